"""DeviceFit and DeviceAllocation with `deviceClass`: shared GPUs read and recorded as DRA consumable capacity.

One in-memory cluster: n1 without devices, n2 with two shared GPUs of 16Gi and 100 cores (memory
in steps of 1Gi), one of them tainted in some tests. Shares pods and standard DRA claims draw on
the same capacity: whichever comes first, the other sees it taken.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from extender.checks.configs import check_policy
from extender.cluster import dra_store
from extender.cluster.memory_binder import MemoryBinder
from extender.cluster.state import ClusterState
from extender.dra.objects import DeviceID
from extender.explain.device_notes import device_notes
from extender.model.devices import (
    ASSIGNMENT_ANNOTATION,
    REASON_CORES,
    REASON_MEMORY,
    REASON_NO_DEVICES,
    REASON_POLICY,
    REASON_TYPE,
    REASON_UNHEALTHY,
)
from extender.model.pods import PodView
from extender.policy.builtin import DeviceFit
from extender.policy.builtin.devices import DeviceAllocation
from extender.policy.builtin.dra_devices import REASON_ONE_CLAIM
from extender.policy.claim_actions import CreateExtendedClaim, DeleteClaim, DeleteExtendedClaim
from extender.policy.engine import Engine
from extender.policy.loading import load_policy
from extender.policy.reservations import Reservation, all_actions, release_all
from extender.policy.status import Code, Status
from tests.policy.builders import dra_state

DRIVER = "gpu.example.com"
MIB = 1 << 20
POLICY = """
apiVersion: extender/v1alpha1
kind: Policy
filters:
  - name: ResourceFit
    args: {ignoredResourceGroups: [extender.example]}
  - name: DynamicResources
  - name: DeviceFit
    args: {deviceClass: shared-gpu}
scores:
  - name: DeviceAllocation
    weight: 1
    args: {deviceClass: shared-gpu}
