"""Device taints and tolerations (DRADeviceTaints, beta and on in v1.36): the "tainted-*" cases of
k8s.io/dynamic-resource-allocation@v0.36.3/structured/internal/allocatortesting/allocator_testing.go
with the feature on, the toleration rules of resourceclaim/devicetoleration.go ToleratesTaint,
the tolerations copied into the results, and what explain says about a tainted device."""

from __future__ import annotations

import pytest

from extender.dra.allocator import NodeAllocation, Unallocatable
from extender.dra.objects import (
    Allocation,
    DeviceTaint,
    DeviceTaintRule,
    DeviceToleration,
    ResourceSlice,
    with_taint_rules,
)
from extender.errors import InvalidObject
from tests.dra.builders import (
    CLASS_A,
    CLASS_B,
    DRIVER_A,
    NODE_1,
    all_of,
    claim,
    device,
    exact,
    first_available,
    raw_slice,
    slice_,
    sub,
    taint,
    toleration,
)
from tests.dra.test_allocator import a, fails, picked, run

NO_SCHEDULE = taint("taint-key", "taint-value", "NoSchedule")
NO_EXECUTE = taint("taint-key", "taint-value-2", "NoExecute")
NONE = taint("taint-key", "taint-value", "None")
TOLERATE_NO_SCHEDULE = toleration("taint-key", "Exists", effect="NoSchedule")
TOLERATE_NO_EXECUTE = toleration("taint-key", "Equal", "taint-value-2", "NoExecute")


def tainted(*devices_taints: list[dict[str, str]]) -> list[ResourceSlice]:
    return [slice_("slice-1", NODE_1, "pool-1", DRIVER_A,
                   *(device(f"device-{i}", taints=taints) for i, taints in enumerate(devices_taints, 1)))]


def results_api(outcome: NodeAllocation | Unallocatable) -> list[dict[str, object]]:
    assert isinstance(outcome, NodeAllocation), outcome
    return outcome.allocations[0].to_api()["devices"]["results"]


def test_tainted_two_devices() -> None:
    assert fails(run([claim("claim-0", exact("req-0", CLASS_A))], tainted([NO_SCHEDULE], [NO_EXECUTE])))


def test_tainted_one_device_two_taints() -> None:
    assert fails(run([claim("claim-0", exact("req-0", CLASS_A))], tainted([NO_SCHEDULE, NO_EXECUTE])))


def test_tainted_two_devices_tolerated() -> None:
    """Only the second device's taint is tolerated; its result carries the toleration."""
    outcome = run([claim("claim-0", exact("req-0", CLASS_A, tolerations=[TOLERATE_NO_EXECUTE]))],
                  tainted([NO_SCHEDULE], [NO_EXECUTE]))
    assert picked(outcome) == [[a("req-0", "pool-1", "device-2")]]
    assert results_api(outcome)[0]["tolerations"] == [TOLERATE_NO_EXECUTE]


def test_tainted_two_devices_prioritized_list_tolerated() -> None:
    c = claim("claim-0", first_available("req-0", sub("subReq-0", CLASS_A),
                                         sub("subReq-1", CLASS_A, tolerations=[TOLERATE_NO_EXECUTE])))
    outcome = run([c], tainted([NO_SCHEDULE], [NO_EXECUTE]))
    assert picked(outcome) == [[a("req-0/subReq-1", "pool-1", "device-2")]]
    assert results_api(outcome)[0]["tolerations"] == [TOLERATE_NO_EXECUTE]


def test_tainted_no_effect() -> None:
    """Effect None (and any effect this version does not know) does not keep a device off."""
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))], tainted([NONE]))
    assert picked(outcome) == [[a("req-0", "pool-1", "device-1")]]
    assert "tolerations" not in results_api(outcome)[0]
    future = run([claim("claim-0", exact("req-0", CLASS_A))], tainted([taint("k", "v", "SomeFutureEffect")]))
    assert picked(future) == [[a("req-0", "pool-1", "device-1")]]


