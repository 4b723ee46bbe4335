"""DynamicResources' PreBind on the in-memory cluster (simulate, the snapshot webhook).

The same steps as against the API server (extender/policy/claim_actions.py), applied to
the state's DRA store as a status write would be: the finalizer, the allocation and the
pod in reservedFor, on the stored claim. A claim that cannot take them raises ClusterError,
so a simulated bind fails where a live one would.
"""

from __future__ import annotations

import itertools
from functools import partial
from typing import Any

from extender.cluster import dra, prebinding
from extender.cluster.state import ClusterState
from extender.errors import ClusterError
from extender.policy.claim_actions import (
    BindClaim,
    ClaimWriteRefused,
    CreateExtendedClaim,
    DeallocateClaim,
    DeleteClaim,
    DeleteExtendedClaim,
    UnreserveClaim,
    check_claim,
    with_finalizer,
    with_status,
)

SIMULATED_TIME = "1970-01-01T00:00:00Z"  # simulate has no clock of its own: a fixed, valid timestamp
_CREATED = itertools.count(1)  # names of the claims created in memory


def bind_claim_in_memory(state: ClusterState, action: BindClaim) -> None:
    def write(raw: dict[str, Any]) -> None:
        check_claim(action, raw)
        written = with_status(action, with_finalizer(action, raw) or raw, SIMULATED_TIME)
        raw.clear()
        raw.update(written)

    try:
        state.dra_store.write_status(action.namespace, action.name, action.uid, write)
    except (ClaimWriteRefused, ValueError) as exc:
        raise ClusterError(str(exc), reason="resource-claim") from None


def unreserve_claim_in_memory(state: ClusterState, action: UnreserveClaim) -> None:
    def write(raw: dict[str, Any]) -> None:
        status = dict(raw.get("status") or {})
        status["reservedFor"] = [r for r in status.get("reservedFor") or []
                                 if not (isinstance(r, dict) and r.get("uid") == action.pod_uid)]
        raw["status"] = status

    try:
        state.dra_store.write_status(action.namespace, action.name, action.uid, write)
    except ValueError:
        return  # the claim is gone: nothing to undo


def deallocate_claim_in_memory(state: ClusterState, action: DeallocateClaim) -> None:
    def write(raw: dict[str, Any]) -> None:
        raw["status"] = action.deallocated()["status"]

    try:
        state.dra_store.write_status(action.namespace, action.name, action.uid, write)
    except ValueError as exc:
        raise ClusterError(str(exc), reason="resource-claim") from None


def create_extended_claim_in_memory(state: ClusterState, action: CreateExtendedClaim) -> None:
    """The claim is stored under a generated name, then allocated and reserved as BindClaim does.
    The pod's status (extendedResourceClaimStatus) is not kept: the in-memory pods are records."""
    raw = action.claim()
    meta = raw["metadata"]
    serial = next(_CREATED)
    meta["name"] = f"{meta.pop('generateName')}{serial:05d}"
    meta["uid"] = f"in-memory-claim-{serial}"
    meta["resourceVersion"] = "1"
    if not state.dra_store.upsert(dra.CLAIMS, raw):
        raise ClusterError(f"the claim for the extended resources of pod {action.pod.name} could not be stored",
                           reason="resource-claim")
    bind_claim_in_memory(state, action.bind(raw))


def delete_extended_claim_in_memory(state: ClusterState, action: DeleteExtendedClaim) -> None:
    claim = state.dra_store.extended_claim_of(action.pod_uid)
    if claim is not None:
        state.dra_store.delete(dra.CLAIMS, claim.key)


def delete_claim_in_memory(state: ClusterState, action: DeleteClaim) -> None:
    state.dra_store.delete(dra.CLAIMS, f"{action.namespace}/{action.name}")


def in_memory_handlers(state: ClusterState) -> dict[type, prebinding.Handler]:
    """The DRA bind-time actions applied to `state` itself."""
    return {BindClaim: partial(bind_claim_in_memory, state), UnreserveClaim: partial(unreserve_claim_in_memory, state),
            DeallocateClaim: partial(deallocate_claim_in_memory, state),
            CreateExtendedClaim: partial(create_extended_claim_in_memory, state),
            DeleteExtendedClaim: partial(delete_extended_claim_in_memory, state),
            DeleteClaim: partial(delete_claim_in_memory, state)}
