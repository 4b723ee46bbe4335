"""The GA cases of k8s.io/dynamic-resource-allocation@v0.36.3/structured/internal/allocatortesting
(allocator_testing.go), ported by name, with the device each one expects; plus our own API
(score, explain, the backtrack bound)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pytest

from extender.dra.allocator import (
    CANNOT_ALLOCATE,
    INVALID_POOLS,
    AllocationError,
    NodeAllocation,
    SearchLimitExceeded,
    Unallocatable,
    allocate,
    first_available_score,
)
from extender.dra.objects import DeviceClass, DeviceID, ResourceClaim, ResourceSlice, gather_pools
from tests.dra.builders import (
    ALL_NODES,
    CLASS_A,
    CLASS_B,
    DRIVER_A,
    DRIVER_B,
    LABELS,
    NODE_1,
    NODE_2,
    all_of,
    cel,
    claim,
    device,
    device_class,
    exact,
    first_available,
    local_node_selector,
    memory_at_least,
    node_label_selector,
    one_device,
    opaque,
    slice_,
    sub,
)

CLASSES = (device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B))
LOCAL = local_node_selector(NODE_1)


def run(claims: Sequence[ResourceClaim], slices: Iterable[ResourceSlice], *, classes: Sequence[DeviceClass] = CLASSES,
        node: str = NODE_1, in_use: Iterable[DeviceID] = (), max_backtracks: int | None = None
        ) -> NodeAllocation | Unallocatable:
    by_name = {c.name: c for c in classes}
    pools = gather_pools(slices, node, LABELS[node])
    return allocate(claims, node, LABELS[node], pools, by_name.get, set(in_use), max_backtracks=max_backtracks)


def picked(outcome: NodeAllocation | Unallocatable) -> list[list[tuple[str, str, str, str]]]:
    assert isinstance(outcome, NodeAllocation), outcome
    return [[(r.request, r.driver, r.pool, r.device) + (("admin",) if r.admin_access else ())
             for r in allocation.results] for allocation in outcome.allocations]


def fails(outcome: NodeAllocation | Unallocatable) -> bool:
    assert isinstance(outcome, Unallocatable), outcome
    assert outcome.reasons, "an unallocatable node must say why"
    return True


def a(request: str, pool: str, dev: str, driver: str = DRIVER_A, admin: bool = False) -> tuple[str, ...]:
    return (request, driver, pool, dev) + (("admin",) if admin else ())


def test_simple_and_its_exact_api_output() -> None:
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))], [one_device("slice-1", NODE_1, "pool-1", DRIVER_A)])
    assert isinstance(outcome, NodeAllocation)
    assert outcome.score == 0 and outcome.backtracks == 0
    assert outcome.allocations[0].to_api() == {
        "devices": {"results": [{"request": "req-0", "driver": DRIVER_A, "pool": "pool-1", "device": "device-1"}]},
        "nodeSelector": LOCAL,
    }


def test_other_node() -> None:
    slices = [one_device("slice-1", NODE_1, "pool-1", DRIVER_B), one_device("slice-2", NODE_2, "pool-2", DRIVER_A)]
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))], slices, node=NODE_2)
    assert picked(outcome) == [[a("req-0", "pool-2", "device-1")]]
    assert isinstance(outcome, NodeAllocation)
    assert outcome.allocations[0].node_selector == local_node_selector(NODE_2)


SMALL, LARGE = device("device-1", {"memory": "1Gi"}), device("device-2", {"memory": "2Gi"})


@pytest.mark.parametrize("devices", [(SMALL, LARGE), (LARGE, SMALL)], ids=["small-and-large", "backtrack-requests"])
def test_small_and_large(devices: tuple[dict, dict]) -> None:
    c = claim("claim-0", exact("req-0", CLASS_A, 1, memory_at_least("1Gi")),
              exact("req-1", CLASS_A, 1, memory_at_least("2Gi")))
    outcome = run([c], [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, *devices)])
    assert picked(outcome) == [[a("req-0", "pool-1", "device-1"), a("req-1", "pool-1", "device-2")]]
    assert isinstance(outcome, NodeAllocation) and outcome.backtracks == (devices[0] is LARGE)


def test_small_and_large_backtrack_claims() -> None:
    claims = [claim("claim-0", exact("req-0", CLASS_A, 1, memory_at_least("1Gi"))),
              claim("claim-1", exact("req-1", CLASS_A, 1, memory_at_least("2Gi")))]
    outcome = run(claims, [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, LARGE, SMALL)])
    assert picked(outcome) == [[a("req-0", "pool-1", "device-1")], [a("req-1", "pool-1", "device-2")]]


def test_devices_split_across_different_slices() -> None:
    slices = [one_device("slice-1", NODE_1, "pool-1", DRIVER_A), one_device("slice-2", NODE_1, "pool-2", DRIVER_A)]
    outcome = run([claim("claim-0", exact("req-0", CLASS_A, 2))], slices)
    assert picked(outcome) == [[a("req-0", "pool-1", "device-1"), a("req-0", "pool-2", "device-1")]]


def test_obsolete_slice_leaves_an_incomplete_pool() -> None:
    slices = [slice_("slice-1-obsolete", NODE_1, "pool-1", DRIVER_A, device("device-1"), count=2),
              slice_("slice-1-obsolete", NODE_1, "pool-1", DRIVER_A, device("device-2"), count=2, generation=2)]
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))], slices)
    assert fails(outcome) and outcome.status_reason == CANNOT_ALLOCATE
    assert any("pool driver-a/pool-1 is incomplete" in r for r in outcome.reasons)


def test_duplicate_slice_makes_the_pool_invalid() -> None:
    slices = [one_device("slice-1", NODE_1, "pool-1", DRIVER_A, count=2),
              one_device("slice-1-2", NODE_1, "pool-1", DRIVER_A, count=2)]
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))], slices)
    assert fails(outcome) and outcome.status_reason == INVALID_POOLS
    assert "resource pool driver-a/pool-1 is invalid: duplicate device name device-1" in outcome.reasons


def test_no_slices() -> None:
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))], [])
    assert fails(outcome)
    assert outcome.reasons == ("claim claim-0, request req-0: no device on this node matches device class class-a",)


def test_not_enough_suitable_devices() -> None:
    claims = [claim("claim-0", exact("req-0", CLASS_A)), claim("claim-0", exact("req-1", CLASS_A))]
    assert fails(run(claims, [one_device("slice-1", NODE_1, "pool-1", DRIVER_A)]))


@pytest.mark.parametrize(("classes", "name", "message"), [
    ((), CLASS_A, "could not retrieve device class class-a"),
    (CLASSES, "unknown-class", "could not retrieve device class unknown-class"),
    (CLASSES, "", "claim claim-0, request req-0: missing device class name (unsupported request type?)"),
], ids=["no-classes", "unknown-class", "empty-class"])
def test_class_problems_are_errors(classes: Sequence[DeviceClass], name: str, message: str) -> None:
    with pytest.raises(AllocationError, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        run([claim("claim-0", exact("req-0", name))], [one_device("slice-1", NODE_1, "pool-1", DRIVER_A)],
            classes=classes)


def test_no_claims_to_allocate() -> None:
    outcome = run([], [one_device("slice-1", NODE_1, "pool-1", DRIVER_A)])
    assert isinstance(outcome, NodeAllocation) and outcome.allocations == ()


def test_all_devices_single_and_many() -> None:
    single = run([claim("claim-0", all_of("req-0", CLASS_A))], [one_device("slice-1", NODE_1, "pool-1", DRIVER_A)])
    assert picked(single) == [[a("req-0", "pool-1", "device-1")]]
    many = run([claim("claim-0", all_of("req-0", CLASS_A))],
               [one_device("slice-1", NODE_1, "pool-1", DRIVER_A), one_device("slice-1", NODE_1, "pool-2", DRIVER_A)])
    assert picked(many) == [[a("req-0", "pool-1", "device-1"), a("req-0", "pool-2", "device-1")]]


def test_all_devices_of_the_incomplete_pool_is_an_error() -> None:
    with pytest.raises(AllocationError, match="claim claim-0, request req-0: asks for all devices, "
                                              "but resource pool driver-a/pool-1 is currently being updated"):
        run([claim("claim-0", all_of("req-0", CLASS_A))], [one_device("slice-1", NODE_1, "pool-1", DRIVER_A, count=2)])


@pytest.mark.parametrize("reverse", [False, True], ids=["plus-another", "plus-another-reversed"])
@pytest.mark.parametrize("many", [False, True], ids=["one", "many"])
def test_all_devices_plus_another(reverse: bool, many: bool) -> None:
    devices = [device("device-1"), device("device-2")] if many else [device("device-1")]
    slices = [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, *devices), one_device("slice-1", NODE_1, "pool-1", DRIVER_B)]
    claims = [claim("claim-0", all_of("req-0", CLASS_A)), claim("claim-1", exact("req-0", CLASS_B))]
    expected = [[a("req-0", "pool-1", d["name"]) for d in devices], [a("req-0", "pool-1", "device-1", DRIVER_B)]]
    if reverse:
        claims.reverse()
        expected.reverse()
    assert picked(run(claims, slices)) == expected


@pytest.mark.parametrize("reverse", [False, True])
def test_all_devices_no_solution(reverse: bool) -> None:
    claims = [claim("claim-1", exact("req-0", CLASS_A)), claim("claim-0", all_of("req-0", CLASS_A))]
    if reverse:
        claims.reverse()
    assert fails(run(claims, [one_device("slice-1", NODE_1, "pool-1", DRIVER_A)]))


def test_all_devices_with_no_device_fails_but_is_no_error() -> None:
    c = claim("claim-0", all_of("req-0", CLASS_A))
    assert fails(run([c], [slice_("slice-1", NODE_1, "pool-1", DRIVER_A)]))
    outcome = run([c], [])
    assert fails(outcome)
    assert "claim claim-0, request req-0: no device on this node matches device class class-a" in outcome.reasons


def test_all_devices_some_allocated() -> None:
    outcome = run([claim("claim-0", all_of("req-0", CLASS_A))],
                  [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, device("device-1"), device("device-2"))],
                  in_use=[DeviceID(DRIVER_A, "pool-1", "device-1")])
    assert fails(outcome)
    assert "claim claim-0, request req-0: asks for all 2 matching devices, 1 in use" in outcome.reasons


TWO_DEVICES = slice_("slice-1", NODE_1, "pool-1", DRIVER_A, device("device-1"), device("device-2"))
DEVICE_1_IN_USE = [DeviceID(DRIVER_A, "pool-1", "device-1")]


def test_admin_access_takes_devices_in_use() -> None:
    all_admin = run([claim("claim-0", all_of("req-0", CLASS_A, admin=True))], [TWO_DEVICES], in_use=DEVICE_1_IN_USE)
    assert picked(all_admin) == [[a("req-0", "pool-1", "device-1", admin=True),
                                  a("req-0", "pool-1", "device-2", admin=True)]]
    counted = run([claim("claim-0", exact("req-0", CLASS_A, 2, admin=True))], [TWO_DEVICES], in_use=DEVICE_1_IN_USE)
    assert picked(counted) == picked(all_admin)
    enabled = run([claim("claim-0", exact("req-0", CLASS_A, admin=True))],
                  [one_device("slice-1", NODE_1, "pool-1", DRIVER_A)],
                  in_use=[*DEVICE_1_IN_USE, DeviceID(DRIVER_A, "pool-1", "device-2")])
    assert picked(enabled) == [[a("req-0", "pool-1", "device-1", admin=True)]]
    assert isinstance(enabled, NodeAllocation)
    assert enabled.allocations[0].to_api()["devices"]["results"][0]["adminAccess"] is True


def test_all_devices_some_allocating_admin_access() -> None:
    """The All request cannot take device-1: the first request of the same claim holds it."""
    c = claim("claim-0", exact("req-0", CLASS_A, admin=True), all_of("req-1", CLASS_A, admin=True))
    assert fails(run([c], [TWO_DEVICES]))


def test_separate_claims_share_device_admin_access() -> None:
    claims = [claim("claim-0", exact("req-0", CLASS_A, admin=True)), claim("claim-1", exact("req-0", CLASS_A, admin=True))]
    assert picked(run(claims, [TWO_DEVICES])) == [[a("req-0", "pool-1", "device-1", admin=True)]] * 2


def test_admin_access_claims_device_allocating_for_non_admin_access() -> None:
    claims = [claim("claim-0", exact("req-0", CLASS_A)), claim("claim-1", exact("req-0", CLASS_A, admin=True))]
    assert picked(run(claims, [TWO_DEVICES])) == [[a("req-0", "pool-1", "device-1")],
                                                  [a("req-0", "pool-1", "device-1", admin=True)]]


def test_non_admin_claim_after_admin_claim_does_not_get_its_device() -> None:
    """allocateDevice marks admin-access devices as allocating too (allocator_stable.go)."""
    claims = [claim("claim-0", exact("req-0", CLASS_A, admin=True)), claim("claim-1", exact("req-0", CLASS_A))]
    assert picked(run(claims, [TWO_DEVICES])) == [[a("req-0", "pool-1", "device-1", admin=True)],
                                                  [a("req-0", "pool-1", "device-2")]]


def _all_first(*rest: dict) -> ResourceClaim:
    return claim("claim-0", first_available("req-0", sub("subReq-0", CLASS_A, mode="All"), sub("subReq-1", CLASS_B)),
                 *rest)


@pytest.mark.parametrize(("slices", "in_use"), [
    ([slice_("slice-1", NODE_1, "pool-1", DRIVER_A), one_device("slice-2", NODE_1, "pool-2", DRIVER_B)], []),
    ([one_device("slice-2", NODE_1, "pool-2", DRIVER_B)], []),
    ([TWO_DEVICES, one_device("slice-2", NODE_1, "pool-2", DRIVER_B)], DEVICE_1_IN_USE),
], ids=["slice-without-devices", "no-slices", "some-allocated"])
def test_all_devices_prioritized_list(slices: list[ResourceSlice], in_use: list[DeviceID]) -> None:
    outcome = run([_all_first()], slices, in_use=in_use)
    assert picked(outcome) == [[a("req-0/subReq-1", "pool-2", "device-1", DRIVER_B)]]
    assert isinstance(outcome, NodeAllocation) and outcome.score == 7


def test_network_attached_device() -> None:
    slices = [one_device("slice-1", node_label_selector("region", "region-1"), "pool-1", DRIVER_A)]
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))], slices)
    assert picked(outcome) == [[a("req-0", "pool-1", "device-1")]]
    assert isinstance(outcome, NodeAllocation)
    assert outcome.allocations[0].node_selector == node_label_selector("region", "region-1")
    assert fails(run([claim("claim-0", exact("req-0", CLASS_A))], slices, node=NODE_2))


def test_many_network_attached_devices_union_their_selectors() -> None:
    slices = [one_device("slice-1", node_label_selector("region", "region-1"), "pool-1", DRIVER_A),
              one_device("slice-1", ALL_NODES, "pool-2", DRIVER_A),
              one_device("slice-1", node_label_selector("planet", "earth"), "pool-3", DRIVER_A),
              one_device("slice-1", local_node_selector(NODE_1), "pool-4", DRIVER_A)]
    outcome = run([claim("claim-0", exact("req-0", CLASS_A, 4))], slices)
    assert picked(outcome) == [[a("req-0", f"pool-{i}", "device-1") for i in range(1, 5)]]
    assert isinstance(outcome, NodeAllocation)
    assert outcome.allocations[0].node_selector == {"nodeSelectorTerms": [{
        "matchExpressions": [{"key": "region", "operator": "In", "values": ["region-1"]},
                             {"key": "planet", "operator": "In", "values": ["earth"]}],
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE_1]}],
    }]}


def test_all_nodes_only_gives_no_node_selector() -> None:
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))], [one_device("slice-1", ALL_NODES, "pool-1", DRIVER_A)])
    assert isinstance(outcome, NodeAllocation)
    assert outcome.allocations[0].node_selector is None and "nodeSelector" not in outcome.allocations[0].to_api()


def test_local_and_network_attached_devices() -> None:
    slices = [one_device("slice-1", node_label_selector("region", "region-1"), "pool-1", DRIVER_A),
              one_device("slice-1", NODE_1, "pool-2", DRIVER_A)]
    outcome = run([claim("claim-0", exact("req-0", CLASS_A, 2))], slices)
    assert picked(outcome) == [[a("req-0", "pool-1", "device-1"), a("req-0", "pool-2", "device-1")]]
    assert isinstance(outcome, NodeAllocation) and outcome.allocations[0].node_selector == LOCAL


def test_several_different_drivers() -> None:
    slices = [TWO_DEVICES, one_device("slice-1", NODE_1, "pool-1", DRIVER_B)]
    claims = [claim("claim-0", exact("req-0", CLASS_A)), claim("claim-0", exact("req-0", CLASS_B))]
    assert picked(run(claims, slices)) == [[a("req-0", "pool-1", "device-1")],
                                           [a("req-0", "pool-1", "device-1", DRIVER_B)]]


def test_already_allocated_devices() -> None:
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))], [one_device("slice-1", NODE_1, "pool-1", DRIVER_A)],
                  in_use=DEVICE_1_IN_USE)
    assert fails(outcome) and "claim claim-0, request req-0: 1 requested, 0 free" in outcome.reasons


ATTRS = {"driverVersion": {"version": "1.0.0"}, "numa": {"int": 1}, "stringAttribute": {"string": "stringAttributeValue"},
         "boolAttribute": {"bool": True}}


def match(attribute: str, *requests: str) -> dict:
    return {"matchAttribute": f"{DRIVER_A}/{attribute}", **({"requests": list(requests)} if requests else {})}


def test_with_constraint() -> None:
    constraints = [match("numa"), match("driverVersion"), match("stringAttribute"), match("boolAttribute")]
    c = claim("claim-0", exact("req-0", CLASS_A), exact("req-1", CLASS_A), constraints=constraints)
    slices = [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, device("device-1", attributes=ATTRS),
                     device("device-2", attributes=ATTRS))]
    assert picked(run([c], slices)) == [[a("req-0", "pool-1", "device-1"), a("req-1", "pool-1", "device-2")]]


def test_constraint_with_qualified_attribute_names_on_the_device() -> None:
    qualified = {f"{DRIVER_A}/numa": {"int": 1}}
    c = claim("claim-0", exact("req-0", CLASS_A, 2), constraints=[match("numa")])
    slices = [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, device("device-1", attributes=qualified),
                     device("device-2", attributes={"numa": {"int": 1}}))]
    assert picked(run([c], slices)) == [[a("req-0", "pool-1", "device-1"), a("req-0", "pool-1", "device-2")]]


def test_with_constraint_non_existent_attribute() -> None:
    c = claim("claim-0", exact("req-0", CLASS_A), constraints=[match("NonExistentAttribute")])
    assert fails(run([c], [one_device("slice-1", NODE_1, "pool-1", DRIVER_A)]))


@pytest.mark.parametrize(("attribute", "first", "second"), [
    ("numa", {"int": 1}, {"int": 2}),
    ("stringAttribute", {"string": "stringAttributeValue"}, {"string": "stringAttributeValue2"}),
    ("boolAttribute", {"bool": True}, {"bool": False}),
    ("driverVersion", {"version": "1.0.0"}, {"version": "2.0.0"}),
    ("numa", {"int": 1}, {"string": "1"}),
], ids=["int", "string", "bool", "version", "types-differ"])
def test_with_constraint_not_matching(attribute: str, first: dict, second: dict) -> None:
    c = claim("claim-0", exact("req-0", CLASS_A, 2), constraints=[match(attribute)])
    slices = [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, device("device-1", attributes={attribute: first}),
                     device("device-2", attributes={attribute: second}))]
    outcome = run([c], slices)
    assert fails(outcome)
    assert outcome.reasons == ("no combination of free devices satisfies every request and constraint",)


def test_with_constraint_not_matching_int_attribute_all_devices_is_an_error() -> None:
    c = claim("claim-0", all_of("req-0", CLASS_A), constraints=[match("numa")])
    slices = [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, device("device-1", attributes={"numa": {"int": 1}}),
                     device("device-2", attributes={"numa": {"int": 2}}))]
    with pytest.raises(AllocationError, match="claim claim-0, request req-0: cannot add device "
                                              "driver-a/pool-1/device-2 because a claim constraint would not be satisfied"):
        run([c], slices)


def test_with_constraint_for_request() -> None:
    c = claim("claim-0", exact("req-0", CLASS_A), exact("req-1", CLASS_A), constraints=[match("driverVersion", "req-0")])
    slices = [slice_("slice-1", NODE_1, "pool-1", DRIVER_A,
                     device("device-1", attributes={"driverVersion": {"version": "1.0.0"}}),
                     device("device-2", attributes={"driverVersion": {"version": "2.0.0"}}))]
    assert picked(run([c], slices)) == [[a("req-0", "pool-1", "device-1"), a("req-1", "pool-1", "device-2")]]


def test_with_constraint_for_request_retry() -> None:
    c = claim("claim-0", exact("req-0", CLASS_A), exact("req-1", CLASS_A),
              constraints=[match("driverVersion", "req-0"), match("stringAttribute")])
    slices = [slice_("slice-1", NODE_1, "pool-1", DRIVER_A,
                     device("device-1", attributes={"driverVersion": {"version": "1.0.0"}, "stringAttribute": {"string": "a"}}),
                     device("device-2", attributes={"driverVersion": {"version": "2.0.0"}, "stringAttribute": {"string": "b"}}),
                     device("device-3", attributes={"driverVersion": {"version": "3.0.0"}, "stringAttribute": {"string": "b"}}))]
    outcome = run([c], slices)
    assert picked(outcome) == [[a("req-0", "pool-1", "device-2"), a("req-1", "pool-1", "device-3")]]
    assert isinstance(outcome, NodeAllocation) and outcome.backtracks == 1


def test_a_constraint_of_an_unknown_type_is_an_error() -> None:
    c = claim("claim-0", exact("req-0", CLASS_A), constraints=[{"requests": ["req-0"]}])
    with pytest.raises(AllocationError, match=r"claim claim-0, constraint #0: empty constraint \(unsupported"):
        run([c], [one_device("slice-1", NODE_1, "pool-1", DRIVER_A)])


def test_with_class_device_config() -> None:
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))], [one_device("slice-1", NODE_1, "pool-1", DRIVER_A)],
                  classes=[device_class(CLASS_A, DRIVER_A, "classAttribute")])
    assert isinstance(outcome, NodeAllocation)
    assert outcome.allocations[0].to_api() == {
        "devices": {
            "results": [{"request": "req-0", "driver": DRIVER_A, "pool": "pool-1", "device": "device-1"}],
            "config": [{"source": "FromClass", "requests": ["req-0"], **opaque(DRIVER_A, "classAttribute")}],
        },
        "nodeSelector": LOCAL,
    }


def test_with_class_device_config_with_multiple_request_and_configs() -> None:
    classes = [device_class(CLASS_A, DRIVER_A, "classAttribute-A"), device_class(CLASS_B, DRIVER_B, "classAttribute-B")]
    slices = [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, device("device-0"), device("device-1")),
              one_device("slice-2", NODE_1, "pool-1", DRIVER_B)]
    c = claim("claim-0", exact("req-0", CLASS_A), exact("req-1", CLASS_A), exact("req-2", CLASS_B), constraints=[])
    outcome = run([c], slices, classes=classes)
    assert picked(outcome) == [[a("req-0", "pool-1", "device-0"), a("req-1", "pool-1", "device-1"),
                                a("req-2", "pool-1", "device-1", DRIVER_B)]]
    assert isinstance(outcome, NodeAllocation)
    assert outcome.allocations[0].to_api()["devices"]["config"] == [
        {"source": "FromClass", "requests": ["req-0", "req-1"], **opaque(DRIVER_A, "classAttribute-A")},
        {"source": "FromClass", "requests": ["req-2"], **opaque(DRIVER_B, "classAttribute-B")},
    ]


def test_claim_with_device_config() -> None:
    c = claim("claim-0", exact("req-0", CLASS_A), config=[opaque(DRIVER_A, "deviceAttribute")])
    outcome = run([c], [one_device("slice-1", NODE_1, "pool-1", DRIVER_A)])
    assert isinstance(outcome, NodeAllocation)
    assert outcome.allocations[0].config == ({"source": "FromClaim", **opaque(DRIVER_A, "deviceAttribute")},)


def test_claim_config_naming_two_requests_is_repeated_as_the_source_loops() -> None:
    """allocator_stable.go appends a claim config once per request of the claim it names."""
    c = claim("claim-0", exact("req-0", CLASS_A), exact("req-1", CLASS_A),
              config=[{"requests": ["req-0", "req-1"], **opaque(DRIVER_A, "x")}])
    outcome = run([c], [TWO_DEVICES])
    assert isinstance(outcome, NodeAllocation)
    entry = {"source": "FromClaim", "requests": ["req-0", "req-1"], **opaque(DRIVER_A, "x")}
    assert outcome.allocations[0].config == (entry, entry)


@pytest.mark.parametrize(("request_", "constraints", "message"), [
    ({"name": "req-0", "exactly": {"deviceClassName": CLASS_A, "selectors": [{}]}}, None,
     r"claim claim-0, request req-0, selector #0: CEL expression empty \(unsupported selector type\?\)"),
    ({"name": "req-0", "exactly": {"deviceClassName": CLASS_A, "allocationMode": "future-mode"}}, None,
     "unsupported count mode future-mode"),
    (exact("req-0", CLASS_A), [{}], r"empty constraint \(unsupported constraint type\?\)"),
    ({"name": "req-0"}, None, r"claim claim-0, request req-0: missing device class name"),
], ids=["unknown-selector", "unknown-allocation-mode", "unknown-constraint", "unknown-request-type"])
def test_unknown_future_fields_are_errors(request_: dict, constraints: list | None, message: str) -> None:
    with pytest.raises(AllocationError, match=message):
        run([claim("claim-0", request_, constraints=constraints)], [one_device("slice-1", NODE_1, "pool-1", DRIVER_A)])


@pytest.mark.parametrize("where", ["request", "class", "all-devices"])
def test_invalid_cel_is_an_error(where: str) -> None:
    bad = cel("noSuchVar")
    classes = [device_class(CLASS_A, DRIVER_A, selector="noSuchVar")] if where == "class" else CLASSES
    request_ = {"request": exact("req-0", CLASS_A, 1, bad), "class": exact("req-0", CLASS_A),
                "all-devices": all_of("req-0", CLASS_A, bad)}[where]
    owner = "class class-a" if where == "class" else "claim claim-0"
    with pytest.raises(AllocationError, match=f"{owner}: selector #0: CEL compile error: .*undeclared reference"):
        run([claim("claim-0", request_)], [one_device("slice-1", NODE_1, "pool-1", DRIVER_A)], classes=classes)


def test_cel_runtime_error_aborts_with_the_message() -> None:
    """selectorsMatch returns the error and allocateOne stops: an error, not a skipped device."""
    request_ = exact("req-0", CLASS_A, 1, cel(f'device.attributes["{DRIVER_A}"].missing == "x"'))
    with pytest.raises(AllocationError, match="claim claim-0: selector #0: CEL runtime error: "):
        run([claim("claim-0", request_)], [one_device("slice-1", NODE_1, "pool-1", DRIVER_A)])


def test_cel_is_not_evaluated_on_devices_in_use() -> None:
    request_ = exact("req-0", CLASS_A, 1, cel(f'device.attributes["{DRIVER_A}"].missing == "x"'))
    assert fails(run([claim("claim-0", request_)], [one_device("slice-1", NODE_1, "pool-1", DRIVER_A)],
                     in_use=DEVICE_1_IN_USE))


def test_too_many_devices() -> None:
    with pytest.raises(AllocationError, match="number of requested devices 500 exceeds the claim limit of 32"):
        run([claim("claim-0", exact("req-0", CLASS_A, 500))], [])
    assert fails(run([claim("claim-0", exact("req-0", CLASS_A, 32))], []))  # many-devices-okay
    many = slice_("slice-1", NODE_1, "pool-1", DRIVER_A, *(device(f"device-{i}") for i in range(33)))
    with pytest.raises(AllocationError, match="exceeds the claim limit"):
        run([claim("claim-0", exact("req-0", CLASS_A, 32), exact("req-1", CLASS_A))], [many])


def test_prioritized_list_first_unavailable() -> None:
    c = claim("claim-0", first_available("req-0", sub("subReq-0", CLASS_B), sub("subReq-1", CLASS_A)))
    outcome = run([c], [one_device("slice-1", NODE_1, "pool-1", DRIVER_A)])
    assert picked(outcome) == [[a("req-0/subReq-1", "pool-1", "device-1")]]
    assert isinstance(outcome, NodeAllocation) and outcome.score == 7


def test_prioritized_list_non_available() -> None:
    c = claim("claim-0", first_available("req-0", sub("subReq-0", CLASS_B, 2), sub("subReq-1", CLASS_A, 2)))
    outcome = run([c], [one_device("slice-1", NODE_1, "pool-1", DRIVER_A), one_device("slice-2", NODE_1, "pool-2", DRIVER_B)])
    assert fails(outcome)
    assert outcome.reasons == ("claim claim-0, request req-0/subReq-0: 2 requested, 1 free",
                               "claim claim-0, request req-0/subReq-1: 2 requested, 1 free")


def test_prioritized_list_device_config() -> None:
    c = claim("claim-0", first_available("req-0", sub("subReq-0", CLASS_A), sub("subReq-1", CLASS_B, 2)),
              config=[{"requests": ["req-0/subReq-0"], **opaque(DRIVER_A, "foo")},
                      {"requests": ["req-0/subReq-1"], **opaque(DRIVER_B, "bar")}])
    slices = [slice_("slice-1", NODE_1, "pool-1", DRIVER_B, device("device-1"), device("device-2"))]
    outcome = run([c], slices)
    assert picked(outcome) == [[a("req-0/subReq-1", "pool-1", "device-1", DRIVER_B),
                                a("req-0/subReq-1", "pool-1", "device-2", DRIVER_B)]]
    assert isinstance(outcome, NodeAllocation)
    assert outcome.allocations[0].config == (
        {"source": "FromClaim", "requests": ["req-0/subReq-1"], **opaque(DRIVER_B, "bar")},)


def test_prioritized_list_class_config() -> None:
    classes = [device_class(CLASS_A, DRIVER_A, "foo"), device_class(CLASS_B, DRIVER_B, "bar")]
    c = claim("claim-0", first_available("req-0", sub("subReq-0", CLASS_A, 2), sub("subReq-1", CLASS_B, 2)))
    slices = [slice_("slice-1", NODE_1, "pool-1", DRIVER_B, device("device-1"), device("device-2")),
              slice_("slice-2", NODE_1, "pool-2", DRIVER_A, device("device-3"))]
    outcome = run([c], slices, classes=classes)
    assert isinstance(outcome, NodeAllocation)
    assert outcome.allocations[0].config == (
        {"source": "FromClass", "requests": ["req-0/subReq-1"], **opaque(DRIVER_B, "bar")},)


def test_prioritized_list_subrequests_with_expressions() -> None:
    c = claim("claim-0", exact("req-0", CLASS_A, 1, memory_at_least("1Gi")),
              first_available("req-1", sub("subReq-0", CLASS_A, 1, memory_at_least("4Gi")),
                              sub("subReq-1", CLASS_A, 2, memory_at_least("2Gi"))))
    slices = [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, device("device-1", {"memory": "2Gi"}),
                     device("device-2", {"memory": "2Gi"}), device("device-3", {"memory": "1Gi"}))]
    outcome = run([c], slices)
    assert picked(outcome) == [[a("req-0", "pool-1", "device-3"), a("req-1/subReq-1", "pool-1", "device-1"),
                                a("req-1/subReq-1", "pool-1", "device-2")]]
    assert isinstance(outcome, NodeAllocation) and outcome.score == 7


@pytest.mark.parametrize(("constrained", "pool_2", "expected"), [
    ("req-1", [device("device-2", {"memory": "2Gi"}, {"driverVersion": {"version": "2.0.0"}}),
               device("device-3", {"memory": "1Gi"}, {"driverVersion": {"version": "1.0.0"}})], "device-3"),
    ("req-1/subReq-0", [device("device-2", {"memory": "2Gi"}, {"driverVersion": {"version": "2.0.0"}})], "device-2"),
], ids=["ref-parent-request", "ref-sub-request"])
def test_prioritized_list_subrequests_with_constraints(constrained: str, pool_2: list, expected: str) -> None:
    c = claim("claim-0", exact("req-0", CLASS_A, 1, memory_at_least("8Gi")),
              first_available("req-1", sub("subReq-0", CLASS_A, 1, memory_at_least("2Gi")),
                              sub("subReq-1", CLASS_A, 1, memory_at_least("1Gi"))),
              constraints=[{"requests": ["req-0", constrained], "matchAttribute": f"{DRIVER_A}/driverVersion"}])
    slices = [slice_("slice-1", NODE_1, "pool-1", DRIVER_A,
                     device("device-1", {"memory": "8Gi"}, {"driverVersion": {"version": "1.0.0"}})),
              slice_("slice-2", NODE_1, "pool-2", DRIVER_A, *pool_2)]
    assert picked(run([c], slices)) == [[a("req-0", "pool-1", "device-1"), a("req-1/subReq-1", "pool-2", expected)]]


def test_prioritized_list_subrequests_with_allocation_mode_all() -> None:
    c = claim("claim-0", first_available("req-0", sub("subReq-0", CLASS_A, mode="All"), sub("subReq-1", CLASS_A)))
    assert picked(run([c], [TWO_DEVICES], in_use=DEVICE_1_IN_USE)) == [[a("req-0/subReq-1", "pool-1", "device-2")]]


def test_prioritized_list_allocation_mode_all_multiple_requests() -> None:
    c = claim("claim-0", exact("req-0", CLASS_A),
              first_available("req-1", sub("subReq-0", CLASS_A, mode="All"), sub("subReq-1", CLASS_A)))
    assert picked(run([c], [TWO_DEVICES])) == [[a("req-0", "pool-1", "device-1"), a("req-1/subReq-1", "pool-1", "device-2")]]


BIG_AND_MEDIUM = [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, device("device-1", {"memory": "8Gi"})),
                  slice_("slice-2", NODE_1, "pool-2", DRIVER_A, device("device-2", {"memory": "4Gi"}))]


def test_prioritized_list_multi_request() -> None:
    c = claim("claim-0", exact("req-1", CLASS_A, 1, memory_at_least("8Gi")),
              first_available("req-0", sub("subReq-0", CLASS_A, 1, memory_at_least("8Gi")),
                              sub("subReq-1", CLASS_A, 1, memory_at_least("4Gi"))))
    assert picked(run([c], BIG_AND_MEDIUM)) == [[a("req-1", "pool-1", "device-1"), a("req-0/subReq-1", "pool-2", "device-2")]]


def test_prioritized_list_with_backtracking() -> None:
    c = claim("claim-0", first_available("req-0", sub("subReq-0", CLASS_A, 1, memory_at_least("8Gi")),
                                         sub("subReq-1", CLASS_A, 1, memory_at_least("4Gi"))),
              exact("req-1", CLASS_A, 1, memory_at_least("8Gi")))
    outcome = run([c], BIG_AND_MEDIUM)
    assert picked(outcome) == [[a("req-0/subReq-1", "pool-2", "device-2"), a("req-1", "pool-1", "device-1")]]
    assert isinstance(outcome, NodeAllocation) and outcome.backtracks == 2 and outcome.score == 7


def test_prioritized_list_too_many_in_first_subrequest() -> None:
    c = claim("claim-0", first_available("req-0", sub("subReq-0", CLASS_B, 500), sub("subReq-1", CLASS_A)))
    assert picked(run([c], [one_device("slice-1", NODE_1, "pool-1", DRIVER_A)])) == [[a("req-0/subReq-1", "pool-1", "device-1")]]


def test_allocation_mode_all_with_multi_host_resource_pool() -> None:
    slices = [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, device("device-1"), count=2),
              slice_("slice-2", NODE_2, "pool-1", DRIVER_A, device("device-2"), count=2)]
    assert picked(run([claim("claim-0", all_of("req-0", CLASS_A))], slices)) == [[a("req-0", "pool-1", "device-1")]]


def test_multi_host_resource_pool_with_stale_slice_for_current_node() -> None:
    slices = [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, device("device-1"), count=2),
              slice_("slice-2", NODE_2, "pool-1", DRIVER_A, device("device-2"), count=2, generation=2)]
    assert fails(run([claim("claim-0", exact("req-0", CLASS_A))], slices))


def _moving_pool(old_node: str, new_node: str, new_complete: bool) -> list[ResourceSlice]:
    slices = [slice_("slice-1", old_node, "pool-1", DRIVER_A, device("device-1"), count=2),
              slice_("slice-1", old_node, "pool-1", DRIVER_A, device("device-2"), count=2),
              slice_("slice-2", new_node, "pool-1", DRIVER_A, device("device-1"), count=2, generation=2)]
    if new_complete:
        slices.append(slice_("slice-2", new_node, "pool-1", DRIVER_A, device("device-2"), count=2, generation=2))
    return slices


@pytest.mark.parametrize(("old_node", "new_node", "complete", "allocated"), [
    (NODE_1, NODE_2, True, True), (NODE_2, NODE_1, True, True), (NODE_1, NODE_2, False, True), (NODE_2, NODE_1, False, False),
], ids=["complete-1-to-2", "complete-2-to-1", "incomplete-1-to-2", "incomplete-2-to-1"])
def test_multi_host_resource_pool_update(old_node: str, new_node: str, complete: bool, allocated: bool) -> None:
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))], _moving_pool(old_node, new_node, complete))
    if allocated:
        assert picked(outcome) == [[a("req-0", "pool-1", "device-1")]]
    else:
        assert fails(outcome)


def test_different_resourceslices_in_pool_can_target_different_nodes() -> None:
    slices = [slice_("slice-1", NODE_2, "pool-1", DRIVER_A, device("device-1"), count=2),
              slice_("slice-2", NODE_1, "pool-1", DRIVER_A, device("device-2"), count=2)]
    assert picked(run([claim("claim-0", exact("req-0", CLASS_A))], slices)) == [[a("req-0", "pool-1", "device-2")]]


INVALID_AND_VALID = [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, device("device-1"), count=2),
                     slice_("slice-2", NODE_1, "pool-1", DRIVER_A, device("device-1"), count=2),
                     slice_("slice-3", NODE_1, "pool-2", DRIVER_A, device("device-2"))]


def test_invalid_pool_is_ok_if_devices_can_be_allocated_from_other() -> None:
    assert picked(run([claim("claim-0", exact("req-0", CLASS_A))], INVALID_AND_VALID)) == [[a("req-0", "pool-2", "device-2")]]


def test_invalid_pool_is_error_if_no_other_device_can_be_allocated() -> None:
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))], INVALID_AND_VALID,
                  in_use=[DeviceID(DRIVER_A, "pool-2", "device-2")])
    assert fails(outcome) and outcome.status_reason == INVALID_POOLS


def test_no_allocation_from_incomplete_pools() -> None:
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))],
                  [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, device("device-1"), count=2)])
    assert fails(outcome)
    assert outcome.reasons[0] == "resource pool driver-a/pool-1 is incomplete: not all of its ResourceSlices are published"


def test_check_combinations_with_backtracking() -> None:
    c = claim("claim-0", exact("req-1", CLASS_A, 2), exact("req-2", CLASS_A, 1, cel(f'device.attributes["{DRIVER_A}"].type == "X"')))
    slices = [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, device("device-1", attributes={"type": {"string": "X"}}),
                     device("device-2", attributes={"type": {"string": "Y"}}),
                     device("device-3", attributes={"type": {"string": "Y"}}))]
    assert picked(run([c], slices)) == [[a("req-1", "pool-1", "device-2"), a("req-1", "pool-1", "device-3"),
                                         a("req-2", "pool-1", "device-1")]]


def test_check_combinations_within_single_request_is_exhaustive_and_bounded() -> None:
    slices = [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, *(device(f"device-{i}") for i in range(1, 5)))]
    outcome = run([claim("claim-0", exact("req-0", CLASS_A, 5))], slices)
    assert fails(outcome) and outcome.reasons == ("claim claim-0, request req-0: 5 requested, 4 free",)
    with pytest.raises(SearchLimitExceeded):
        run([claim("claim-0", exact("req-0", CLASS_A, 5))], slices, max_backtracks=3)


def _bound(name: str, ready: str = "IsPrepare", failed: str = "BindingFailed") -> dict:
    return device(name, bindingConditions=[ready], bindingFailureConditions=[failed])


def _conditions(outcome: NodeAllocation | Unallocatable) -> list[list[tuple[tuple[str, ...], tuple[str, ...]]]]:
    assert isinstance(outcome, NodeAllocation), outcome
    return [[(r.binding_conditions, r.binding_failure_conditions) for r in allocation.results]
            for allocation in outcome.allocations]


def test_device_binding_conditions_are_copied_into_the_result() -> None:
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))], [slice_("slice-1", NODE_1, "pool-1", DRIVER_A,
                                                                        _bound("device-1"))])
    assert picked(outcome) == [[a("req-0", "pool-1", "device-1")]]
    assert isinstance(outcome, NodeAllocation)
    assert outcome.allocations[0].to_api() == {"devices": {"results": [{
        "request": "req-0", "driver": DRIVER_A, "pool": "pool-1", "device": "device-1",
        "bindingConditions": ["IsPrepare"], "bindingFailureConditions": ["BindingFailed"]}]}, "nodeSelector": LOCAL}
    assert outcome.allocations[0].binding_conditions


def test_binding_conditions_multiple_devices() -> None:
    c = claim("claim-0", exact("req-0", CLASS_A, 2), exact("req-1", CLASS_A, 1))
    slices = [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, _bound("device-1"), _bound("device-2", "IsPrepare2",
                     "BindingFailed2"), _bound("device-3", "IsPrepare3", "BindingFailed3"))]
    outcome = run([c], slices)
    assert picked(outcome) == [[a("req-0", "pool-1", "device-1"), a("req-0", "pool-1", "device-2"),
                                a("req-1", "pool-1", "device-3")]]
    assert _conditions(outcome) == [[(("IsPrepare",), ("BindingFailed",)), (("IsPrepare2",), ("BindingFailed2",)),
                                     (("IsPrepare3",), ("BindingFailed3",))]]


def test_binding_conditions_with_and_without() -> None:
    c = claim("claim-0", exact("req-0", CLASS_A), exact("req-1", CLASS_A))
    outcome = run([c], [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, device("device-1"), _bound("device-2"))])
    assert picked(outcome) == [[a("req-0", "pool-1", "device-1"), a("req-1", "pool-1", "device-2")]]
    assert _conditions(outcome) == [[((), ()), (("IsPrepare",), ("BindingFailed",))]]
    assert isinstance(outcome, NodeAllocation)
    assert "bindingConditions" not in outcome.allocations[0].to_api()["devices"]["results"][0]


def test_node_restriction_a_device_that_binds_to_its_node_pins_the_claim_there() -> None:
    slices = [slice_("slice-1", node_label_selector("planet", "earth"), "pool-1", DRIVER_A,
                     device("device-1", bindsToNode=True))]
    outcome = run([claim("claim-0", exact("req-0", CLASS_A))], slices)
    assert picked(outcome) == [[a("req-0", "pool-1", "device-1")]]
    assert isinstance(outcome, NodeAllocation) and outcome.allocations[0].node_selector == LOCAL
    plain = run([claim("claim-0", exact("req-0", CLASS_A))],
                [slice_("slice-1", node_label_selector("planet", "earth"), "pool-1", DRIVER_A, device("device-1"))])
    assert isinstance(plain, NodeAllocation) and plain.allocations[0].node_selector == node_label_selector("planet",
                                                                                                           "earth")


def test_pools_with_binding_conditions_are_visited_last() -> None:
    """pools_incubating.go GatherPools: such pools go after the others, each part sorted."""
    slices = [slice_("slice-1", NODE_1, "pool-a", DRIVER_A, _bound("device-1")),
              slice_("slice-2", NODE_1, "pool-c", DRIVER_A, _bound("device-1")),
              slice_("slice-3", NODE_1, "pool-b", DRIVER_A, device("device-1")),
              slice_("slice-4", NODE_1, "pool-d", DRIVER_A, device("device-1"))]
    pools = gather_pools(slices, NODE_1, LABELS[NODE_1])
    assert [pool.name for pool in pools] == ["pool-b", "pool-d", "pool-a", "pool-c"]
    outcome = run([claim("claim-0", exact("req-0", CLASS_A, 3))], slices)
    assert picked(outcome) == [[a("req-0", "pool-b", "device-1"), a("req-0", "pool-d", "device-1"),
                                a("req-0", "pool-a", "device-1")]]


def test_pools_are_visited_sorted_by_driver_and_name() -> None:
    slices = [one_device("slice-z", NODE_1, "pool-b", DRIVER_A), one_device("slice-y", NODE_1, "pool-a", DRIVER_A)]
    assert picked(run([claim("claim-0", exact("req-0", CLASS_A))], slices)) == [[a("req-0", "pool-a", "device-1")]]


def test_reason_names_the_selector_that_matches_nothing() -> None:
    outcome = run([claim("claim-0", exact("req-0", CLASS_A, 1, memory_at_least("8Gi")))],
                  [slice_("slice-1", NODE_1, "pool-1", DRIVER_A, device("device-1", {"memory": "1Gi"}))])
    assert fails(outcome)
    assert outcome.reasons == (f"claim claim-0, request req-0: no device of class class-a matches selector "
                               f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("8Gi")) >= 0',)


def test_first_available_score_counts_every_claim() -> None:
    c = _all_first()
    outcome = run([c, claim("claim-1", first_available("req-0", sub("subReq-0", CLASS_A), sub("subReq-1", CLASS_B)))],
                  [TWO_DEVICES, one_device("slice-2", NODE_1, "pool-2", DRIVER_B)])
    # claim-0 takes every class-a device with subReq-0 (8), claim-1 falls back to subReq-1 (7).
    assert picked(outcome) == [[a("req-0/subReq-0", "pool-1", "device-1"), a("req-0/subReq-0", "pool-1", "device-2")],
                               [a("req-0/subReq-1", "pool-2", "device-1", DRIVER_B)]]
    assert isinstance(outcome, NodeAllocation) and outcome.score == 15
    assert first_available_score([c], outcome.allocations[:1]) == 8


def test_all_request_refuses_any_incomplete_pool_of_the_node() -> None:
    """validateDeviceRequest checks every pool of the node, whatever its driver."""
    slices = [one_device("slice-1", NODE_1, "pool-1", DRIVER_A), one_device("slice-2", NODE_1, "pool-2", DRIVER_B, count=2)]
    with pytest.raises(AllocationError, match="resource pool driver-b/pool-2 is currently being updated"):
        run([claim("claim-0", all_of("req-0", CLASS_A))], slices)
    assert picked(run([claim("claim-0", exact("req-0", CLASS_A))], slices)) == [[a("req-0", "pool-1", "device-1")]]


def test_namespaced_claim_in_messages_and_tolerations_in_results() -> None:
    request_ = exact("req-0", CLASS_A)
    request_["exactly"]["tolerations"] = [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
    outcome = run([claim("claim-0", request_, namespace="default")], [one_device("slice-1", NODE_1, "pool-1", DRIVER_A)])
    assert isinstance(outcome, NodeAllocation)
    assert outcome.allocations[0].to_api()["devices"]["results"][0]["tolerations"] == request_["exactly"]["tolerations"]
    with pytest.raises(AllocationError, match="claim default/claim-0: selector #0: CEL compile error"):
        run([claim("claim-0", exact("req-0", CLASS_A, 1, cel("noSuchVar")), namespace="default")],
            [one_device("slice-1", NODE_1, "pool-1", DRIVER_A)])
