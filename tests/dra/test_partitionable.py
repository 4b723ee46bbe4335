"""Partitionable devices (DRAPartitionableDevices, beta and on in v1.36): shared counters, devices
that consume them, per-device node selection. The "partitionable-devices-*" cases of
k8s.io/dynamic-resource-allocation@v0.36.3/structured/internal/allocatortesting/allocator_testing.go,
the pools of structured/internal/incubating/pools_incubating.go, scheduler_perf's
PartitionableBacktracking (test/integration/scheduler_perf/dra/partitionabledevices), and what
explain says about counters."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from extender.dra.allocator import INVALID_POOLS, NodeAllocation, Unallocatable, allocate
from extender.dra.objects import (
    CounterSet,
    DeviceClass,
    DeviceID,
    ResourceSlice,
    gather_pools,
)
from extender.errors import InvalidObject
from tests.dra.builders import (
    ALL_NODES,
    CLASS_A,
    CLASS_B,
    DRIVER_A,
    DRIVER_B,
    LABELS,
    NODE_1,
    NODE_2,
    PER_DEVICE,
    claim,
    consumes,
    counter_set,
    counter_slice,
    device,
    device_class,
    exact,
    first_available,
    local_node_selector,
    memory_at_least,
    node_label_selector,
    raw_slice,
    slice_,
    sub,
    taint,
)
from tests.dra.test_allocator import CLASSES, a, fails, picked, run

SET_1, SET_2 = "counter-set-1", "counter-set-2"


def gpu(name: str, memory: str, set_name: str = SET_1, **extra: Any) -> dict[str, Any]:
    """device(name, fromCounters): capacity memory as consumed from the counter set."""
    return device(name, {"memory": memory}, consumesCounters=[consumes(set_name, memory=memory)], **extra)


def pool_of(*devices: dict[str, Any], total: str = "8Gi", where: Any = NODE_1, pool: str = "pool-1",
            driver: str = DRIVER_A, set_name: str = SET_1) -> list[ResourceSlice]:
    """A pool of two slices: the devices (slice-1) and one counter set of `memory` (slice-2)."""
    return [slice_(f"{pool}-slice-1", where, pool, driver, *devices, count=2),
            counter_slice(f"{pool}-slice-2", where, pool, driver, counter_set(set_name, memory=total), count=2)]


def test_partitionable_devices_single_device() -> None:
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))], pool_of(gpu("device-1", "4Gi")))
    assert picked(outcome) == [[a("req-0", "pool-1", "device-1")]]
    assert isinstance(outcome, NodeAllocation)
    assert outcome.allocations[0].node_selector == local_node_selector(NODE_1)


def test_partitionable_devices_multiple_devices() -> None:
    """device-2 (6Gi) would leave 2Gi: the second request takes device-3 instead."""
    slices = pool_of(gpu("device-1", "4Gi"), gpu("device-2", "6Gi"), gpu("device-3", "4Gi"))
    outcome = run([claim("claim-0", exact("req-0", CLASS_A), exact("req-1", CLASS_A))], slices)
    assert picked(outcome) == [[a("req-0", "pool-1", "device-1"), a("req-1", "pool-1", "device-3")]]


def test_partitionable_devices_unused_counters_in_counter_set() -> None:
    slices = pool_of(gpu("device-1", "5Gi"), gpu("device-2", "4Gi"), gpu("device-3", "4Gi"))
    slices[1] = counter_slice("pool-1-slice-2", NODE_1, "pool-1", DRIVER_A,
                              counter_set(SET_1, memory="8Gi", unused="1Gi"), count=2)
    outcome = run([claim("claim-0", exact("req-0", CLASS_A, 2))], slices)
    assert picked(outcome) == [[a("req-0", "pool-1", "device-2"), a("req-0", "pool-1", "device-3")]]


def test_partitionable_devices_multiple_counters_and_counter_sets() -> None:
    """A device consuming from two sets fits only when both have room."""
    two = device("device-1", consumesCounters=[consumes(SET_1, memory="4Gi"), consumes(SET_2, cores="2")])
    one = device("device-2", consumesCounters=[consumes(SET_1, memory="4Gi"), consumes(SET_2, cores="2")])
    slices = [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, two, one, count=2),
              counter_slice("slice-2", NODE_1, "pool-1", DRIVER_A, counter_set(SET_1, memory="8Gi"),
                            counter_set(SET_2, cores="3"), count=2)]
    assert picked(run([claim("claim-0", exact("req-0", CLASS_A))], slices)) == [[a("req-0", "pool-1", "device-1")]]
    assert fails(run([claim("claim-0", exact("req-0", CLASS_A, 2))], slices))


def test_partitionable_devices_multiple_pools_keep_their_own_counters() -> None:
    slices = [*pool_of(gpu("device-1", "8Gi"), gpu("device-2", "8Gi")),
              *pool_of(gpu("device-1", "8Gi"), pool="pool-2")]
    outcome = run([claim("claim-0", exact("req-0", CLASS_A, 2))], slices)
    assert picked(outcome) == [[a("req-0", "pool-1", "device-1"), a("req-0", "pool-2", "device-1")]]


def test_partitionable_devices_prioritized_list() -> None:
    """The first subrequest (two 6Gi devices of 8Gi) cannot fit; the second one can."""
    slices = pool_of(gpu("device-1", "4Gi"), gpu("device-2", "6Gi"), gpu("device-3", "4Gi"))
    c = claim("claim-0", first_available("req-0", sub("subReq-0", CLASS_A, 2, memory_at_least("6Gi")),
                                         sub("subReq-1", CLASS_A, 2, memory_at_least("4Gi"))))
    outcome = run([c], slices)
    assert picked(outcome) == [[a("req-0/subReq-1", "pool-1", "device-1"), a("req-0/subReq-1", "pool-1", "device-3")]]
    assert isinstance(outcome, NodeAllocation) and outcome.score == 7


def test_partitionable_devices_no_capacity_available() -> None:
    """The device in use holds 16Gi of 18Gi: a 4Gi device does not fit."""
    slices = pool_of(gpu("device-1", "4Gi"), gpu("device-2", "16Gi"), total="18Gi")
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))], slices, in_use=[DeviceID(DRIVER_A, "pool-1", "device-2")])
    assert fails(outcome) and outcome.reasons == (
        "claim claim-0, request req-0: 1 requested, 0 usable: counter set counter-set-1 of device "
        "driver-a/pool-1/device-1 has 2Gi of 18Gi memory left, needs 4Gi",)
    assert picked(run([claim("claim-0", exact("req-0", CLASS_A))], slices)) == [[a("req-0", "pool-1", "device-1")]]


def test_partitionable_devices_overallocated_capacity_pool() -> None:
    """A device in use that over-commits a counter (20Gi of 18Gi) leaves nothing: never below zero."""
    slices = pool_of(gpu("device-1", "4Gi"), gpu("device-2", "20Gi"), total="18Gi")
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))], slices, in_use=[DeviceID(DRIVER_A, "pool-1", "device-2")])
    assert fails(outcome) and "has 0 of 18Gi memory left, needs 4Gi" in outcome.reasons[0]


def test_overcommitted_counter_refuses_devices_consuming_other_counters() -> None:
    """The source compares every counter of the pool for each device that consumes any."""
    over = device("device-1", consumesCounters=[consumes(SET_1, memory="20Gi")])
    other = device("device-2", consumesCounters=[consumes(SET_2, cores="1")])
    plain = device("device-3")
    slices = [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, over, other, plain, count=2),
              counter_slice("slice-2", NODE_1, "pool-1", DRIVER_A, counter_set(SET_1, memory="18Gi"),
                            counter_set(SET_2, cores="4"), count=2)]
    in_use = [DeviceID(DRIVER_A, "pool-1", "device-1")]
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))], slices, in_use=in_use)
    assert picked(outcome) == [[a("req-0", "pool-1", "device-3")]]
    refused = run([claim("claim-0", exact("req-0", CLASS_A, 2))], slices, in_use=in_use)
    assert fails(refused) and refused.reasons == (
        "claim claim-0, request req-0: 2 requested, 1 usable: counter set counter-set-1 of device "
        "driver-a/pool-1/device-2 has 0 of 18Gi memory left (over-committed by the devices in use)",)


def test_partitionable_devices_taint_releases_counter() -> None:
    """device-1 is refused by its taint; its counter is not held, so device-2 gets it."""
    slices = [slice_("slice-1", NODE_1, "pool-1", DRIVER_A,
                     device("device-1", consumesCounters=[consumes(SET_1, c="1")],
                            taints=[taint("taint-key", "taint-value", "NoSchedule")]),
                     device("device-2", consumesCounters=[consumes(SET_1, c="1")]), count=2),
              counter_slice("slice-2", NODE_1, "pool-1", DRIVER_A, counter_set(SET_1, c="1"), count=2)]
    assert picked(run([claim("claim-0", exact("req-0", CLASS_A))], slices)) == [[a("req-0", "pool-1", "device-2")]]


def test_partitionable_devices_constraint_releases_counter() -> None:
    def colored(name: str, color: str) -> dict[str, Any]:
        return device(name, attributes={"stringAttribute": {"string": color}},
                      consumesCounters=[consumes(SET_1, c="1")])

    slices = [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, colored("device-1", "red"), colored("device-2", "blue"),
                     colored("device-3", "blue"), count=2),
              counter_slice("slice-2", NODE_1, "pool-1", DRIVER_A, counter_set(SET_1, c="2"), count=2)]
    c = claim("claim-0", exact("req-0", CLASS_A, 2), constraints=[{"matchAttribute": f"{DRIVER_A}/stringAttribute"}])
    assert picked(run([c], slices)) == [[a("req-0", "pool-1", "device-2"), a("req-0", "pool-1", "device-3")]]


def test_partitionable_all_mode_with_consumed_counters() -> None:
    """all-devices-with-consumed-counters: All takes both when the counters allow it, and fails otherwise."""
    slices = pool_of(gpu("device-1", "4Gi"), gpu("device-2", "4Gi"))
    c = claim("claim-0", {"name": "req-0", "exactly": {"deviceClassName": CLASS_A, "allocationMode": "All"}})
    assert picked(run([c], slices)) == [[a("req-0", "pool-1", "device-1"), a("req-0", "pool-1", "device-2")]]
    assert fails(run([c], pool_of(gpu("device-1", "4Gi"), gpu("device-2", "5Gi"))))


def test_counters_span_claims_of_one_pod() -> None:
    """Devices picked for an earlier claim of the same search take from the same counters."""
    slices = pool_of(gpu("device-1", "6Gi"), gpu("device-2", "4Gi"), gpu("device-3", "4Gi"))
    claims = [claim("claim-0", exact("req-0", CLASS_A)), claim("claim-1", exact("req-0", CLASS_A))]
    # claim-0 first takes device-1 (6Gi); claim-1 finds no 2Gi device, so claim-0 moves to device-2.
    assert picked(run(claims, slices)) == [[a("req-0", "pool-1", "device-2")], [a("req-0", "pool-1", "device-3")]]


def test_partitionable_backtracking() -> None:
    """scheduler_perf PartitionableBacktracking: 8 devices of one cpu counter each, device-1 taking
    20Gi and the others 10Gi of 70Gi; 7 devices fit only without device-1, which the search
    takes first and must give back (with its counters)."""
    cpus = {f"cpu{i}": "1" for i in range(1, 9)}
    devices = [device(f"device-{i}", consumesCounters=[consumes("counter-set-for-cpu", **{f"cpu{i}": "1"}),
                                                       consumes("counter-set-for-mem", mem="20Gi" if i == 1 else "10Gi")])
               for i in range(1, 9)]
    where = node_label_selector("region", "region-1")
    slices = [counter_slice("resourceslice-countersets-0", where, "resourceslice-0", DRIVER_A,
                            counter_set("counter-set-for-cpu", **cpus), counter_set("counter-set-for-mem", mem="70Gi"),
                            count=2),
              slice_("resourceslice-devices-0", where, "resourceslice-0", DRIVER_A, *devices, count=2)]
    outcome = run([claim("claim-0", exact("req-0", CLASS_A, 7))], slices)
    assert picked(outcome) == [[a("req-0", "resourceslice-0", f"device-{i}") for i in range(2, 9)]]
    assert isinstance(outcome, NodeAllocation) and outcome.backtracks > 0
    assert outcome.allocations[0].node_selector == where
    # One device fewer in use-free room: with device-8 held elsewhere, 7 cannot fit at all.
    assert fails(run([claim("claim-0", exact("req-0", CLASS_A, 7))], slices,
                     in_use=[DeviceID(DRIVER_A, "resourceslice-0", "device-8")]))


def test_backtracking_gives_every_counter_back() -> None:
    """After a failed search nothing is held: the same search over again finds the same answer."""
    slices = pool_of(*(gpu(f"device-{i}", "3Gi") for i in range(1, 5)), total="8Gi")
    by_name = {c.name: c for c in CLASSES}
    pools = gather_pools(slices, NODE_1, LABELS[NODE_1])
    three = allocate([claim("claim-0", exact("req-0", CLASS_A, 3))], NODE_1, LABELS[NODE_1], pools, by_name.get, set())
    assert isinstance(three, Unallocatable)
    two = allocate([claim("claim-0", exact("req-0", CLASS_A, 2))], NODE_1, LABELS[NODE_1], pools, by_name.get, set())
    assert isinstance(two, NodeAllocation) and len(two.allocations[0].results) == 2


# -- per-device node selection --

def per_device(name: str, where: Any, **extra: Any) -> dict[str, Any]:
    if where is ALL_NODES:
        return device(name, allNodes=True, **extra)
    if isinstance(where, dict):
        return device(name, nodeSelector=where, **extra)
    return device(name, nodeName=where, **extra)


def test_per_device_node_selection_nodename() -> None:
    """device-2 (6Gi) is on node-2: on node-1 the first subrequest finds nothing, the second takes device-1."""
    slices = [slice_("slice-1", PER_DEVICE, "pool-1", DRIVER_A,
                     per_device("device-1", NODE_1, capacity={"memory": "4Gi"},
                                consumesCounters=[consumes(SET_1, memory="4Gi")]),
                     per_device("device-2", NODE_2, capacity={"memory": "6Gi"},
                                consumesCounters=[consumes(SET_1, memory="6Gi")]), count=2),
              counter_slice("slice-2", PER_DEVICE, "pool-1", DRIVER_A, counter_set(SET_1, memory="18Gi"), count=2)]
    c = claim("claim-0", first_available("req-0", sub("subReq-0", CLASS_A, 1, memory_at_least("6Gi")),
                                         sub("subReq-1", CLASS_A, 1, memory_at_least("4Gi"))))
    outcome = run([c], slices)
    assert picked(outcome) == [[a("req-0/subReq-1", "pool-1", "device-1")]]
    assert isinstance(outcome, NodeAllocation) and outcome.allocations[0].node_selector == local_node_selector(NODE_1)
    on_two = run([c], slices, node=NODE_2)
    assert picked(on_two) == [[a("req-0/subReq-0", "pool-1", "device-2")]]
    assert isinstance(on_two, NodeAllocation) and on_two.allocations[0].node_selector == local_node_selector(NODE_2)


def test_per_device_node_selection_node_selector() -> None:
    region = node_label_selector("region", "region-1")
    slices = [slice_("slice-1", PER_DEVICE, "pool-1", DRIVER_A,
                     per_device("device-1", region, consumesCounters=[consumes(SET_1, memory="4Gi")]), count=2),
              counter_slice("slice-2", PER_DEVICE, "pool-1", DRIVER_A, counter_set(SET_1, memory="18Gi"), count=2)]
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))], slices)
    assert isinstance(outcome, NodeAllocation) and outcome.allocations[0].node_selector == region
    assert fails(run([claim("claim-0", exact("req-0", CLASS_A))], slices, node=NODE_2))


def test_per_device_node_selection_multiple_devices() -> None:
    """A node-local device among them pins the whole claim to the node."""
    slices = [slice_("slice-1", PER_DEVICE, "pool-1", DRIVER_A,
                     per_device("device-1", node_label_selector("region", "region-1"),
                                consumesCounters=[consumes(SET_1, memory="4Gi")]),
                     per_device("device-2", NODE_1, consumesCounters=[consumes(SET_1, memory="4Gi")]),
                     per_device("device-3", ALL_NODES, consumesCounters=[consumes(SET_1, memory="4Gi")]), count=2),
              counter_slice("slice-2", PER_DEVICE, "pool-1", DRIVER_A, counter_set(SET_1, memory="18Gi"), count=2),
              slice_("slice-3", NODE_1, "pool-2", DRIVER_B,
                     *(device(f"device-{i}", consumesCounters=[consumes(SET_2, memory="4Gi")]) for i in (1, 2, 3)),
                     count=2),
              counter_slice("slice-4", NODE_1, "pool-2", DRIVER_B, counter_set(SET_2, memory="12Gi"), count=2)]
    outcome = run([claim("claim-0", exact("req-0", CLASS_A, 3), exact("req-1", CLASS_B, 3))], slices)
    assert picked(outcome) == [[a("req-0", "pool-1", f"device-{i}") for i in (1, 2, 3)]
                               + [a("req-1", "pool-2", f"device-{i}", DRIVER_B) for i in (1, 2, 3)]]
    assert isinstance(outcome, NodeAllocation) and outcome.allocations[0].node_selector == local_node_selector(NODE_1)
    # Only the allNodes device reaches node-2 (region-2), and its selector adds nothing.
    only_all = run([claim("claim-0", exact("req-0", CLASS_A))], slices, node=NODE_2)
    assert picked(only_all) == [[a("req-0", "pool-1", "device-3")]]
    assert isinstance(only_all, NodeAllocation) and only_all.allocations[0].node_selector is None


def test_devices_on_different_nodes_consume_same_counter_set() -> None:
    """device-3 is on node-2 and in use: its 6Gi still count against node-1's devices."""
    slices = [counter_slice("slice-1", NODE_1, "pool-1", DRIVER_A, counter_set(SET_1, memory="8Gi"), count=3),
              slice_("slice-2", NODE_1, "pool-1", DRIVER_A, gpu("device-1", "6Gi"), gpu("device-2", "2Gi"), count=3),
              slice_("slice-3", NODE_2, "pool-1", DRIVER_A, gpu("device-3", "6Gi"), count=3)]
    c = claim("claim-0", first_available("req-0", sub("subReq-0", CLASS_A, 1, memory_at_least("6Gi")),
                                         sub("subReq-1", CLASS_A, 1, memory_at_least("2Gi"))))
    outcome = run([c], slices, in_use=[DeviceID(DRIVER_A, "pool-1", "device-3")])
    assert picked(outcome) == [[a("req-0/subReq-1", "pool-1", "device-2")]]
    (pool,) = gather_pools(slices, NODE_1, LABELS[NODE_1])
    assert [s.name for s in pool.slices] == ["slice-2"] and [s.name for s in pool.elsewhere] == ["slice-3"]
    assert [d.device for d, _ in pool.consumers] == ["device-1", "device-2", "device-3"]


