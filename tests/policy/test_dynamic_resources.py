"""DynamicResources through the engine and the in-memory cluster: kube-scheduler's reasons, Reserve's
devices held in flight, and PreBind's writes (dynamicresources.go in kube-scheduler v1.36.3)."""

from __future__ import annotations

from typing import Any

import pytest

from extender.cluster import dra_store
from extender.cluster.memory_binder import MemoryBinder
from extender.cluster.state import ClusterState
from extender.dra.objects import DeviceID
from extender.errors import ClusterError
from extender.model.pods import PodView
from extender.policy.builtin.allocation import LeastAllocated, MostAllocated
from extender.policy.claim_actions import FINALIZER, BindClaim
from extender.policy.defaults import default_policy
from extender.policy.engine import Engine, PluginError
from extender.policy.reservations import Reservation, all_actions, release_all
from extender.policy.status import Code, Status
from tests.policy.builders import dra_state

DRIVER = "gpu.example.com"


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def device_class(name: str = "gpu", expression: str = f'device.driver == "{DRIVER}"') -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": expression}}]}}


def resource_slice(node_name: str, *devices: str, model: str = "a100") -> dict[str, Any]:
    return {"metadata": {"name": f"{node_name}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": d, "attributes": {"model": {"string": model}}} for d in devices]}}


def claim(name: str, *, count: int = 1, device_class_name: str = "gpu", selector: str | None = None,
          owner: str = "", **status: Any) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class_name, "allocationMode": "ExactCount", "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "1"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner, "uid": f"uid-{owner}",
                                    "controller": True}]
    return {"metadata": meta, "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
            "status": status}


