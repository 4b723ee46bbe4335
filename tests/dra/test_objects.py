"""Parsing the resource.k8s.io/v1 objects (field names and defaults of
k8s.io/api@v0.36.3/resource/v1/types.go) and gathering a node's pools
(structured/internal/incubating/pools_incubating.go GatherPools; the partitionable-devices
pools are in test_partitionable.py)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from extender.dra.capacity import canonical_text
from extender.dra.objects import (
    Allocation,
    Constraint,
    DeviceClass,
    DeviceID,
    DeviceResult,
    DeviceTaint,
    DeviceToleration,
    Pool,
    ResourceClaim,
    ResourceSlice,
    consumed_capacity,
    gather_pools,
)
from extender.errors import InvalidObject
from tests.dra.builders import (
    ALL_NODES,
    DRIVER_A,
    DRIVER_B,
    LABELS,
    NODE_1,
    NODE_2,
    device,
    first_available,
    local_node_selector,
    node_label_selector,
    raw_claim,
    raw_slice,
    slice_,
    sub,
)


def test_device_class() -> None:
    cls = DeviceClass.parse({"metadata": {"name": "gpu"}, "spec": {
        "selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}],
        "config": [{"opaque": {"driver": "gpu.example.com", "parameters": {"a": 1}}}],
        "extendedResourceName": "example.com/gpu"}})
    assert cls.name == "gpu" and cls.selectors == ('device.driver == "gpu.example.com"',)
    assert cls.config == ({"opaque": {"driver": "gpu.example.com", "parameters": {"a": 1}}},)
    assert cls.extended_resource_name == "example.com/gpu"
    bare = DeviceClass.parse({"metadata": {"name": "any"}})
    assert bare.selectors == () and bare.config == () and bare.extended_resource_name is None


@pytest.mark.parametrize(("raw", "message"), [
    ({"spec": {}}, "metadata.name: required"),
    ({"metadata": {"name": "x"}, "spec": {"selectors": {}}}, "spec.selectors: expected a list"),
    ({"metadata": {"name": "x"}, "spec": {"selectors": [{"cel": {"expression": ["x"]}}]}},
     r"spec.selectors\[0\].cel.expression: expected a string"),
    ({"metadata": {"name": "x"}, "spec": {"config": ["x"]}}, r"spec.config\[0\]: expected an object"),
    ([], "DeviceClass: expected an object"),
])
def test_device_class_bad_input(raw: Any, message: str) -> None:
    with pytest.raises(InvalidObject, match=message):
        DeviceClass.parse(raw)


def test_resource_slice() -> None:
    raw = raw_slice("s", NODE_1, "pool-1", DRIVER_A,
                    device("d0", {"memory": "1Gi"}, {"model": {"string": "a100"}}, bindingConditions=["ready"],
                           allowMultipleAllocations=True, taints=[{"key": "k", "effect": "NoSchedule"}]),
                    count=2, generation=3)
    parsed = ResourceSlice.parse(raw)
    assert (parsed.name, parsed.driver, parsed.pool, parsed.generation, parsed.slice_count) == ("s", DRIVER_A, "pool-1", 3, 2)
    assert parsed.node_name == NODE_1 and parsed.node_selector is None and not parsed.all_nodes
    assert parsed.resource_version == "1"
    d0 = parsed.devices[0]
    assert d0.name == "d0" and d0.driver == DRIVER_A
    assert d0.attributes == {"model": {"string": "a100"}} and d0.capacity == {"memory": {"value": "1Gi"}}
    assert d0.binding_conditions == ("ready",) and d0.allow_multiple_allocations
    assert d0.taints == (DeviceTaint("k", "", "NoSchedule"),) and str(d0.taints[0]) == "k:NoSchedule"
    assert d0.cel is d0.cel  # built once


@pytest.mark.parametrize(("spec", "message"), [
    ({"driver": "d", "pool": {"name": "p", "generation": "1"}}, "spec.pool.generation: expected an integer"),
    ({"driver": "d", "pool": {"name": "p", "resourceSliceCount": True}}, "spec.pool.resourceSliceCount: expected an integer"),
    ({"driver": "d", "pool": {"name": "p"}, "devices": [{}]}, r"spec.devices\[0\].name: required"),
    ({"driver": "d", "pool": {"name": "p"}, "devices": [{"name": "x", "attributes": []}]},
     r"spec.devices\[0\].attributes: expected an object"),
    ({"driver": "d", "pool": {"name": "p"}, "allNodes": "yes"}, "spec.allNodes: expected a boolean"),
    ({"driver": "d", "pool": {"name": "p"}, "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "k", "operator": "Near"}]}]}}, r"spec.nodeSelector.nodeSelectorTerms\[0\].matchExpressions\[0\].operator"),
    ({"driver": {}, "pool": {"name": "p"}}, "spec.driver: expected a string"),
])
def test_resource_slice_bad_input(spec: dict, message: str) -> None:
    with pytest.raises(InvalidObject, match=message):
        ResourceSlice.parse({"metadata": {"name": "s"}, "spec": spec})


@pytest.mark.parametrize(("where", "on_node_1", "on_node_2"), [
    (NODE_1, True, False),
    (ALL_NODES, True, True),
    (node_label_selector("region", "region-2"), False, True),
    (local_node_selector(NODE_2), False, True),
])
def test_resource_slice_available_on(where: Any, on_node_1: bool, on_node_2: bool) -> None:
    parsed = slice_("s", where, "p", DRIVER_A)
    assert parsed.available_on(NODE_1, LABELS[NODE_1]) is on_node_1
    assert parsed.available_on(NODE_2, LABELS[NODE_2]) is on_node_2


def test_slice_with_no_node_selection_is_available_nowhere() -> None:
    parsed = ResourceSlice.parse({"metadata": {"name": "s"}, "spec": {"driver": "d", "pool": {"name": "p"}}})
    assert not parsed.available_on(NODE_1, LABELS[NODE_1])


def test_resource_claim() -> None:
    raw = raw_claim("c", {"name": "gpu", "exactly": {"deviceClassName": "gpu", "selectors": [{"cel": {"expression": "true"}}],
                                                    "adminAccess": True, "tolerations": [{"operator": "Exists"}]}},
                    first_available("nic", sub("fast", "nic-fast", 2), sub("slow", "nic", mode="All")),
                    constraints=[{"requests": ["gpu"], "matchAttribute": "gpu.example.com/model"},
                                 {"distinctAttribute": "gpu.example.com/uuid"}],
                    config=[{"requests": ["gpu"], "opaque": {"driver": "gpu.example.com", "parameters": {}}}],
                    namespace="default")
    raw["metadata"].update(deletionTimestamp="2024-01-01T00:00:00Z", finalizers=["resource.kubernetes.io/delete-protection"],
                           ownerReferences=[{"kind": "Pod", "name": "p", "uid": "u1", "controller": True}])
    raw["status"] = {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}],
                     "allocation": {"devices": {"results": [{"request": "gpu", "driver": "d", "pool": "p", "device": "x",
                                                             "adminAccess": True}]}}}
    parsed = ResourceClaim.parse(raw)
    assert parsed.key == "default/c" and parsed.uid == "uid-c" and parsed.resource_version == "1"
    assert parsed.deleting and parsed.finalizers == ("resource.kubernetes.io/delete-protection",)
    assert parsed.owner_uids[0] == ("Pod", "p", "u1", True)
    gpu, nic = parsed.requests
    assert gpu.alternatives() == (gpu.exactly,) and gpu.exactly is not None
    assert (gpu.exactly.name, gpu.exactly.device_class, gpu.exactly.selectors, gpu.exactly.allocation_mode,
            gpu.exactly.count, gpu.exactly.admin_access) == ("gpu", "gpu", ("true",), "ExactCount", 1, True)
    assert gpu.exactly.tolerations == (DeviceToleration(operator="Exists"),)
    assert nic.exactly is None and [s.name for s in nic.alternatives()] == ["nic/fast", "nic/slow"]
    fast, slow = nic.first_available
    assert (fast.request, fast.subrequest, fast.count, slow.allocation_mode, slow.count) == ("nic", "fast", 2, "All", 0)
    assert parsed.constraints == (Constraint(("gpu",), "gpu.example.com/model", None),
                                  Constraint((), None, "gpu.example.com/uuid"))
    assert parsed.config[0]["requests"] == ["gpu"]
    assert parsed.allocation is not None and parsed.allocation.results[0].admin_access
    assert parsed.reserved_for_pod("u1") and not parsed.reserved_for_pod("u2")
    assert parsed.can_be_reserved()


def test_claim_reservations_are_capped_at_256() -> None:
    raw = raw_claim("c")
    raw["status"] = {"reservedFor": [{"resource": "pods", "name": f"p{i}", "uid": f"u{i}"} for i in range(256)]}
    assert not ResourceClaim.parse(raw).can_be_reserved()


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda raw: raw["metadata"].pop("name"), "metadata.name: required"),
    (lambda raw: raw["spec"]["devices"].update(requests={}), "spec.devices.requests: expected a list"),
    (lambda raw: raw["spec"]["devices"]["requests"].append({"name": "r", "exactly": {"count": "2"}}),
     r"spec.devices.requests\[0\].exactly.count: expected an integer"),
    (lambda raw: raw["spec"]["devices"]["requests"].append({"name": "r", "firstAvailable": [{"name": 1, "count": 1.5}]}),
     r"spec.devices.requests\[0\].firstAvailable\[0\].count: expected an integer"),
    (lambda raw: raw["spec"]["devices"].update(constraints=[{"requests": [1]}]),
     r"spec.devices.constraints\[0\].requests\[0\]: expected a string"),
    (lambda raw: raw.update(status={"allocation": {"devices": {"results": ["x"]}}}),
     r"status.allocation.devices.results\[0\]: expected an object"),
    (lambda raw: raw.update(status={"reservedFor": [{"uid": []}]}), r"status.reservedFor\[0\].uid: expected a string"),
])
def test_resource_claim_bad_input(mutate: Any, message: str) -> None:
    raw = raw_claim("c")
    mutate(raw)
    with pytest.raises(InvalidObject, match=message):
        ResourceClaim.parse(raw)


def test_allocation_round_trip_and_node_selector() -> None:
    raw = {"devices": {"results": [{"request": "r", "driver": "d", "pool": "p", "device": "x",
                                    "tolerations": [{"key": "k", "operator": "Exists"}]}],
                       "config": [{"source": "FromClaim", "requests": ["r"], "opaque": {"driver": "d", "parameters": {}}}]},
           "nodeSelector": node_label_selector("region", "region-1")}
    allocation = Allocation.parse(raw)
    assert allocation.to_api() == raw
    assert allocation.results[0].id == DeviceID("d", "p", "x") and str(allocation.results[0].id) == "d/p/x"
    assert allocation.available_on(NODE_1, LABELS[NODE_1]) and not allocation.available_on(NODE_2, LABELS[NODE_2])
    everywhere = Allocation((DeviceResult("r", "d", "p", "x", False),))
    assert everywhere.available_on(NODE_2, {}) and everywhere.to_api() == {
        "devices": {"results": [{"request": "r", "driver": "d", "pool": "p", "device": "x"}]}}
    assert Allocation(()).to_api() == {"devices": {}}


def test_gather_pools_newest_generation_sorted() -> None:
    slices = [slice_("b-2", NODE_1, "pool-b", DRIVER_A, device("x"), count=2),
              slice_("b-1", NODE_1, "pool-b", DRIVER_A, device("y"), count=2),
              slice_("a-old", NODE_1, "pool-a", DRIVER_B, device("x")),
              slice_("a-new", NODE_1, "pool-a", DRIVER_B, device("z"), generation=2),
              slice_("other", NODE_2, "pool-c", DRIVER_A, device("x"))]
    pools = gather_pools(slices, NODE_1, LABELS[NODE_1])
    assert [(p.driver, p.name, p.generation, [s.name for s in p.slices]) for p in pools] == [
        (DRIVER_A, "pool-b", 1, ["b-1", "b-2"]), (DRIVER_B, "pool-a", 2, ["a-new"])]
    assert not any(p.incomplete or p.invalid for p in pools)


def test_gather_pools_incomplete_invalid_and_obsolete() -> None:
    incomplete = slice_("s", NODE_1, "pool-1", DRIVER_A, device("x"), count=2)
    assert gather_pools([incomplete], NODE_1, {}) == [Pool(DRIVER_A, "pool-1", 1, (), incomplete=True)]
    elsewhere = slice_("t", NODE_2, "pool-1", DRIVER_A, device("y"), count=2)
    # The node sees one slice of two; the other exists for another node: complete.
    complete = gather_pools([incomplete], NODE_1, {}, all_slices=[incomplete, elsewhere])
    assert complete[0].slices == (incomplete,) and not complete[0].incomplete
    newer = slice_("t", NODE_2, "pool-1", DRIVER_A, device("y"), count=2, generation=2)
    assert gather_pools([incomplete, newer], NODE_1, {}) == []
    duplicate = [slice_("s1", NODE_1, "pool-1", DRIVER_A, device("x"), count=2),
                 slice_("s2", NODE_1, "pool-1", DRIVER_A, device("x"), count=2)]
    (pool,) = gather_pools(duplicate, NODE_1, {})
    assert pool.invalid == "duplicate device name x" and str(pool) == "driver-a/pool-1"




def test_an_update_of_the_same_claim_keeps_its_parsed_requests_and_a_recreated_one_is_parsed_anew() -> None:
    raw = {"metadata": {"name": "c", "namespace": "default", "uid": "u1", "resourceVersion": "1"},
           "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}
    first = ResourceClaim.parse(raw)
    allocated = {**raw, "metadata": {**raw["metadata"], "resourceVersion": "2"},
                 "status": {"allocation": {"devices": {"results": [
                     {"request": "gpu", "driver": "d", "pool": "p", "device": "x"}]}}}}
    second = ResourceClaim.parse(allocated, previous=first)
    assert second.requests is first.requests and second.allocation is not None
    recreated = {**raw, "metadata": {**raw["metadata"], "uid": "u2"},
                 "spec": {"devices": {"requests": [{"name": "nic", "exactly": {"deviceClassName": "nic"}}]}}}
    third = ResourceClaim.parse(recreated, previous=first)
    assert [r.name for r in third.requests] == ["nic"]


@pytest.mark.parametrize(("text", "canonical"), [
    ("1024Mi", "1Gi"), ("1536Mi", "1536Mi"), ("1000Ki", "1000Ki"), ("512Ki", "512Ki"), ("1Ki", "1Ki"),
    ("1000", "1k"), ("1500", "1500"), ("1.5G", "1500M"), ("1000m", "1"), ("0.5", "500m"), ("0", "0"),
    ("100Mi", "100Mi"), ("2", "2"), ("1e3", "1e3"), ("1.5Ki", "1536"),
])
def test_consumed_quantities_read_back_in_the_api_servers_canonical_form(text: str, canonical: str) -> None:
    raw = {"request": "r", "driver": "d", "pool": "p", "device": "x", "shareID": "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa",
           "consumedCapacity": {"memory": text}}
    result = DeviceResult.parse(raw, "result")
    assert result.to_api()["consumedCapacity"] == {"memory": canonical}
    assert DeviceResult.parse(result.to_api(), "result") == result


def test_binary_quantities_below_1024_are_written_in_decimal() -> None:
    """quantity.go CanonicalizeBytes: NewQuantity(1000, BinarySI) reads "1k", (3, BinarySI) "3"."""
    assert canonical_text(Fraction(1000), True) == "1k"
    assert canonical_text(Fraction(3), True) == "3"
    assert canonical_text(Fraction(4 * 2**30), True) == "4Gi"


def test_a_share_in_its_api_form() -> None:
    share = DeviceResult.parse({"request": "r", "driver": "d", "pool": "p", "device": "x", "shareID": "s-1",
                                "consumedCapacity": {"memory": "2Gi", "cores": "1"}}, "result")
    assert share.share_id == "s-1" and not share.exclusive
    assert share.to_api() == {"request": "r", "driver": "d", "pool": "p", "device": "x", "shareID": "s-1",
                              "consumedCapacity": {"memory": "2Gi", "cores": "1"}}
    whole = DeviceResult("r", "d", "p", "y", False)
    assert whole.exclusive and "shareID" not in whole.to_api() and "consumedCapacity" not in whole.to_api()
    assert not DeviceResult("r", "d", "p", "y", True).exclusive
    with pytest.raises(InvalidObject, match="result.consumedCapacity.memory"):
        DeviceResult.parse({"request": "r", "driver": "d", "pool": "p", "device": "x", "shareID": "s",
                            "consumedCapacity": {"memory": "lots"}}, "result")


def test_consumed_capacity_sums_the_shares_of_each_device() -> None:
    def result(device: str, share: str | None, admin: bool = False, **consumed: str) -> dict[str, Any]:
        raw: dict[str, Any] = {"request": "r", "driver": "d", "pool": "p", "device": device}
        if share:
            raw["shareID"] = share
        if consumed:
            raw["consumedCapacity"] = consumed
        if admin:
            raw["adminAccess"] = True
        return raw

    first = Allocation.parse({"devices": {"results": [result("x", "s1", memory="2Gi"), result("y", None),
                                                        result("z", "s2")]}})
    second = Allocation.parse({"devices": {"results": [result("x", "s3", memory="1Gi", cores="1"),
                                                         result("x", "s4", True, memory="4Gi")]}})
    assert consumed_capacity([first, second]) == {
        DeviceID("d", "p", "x"): {"memory": Fraction(3 * 2**30), "cores": Fraction(1)},
        DeviceID("d", "p", "z"): {},
    }


def test_device_capacity_policies_and_request_capacity_are_parsed() -> None:
    item = ResourceSlice.parse(raw_slice("s", NODE_1, "pool-1", DRIVER_A, {
        "name": "x", "allowMultipleAllocations": True,
        "capacity": {"memory": {"value": "8Gi", "requestPolicy": {"default": "1Gi", "validRange": {
            "min": "1Gi", "max": "4Gi", "step": "1Gi"}}},
                     "slots": {"value": "4", "requestPolicy": {"validValues": ["1", "2"]}}}}))
    memory, slots = item.devices[0].capacities["memory"], item.devices[0].capacities["slots"]
    assert memory.value.value == 8 * 2**30 and str(memory.policy) == "range from 1Gi to 4Gi in steps of 1Gi"
    assert str(slots.policy) == "valid values 1, 2" and slots.policy.default is None
    request = ResourceClaim.parse(raw_claim("c", {"name": "r", "exactly": {
        "deviceClassName": "gpu", "capacity": {"requests": {"memory": "3Gi"}}}})).requests[0].exactly
    assert request is not None and request.capacity["memory"].value == 3 * 2**30
    with pytest.raises(InvalidObject, match=r"spec.devices\[0\].capacity.memory.value: required"):
        ResourceSlice.parse(raw_slice("s", NODE_1, "pool-1", DRIVER_A, {"name": "x", "capacity": {"memory": {}}}))