def test_tainted_one_device_two_taints_both_tolerated() -> None:
    both = [TOLERATE_NO_SCHEDULE, TOLERATE_NO_EXECUTE]
    outcome = run([claim("claim-0", exact("req-0", CLASS_A, tolerations=both))], tainted([NO_SCHEDULE, NO_EXECUTE]))
    assert picked(outcome) == [[a("req-0", "pool-1", "device-1")]]
    assert results_api(outcome)[0]["tolerations"] == both


def test_tainted_prioritized_list() -> None:
    c = claim("claim-0", first_available("req-0", sub("subReq-0", CLASS_B), sub("subReq-1", CLASS_A)))
    assert fails(run([c], tainted([NO_SCHEDULE])))


def test_tainted_admin_access() -> None:
    """Admin access takes devices in use, but not tainted ones."""
    outcome = run([claim("claim-0", exact("req-0", CLASS_A, admin=True))], tainted([NO_SCHEDULE]),
                  in_use=[("driver-a", "pool-1", "device-1"), ("driver-a", "pool-1", "device-2")])
    assert fails(outcome)


def test_tainted_all_devices_single() -> None:
    """An All request needs every matching device: one tainted device makes the node fail."""
    assert fails(run([claim("claim-0", all_of("req-0", CLASS_A))], tainted([NO_SCHEDULE])))
    assert fails(run([claim("claim-0", all_of("req-0", CLASS_A))], tainted([], [NO_SCHEDULE])))
    ok = run([claim("claim-0", all_of("req-0", CLASS_A, ))], tainted([], [NONE]))
    assert picked(ok) == [[a("req-0", "pool-1", "device-1"), a("req-0", "pool-1", "device-2")]]


def test_tainted_device_is_skipped_for_the_next_one() -> None:
    outcome = run([claim("claim-0", exact("req-0", CLASS_A, 2))], tainted([NO_SCHEDULE], [], []))
    assert picked(outcome) == [[a("req-0", "pool-1", "device-2"), a("req-0", "pool-1", "device-3")]]


@pytest.mark.parametrize(("tol", "tolerated"), [
    (toleration(operator="Exists"), True),                              # everything
    (toleration("taint-key", "Exists"), True),                          # any value, any effect
    (toleration("taint-key", "Exists", effect="NoExecute"), False),     # wrong effect
    (toleration("other", "Exists"), False),                             # wrong key
    (toleration("taint-key", "Equal", "taint-value"), True),
    (toleration("taint-key", "", "taint-value"), True),                 # no operator means Equal
    (toleration("taint-key", "Equal", "other"), False),
    (toleration("taint-key", "Equal"), False),                          # Equal with no value: value ""
    (toleration(operator="Equal", value="taint-value"), True),          # no key: any key, Equal value
    (toleration("taint-key", "Gt", "taint-value"), False),              # an operator it does not know
])
def test_toleration_rules(tol: dict[str, str], tolerated: bool) -> None:
    """resourceclaim.ToleratesTaint, on the NoSchedule taint taint-key=taint-value."""
    parsed = DeviceToleration.parse(tol, "t")
    assert parsed.tolerates(DeviceTaint("taint-key", "taint-value", "NoSchedule")) is tolerated
    outcome = run([claim("claim-0", exact("req-0", CLASS_A, tolerations=[tol]))], tainted([NO_SCHEDULE]))
    assert isinstance(outcome, NodeAllocation) is tolerated


def test_explain_names_the_taint_and_the_request() -> None:
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))], tainted([NO_SCHEDULE]))
    assert fails(outcome) and outcome.reasons == (
        "claim claim-0, request req-0: 1 requested, 0 usable: device driver-a/pool-1/device-1 has taint "
        "taint-key=taint-value:NoSchedule that request req-0 does not tolerate",)
    all_request = run([claim("claim-0", all_of("req-0", CLASS_A))], tainted([], [taint("k", "", "NoExecute")]))
    assert fails(all_request) and all_request.reasons == (
        "claim claim-0, request req-0: asks for all 2 matching devices: device driver-a/pool-1/device-2 has taint "
        "k:NoExecute that request req-0 does not tolerate",)