def pod(name: str = "p", *claims: str, template: str = "", generated: dict[str, str] | None = None) -> PodView:
    refs: list[dict[str, Any]] = [{"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)]
    if template:
        refs.append({"name": "t", "resourceClaimTemplateName": template})
    raw: dict[str, Any] = {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
                           "spec": {"containers": [{"name": "c"}], "resourceClaims": refs}}
    if generated is not None:
        raw["status"] = {"resourceClaimStatuses": [{"name": k, "resourceClaimName": v} for k, v in generated.items()]}
    return PodView.from_dict(raw)


@pytest.fixture
def state() -> ClusterState:
    return dra_state([node("n1"), node("n2")], [device_class()], [resource_slice("n2", "gpu-0", "gpu-1")],
                     [claim("one"), claim("two", count=2), claim("other")])


ENGINE = Engine(default_policy("standalone"))


def refusals(state: ClusterState, view: PodView) -> dict[str, Status]:
    return ENGINE.filter(view, state.all_node_infos(), state).failed


def reason(state: ClusterState, view: PodView) -> str:
    """The one reason every node gives (a PreFilter refusal)."""
    failed = refusals(state, view)
    assert set(failed) == {"n1", "n2"}, failed
    reasons = {status.reason for status in failed.values()}
    assert len(reasons) == 1 and all(s.plugin == "DynamicResources" for s in failed.values())
    return reasons.pop()


def place(state: ClusterState, view: PodView, node_name: str) -> list[Reservation]:
    reserved = ENGINE.reserve(view, state.node_info(node_name), state)
    assert not isinstance(reserved, Status), reserved
    MemoryBinder(state).prebind(all_actions(reserved))
    return reserved


def test_only_the_node_with_the_devices_fits(state: ClusterState) -> None:
    failed = refusals(state, pod("p", "one"))
    assert set(failed) == {"n1"}
    assert failed["n1"].code == Code.UNRESOLVABLE and failed["n1"].reason == "cannot allocate all claims"
    assert "claim default/one" in failed["n1"].detail


def test_reserve_holds_the_devices_for_the_next_pod(state: ClusterState) -> None:
    reserved = ENGINE.reserve(pod("p", "one"), state.node_info("n2"), state)
    assert not isinstance(reserved, Status)
    assert set(state.dra_store.in_use()) == {DeviceID(DRIVER, "n2", "gpu-0")}
    # two devices asked for, one left: no node fits until the reservation is given back
    assert set(refusals(state, pod("q", "two"))) == {"n1", "n2"}
    release_all(reserved)
    assert not set(state.dra_store.in_use())
    assert set(refusals(state, pod("q", "two"))) == {"n1"}


def test_prebind_writes_the_allocation_the_finalizer_and_the_reservation(state: ClusterState) -> None:
    place(state, pod("p", "one"), "n2")
    written = state.dra_store.claim("default", "one")
    assert written.allocation is not None
    assert [(r.request, r.device) for r in written.allocation.results] == [("gpu", "gpu-0")]
    assert FINALIZER in written.finalizers
    assert [(r.resource, r.name, r.uid) for r in written.reserved_for] == [("pods", "p", "uid-p")]
    assert written.raw["status"]["allocation"]["nodeSelector"] == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}
    # the stored allocation holds the device now, not the reservation in flight
    assert state.dra_store.pending_allocation("uid-one") is None
    assert set(state.dra_store.in_use()) == {DeviceID(DRIVER, "n2", "gpu-0")}


def test_a_shared_claim_pins_its_next_pod_to_its_node_and_is_only_reserved(state: ClusterState) -> None:
    place(state, pod("p", "one"), "n2")
    failed = refusals(state, pod("q", "one"))
    assert set(failed) == {"n1"} and failed["n1"].reason == "resourceclaim not available on the node"
    reserved = ENGINE.reserve(pod("q", "one"), state.node_info("n2"), state)
    action = all_actions(reserved)[0]
    assert isinstance(action, BindClaim) and action.allocation is None
    MemoryBinder(state).prebind([action])
    assert [r.name for r in state.dra_store.claim("default", "one").reserved_for] == ["p", "q"]
    assert set(state.dra_store.in_use()) == {DeviceID(DRIVER, "n2", "gpu-0")}


def test_a_claim_reserved_256_times_is_in_use(state: ClusterState) -> None:
    allocation = {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n2", "device": "gpu-0"}]}}
    full = [{"resource": "pods", "name": f"x{i}", "uid": f"x{i}"} for i in range(256)]
    state.dra_store.upsert(dra_store.CLAIMS, claim("one", allocation=allocation, reservedFor=full))
    assert reason(state, pod("p", "one")) == "resourceclaim in use"
    # a pod already in the list is not refused
    state.dra_store.upsert(dra_store.CLAIMS, claim("one", allocation=allocation,
                                             reservedFor=[*full[:255], {"resource": "pods", "name": "p", "uid": "uid-p"}]))
    assert set(refusals(state, pod("p", "one"))) == set()


@pytest.mark.parametrize(("view", "expected"), [
    (pod("p", "missing"), 'could not find ResourceClaim "default/missing"'),
    (pod("p", template="tpl"), 'pod "default/p": ResourceClaim not created yet'),
    (pod("p", template="tpl", generated={"t": "other"}),
     "ResourceClaim default/other was not created for Pod default/p (Pod is not owner)"),
])
def test_a_claim_that_is_not_there_yet_keeps_the_pod_waiting(state: ClusterState, view: PodView, expected: str) -> None:
    assert reason(state, view) == expected


def test_a_template_claim_owned_by_the_pod_is_used(state: ClusterState) -> None:
    state.dra_store.upsert(dra_store.CLAIMS, claim("p-t-abc", owner="p"))
    assert set(refusals(state, pod("p", template="tpl", generated={"t": "p-t-abc"}))) == {"n1"}


def test_a_claim_being_deleted_or_naming_a_missing_class_waits(state: ClusterState) -> None:
    deleting = claim("one")
    deleting["metadata"]["deletionTimestamp"] = "2026-12-03T00:00:00Z"
    state.dra_store.upsert(dra_store.CLAIMS, deleting)
    assert reason(state, pod("p", "one")) == 'resourceclaim "one" is being deleted'
    state.dra_store.upsert(dra_store.CLAIMS, claim("nvme", device_class_name="nvme"))
    assert reason(state, pod("p", "nvme")) == "request gpu: device class nvme does not exist"


def test_a_claim_in_flight_for_another_pod_waits(state: ClusterState) -> None:
    ENGINE.reserve(pod("p", "one"), state.node_info("n2"), state)
    assert reason(state, pod("q", "one")) == "resource claim default/one is in the process of being allocated"


def test_dra_off_keeps_claim_pods_waiting_and_others_untouched(state: ClusterState) -> None:
    state.dra_store.disable("the API server does not serve resource.k8s.io/v1")
    assert reason(state, pod("p", "one")).startswith("pod uses dynamic resource claims, but the API server")
    plain = PodView.from_dict({"metadata": {"name": "plain", "namespace": "default"},
                               "spec": {"containers": [{"name": "c"}]}})
    assert refusals(state, plain) == {}


def test_a_cel_runtime_error_fails_the_attempt_not_the_node(state: ClusterState) -> None:
    state.dra_store.upsert(dra_store.CLAIMS, claim("bad", selector='device.attributes["gpu.example.com"].missing == "x"'))
    with pytest.raises(PluginError, match="CEL runtime error"):
        refusals(state, pod("p", "bad"))


def test_a_request_selector_picks_the_model(state: ClusterState) -> None:
    state.dra_store.upsert(dra_store.SLICES, resource_slice("n1", "h-0", model="h100"))
    state.dra_store.upsert(dra_store.CLAIMS, claim("h100", selector='device.attributes["gpu.example.com"].model == "h100"'))
    assert set(refusals(state, pod("p", "h100"))) == {"n2"}


def test_prebind_refuses_a_claim_allocated_elsewhere_meanwhile(state: ClusterState) -> None:
    reserved = ENGINE.reserve(pod("p", "one"), state.node_info("n2"), state)
    allocation = {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n2", "device": "gpu-1"}]}}
    state.dra_store.upsert(dra_store.CLAIMS, claim("one", allocation=allocation))  # another scheduler won
    with pytest.raises(ClusterError, match="got allocated elsewhere in the meantime"):
        MemoryBinder(state).prebind(all_actions(reserved))
    release_all(reserved)
    assert set(state.dra_store.in_use()) == {DeviceID(DRIVER, "n2", "gpu-1")}


def test_first_available_scores_the_earlier_choice_higher() -> None:
    state = dra_state([node("n1"), node("n2")], [device_class()],
                      [resource_slice("n1", "a", model="h100"), resource_slice("n2", "b")])
    prioritized = {"metadata": {"name": "fa", "namespace": "default", "uid": "uid-fa", "resourceVersion": "1"},
                   "spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": [
                       {"name": "big", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1,
                        "selectors": [{"cel": {"expression": 'device.attributes["gpu.example.com"].model == "h100"'}}]},
                       {"name": "any", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}]}]}}}
    state.dra_store.replace(dra_store.CLAIMS, [prioritized])
    decision = ENGINE.decide(pod("p", "fa"), state.all_node_infos(), state)
    scores = dict(zip([n.name for n in decision.scored], decision.raw_scores["DynamicResources"], strict=True))
    assert scores["n1"] > scores["n2"]
    assert decision.normalized_scores["DynamicResources"][[n.name for n in decision.scored].index("n1")] == 100