"""
ENGINE = Engine(load_policy(POLICY, source="test"))


def node(name: str, **allocatable: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110", **allocatable},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def gpu(name: str, *, memory: str = "16Gi", cores: str | None = "100", tainted: bool = False,
        multiple: bool = True, policy: dict[str, Any] | None = None) -> dict[str, Any]:
    capacity: dict[str, Any] = {"memory": {"value": memory, "requestPolicy": policy or {
        "default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}}}
    if cores is not None:
        capacity["cores"] = {"value": cores}
    device: dict[str, Any] = {"name": name, "allowMultipleAllocations": multiple, "capacity": capacity,
                              "attributes": {"uuid": {"string": f"GPU-{name}"},
                                             "productName": {"string": "NVIDIA-A100"}}}
    if tainted:
        device["taints"] = [{"key": "broken", "effect": "NoExecute"}]
    return device


def resource_slice(node_name: str, *devices: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": f"{node_name}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1}, "devices": list(devices)}}


def dra_claim(name: str, memory: str, cores: str = "0") -> dict[str, Any]:
    exactly = {"deviceClassName": "shared-gpu", "allocationMode": "ExactCount", "count": 1,
               "capacity": {"requests": {"memory": memory, "cores": cores}}}
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "1"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}, "status": {}}


def shares_pod(name: str, memory: int | None = None, cores: int | None = None, count: int | None = None,
               *, annotations: dict[str, str] | None = None, **extra: str) -> PodView:
    limits = {**extra}
    if memory is not None:
        limits["extender.example/gpu-memory"] = str(memory)
    if cores is not None:
        limits["extender.example/gpu-cores"] = str(cores)
    if count is not None:
        limits["extender.example/gpu"] = str(count)
    return PodView.from_dict({
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "annotations": annotations or {}},
        "spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "100m", **limits},
                                                               "limits": limits}}]}})


def claim_pod(name: str, claim: str) -> PodView:
    return PodView.from_dict({"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
                              "spec": {"containers": [{"name": "c"}],
                                       "resourceClaims": [{"name": "g", "resourceClaimName": claim}]}})


@pytest.fixture
def state() -> ClusterState:
    shared_gpu = {"metadata": {"name": "shared-gpu"},
                  "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}
    return dra_state([node("n1"), node("n2")], [shared_gpu], [resource_slice("n2", gpu("g0"), gpu("g1"))])


def refusals(state: ClusterState, view: PodView) -> dict[str, Status]:
    return ENGINE.filter(view, state.all_node_infos(), state).failed


def place(state: ClusterState, view: PodView, node_name: str = "n2") -> list[Reservation]:
    reserved = ENGINE.reserve(view, state.node_info(node_name), state)
    assert not isinstance(reserved, Status), reserved
    MemoryBinder(state).prebind(all_actions(reserved))
    return reserved


def consumed(state: ClusterState, device: str) -> dict[str, Any]:
    return dict(state.dra_store.consumed().get(DeviceID(DRIVER, "n2", device), {}))


def test_the_gpus_are_the_class_devices_that_allow_shares(state: ClusterState) -> None:
    failed = refusals(state, shares_pod("p", 4096, 30))
    assert set(failed) == {"n1"}
    assert failed["n1"].reasons == (REASON_NO_DEVICES,) and failed["n1"].code == Code.UNRESOLVABLE
    state.dra_store.upsert(dra_store.SLICES, resource_slice("n1", gpu("x", multiple=False), gpu("y", cores="150")))
    detail = refusals(state, shares_pod("p", 4096, 30))["n1"].detail
    assert "gpu.example.com/n1/x does not allow multiple allocations" in detail
    assert "gpu.example.com/n1/y cores capacity 150 is not a percentage from 1 to 100" in detail


def test_a_share_is_recorded_as_a_claim_with_the_policys_amounts(state: ClusterState) -> None:
    """5000 MiB is rounded up to 5Gi by the device's policy; the claim names what the pod asked."""
    reserved = place(state, shares_pod("p", 5000, 30))
    assert consumed(state, "g0") == {"memory": 5 << 30, "cores": 30}
    claim = state.dra_store.extended_claim_of("uid-p")
    assert claim is not None and claim.name.startswith("p-extended-resources-")
    assert claim.raw["spec"]["devices"]["requests"] == [{"name": "container-0-request-1", "exactly": {
        "deviceClassName": "shared-gpu", "allocationMode": "ExactCount", "count": 1,
        "capacity": {"requests": {"memory": "5000Mi", "cores": "30"}}}}]
    (result,) = claim.allocation.results
    assert (result.request, result.device, result.consumed["memory"].text) == ("container-0-request-1", "g0", "5Gi")
    assert result.share_id
    assert [r.uid for r in claim.reserved_for] == ["uid-p"]
    create = next(a for a in all_actions(reserved) if isinstance(a, CreateExtendedClaim))
    assert [m["resourceName"] for m in create.mappings] == ["extender.example/gpu-cores", "extender.example/gpu-memory"]
    assert {m["requestName"] for m in create.mappings} == {"container-0-request-1"}
    assignment = json.loads(reserved[-1].annotations[ASSIGNMENT_ANNOTATION])
    assert assignment == {"node": "n2", "containers": {"main": [{"id": "GPU-g0", "memory": 5120, "cores": 30}]}}
    assert reserved[-1].undo == (DeleteExtendedClaim("default", "uid-p"),)


def test_a_dra_claim_first_leaves_its_capacity_to_nobody(state: ClusterState) -> None:
    for name in ("a", "b"):
        state.dra_store.upsert(dra_store.CLAIMS, dra_claim(name, "12Gi", "10"))
        place(state, claim_pod(f"pod-{name}", name))
    failed = refusals(state, shares_pod("p", 8192))
    assert failed["n2"].reasons == (REASON_MEMORY,) and failed["n2"].code == Code.UNSCHEDULABLE
    assert "GPU-g0 (NVIDIA-A100) 4096/16384 MiB, 90/100% cores free, 1 pod(s)" in failed["n2"].detail
    assert "n2" not in refusals(state, shares_pod("p", 4096))


