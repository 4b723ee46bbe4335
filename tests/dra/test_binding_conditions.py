"""Binding conditions: isClaimReadyForBinding, isClaimTimeout and isPodReadyForBinding's cases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from extender.dra.binding_conditions import READY, pod_readiness, readiness, timed_out, unusable
from extender.dra.objects import ResourceClaim

ALLOCATED_AT = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)
DRIVER, POOL = "gpu.example.com", "node-1"


def result(device: str, conditions: tuple[str, ...] = ("Attached",), failures: tuple[str, ...] = ("AttachFailed",)
           ) -> dict[str, Any]:
    raw: dict[str, Any] = {"request": "gpu", "driver": DRIVER, "pool": POOL, "device": device}
    if conditions:
        raw |= {"bindingConditions": list(conditions), "bindingFailureConditions": list(failures)}
    return raw


def condition(kind: str, status: str = "True", reason: str = "Done", message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": "2026-12-03T12:00:01Z"}


def claim(*results: dict[str, Any], devices: list[dict[str, Any]] | None = None, timestamp: bool = True,
          allocated: bool = True) -> ResourceClaim:
    status: dict[str, Any] = {}
    if allocated:
        status["allocation"] = {"devices": {"results": list(results)}}
        if timestamp:
            status["allocation"]["allocationTimestamp"] = ALLOCATED_AT.strftime("%Y-%m-%dT%H:%M:%SZ")
    if devices is not None:
        status["devices"] = devices
    return ResourceClaim.parse({"metadata": {"namespace": "default", "name": "gpu-claim", "uid": "c1"},
                                "spec": {"devices": {"requests": []}}, "status": status})


def status_of(device: str, *conditions: dict[str, Any]) -> dict[str, Any]:
    return {"driver": DRIVER, "pool": POOL, "device": device, "conditions": list(conditions)}


def test_a_claim_without_binding_conditions_is_ready() -> None:
    assert readiness(claim(result("gpu-0", conditions=()))) == READY


def test_a_device_without_a_status_entry_is_pending() -> None:
    state = readiness(claim(result("gpu-0")))
    assert not state.ready and not state.failed and state.pending == ("gpu-0: Attached",)


def test_every_binding_condition_must_be_true() -> None:
    two = result("gpu-0", conditions=("Attached", "Powered"))
    assert readiness(claim(two, devices=[status_of("gpu-0", condition("Attached"))])).pending == ("gpu-0: Powered",)
    assert readiness(claim(two, devices=[status_of("gpu-0", condition("Attached"), condition("Powered", "False"))])
                     ).pending == ("gpu-0: Powered",)
    assert readiness(claim(two, devices=[status_of("gpu-0", condition("Attached"), condition("Powered"))])) == READY


def test_a_true_failure_condition_fails_with_its_reason_and_message() -> None:
    failed = claim(result("gpu-0"), devices=[status_of("gpu-0", condition("AttachFailed", reason="NoPath",
                                                                          message="fabric port down"))])
    assert readiness(failed).failed == ('device binding failed: claim=gpu-claim, reason=NoPath, '
                                        'message="fabric port down"')


def test_a_false_failure_condition_does_not_fail() -> None:
    state = readiness(claim(result("gpu-0"), devices=[status_of("gpu-0", condition("AttachFailed", "False"))]))
    assert not state.failed and state.pending == ("gpu-0: Attached",)


def test_status_entries_are_matched_by_driver_pool_and_device() -> None:
    elsewhere = {"driver": DRIVER, "pool": "other-pool", "device": "gpu-0", "conditions": [condition("Attached")]}
    assert not readiness(claim(result("gpu-0"), devices=[elsewhere])).ready


def test_timeout_counts_from_the_allocation_timestamp() -> None:
    pending = claim(result("gpu-0"))
    assert not timed_out(pending, 600, ALLOCATED_AT + timedelta(seconds=599))
    assert timed_out(pending, 600, ALLOCATED_AT + timedelta(seconds=601))
    assert not timed_out(claim(result("gpu-0"), timestamp=False), 600, ALLOCATED_AT + timedelta(days=1))
    assert not timed_out(claim(result("gpu-0", conditions=())), 600, ALLOCATED_AT + timedelta(days=1))


@pytest.mark.parametrize(("devices", "seconds", "expected"), [
    (None, 10, False),  # pending, in time
    (None, 700, True),  # pending, timed out
    ([status_of("gpu-0", condition("Attached"))], 700, False),  # ready: the timeout no longer matters
    ([status_of("gpu-0", condition("AttachFailed"))], 10, True),  # failed
], ids=["pending", "timed-out", "ready-late", "failed"])
def test_filter_refuses_failed_and_timed_out_claims(devices: list[dict[str, Any]] | None, seconds: int,
                                                     expected: bool) -> None:
    assert unusable(claim(result("gpu-0"), devices=devices), 600, ALLOCATED_AT + timedelta(seconds=seconds)) is expected


def test_pod_readiness_reports_the_first_failure_or_the_timeout() -> None:
    ready = claim(result("gpu-0"), devices=[status_of("gpu-0", condition("Attached"))])
    pending = claim(result("gpu-1"))
    late = ALLOCATED_AT + timedelta(seconds=601)
    assert pod_readiness([ready], 600, late) == READY
    assert pod_readiness([ready, pending], 600, ALLOCATED_AT).pending == ("gpu-claim/gpu-1: Attached",)
    assert pod_readiness([ready, pending], 600, late).failed == "device binding timeout: claim=gpu-claim"
    assert not pod_readiness([claim(allocated=False)], 600, late).ready
