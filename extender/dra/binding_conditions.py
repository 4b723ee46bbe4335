"""Binding conditions (DRADeviceBindingConditions, beta and on in kube-scheduler v1.36): is a claim's device ready?

A device may list `bindingConditions` (and `bindingFailureConditions`) in its slice: the
allocator copies them into the claim's allocation, and the pod is bound only once the
driver (or a controller attaching the device, a fabric switch say) has set every binding
condition true in the claim's `status.devices[].conditions` for that device. A failure
condition set true, or `bindingTimeout` elapsed since the allocation's
`allocationTimestamp`, fails the bind instead. The facts, from
pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go:

* `isClaimReadyForBinding`: a result without binding conditions is ready; one whose device
  has no status entry (matched by driver, pool and device) is pending; a failure condition
  true fails it (`device binding failed: claim=<name>, reason=<reason>, message="<message>"`);
  every binding condition must be true.
* `isClaimTimeout`: only for an allocation with binding conditions and a timestamp: the
  timestamp plus the timeout is in the past (`device binding timeout: claim=<name>`).
* Filter: an allocated claim that failed or timed out is not available on any node (so
  PostFilter deallocates it, and the next attempt may choose other devices).

Pure: the clock is an argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from extender.dra.objects import DeviceResult, ResourceClaim

FAILED = "device binding failed"  # ErrDeviceBindingFailed
TIMEOUT = "device binding timeout"  # ErrDeviceBindingTimeout
DEFAULT_TIMEOUT = 600.0  # config.DynamicResourcesBindingTimeoutDefault, seconds


@dataclass(frozen=True, slots=True)
class Readiness:
    """Whether a claim's devices let the pod be bound: `ready`, or else the failure (`failed`
    non-empty: the bind fails) or the conditions still awaited (`pending`, by device)."""

    ready: bool
    failed: str = ""
    pending: tuple[str, ...] = ()


READY = Readiness(True)


def _conditions(claim: ResourceClaim, result: DeviceResult) -> Mapping[str, Mapping[str, Any]] | None:
    """getAllocatedDeviceStatus: the device's conditions by type, None without a status entry."""
    status = claim.raw.get("status") if isinstance(claim.raw, Mapping) else None
    entries = status.get("devices") if isinstance(status, Mapping) else None
    for entry in entries if isinstance(entries, list) else ():
        if (isinstance(entry, Mapping) and entry.get("driver") == result.driver and entry.get("pool") == result.pool
                and entry.get("device") == result.device):
            conditions = entry.get("conditions")
            return {c["type"]: c for c in conditions if isinstance(c, Mapping) and isinstance(c.get("type"), str)
                    } if isinstance(conditions, list) else {}
    return None


def readiness(claim: ResourceClaim) -> Readiness:
    """isClaimReadyForBinding, with what is still awaited for the messages."""
    if claim.allocation is None:
        return Readiness(False, pending=("allocation",))
    pending: list[str] = []
    for result in claim.allocation.results:
        if not result.binding_conditions:
            continue
        conditions = _conditions(claim, result)
        if conditions is None:
            pending += (f"{result.device}: {name}" for name in result.binding_conditions)
            continue
        for name in result.binding_failure_conditions:
            condition = conditions.get(name)
            if condition is not None and condition.get("status") == "True":
                return Readiness(False, failed=f"{FAILED}: claim={claim.name}, reason={condition.get('reason', '')}, "
                                               f'message="{condition.get("message", "")}"')
        pending += (f"{result.device}: {name}" for name in result.binding_conditions
                    if (conditions.get(name) or {}).get("status") != "True")
    return Readiness(not pending, pending=tuple(pending))


def timed_out(claim: ResourceClaim, timeout: float, now: datetime) -> bool:
    """isClaimTimeout: an allocation with binding conditions, older than `timeout` seconds."""
    allocation = claim.allocation
    if allocation is None or allocation.timestamp is None or not allocation.binding_conditions:
        return False
    return datetime.fromisoformat(allocation.timestamp) + timedelta(seconds=timeout) < now


def pod_readiness(claims: Iterable[ResourceClaim], timeout: float, now: datetime) -> Readiness:
    """isPodReadyForBinding over the pod's claims as they are now: the first failure (a failure
    condition, or a claim past its timeout), else what is still awaited (empty: ready)."""
    pending: list[str] = []
    for claim in claims:
        state = readiness(claim)
        if state.failed:
            return state
        if not state.ready:
            if timed_out(claim, timeout, now):
                return Readiness(False, failed=f"{TIMEOUT}: claim={claim.name}")
            pending += (f"{claim.name}/{what}" for what in state.pending)
    return Readiness(not pending, pending=tuple(pending))


def unusable(claim: ResourceClaim, timeout: float, now: datetime) -> bool:
    """Filter's check of an allocated claim: failed, or not ready and timed out."""
    if claim.allocation is None or not claim.allocation.binding_conditions:
        return False
    state = readiness(claim)
    return bool(state.failed) or (not state.ready and timed_out(claim, timeout, now))
