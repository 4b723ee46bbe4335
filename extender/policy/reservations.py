"""Reservations: what a plugin holds for a pod between choosing its node and the bind.

kube-scheduler's Reserve / PreBind / Unreserve extension points, reduced to what this
engine needs. Once the node is chosen, the engine asks every plugin that implements

    reserve(pod, node, cluster) -> Reservation | Status | None

to claim what the pod will use there, before the next pod is considered: a device share,
a PersistentVolume for an unbound claim. A Status refuses the node after all (the pod is
retried). A `Reservation` says:

* `annotations`: set on the Binding's metadata, which the API server copies onto the pod
  in the same request as the bind (an atomic device assignment);
* `actions`: plain data describing API writes to make before the Binding (PreBind),
  carried out by the binder of the mode (the API server, or the in-memory cluster of
  simulate) through `extender.cluster.prebinding`;
* `release`: undo the in-memory claim when the bind does not happen (Unreserve);
* `undo`: plain data describing API writes that take back what `actions` wrote, when the
  bind does not happen after they ran (the API side of Unreserve: a resource claim's
  reservation for the pod), carried out by the same binder.

Plugins stay pure: they describe the work; adapters do it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy.status import Status


@dataclass(frozen=True)
class Reservation:
    plugin: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    actions: tuple[Any, ...] = ()
    release: Callable[[], None] | None = None
    undo: tuple[Any, ...] = ()


class Reserve(Protocol):
    def reserve(self, pod: PodView, node: NodeInfo, cluster: Any) -> Reservation | Status | None: ...


def release_all(reservations: Sequence[Reservation]) -> None:
    """Unreserve, in reverse order; one failing release does not stop the others."""
    errors = []
    for reservation in reversed(reservations):
        if reservation.release is not None:
            try:
                reservation.release()
            except Exception as exc:  # noqa: BLE001 - collected and re-raised below
                errors.append(f"{reservation.plugin}: {exc}")
    if errors:
        raise RuntimeError("unreserve failed: " + "; ".join(errors))


def merged_annotations(reservations: Sequence[Reservation]) -> dict[str, str]:
    merged: dict[str, str] = {}
    for reservation in reservations:
        merged.update(reservation.annotations)
    return merged


def all_actions(reservations: Sequence[Reservation]) -> list[Any]:
    return [action for reservation in reservations for action in reservation.actions]


def all_undo(reservations: Sequence[Reservation]) -> list[Any]:
    """The API writes taking back the actions, in reverse order of the reservations."""
    return [action for reservation in reversed(reservations) for action in reservation.undo]