def test_counter_slice_reaches_every_node() -> None:
    """pools_incubating.go: a slice of shared counters is always relevant, whatever its node selection."""
    slices = [counter_slice("slice-1", NODE_2, "pool-1", DRIVER_A, counter_set(SET_1, memory="8Gi"), count=2),
              slice_("slice-2", NODE_1, "pool-1", DRIVER_A, gpu("device-1", "6Gi"), count=2)]
    assert picked(run([claim("claim-0", exact("req-0", CLASS_A))], slices)) == [[a("req-0", "pool-1", "device-1")]]


# -- invalid pools --

@pytest.mark.parametrize(("slices", "invalid"), [
    ([slice_("slice-1", NODE_1, "pool-1", DRIVER_A, device("device-1"), count=4),
      counter_slice("slice-2", NODE_1, "pool-1", DRIVER_A, counter_set(SET_1), count=4),
      slice_("slice-3", NODE_1, "pool-1", DRIVER_A, device("device-2"), count=4),
      counter_slice("slice-4", NODE_1, "pool-1", DRIVER_A, counter_set(SET_1), count=4)],
     "duplicate counter set name counter-set-1"),
    (pool_of(device("device-1", consumesCounters=[consumes(SET_2)])), "counter set counter-set-2 not found"),
    (pool_of(device("device-1", consumesCounters=[consumes(SET_1, other="1")])),
     "counter other not found in counter set counter-set-1"),
    ([counter_slice("slice-1", NODE_1, "pool-1", DRIVER_A, counter_set(SET_1, memory="8Gi"), count=3),
      slice_("slice-2", NODE_1, "pool-1", DRIVER_A, gpu("device-1", "6Gi"), count=3),
      slice_("slice-3", NODE_2, "pool-1", DRIVER_A, gpu("device-3", "6Gi", SET_2), count=3)],
     "counter set counter-set-2 not found"),  # validation-error-on-non-targeting-slice
], ids=["same-counter-set-name", "unknown-counter-set", "unknown-counter", "non-targeting-slice"])
def test_invalid_partitionable_pools(slices: list[ResourceSlice], invalid: str) -> None:
    (pool,) = gather_pools(slices, NODE_1, LABELS[NODE_1])
    assert pool.invalid == invalid
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))], slices)
    assert isinstance(outcome, Unallocatable) and outcome.status_reason == INVALID_POOLS