def test_tolerations_round_trip_in_the_allocation_result() -> None:
    """DeviceRequestAllocationResult.tolerations: what the allocator copied, written back as Go marshals it."""
    raw = {"devices": {"results": [{"request": "r", "driver": "d", "pool": "p", "device": "x", "tolerations": [
        {"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute", "tolerationSeconds": 300},
        {"operator": "Exists"}]}]}}
    allocation = Allocation.parse(raw)
    assert allocation.results[0].tolerations[0] == DeviceToleration("k", "Equal", "v", "NoExecute", 300)
    assert allocation.to_api() == raw


def test_taint_and_toleration_parsing() -> None:
    raw = raw_slice("s", NODE_1, "pool-1", DRIVER_A, device("d", taints=[
        {"key": "k", "value": "v", "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"}]))
    (parsed,) = ResourceSlice.parse(raw).devices[0].taints
    assert parsed == DeviceTaint("k", "v", "NoExecute", "2026-01-01T00:00:00Z") and parsed.blocks_allocation
    assert str(parsed) == "k=v:NoExecute"
    bad = raw_slice("s", NODE_1, "pool-1", DRIVER_A, device("d", taints=[{"key": ["k"]}]))
    with pytest.raises(InvalidObject, match=r"spec.devices\[0\].taints\[0\].key"):
        ResourceSlice.parse(bad)
    with pytest.raises(InvalidObject, match="t.tolerationSeconds: expected an integer"):
        DeviceToleration.parse({"tolerationSeconds": "300"}, "t")


# ---- DeviceTaintRules (resourceslice/tracker applyPatches) -----------------------------------


def rule(name: str, taint_: dict[str, str], **selector: str | None) -> DeviceTaintRule:
    spec: dict[str, object] = {"taint": taint_}
    if selector:
        spec["deviceSelector"] = selector
    return DeviceTaintRule.parse({"metadata": {"name": name}, "spec": spec})


def taints_of(slice_: ResourceSlice) -> dict[str, list[str]]:
    return {d.name: [str(t) for t in d.taints] for d in slice_.devices}


def test_a_rule_without_a_selector_taints_every_device() -> None:
    (published,) = tainted([], [NO_EXECUTE])
    patched = with_taint_rules(published, [rule("all", NO_SCHEDULE)])
    assert taints_of(patched) == {"device-1": ["taint-key=taint-value:NoSchedule"],
                                  "device-2": ["taint-key=taint-value-2:NoExecute", "taint-key=taint-value:NoSchedule"]}
    assert taints_of(published) == {"device-1": [], "device-2": ["taint-key=taint-value-2:NoExecute"]}


@pytest.mark.parametrize(("selector", "hit"), [
    ({"driver": DRIVER_A}, {"device-1", "device-2"}),
    ({"driver": "other.example.com"}, set()),
    ({"pool": "pool-1"}, {"device-1", "device-2"}),
    ({"pool": "pool-2"}, set()),
    ({"device": "device-2"}, {"device-2"}),
    ({"driver": DRIVER_A, "pool": "pool-1", "device": "device-1"}, {"device-1"}),
], ids=["driver", "other-driver", "pool", "other-pool", "device", "all-three"])
def test_a_rule_selects_by_driver_pool_and_device(selector: dict[str, str], hit: set[str]) -> None:
    (published,) = tainted([], [])
    patched = with_taint_rules(published, [rule("r", NO_SCHEDULE, **selector)])
    assert {name for name, found in taints_of(patched).items() if found} == hit
    if not hit:
        assert patched is published  # nothing applied: the slice is shared, not copied


def test_a_device_tainted_by_a_rule_is_not_allocated_unless_tolerated() -> None:
    (published,) = tainted([], [])
    patched = [with_taint_rules(published, [rule("r", NO_SCHEDULE, device="device-1")])]
    assert picked(run([claim("claim-0", exact("req-0", CLASS_A))], patched)) == [[a("req-0", "pool-1", "device-2")]]
    tolerant = claim("claim-0", exact("req-0", CLASS_A, 2, tolerations=[TOLERATE_NO_SCHEDULE]))
    assert len(picked(run([tolerant], patched))[0]) == 2