def test_shares_first_leave_their_capacity_to_no_dra_claim(state: ClusterState) -> None:
    """In flight (Reserve) and then stored (PreBind): a standard claim asking the rest is refused."""
    reserved = ENGINE.reserve(shares_pod("p", 12288, 60, count=2), state.node_info("n2"), state)
    assert not isinstance(reserved, Status)
    state.dra_store.upsert(dra_store.CLAIMS, dra_claim("late", "8Gi"))
    assert refusals(state, claim_pod("q", "late"))["n2"].reason == "cannot allocate all claims"
    MemoryBinder(state).prebind(all_actions(reserved))
    assert state.dra_store.pending_allocation("extended-resources/uid-p") is None
    assert refusals(state, claim_pod("q", "late"))["n2"].reason == "cannot allocate all claims"
    state.dra_store.upsert(dra_store.CLAIMS, dra_claim("fits", "4Gi", "40"))
    assert "n2" not in refusals(state, claim_pod("r", "fits"))


def test_a_released_reservation_gives_the_shares_back(state: ClusterState) -> None:
    reserved = ENGINE.reserve(shares_pod("p", None, None, count=2), state.node_info("n2"), state)
    assert not isinstance(reserved, Status)
    assert consumed(state, "g0") == {"memory": 16 << 30, "cores": 100}  # whole devices: all of each
    assert refusals(state, shares_pod("q", 1024))["n2"].reasons == (REASON_MEMORY,)
    release_all(reserved)
    assert consumed(state, "g0") == {}
    assert "n2" not in refusals(state, shares_pod("q", 1024))


def test_cores_and_memory_shortages_are_told_apart(state: ClusterState) -> None:
    place(state, shares_pod("a", 1024, 80, count=2))
    assert refusals(state, shares_pod("p", 1024, 30))["n2"].reasons == (REASON_CORES,)


def test_a_share_outside_the_policy_makes_the_device_unusable(state: ClusterState) -> None:
    odd = {"validValues": ["4Gi", "8Gi"], "default": "4Gi"}
    state.dra_store.upsert(dra_store.SLICES, resource_slice("n2", gpu("g0", memory="8Gi", policy=odd)))
    failed = refusals(state, shares_pod("p", 12288))["n2"]
    assert failed.reasons == (REASON_POLICY,) and failed.code == Code.UNRESOLVABLE
    assert "GPU-g0: 12Gi of memory is outside its request policy (valid values 4Gi, 8Gi)" in failed.detail
    place(state, shares_pod("q", 3000))  # rounded up to 4Gi
    assert consumed(state, "g0")["memory"] == 4 << 30


def test_taints_are_unhealthy_gpus_and_the_product_name_is_the_type(state: ClusterState) -> None:
    state.dra_store.upsert(dra_store.SLICES, resource_slice("n2", gpu("g0", tainted=True)))
    assert refusals(state, shares_pod("p", 1024))["n2"].reasons == (REASON_UNHEALTHY,)
    avoid = shares_pod("q", 1024, annotations={"extender.example/gpu-type-avoid": "a100"})
    assert refusals(state, avoid)["n2"].reasons == (REASON_TYPE,)


def test_a_device_without_cores_takes_memory_shares_only(state: ClusterState) -> None:
    state.dra_store.upsert(dra_store.SLICES, resource_slice("n2", gpu("g0", cores=None)))
    failed = refusals(state, shares_pod("p", 1024, 10))["n2"]
    assert failed.reasons == (REASON_POLICY,) and "publishes no cores capacity" in failed.detail
    place(state, shares_pod("q", 1024))
    claim = state.dra_store.extended_claim_of("uid-q")
    assert claim is not None
    assert claim.raw["spec"]["devices"]["requests"][0]["exactly"]["capacity"] == {"requests": {"memory": "1024Mi"}}


