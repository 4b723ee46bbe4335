"""The standalone scheduler with shared GPUs on the standard API (DeviceFit `deviceClass`), on the API server.

A shares pod's devices are recorded as a ResourceClaim of its own (created, allocated with one
share per device, reserved for the pod, named in its extendedResourceClaimStatus) before the
Binding, which still carries the assignment annotation. A standard DRA claim with a capacity
request and shares pods draw from one capacity, whichever comes first (fake or real server).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from extender.model.devices import ASSIGNMENT_ANNOTATION
from extender.policy.engine import Engine
from extender.policy.loading import load_policy_file
from extender.scheduler.profiles import Profile
from tests.helpers import ROOT
from tests.scheduler.conftest import SCHEDULER_NAME
from tests.scheduler.test_dra import (
    DRIVER,
    create,
    create_pod,
    get_claim,
    node_of,
    wait_bound,
    wait_failure,
)

pytestmark = pytest.mark.apiserver

CLASS = "shared-gpu"  # config/policy-devices-dra.yaml's deviceClass


def profile() -> Profile:
    return Profile.from_engine(SCHEDULER_NAME, Engine(load_policy_file(ROOT / "config" / "policy-devices-dra.yaml")))


def gpus_on_node_2(kube: Any, devices: list[dict[str, Any]]) -> None:
    """node-1 and node-2, the shared-GPU DeviceClass, and `devices` in one ResourceSlice of node-2."""
    for name in ("node-1", "node-2"):
        kube.create_node(name)
    create(kube, "deviceclasses", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                   "metadata": {"name": CLASS},
                                   "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    create(kube, "resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "node-2-gpus"},
        "spec": {"driver": DRIVER, "nodeName": "node-2",
                 "pool": {"name": "node-2", "generation": 1, "resourceSliceCount": 1}, "devices": devices}})


def shared_gpu_cluster(kube: Any) -> None:
    """node-2 has one shared GPU of 8Gi and 100 cores (memory in steps of 1Gi); node-1 none."""
    gpus_on_node_2(kube, [{"name": "gpu-0", "allowMultipleAllocations": True,
                           "attributes": {"uuid": {"string": "GPU-0"}},
                           "capacity": {"memory": {"value": "8Gi", "requestPolicy": {
                               "default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}},
                               "cores": {"value": "100"}}}])


def dra_claim(kube: Any, name: str, memory: str) -> None:
    create(kube, "namespaces/default/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": CLASS, "capacity": {"requests": {"memory": memory, "cores": "10"}}}}]}}})


def shares_pod(kube: Any, name: str, memory_mib: int) -> dict[str, Any]:
    amounts = {"extender.example/gpu-memory": str(memory_mib), "extender.example/gpu-cores": "20"}
    return kube.create_pod(name, scheduler_name=SCHEDULER_NAME, requests=amounts, limits=amounts)


def shares_claim(kube: Any, name: str) -> dict[str, Any]:
    """The claim the scheduler made for the pod's shares, found through the pod's status."""
    status = kube.wait_for(lambda: (kube.get_pod(name).get("status") or {}).get("extendedResourceClaimStatus"),
                           message=f"extendedResourceClaimStatus of {name}")
    assert {m["resourceName"] for m in status["requestMappings"]} == {
        "extender.example/gpu-cores", "extender.example/gpu-memory"}
    return get_claim(kube, status["resourceClaimName"])


def test_a_dra_claim_first_then_shares_pods_see_its_capacity_taken(kube, make_scheduler):
    shared_gpu_cluster(kube)
    dra_claim(kube, "big", "6Gi")
    make_scheduler([profile()])
    create_pod(kube, "dra-pod", "big")
    assert wait_bound(kube, "dra-pod") == "node-2"
    shares_pod(kube, "too-much", 4096)
    wait_failure(kube, "too-much", "Insufficient GPU memory")
    pod = shares_pod(kube, "fits", 2048)
    assert wait_bound(kube, "fits") == "node-2"
    assignment = json.loads(kube.get_pod("fits")["metadata"]["annotations"][ASSIGNMENT_ANNOTATION])
    assert assignment == {"node": "node-2", "containers": {
        kube.get_pod("fits")["spec"]["containers"][0]["name"]: [{"id": "GPU-0", "memory": 2048, "cores": 20}]}}
    claim = shares_claim(kube, "fits")
    assert claim["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert (result["device"], result["consumedCapacity"]) == ("gpu-0", {"memory": "2Gi", "cores": "20"})
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]
    assert node_of(kube, "too-much") == ""


def test_shares_pods_first_then_a_dra_claim_sees_their_capacity_taken(kube, make_scheduler):
    shared_gpu_cluster(kube)
    make_scheduler([profile()])
    shares_pod(kube, "infer", 6144)
    assert wait_bound(kube, "infer") == "node-2"
    shares_claim(kube, "infer")
    dra_claim(kube, "late", "4Gi")
    create_pod(kube, "late-pod", "late")
    wait_failure(kube, "late-pod", "cannot allocate all claims")
    dra_claim(kube, "small", "2Gi")
    create_pod(kube, "small-pod", "small")
    assert wait_bound(kube, "small-pod") == "node-2"
    results = get_claim(kube, "small")["status"]["allocation"]["devices"]["results"]
    assert [r["consumedCapacity"]["memory"] for r in results] == ["2Gi"]
    assert node_of(kube, "late-pod") == ""
    assert (get_claim(kube, "late").get("status") or {}).get("allocation") is None