def test_counter_set_in_other_pool_is_unknown() -> None:
    slices = [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, gpu("device-1", "8Gi")),
              counter_slice("slice-2", NODE_1, "pool-2", DRIVER_A, counter_set(SET_1, memory="8Gi"))]
    pools = gather_pools(slices, NODE_1, LABELS[NODE_1])
    assert [p.invalid for p in pools] == ["counter set counter-set-1 not found", ""]
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))], slices)
    assert isinstance(outcome, Unallocatable) and outcome.status_reason == INVALID_POOLS


def test_partitionable_slices_parse() -> None:
    raw = raw_slice("s", PER_DEVICE, "pool-1", DRIVER_A,
                    device("d", nodeSelector=node_label_selector("region", "region-1"),
                           consumesCounters=[consumes(SET_1, memory="4Gi", cores="500m")]))
    parsed = ResourceSlice.parse(raw)
    assert parsed.per_device_node_selection
    (d,) = parsed.devices
    assert d.consumes_counters == (CounterSet(SET_1, {"memory": Fraction(4 * 2**30), "cores": Fraction(1, 2)}),)
    assert d.available_on(NODE_1, LABELS[NODE_1]) and not d.available_on(NODE_2, LABELS[NODE_2])
    assert parsed.available_on(NODE_1, LABELS[NODE_1]) and not parsed.available_on(NODE_2, LABELS[NODE_2])
    counters = counter_slice("c", NODE_2, "pool-1", DRIVER_A, counter_set(SET_1, memory="8Gi"))
    assert counters.shared_counters == (CounterSet(SET_1, {"memory": Fraction(8 * 2**30)}),)
    assert counters.available_on(NODE_1, {})
    bad = raw_slice("s", NODE_1, "pool-1", DRIVER_A, device("d", consumesCounters=[{"counterSet": SET_1,
                                                                                    "counters": {"m": {}}}]))
    with pytest.raises(InvalidObject, match=r"spec.devices\[0\].consumesCounters\[0\].counters.m.value: required"):
        ResourceSlice.parse(bad)
    worse = raw_slice("s", NODE_1, "pool-1", DRIVER_A)
    worse["spec"]["sharedCounters"] = [{"name": SET_1, "counters": {"m": {"value": "lots"}}}]
    with pytest.raises(InvalidObject, match="lots"):
        ResourceSlice.parse(worse)