def test_a_pod_needing_a_second_extended_claim_is_refused(state: ClusterState) -> None:
    cls = {"metadata": {"name": "fpga"}, "spec": {"extendedResourceName": "example.com/fpga", "selectors": [
        {"cel": {"expression": 'device.driver == "fpga.example.com"'}}]}}
    state.dra_store.upsert(dra_store.CLASSES, cls)
    state.dra_store.upsert(dra_store.SLICES, {"metadata": {"name": "n2-fpga"}, "spec": {
        "driver": "fpga.example.com", "nodeName": "n2", "pool": {"name": "n2", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "f0"}]}})
    state.upsert_node(node("n1", **{"example.com/fpga": "1"}))
    failed = refusals(state, shares_pod("p", 1024, **{"example.com/fpga": "1"}))
    assert failed["n2"].reasons == (REASON_ONE_CLAIM,) and failed["n2"].code == Code.UNRESOLVABLE
    assert "example.com/fpga would need an extended-resource claim of their own" in failed["n2"].detail
    assert failed["n1"].reasons == (REASON_NO_DEVICES,)  # n1 serves the FPGA by its device plugin


def test_a_stale_claim_is_deleted_at_post_filter(state: ClusterState) -> None:
    pod = shares_pod("p", 1024)
    place(state, pod)  # an earlier attempt made the claim; its bind then failed
    failed = refusals(state, pod)
    assert {s.reason for s in failed.values()} == {"cannot schedule extended resource claim"}
    actions = ENGINE.post_filter(pod, failed, state)
    claim = state.dra_store.extended_claim_of("uid-p")
    assert claim is not None and actions == [DeleteClaim("default", claim.name, claim.uid)]
    MemoryBinder(state).prebind(actions)
    assert state.dra_store.extended_claim_of("uid-p") is None
    assert "n2" not in refusals(state, pod)


def test_a_missing_class_or_dra_off_refuses_every_node(state: ClusterState) -> None:
    state.dra_store.delete(dra_store.CLASSES, "shared-gpu")
    assert {s.reason for s in refusals(state, shares_pod("p", 1024)).values()} == {
        "device class shared-gpu does not exist"}
    state.dra_store.disable("off")
    assert {s.reason for s in refusals(state, shares_pod("p", 1024)).values()} == {
        "pod uses shared GPUs on DRA, but the API server does not serve resource.k8s.io/v1"}


def test_allocation_scores_from_the_same_inventory_and_use(state: ClusterState) -> None:
    state.dra_store.upsert(dra_store.SLICES, resource_slice("n1", gpu("h0")))
    state.dra_store.upsert(dra_store.CLAIMS, dra_claim("busy", "8Gi", "50"))
    place(state, claim_pod("holder", "busy"), "n1")
    score = DeviceAllocation(device_class="shared-gpu").prescore(shares_pod("p", 4096, 25), state, [])
    assert score is not None
    busy, idle = score(state.node_info("n1")), score(state.node_info("n2"))  # type: ignore[arg-type]
    assert busy > idle > 0  # binpack: the node whose GPU a standard claim half fills


def test_explain_notes_show_the_dra_figures(state: ClusterState) -> None:
    place(state, shares_pod("a", 6144, 25))
    notes = device_notes(shares_pod("p", 1024), state.all_node_infos(), state, DeviceFit(device_class="shared-gpu"))
    assert notes == ["GPUs on n2: GPU-g0 (NVIDIA-A100) 10240/16384 MiB, 75/100% cores free, 1 pod(s); "
                     "GPU-g1 (NVIDIA-A100) 16384/16384 MiB, 100/100% cores free, 0 pod(s)"]


def test_a_webhook_policy_may_not_use_dra_mode(tmp_path: Any) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    assert check_policy(path) == [] and check_policy(path, "standalone") == []
    (problem,) = check_policy(path, "webhook")
    assert "filters[2] (DeviceFit) has deviceClass 'shared-gpu': shared GPUs on DRA need the standalone" in problem
