"""Binders (`extender.cycle.steps.Binder`): how a placement becomes real. `MemoryBinder` for
snapshots; the kube binder is `extender.kube.binder`.

Both check what the API server checks (the pod exists, its UID matches, it is
not bound, not being deleted, not gated) and raise the same errors, so the
webhook, the scheduler and simulate behave identically whichever binder they use.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from extender.cluster import dra_actions, prebinding, volume_handlers
from extender.cluster.state import ClusterState
from extender.errors import ConflictError, NotFoundError
from extender.model.devices import LedgerClaim


def in_memory_actions(state: ClusterState) -> dict[type, prebinding.Handler]:
    """Every bind-time action applied to `state`: one in-memory cluster, one process, so the
    device shares claimed in the state already arbitrate and a LedgerClaim needs nothing more."""
    return {**volume_handlers.in_memory_handlers(state), **dra_actions.in_memory_handlers(state),
            LedgerClaim: lambda claim: None}


class MemoryBinder:
    """Binds pods inside the cluster state itself: the state is the source of truth."""

    kind = "memory"

    def __init__(self, state: ClusterState, actions: prebinding.Handlers | None = None) -> None:
        self.state = state
        self.actions = in_memory_actions(state) if actions is None else actions
        self._lock = threading.Lock()
        self.bindings: list[tuple[str, str]] = []

    def bind(self, namespace: str, name: str, uid: str, node: str, *,
             annotations: Mapping[str, str] | None = None) -> None:
        key = f"{namespace}/{name}"
        with self._lock:  # check-then-set must be atomic, as etcd's compare-and-swap is
            record = self.state.pod(key)
            if record is None:
                raise NotFoundError(f"pod {key} not found", status=404, reason="NotFound")
            if uid and record.uid and uid != record.uid:
                raise ConflictError(f"pod {key} was recreated (UID mismatch)", status=409, reason="Conflict")
            if record.node_name and not record.assumed:
                raise ConflictError(
                    f"pod {key} is already assigned to node {record.node_name}", status=409, reason="Conflict"
                )
            if record.deleting:
                raise ConflictError(f"pod {key} is being deleted", status=409, reason="Conflict")
            if record.gated:
                raise ConflictError(f"pod {key} still has scheduling gates", status=409, reason="Conflict")
            self.state.confirm(key, node, annotations=annotations)
            self.bindings.append((key, node))

    def prebind(self, actions: Sequence[Any]) -> None:
        prebinding.run(actions, self.actions, where="in-memory")
