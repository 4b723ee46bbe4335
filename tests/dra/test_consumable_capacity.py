"""Consumable capacity and distinctAttribute (DRAConsumableCapacity), ported from the
"consumable-capacity-*", "allow-multiple-allocations-*" and "*distinct*" cases of
k8s.io/dynamic-resource-allocation@v0.36.3/structured/internal/allocatortesting/allocator_testing.go
(the incubating allocator with the feature on, as kube-scheduler v1.36 runs it). Go's fixed
share id is a fresh UUID here: the tests check that every share has its own."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import pytest

from extender.dra.allocator import AllocationError, NodeAllocation, Unallocatable, allocate
from extender.dra.objects import (
    Allocation,
    DeviceClass,
    DeviceID,
    ResourceClaim,
    ResourceSlice,
    consumed_capacity,
    gather_pools,
)
from tests.dra.builders import (
    CLASS_A,
    DRIVER_A,
    LABELS,
    NODE_1,
    all_of,
    cel,
    claim,
    consumes,
    counter_set,
    counter_slice,
    device,
    device_class,
    exact,
    first_available,
    multi,
    multi_class,
    policy_range,
    policy_values,
    slice_,
    sub,
    with_capacity,
)

CAP = "capacity-0"
OTHER = "capacity-1"
PLAIN = (device_class(CLASS_A, DRIVER_A),)
MULTI = (multi_class(CLASS_A, DRIVER_A, True),)
DEDICATED = (multi_class(CLASS_A, DRIVER_A, False),)
D1, D2 = DeviceID(DRIVER_A, "pool-1", "device-1"), DeviceID(DRIVER_A, "pool-1", "device-2")


def run(claims: Sequence[ResourceClaim], slices: Iterable[ResourceSlice], *, classes: Sequence[DeviceClass] = MULTI,
        in_use: Iterable[DeviceID] = (), consumed: Mapping[DeviceID, Mapping[str, Fraction]] | None = None
        ) -> NodeAllocation | Unallocatable:
    by_name = {c.name: c for c in classes}
    pools = gather_pools(slices, NODE_1, LABELS[NODE_1])
    return allocate(claims, NODE_1, LABELS[NODE_1], pools, by_name.get, set(in_use), consumed=consumed or {})


def shares(outcome: NodeAllocation | Unallocatable) -> list[list[tuple[Any, ...]]]:
    """Per claim: (request, device, consumedCapacity) for a share, (request, device) for a whole
    device; every share id a UUID of its own."""
    assert isinstance(outcome, NodeAllocation), outcome
    seen: set[str] = set()
    out = []
    for allocation in outcome.allocations:
        rows: list[tuple[Any, ...]] = []
        for result in allocation.results:
            api = result.to_api()
            if result.share_id is None:
                assert "consumedCapacity" not in api and "shareID" not in api
                rows.append((result.request, result.device))
                continue
            assert str(uuid.UUID(result.share_id)) == result.share_id and result.share_id not in seen
            seen.add(result.share_id)
            rows.append((result.request, result.device, api.get("consumedCapacity")))
        out.append(rows)
    return out


def fails(outcome: NodeAllocation | Unallocatable) -> bool:
    assert isinstance(outcome, Unallocatable), outcome
    assert outcome.reasons
    return True


def one_slice(*devices: dict[str, Any], count: int = 1) -> ResourceSlice:
    return slice_("slice-1", NODE_1, "pool-1", DRIVER_A, *devices, count=count)


def ask(name: str, amount: str | None = None, *selectors: dict[str, Any], capacity: str = CAP) -> dict[str, Any]:
    request = exact(name, CLASS_A, 1, *selectors)
    return request if amount is None else with_capacity(request, {capacity: amount})


# -- requests and policies --


def test_missing_capacity_request_is_not_allocatable() -> None:
    assert fails(run([claim("claim-0", ask("req-0", "1"))], [one_slice(multi(device("device-1", {OTHER: "1"})))]))


def test_all_mode_with_missing_capacity_request_is_not_allocatable() -> None:
    c = claim("claim-0", with_capacity(all_of("req-0", CLASS_A), {CAP: "1"}))
    assert fails(run([c], [one_slice(multi(device("device-1", {OTHER: "1"})))]))


def test_device_without_capacity_is_shared_and_consumes_nothing() -> None:
    outcome = run([claim("claim-0", ask("req-0")), claim("claim-1", ask("req-0"))], [one_slice(multi(device("device-1")))])
    assert shares(outcome) == [[("req-0", "device-1", None)], [("req-0", "device-1", None)]]


def test_without_policy_nor_request_a_share_takes_the_whole_capacity() -> None:
    slices = [one_slice(multi(device("device-1", {CAP: "1"})), multi(device("device-2", {CAP: "1"})))]
    outcome = run([claim("claim-0", ask("req-0")), claim("claim-1", ask("req-0"))], slices)
    assert shares(outcome) == [[("req-0", "device-1", {CAP: "1"})], [("req-0", "device-2", {CAP: "1"})]]


def test_without_policy_nor_request_two_claims_do_not_fit_one_device() -> None:
    slices = [one_slice(multi(device("device-1", {CAP: "2"})))]
    assert fails(run([claim("claim-0", ask("req-0")), claim("claim-1", ask("req-0"))], slices))


def test_without_policy_requests_share_a_device() -> None:
    slices = [one_slice(multi(device("device-1", {CAP: "2"})))]
    outcome = run([claim("claim-0", ask("req-0", "1")), claim("claim-1", ask("req-0", "1"))], slices)
    assert shares(outcome) == [[("req-0", "device-1", {CAP: "1"})], [("req-0", "device-1", {CAP: "1"})]]


def test_policy_default_applies_when_nothing_is_requested() -> None:
    slices = [one_slice(policy_range(multi(device("device-1")), CAP, value="4"))]
    outcome = run([claim("claim-0", ask("req-0")), claim("claim-1", ask("req-0"))], slices)
    assert shares(outcome) == [[("req-0", "device-1", {CAP: "2"})], [("req-0", "device-1", {CAP: "2"})]]


def test_zero_request_policy() -> None:
    slices = [one_slice(policy_values(multi(device("device-1")), CAP, "1", "0"))]
    outcome = run([claim("claim-0", ask("req-0")), claim("claim-1", ask("req-0"))], slices)
    assert shares(outcome) == [[("req-0", "device-1", {CAP: "0"})], [("req-0", "device-1", {CAP: "0"})]]


def test_request_above_every_valid_value_violates_the_policy() -> None:
    slices = [one_slice(policy_values(multi(device("device-1")), CAP, "1", "0"))]
    outcome = run([claim("claim-0", ask("req-0", "1"))], slices)
    assert fails(outcome)
    assert any("asks for 1 capacity-0, outside device driver-a/pool-1/device-1's policy (valid values 0)" in reason
               for reason in outcome.reasons), outcome.reasons


def test_range_rounds_up_to_min() -> None:
    slices = [one_slice(policy_range(multi(device("device-1")), CAP, value="4"))]
    outcome = run([claim("claim-0", ask("req-0", "1")), claim("claim-1", ask("req-0", "1"))], slices)
    assert shares(outcome) == [[("req-0", "device-1", {CAP: "2"})], [("req-0", "device-1", {CAP: "2"})]]


def test_range_rounds_up_to_the_step() -> None:
    slices = [one_slice(policy_range(multi(device("device-1")), CAP, value="4"))]
    assert shares(run([claim("claim-0", ask("req-0", "3"))], slices)) == [[("req-0", "device-1", {CAP: "4"})]]


def test_stepped_range_rounds_to_a_binary_quantity() -> None:
    """roundUpRange returns resource.NewQuantity(v, BinarySI): 3Gi asked in steps of 2Gi reads 4Gi."""
    slices = [one_slice(policy_range(multi(device("device-1")), "memory", value="8Gi", default="2Gi",
                                     minimum="2Gi", step="2Gi", maximum="8Gi"))]
    outcome = run([claim("claim-0", ask("req-0", "3Gi", capacity="memory"))], slices)
    assert shares(outcome) == [[("req-0", "device-1", {"memory": "4Gi"})]]


def test_valid_values() -> None:
    slices = [one_slice(policy_values(multi(device("device-1")), CAP, "4", "1", "2"))]
    assert shares(run([claim("claim-0", ask("req-0", "2"))], slices)) == [[("req-0", "device-1", {CAP: "2"})]]


def test_valid_values_round_up() -> None:
    slices = [one_slice(policy_values(multi(device("device-1")), CAP, "3", "1", "3"))]
    assert shares(run([claim("claim-0", ask("req-0", "2"))], slices)) == [[("req-0", "device-1", {CAP: "3"})]]


def test_requests_exceeding_the_capacity_together() -> None:
    slices = [one_slice(policy_range(multi(device("device-1")), CAP, value="2"))]
    assert fails(run([claim("claim-0", ask("req-0", "1")), claim("claim-1", ask("req-0", "2"))], slices))


def test_request_over_the_policy_max_even_within_the_capacity() -> None:
    slices = [one_slice(policy_range(multi(device("device-1")), CAP, value="10"))]
    outcome = run([claim("claim-0", ask("req-0", "6"))], slices)
    assert fails(outcome)
    assert any("asks for 6 capacity-0, outside device driver-a/pool-1/device-1's policy "
               "(range from 2 to 4 in steps of 2)" in reason for reason in outcome.reasons), outcome.reasons


# -- what other claims consume --


def test_allocated_capacity_leaves_the_remaining() -> None:
    slices = [one_slice(policy_range(multi(device("device-1")), CAP, value="4"))]
    outcome = run([claim("claim-0", ask("req-0", "2"))], slices, consumed={D1: {CAP: Fraction(2)}})
    assert shares(outcome) == [[("req-0", "device-1", {CAP: "2"})]]


def test_allocated_capacity_moves_to_the_next_device() -> None:
    slices = [one_slice(policy_range(multi(device("device-1")), CAP, value="2"),
                        policy_range(multi(device("device-2")), CAP, value="2"))]
    outcome = run([claim("claim-0", ask("req-0", "2"))], slices, consumed={D1: {CAP: Fraction(2)}})
    assert shares(outcome) == [[("req-0", "device-2", {CAP: "2"})]]


def test_no_capacity_left_and_explain_says_how_much() -> None:
    slices = [one_slice(policy_range(multi(device("device-1")), CAP, value="2"))]
    outcome = run([claim("claim-0", ask("req-0", "2"))], slices, consumed={D1: {CAP: Fraction(2)}})
    assert fails(outcome)
    assert any("capacity capacity-0 of device driver-a/pool-1/device-1: 2 requested, 0 left" in reason
               for reason in outcome.reasons), outcome.reasons


def test_explain_in_memory_units() -> None:
    slices = [one_slice(multi(device("device-1", {"memory": "8Gi"})))]
    outcome = run([claim("claim-0", ask("req-0", "4Gi", capacity="memory"))], slices,
                  consumed={D1: {"memory": Fraction(6 * 2**30)}})
    assert fails(outcome)
    assert any("capacity memory of device driver-a/pool-1/device-1: 4Gi requested, 2Gi left" in reason
               for reason in outcome.reasons), outcome.reasons


def test_backtracking_over_shares() -> None:
    """consumable-capacity-with-multi-allocatable-device-backtrack."""
    attribute = f"{DRIVER_A}/stringAttribute"
    c0 = claim("claim-0", ask("req-0", "2"), ask("req-1", "2"), constraints=[{"matchAttribute": attribute}])
    c1 = claim("claim-1", ask("req-0", "2"))
    slices = [one_slice(
        policy_range(multi(device("device-2", attributes={"stringAttribute": {"string": "v1"}})), CAP, value="2"),
        policy_range(multi(device("device-1", attributes={"stringAttribute": {"string": "v2"}})), CAP, value="4"))]
    outcome = run([c0, c1], slices, classes=PLAIN)
    assert shares(outcome) == [[("req-0", "device-1", {CAP: "2"}), ("req-1", "device-1", {CAP: "2"})],
                               [("req-0", "device-2", {CAP: "2"})]]


def test_subrequests_take_the_first_that_fits() -> None:
    c = claim("claim-0", first_available("req-0", with_capacity(sub("sub-0", CLASS_A), {CAP: "4"}),
                                         with_capacity(sub("sub-1", CLASS_A), {CAP: "2"}), sub("sub-2", CLASS_A)))
    slices = [one_slice(policy_range(multi(device("device-1")), CAP, value="2"))]
    assert shares(run([c], slices)) == [[("req-0/sub-1", "device-1", {CAP: "2"})]]


@pytest.mark.parametrize(("second", "consumed", "expected"), [
    ("1", None, [("req-0", "device-1", {CAP: "2"})]),  # filter-out-insufficient-capacity
    (None, None, [("req-0", "device-1", {CAP: "2"})]),  # filter-out-no-capacity
])
def test_all_mode_leaves_out_devices_without_room(second: str | None, consumed: Any, expected: list) -> None:
    devices = [multi(device("device-1", {CAP: "2"})), multi(device("device-2", {CAP: second} if second else None))]
    c = claim("claim-0", with_capacity(all_of("req-0", CLASS_A), {CAP: "2"}))
    assert shares(run([c], [one_slice(*devices)])) == [expected]


def test_all_mode_after_a_share_in_the_same_claim() -> None:
    c = claim("claim-0", ask("req-0", "1"), with_capacity(all_of("req-1", CLASS_A), {CAP: "1"}))
    sufficient = [one_slice(multi(device("device-1", {CAP: "2"})), multi(device("device-2", {CAP: "1"})))]
    assert shares(run([c], sufficient, classes=PLAIN)) == [[
        ("req-0", "device-1", {CAP: "1"}), ("req-1", "device-1", {CAP: "1"}), ("req-1", "device-2", {CAP: "1"})]]
    insufficient = [one_slice(multi(device("device-1", {CAP: "1"})), multi(device("device-2", {CAP: "1"})))]
    assert fails(run([c], insufficient, classes=PLAIN))


def test_all_mode_after_shares_in_use() -> None:
    c = claim("claim-0", with_capacity(all_of("req-0", CLASS_A), {CAP: "1"}))
    sufficient = [one_slice(multi(device("device-1", {CAP: "2"})), multi(device("device-2", {CAP: "1"})))]
    assert shares(run([c], sufficient, classes=PLAIN, consumed={D1: {CAP: Fraction(1)}})) == [[
        ("req-0", "device-1", {CAP: "1"}), ("req-0", "device-2", {CAP: "1"})]]
    insufficient = [one_slice(multi(device("device-1", {CAP: "1"})), multi(device("device-2", {CAP: "1"})))]
    assert shares(run([c], insufficient, classes=PLAIN, consumed={D1: {CAP: Fraction(1)}})) == [[
        ("req-0", "device-2", {CAP: "1"})]]


# -- devices that do not allow multiple allocations --


def test_dedicated_device_is_taken_whole() -> None:
    slices = [one_slice(device("device-1", {CAP: "1"}))]
    assert shares(run([claim("claim-0", ask("req-0", "1"))], slices, classes=DEDICATED)) == [[("req-0", "device-1")]]


def test_dedicated_device_is_not_shared() -> None:
    slices = [one_slice(policy_range(device("device-1"), CAP, value="2"))]
    assert fails(run([claim("claim-0", ask("req-0", "1")), claim("claim-1", ask("req-0", "1"))], slices,
                     classes=DEDICATED))


def test_dedicated_device_request_over_its_capacity() -> None:
    slices = [one_slice(device("device-1", {"memory": "2Gi"}))]
    outcome = run([claim("claim-0", ask("req-0", "4Gi", capacity="memory"))], slices, classes=PLAIN)
    assert fails(outcome)
    assert any("capacity memory of device driver-a/pool-1/device-1: 4Gi requested, 2Gi left" in reason
               for reason in outcome.reasons), outcome.reasons


def test_class_selector_excludes_multi_allocatable_devices() -> None:
    slices = [one_slice(multi(device("device-1", {CAP: "1"})))]
    assert fails(run([claim("claim-0", ask("req-0", "1"))], slices, classes=DEDICATED))


def test_multi_allocatable_device_already_dedicated() -> None:
    slices = [one_slice(policy_range(multi(device("device-1")), CAP, value="2"))]
    assert fails(run([claim("claim-0", ask("req-0", "1"))], slices, in_use=[D1]))


def test_dedicated_device_that_was_multi_allocatable_counts_its_shares() -> None:
    slices = [one_slice(policy_range(device("device-1"), CAP, value="2"))]
    assert fails(run([claim("claim-0", ask("req-0", "1"))], slices, consumed={D1: {CAP: Fraction(1)}}, classes=PLAIN))


# -- with partitionable devices (counters) --


def _kind(value: str) -> dict[str, Any]:
    return cel(f'device.attributes["{DRIVER_A}"].kind == "{value}"')


def test_backtracking_a_share_gives_its_counters_back() -> None:
    """partitionable-consumable-capacity-backtrack-releases-counter."""
    c = claim("claim-0", ask("req-0", None, _kind("shared")), ask("req-1", None, _kind("counteronly")))
    slices = [one_slice(multi(device("device-1", attributes={"kind": {"string": "shared"}},
                                     consumesCounters=[consumes("set-1", c="1")])),
                        device("device-2", attributes={"kind": {"string": "shared"}}),
                        device("device-3", attributes={"kind": {"string": "counteronly"}},
                               consumesCounters=[consumes("set-1", c="1")]), count=2),
              counter_slice("slice-2", NODE_1, "pool-1", DRIVER_A, counter_set("set-1", c="1"), count=2)]
    assert shares(run([c], slices, classes=PLAIN)) == [[("req-0", "device-2"), ("req-1", "device-3")]]


def test_later_shares_take_no_counters_and_backtracking_keeps_the_first() -> None:
    """partitionable-empty-capacity-multiple-share-backtrack-keeps-counter-ownership."""
    attribute = f"{DRIVER_A}/stringAttribute"
    c0 = claim("claim-0", ask("req-0", None, _kind("shared")))
    c1 = claim("claim-1", ask("req-1", None, cel(f'device.attributes["{DRIVER_A}"].kind == "shared" || '
                                                  f'device.attributes["{DRIVER_A}"].kind == "fallback"')),
               ask("req-2", None, _kind("gate")), ask("req-3", None, _kind("shared")),
               constraints=[{"matchAttribute": attribute, "requests": ["req-1", "req-2"]}])
    slices = [one_slice(
        multi(device("device-1", attributes={"kind": {"string": "shared"}, "stringAttribute": {"string": "red"}},
                     consumesCounters=[consumes("set-1", c="1")])),
        device("device-2", attributes={"kind": {"string": "fallback"}, "stringAttribute": {"string": "blue"}}),
        device("device-3", attributes={"kind": {"string": "gate"}, "stringAttribute": {"string": "blue"}}), count=2),
        counter_slice("slice-2", NODE_1, "pool-1", DRIVER_A, counter_set("set-1", c="1"), count=2)]
    assert shares(run([c0, c1], slices, classes=PLAIN)) == [
        [("req-0", "device-1", None)],
        [("req-1", "device-2"), ("req-2", "device-3"), ("req-3", "device-1", None)]]


def test_shares_of_partitionable_devices() -> None:
    """allow-multiple-allocations-with-partitionable-device."""
    c = claim("claim-0", ask("req-0"), first_available(
        "req-1", sub("sub-0", CLASS_A, 1, cel(f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("6Gi")) >= 0')),
        sub("sub-1", CLASS_A, 1, cel(f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("4Gi")) >= 0'))))
    slices = [one_slice(*(multi(device(name, {"memory": memory}, consumesCounters=[consumes("set-1", memory=memory)]))
                          for name, memory in (("device-1", "4Gi"), ("device-2", "6Gi"), ("device-3", "4Gi"))),
                        count=2),
              counter_slice("slice-2", NODE_1, "pool-1", DRIVER_A, counter_set("set-1", memory="8Gi"), count=2)]
    assert shares(run([c], slices)) == [[("req-0", "device-1", {"memory": "4Gi"}),
                                         ("req-1/sub-1", "device-3", {"memory": "4Gi"})]]


def test_a_shared_device_in_use_holds_its_counters() -> None:
    """allow-multiple-allocations-with-shared-device-counter-cross-cycle."""
    c = claim("claim-0", ask("req-0", "1", cel(f'device.attributes["{DRIVER_A}"].mode == "b"')))
    slices = [one_slice(*(multi(device(name, {CAP: "1"}, {"mode": {"string": mode}},
                                       consumesCounters=[consumes("set-1", **{CAP: "1"})]))
                          for name, mode in (("device-1", "a"), ("device-2", "b"))), count=2),
              counter_slice("slice-2", NODE_1, "pool-1", DRIVER_A, counter_set("set-1", **{CAP: "1"}), count=2)]
    assert fails(run([c], slices, consumed={D1: {CAP: Fraction(1)}}))
    assert shares(run([c], slices)) == [[("req-0", "device-2", {CAP: "1"})]]


def test_a_refused_share_gives_back_its_constraint() -> None:
    """consumable-capacity-rejection-rolls-back-constraints."""
    attribute = f"{DRIVER_A}/stringAttribute"
    cap, fallback = (cel(f'device.attributes["{DRIVER_A}"].stringAttribute == "{v}"') for v in ("cap", "fb"))
    c0 = claim("claim-0", ask("req-0", "2", cap))
    c1 = claim("claim-1", first_available("req-0", with_capacity(sub("sub-0", CLASS_A, 1, cap, mode="All"), {CAP: "2"}),
                                          sub("sub-1", CLASS_A, 1, fallback)),
               constraints=[{"matchAttribute": attribute}])
    slices = [one_slice(multi(device("device-1", {CAP: "2"}, {"stringAttribute": {"string": "cap"}})),
                        device("device-2", attributes={"stringAttribute": {"string": "fb"}}))]
    assert shares(run([c0, c1], slices, classes=PLAIN)) == [[("req-0", "device-1", {CAP: "2"})],
                                                            [("req-0/sub-1", "device-2")]]


# -- distinctAttribute --


def _attributes(version: str, numa: int, flag: bool) -> dict[str, Any]:
    return {"driverVersion": {"version": version}, "numa": {"int": numa}, "boolAttribute": {"bool": flag}}


def test_distinct_constraints() -> None:
    c = claim("claim-0", *(ask(f"req-{i}") for i in range(4)), constraints=[
        {"distinctAttribute": f"{DRIVER_A}/boolAttribute", "requests": ["req-0", "req-1"]},
        {"distinctAttribute": f"{DRIVER_A}/driverVersion", "requests": ["req-0", "req-1", "req-2"]},
        {"distinctAttribute": f"{DRIVER_A}/numa", "requests": ["req-0", "req-1", "req-2", "req-3"]}])
    slices = [one_slice(multi(device("device-1", attributes=_attributes("1.0.0", 0, True))),
                        multi(device("device-2", attributes=_attributes("1.0.1", 1, False))),
                        multi(device("device-3", attributes=_attributes("1.0.2", 2, True))),
                        multi(device("device-4", attributes=_attributes("1.0.0", 3, True))))]
    assert shares(run([c], slices, classes=PLAIN)) == [[("req-0", "device-1", None), ("req-1", "device-2", None),
                                                        ("req-2", "device-3", None), ("req-3", "device-4", None)]]


def test_distinct_constraint_attribute_not_set() -> None:
    c = claim("claim-0", ask("req-0"), constraints=[{"distinctAttribute": f"{DRIVER_A}/boolAttribute",
                                                     "requests": ["req-0"]}])
    assert fails(run([c], [one_slice(multi(device("device-1")))], classes=PLAIN))


def test_distinct_constraint_unknown_attribute_type_is_an_error() -> None:
    c = claim("claim-0", ask("req-0"), constraints=[{"distinctAttribute": f"{DRIVER_A}/boolAttribute",
                                                     "requests": ["req-0"]}])
    with pytest.raises(AllocationError, match="unsupported attribute value"):
        run([c], [one_slice(multi(device("device-1", attributes={"boolAttribute": {}})))], classes=PLAIN)


def test_distinct_constraint_with_subrequests() -> None:
    flag = cel(f'device.attributes["{DRIVER_A}"].boolAttribute')
    c = claim("claim-0", *(first_available(f"req-{i}", sub("sub-0", CLASS_A, 1, flag), sub("sub-1", CLASS_A))
                           for i in range(3)),
              constraints=[{"distinctAttribute": f"{DRIVER_A}/boolAttribute", "requests": ["req-0", "req-1"]}])
    slices = [one_slice(multi(device("device-1", attributes={"boolAttribute": {"bool": True}})),
                        multi(device("device-2", attributes={"boolAttribute": {"bool": False}})))]
    assert shares(run([c], slices, classes=PLAIN)) == [[
        ("req-0/sub-0", "device-1", None), ("req-1/sub-1", "device-2", None), ("req-2/sub-0", "device-1", None)]]


def test_distinct_constraint_keeps_two_requests_off_one_shared_device() -> None:
    c = claim("claim-0", ask("req-0", "1"), ask("req-1", "1"),
              constraints=[{"distinctAttribute": f"{DRIVER_A}/stringAttribute"}])
    one = [one_slice(policy_range(multi(device("device-1", attributes={"stringAttribute": {"string": "v"}})),
                                  CAP, value="2"))]
    assert fails(run([c], one))
    two = [slice_(f"slice-{i}", NODE_1, "pool-1", DRIVER_A,
                  policy_range(multi(device(f"device-{i}", attributes={"stringAttribute": {"string": f"v{i}"}})),
                               CAP, value="4"), count=2) for i in (1, 2)]
    assert shares(run([claim("claim-0", ask("req-0", "2"), ask("req-1", "2"),
                             constraints=[{"distinctAttribute": f"{DRIVER_A}/stringAttribute"}])], two)) == [[
        ("req-0", "device-1", {CAP: "2"}), ("req-1", "device-2", {CAP: "2"})]]


# -- a device shared across scheduling cycles, as the store feeds it --


def test_a_device_shared_by_several_claims_is_never_overcommitted() -> None:
    """Claims allocated one after the other, each seeing what the stored allocations (read back
    from their API form) consume: 3 shares of 2Gi fit a device of 8Gi with 2Gi steps, the 5th
    does not; a 1Gi request is rounded up to 2Gi."""
    slices = [one_slice(policy_range(multi(device("device-1")), "memory", value="8Gi", default="2Gi",
                                     minimum="2Gi", step="2Gi", maximum="8Gi"))]
    stored: list[Allocation] = []
    for i, amount in enumerate(("2Gi", "1Gi", "2Gi", "2Gi")):
        outcome = run([claim(f"claim-{i}", ask("req-0", amount, capacity="memory"))], slices,
                      consumed=consumed_capacity(stored))
        assert shares(outcome) == [[("req-0", "device-1", {"memory": "2Gi"})]]
        assert isinstance(outcome, NodeAllocation)
        stored.append(Allocation.parse(outcome.allocations[0].to_api()))
    assert consumed_capacity(stored) == {D1: {"memory": Fraction(8 * 2**30)}}
    outcome = run([claim("claim-4", ask("req-0", "2Gi", capacity="memory"))], slices, consumed=consumed_capacity(stored))
    assert fails(outcome)
    assert any("capacity memory of device driver-a/pool-1/device-1: 2Gi requested, 0 left" in reason
               for reason in outcome.reasons), outcome.reasons