# ---- extended resources backed by DRA (dra_extended.py) ------------------------------------------


def gpu_pod(name: str, count: int = 1, resource: str = "example.com/gpu", *, init: int = 0) -> PodView:
    containers = [{"name": "main", "resources": {"requests": {resource: str(count), "cpu": "100m"},
                                                 "limits": {resource: str(count)}}}]
    spec: dict[str, Any] = {"containers": containers}
    if init:
        spec["initContainers"] = [{"name": "setup", "resources": {"requests": {resource: str(init)},
                                                                  "limits": {resource: str(init)}}}]
    return PodView.from_dict({"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec})


@pytest.fixture
def extended(state: ClusterState) -> ClusterState:
    """The GPUs of n2 are also reachable as `example.com/gpu` (the class names it), and n1
    advertises 4 of them the classic way (a device plugin)."""
    gpu = device_class()
    gpu["spec"]["extendedResourceName"] = "example.com/gpu"
    state.dra_store.upsert(dra_store.CLASSES, gpu)
    plugin_node = node("n1")
    plugin_node["status"]["allocatable"]["example.com/gpu"] = "4"
    state.upsert_node(plugin_node)
    return state


def test_an_extended_resource_is_served_by_the_class_or_by_the_node(extended: ClusterState) -> None:
    assert refusals(extended, gpu_pod("p")) == {}  # n1: its device plugin; n2: the class's devices
    assert set(refusals(extended, gpu_pod("big", 3))) == {"n2"}  # n2 has 2 GPUs, n1 advertises 4
    no_class = gpu_pod("other", 1, "example.com/fpga")
    assert {s.reason for s in refusals(extended, no_class).values()} == {"Insufficient example.com/fpga"}


def test_the_implicit_name_of_a_class_serves_too(extended: ClusterState) -> None:
    failed = refusals(extended, gpu_pod("p", 1, "deviceclass.resource.kubernetes.io/gpu"))
    assert set(failed) == {"n1"}  # n1 advertises example.com/gpu, not the implicit name
    assert failed["n1"].plugin == "DynamicResources"


def test_prebind_creates_allocates_and_names_the_extended_claim(extended: ClusterState) -> None:
    pod = gpu_pod("p", 2, init=1)
    place(extended, pod, "n2")
    claim = extended.dra_store.extended_claim_of("uid-p")
    assert claim is not None and claim.name.startswith("p-extended-resources-")
    # the main container (index 1, after the init one) asks for cpu and the GPUs: the GPUs sort second;
    # the init container reuses its request
    assert [(r.name, r.exactly.count) for r in claim.requests] == [("container-1-request-1", 2)]
    assert sorted(r.device for r in claim.allocation.results) == ["gpu-0", "gpu-1"]
    assert [r.uid for r in claim.reserved_for] == ["uid-p"]
    assert claim.raw["metadata"]["ownerReferences"][0]["uid"] == "uid-p"
    assert extended.dra_store.pending_allocation("extended-resources/uid-p") is None  # the claim holds them now


def test_a_stale_extended_claim_is_deleted_at_post_filter(extended: ClusterState) -> None:
    pod = gpu_pod("p")
    place(extended, pod, "n2")  # an earlier attempt made the claim; its bind then failed
    failed = refusals(extended, pod)
    assert {s.reason for s in failed.values()} == {"cannot schedule extended resource claim"}
    actions = ENGINE.post_filter(pod, failed, extended)
    MemoryBinder(extended).prebind(actions)
    assert extended.dra_store.extended_claim_of("uid-p") is None
    assert refusals(extended, pod) == {}


def test_a_failed_bind_gives_back_the_extended_devices(extended: ClusterState) -> None:
    reserved = ENGINE.reserve(gpu_pod("p", 2), extended.node_info("n2"), extended)
    assert set(extended.dra_store.in_use()) == {DeviceID(DRIVER, "n2", "gpu-0"), DeviceID(DRIVER, "n2", "gpu-1")}
    release_all(reserved)
    assert not set(extended.dra_store.in_use())


# ---- consumable capacity: one device shared by several claims ---------------------------------------


def test_a_shared_device_takes_claims_until_its_capacity_is_used(state: ClusterState) -> None:
    shared = {"metadata": {"name": "n1-shared"},
              "spec": {"driver": DRIVER, "nodeName": "n1", "pool": {"name": "n1", "generation": 1,
                                                                    "resourceSliceCount": 1},
                       "devices": [{"name": "big", "allowMultipleAllocations": True,
                                    "capacity": {"memory": {"value": "8Gi"}}}]}}
    state.dra_store.upsert(dra_store.SLICES, shared)
    for name in ("m-0", "m-1", "m-2"):
        raw = claim(name)
        raw["spec"]["devices"]["requests"][0]["exactly"]["capacity"] = {"requests": {"memory": "4Gi"}}
        raw["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
            {"cel": {"expression": "device.allowMultipleAllocations"}}]
        state.dra_store.upsert(dra_store.CLAIMS, raw)
    for name in ("m-0", "m-1"):
        assert set(refusals(state, pod(f"pod-{name}", name))) == {"n2"}
        place(state, pod(f"pod-{name}", name), "n1")
    written = [state.dra_store.claim("default", n).allocation.results[0] for n in ("m-0", "m-1")]
    assert all(r.device == "big" and r.share_id for r in written) and written[0].share_id != written[1].share_id
    assert not set(state.dra_store.in_use())  # a shared device is never held whole
    failed = refusals(state, pod("pod-m-2", "m-2"))
    assert set(failed) == {"n1", "n2"}
    assert "4Gi requested, 0 left" in failed["n1"].detail, failed["n1"].detail


def test_least_allocated_scores_a_class_served_resource_by_the_nodes_devices(state: ClusterState) -> None:
    """ExtendedResourceScoring (noderesources calculateDRAResourceTotals): on nodes that do not
    advertise example.com/gpu, the class's devices there are its allocatable, those allocated its
    requested; a node advertising it is scored on its allocatable as before."""
    gpu = device_class()
    gpu["spec"]["extendedResourceName"] = "example.com/gpu"
    state.dra_store.upsert(dra_store.CLASSES, gpu)
    state.upsert_node(node("n3"))
    state.dra_store.replace(dra_store.SLICES, [resource_slice("n2", "gpu-0", "gpu-1"),
                                         resource_slice("n3", "gpu-0", "gpu-1", "gpu-2", "gpu-3")])
    plugin_node = node("n1")
    plugin_node["status"]["allocatable"]["example.com/gpu"] = "8"
    state.upsert_node(plugin_node)
    resources = (("example.com/gpu", 1),)
    pod = gpu_pod("p")
    infos = [state.node_info(name) for name in ("n1", "n2", "n3")]

    def scores(plugin: Any) -> list[float]:
        score = plugin.prescore(pod, state, infos)
        return [score(info) for info in infos]

    assert scores(LeastAllocated(resources)) == [(8 - 1) * 100 // 8, (2 - 1) * 100 // 2, (4 - 1) * 100 // 4]
    assert scores(MostAllocated(resources)) == [100 // 8, 100 // 2, 100 // 4]
    held = claim("held", count=2)
    held["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "n3", "device": f"gpu-{i}"} for i in range(2)]}}}
    state.dra_store.upsert(dra_store.CLAIMS, held)
    assert scores(LeastAllocated(resources)) == [87, 50, (4 - 3) * 100 // 4]
    without_class = gpu_pod("q", 1, "example.com/fpga")
    assert LeastAllocated(resources).prescore(without_class, state, infos)(infos[2]) == 0  # nothing to score


def test_a_taint_added_while_a_claim_holds_the_device_keeps_the_allocation(state: ClusterState) -> None:
    """A device tainted after it was allocated: the allocation stays and the pods sharing the
    claim still go to its node (kube-scheduler checks taints only when it allocates; evicting
    for NoExecute is kube-controller-manager's device-taint-eviction controller's job); no new
    claim gets the device."""
    place(state, pod("first", "one"), "n2")
    held = state.dra_store.claim("default", "one")
    assert held is not None and [r.device for r in held.allocation.results] == ["gpu-0"]
    tainted = resource_slice("n2", "gpu-0", "gpu-1")
    tainted["spec"]["devices"][0]["taints"] = [{"key": "gpu.example.com/ecc", "value": "fatal", "effect": "NoExecute"}]
    state.dra_store.replace(dra_store.SLICES, [tainted])
    assert set(refusals(state, pod("second", "one"))) == {"n1"}  # the claim's node still takes its pods
    state.dra_store.delete(dra_store.CLAIMS, "default/one")  # its pods are gone: gpu-0 is free, and tainted
    failed = refusals(state, pod("third", "two"))
    assert set(failed) == {"n1", "n2"}
    assert "gpu-0 has taint gpu.example.com/ecc=fatal:NoExecute" in failed["n2"].detail
    place(state, pod("other", "other"), "n2")
    other = state.dra_store.claim("default", "other")
    assert other is not None and [r.device for r in other.allocation.results] == ["gpu-1"]


def test_device_taint_rules_taint_the_devices_they_select_until_deleted(state: ClusterState) -> None:
    """DeviceTaintRules (where served): the store applies each rule's taint to the devices it
    selects, as kube-scheduler's slice tracker does; a rule's change reaches the nodes' pools."""
    rule = {"metadata": {"name": "drain-gpu-0"}, "spec": {
        "deviceSelector": {"driver": DRIVER, "pool": "n2", "device": "gpu-0"},
        "taint": {"key": "maintenance", "value": "planned", "effect": "NoSchedule"}}}
    state.dra_store.replace(dra_store.TAINT_RULES, [rule])
    place(state, pod("first", "one"), "n2")
    first = state.dra_store.claim("default", "one")
    assert first is not None and [r.device for r in first.allocation.results] == ["gpu-1"]
    failed = refusals(state, pod("second", "other"))
    assert set(failed) == {"n1", "n2"}
    assert "gpu-0 has taint maintenance=planned:NoSchedule" in failed["n2"].detail
    state.dra_store.delete(dra_store.TAINT_RULES, "drain-gpu-0")
    assert set(refusals(state, pod("second", "other"))) == {"n1"}
    everything = {"metadata": {"name": "all"}, "spec": {"taint": {"key": "k", "effect": "NoSchedule"}}}
    state.dra_store.upsert(dra_store.TAINT_RULES, everything)
    assert set(refusals(state, pod("second", "other"))) == {"n1", "n2"}


def test_a_pool_every_node_reaches_is_one_object_until_its_slices_change(state: ClusterState) -> None:
    """Pools of nodeSelector/allNodes slices are made once and shared by the nodes (memory and
    time grow with the pools, not with pools times nodes); a slice change makes them anew."""
    shared = {"metadata": {"name": "fabric"}, "spec": {
        "driver": DRIVER, "allNodes": True, "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "nic-0"}]}}
    state.dra_store.replace(dra_store.SLICES, [resource_slice("n2", "gpu-0"), shared])
    store = state.dra_store
    n1 = {p.name: p for p in store.pools_for("n1", {"kubernetes.io/hostname": "n1"})}
    n2 = {p.name: p for p in store.pools_for("n2", {"kubernetes.io/hostname": "n2"})}
    assert set(n1) == {"fabric"} and set(n2) == {"fabric", "n2"}
    assert n1["fabric"] is n2["fabric"]
    store.upsert(dra_store.SLICES, {**shared, "spec": {**shared["spec"], "devices": [{"name": "nic-0"}, {"name": "nic-1"}]}})
    again = {p.name: p for p in store.pools_for("n1", {"kubernetes.io/hostname": "n1"})}
    assert again["fabric"] is not n1["fabric"]
    assert [d.name for _, d, _ in again["fabric"].devices] == ["nic-0", "nic-1"]
