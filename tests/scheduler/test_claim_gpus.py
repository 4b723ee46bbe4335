"""The standalone scheduler placing pods' own shared-GPU claims with a replay policy (DeviceFit
without DynamicResources, gpu_claims.py), on the API server (fake, or real under envtest).

The GPU inside the node is the strategy's (binpack: the fullest that fits), not the first that
fits; the claim is written allocated (one share, its consumedCapacity) and reserved for the pod
before the Binding, which carries the assignment annotation naming the same device.
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
from tests.scheduler.test_devices_dra import CLASS, gpus_on_node_2
from tests.scheduler.test_dra import DRIVER, create, get_claim, wait_bound, wait_failure

pytestmark = pytest.mark.apiserver


def two_gpu_node(kube: Any) -> None:
    """node-2 has two shared T4s of 1000Mi and 100 cores; node-1 none."""
    gpus_on_node_2(kube, [{"name": f"gpu-{i}", "allowMultipleAllocations": True,
                           "attributes": {"uuid": {"string": f"GPU-{i}"}, "productName": {"string": "Tesla-T4"}},
                           "capacity": {"memory": {"value": "1000Mi"}, "cores": {"value": "100"}}}
                          for i in range(2)])


def claim_pod(kube: Any, name: str, milli: int) -> dict[str, Any]:
    """A pod with a claim of its own asking for one share of milli/1000 of a T4."""
    create(kube, "namespaces/default/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": CLASS, "count": 1,
            "selectors": [{"cel": {"expression":
                                   f'device.attributes["{DRIVER}"].productName.lowerAscii().contains("t4")'}}],
            "capacity": {"requests": {"memory": f"{milli}Mi", "cores": str(milli // 10)}}}}]}}})
    return kube.create_pod(name, scheduler_name=SCHEDULER_NAME, spec={
        "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
        "containers": [{"name": "task", "image": "example", "resources": {"claims": [{"name": "gpu"}]}}]})


def allocated(kube: Any, name: str, pod: dict[str, Any]) -> tuple[str, dict[str, str]]:
    claim = get_claim(kube, name)
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["shareID"] and [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]
    return result["device"], result["consumedCapacity"]


def test_deviceFit_places_a_pods_own_claim_on_the_gpu_its_strategy_chose(kube, make_scheduler):
    two_gpu_node(kube)
    make_scheduler([Profile.from_engine(SCHEDULER_NAME,
                                        Engine(load_policy_file(ROOT / "config" / "replay" / "bestfit.yaml")))])
    first = claim_pod(kube, "first", 500)
    assert wait_bound(kube, "first") == "node-2"
    assert allocated(kube, "first", first) == ("gpu-0", {"memory": "500Mi", "cores": "50"})
    # binpack: the fullest GPU that fits: gpu-0 (500 free) for 300, though gpu-1 is free too
    second = claim_pod(kube, "second", 300)
    assert wait_bound(kube, "second") == "node-2"
    assert allocated(kube, "second", second) == ("gpu-0", {"memory": "300Mi", "cores": "30"})
    third = claim_pod(kube, "third", 600)
    assert wait_bound(kube, "third") == "node-2"
    assert allocated(kube, "third", third) == ("gpu-1", {"memory": "600Mi", "cores": "60"})
    assignment = json.loads(kube.get_pod("third")["metadata"]["annotations"][ASSIGNMENT_ANNOTATION])
    assert assignment == {"node": "node-2", "containers": {"task": [{"id": "GPU-1", "memory": 600, "cores": 60}]}}
    # 200 and 400 left: a 500 share fits nowhere, and no GPU is ever over its capacity
    claim_pod(kube, "too-big", 500)
    wait_failure(kube, "too-big", "Insufficient GPU")
    assert (get_claim(kube, "too-big").get("status") or {}).get("allocation") is None
