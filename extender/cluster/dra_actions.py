"""DynamicResources' PreBind on the in-memory cluster (simulate, the snapshot webhook).

The same steps as against the API server (extender/policy/claim_actions.py), applied to
the state's DRA store as a status write would be: the finalizer, the allocation and the
pod in reservedFor, on the stored claim. A claim that cannot take them raises ClusterError,
so a simulated bind fails where a live one would.
"""

from __future__ import annotations

import itertools
from datetime import datetime
from functools import partial
from typing import Any

from extender.cluster import dra_store, prebinding
from extender.cluster.state import ClusterState
from extender.dra.binding_conditions import pod_readiness
from extender.errors import ClusterError
from extender.policy.claim_actions import (
    AwaitBindingConditions,
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
    if not state.dra_store.upsert(dra_store.CLAIMS, raw):
        raise ClusterError(f"the claim for the extended resources of pod {action.pod.name} could not be stored",
                           reason="resource-claim")
    bind_claim_in_memory(state, action.bind(raw))


def delete_extended_claim_in_memory(state: ClusterState, action: DeleteExtendedClaim) -> None:
    claim = state.dra_store.extended_claim_of(action.pod_uid)
    if claim is not None:
        state.dra_store.delete(dra_store.CLAIMS, claim.key)


def delete_claim_in_memory(state: ClusterState, action: DeleteClaim) -> None:
    state.dra_store.delete(dra_store.CLAIMS, f"{action.namespace}/{action.name}")


def await_binding_conditions_in_memory(state: ClusterState, action: AwaitBindingConditions) -> None:
    """No driver attaches devices offline: a claim whose failure condition is true already fails
    the bind as it would live; otherwise the devices are taken as attached (a live bind would wait
    for them, not go elsewhere), and their binding conditions are written true on the claims, as
    the driver would, so that later pods sharing a claim see it ready."""
    store = state.dra_store
    claims = [claim for name in action.claims if (claim := store.claim(action.namespace, name)) is not None]
    if action.extended and (extended := store.extended_claim_of(action.pod.uid)) is not None:
        claims.append(extended)
    found = pod_readiness(claims, action.timeout, datetime.fromisoformat(SIMULATED_TIME))
    if found.failed:
        raise ClusterError(found.failed, reason="resource-claim")
    for claim in claims:
        try:
            store.write_status(claim.namespace, claim.name, claim.uid, _attached)
        except ValueError as exc:
            raise ClusterError(str(exc), reason="resource-claim") from None


def _attached(raw: dict[str, Any]) -> None:
    """Every binding condition of the allocation's devices set true in status.devices."""
    status = raw.setdefault("status", {})
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    entries = status.setdefault("devices", [])
    for result in results:
        conditions = result.get("bindingConditions") or []
        if not conditions:
            continue
        entry = next((e for e in entries if all(e.get(k) == result.get(k) for k in ("driver", "pool", "device"))),
                     None)
        if entry is None:
            entry = {k: result.get(k) for k in ("driver", "pool", "device")}
            entries.append(entry)
        kept = [c for c in entry.get("conditions") or [] if c.get("type") not in conditions]
        entry["conditions"] = kept + [{"type": name, "status": "True", "reason": "Simulated",
                                       "message": "taken as attached by simulate", "lastTransitionTime": SIMULATED_TIME}
                                      for name in conditions]


def in_memory_handlers(state: ClusterState) -> dict[type, prebinding.Handler]:
    """The DRA bind-time actions applied to `state` itself."""
    return {BindClaim: partial(bind_claim_in_memory, state), UnreserveClaim: partial(unreserve_claim_in_memory, state),
            DeallocateClaim: partial(deallocate_claim_in_memory, state),
            CreateExtendedClaim: partial(create_extended_claim_in_memory, state),
            DeleteExtendedClaim: partial(delete_extended_claim_in_memory, state),
            DeleteClaim: partial(delete_claim_in_memory, state),
            AwaitBindingConditions: partial(await_binding_conditions_in_memory, state)}