def test_pods_without_partitionable_devices_build_no_counters() -> None:
    """The counter book is made only when a device that consumes counters is tried."""
    classes = (device_class(CLASS_A, DRIVER_A),)
    pools = gather_pools([slice_("slice-1", NODE_1, "pool-1", DRIVER_A, device("device-1"))], NODE_1, LABELS[NODE_1])
    by_name: dict[str, DeviceClass] = {c.name: c for c in classes}
    outcome = allocate([claim("claim-0", exact("req-0", CLASS_A))], NODE_1, LABELS[NODE_1], pools, by_name.get, set())
    assert isinstance(outcome, NodeAllocation)
    assert pools[0].consumers == () and pools[0].counter_sets == {}


def test_counter_slice_filed_under_another_node_is_found_through_all_slices() -> None:
    """A caller that offers each node only its own slices (and the selector ones) still gets the
    pool's counter sets, from `all_slices`, when the node sees part of the pool."""
    counters = counter_slice("slice-1", NODE_2, "pool-1", DRIVER_A, counter_set(SET_1, memory="8Gi"), count=2)
    devices = slice_("slice-2", NODE_1, "pool-1", DRIVER_A, gpu("device-1", "6Gi"), count=2)
    (pool,) = gather_pools([devices], NODE_1, LABELS[NODE_1], all_slices=[counters, devices])
    assert not pool.invalid and set(pool.counter_sets) == {SET_1} and pool.elsewhere == ()
    outcome = allocate([claim("claim-0", exact("req-0", CLASS_A))], NODE_1, LABELS[NODE_1], [pool],
                       {c.name: c for c in CLASSES}.get, set())
    assert picked(outcome) == [[a("req-0", "pool-1", "device-1")]]
