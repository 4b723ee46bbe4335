"""bench/chaos/oracle.py: how many Pending pods fit at once on the final cluster, group
membership left out (the all-or-nothing rule is the checker's)."""

from __future__ import annotations

from typing import Any

from bench.chaos.oracle import Oracle


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}, "spec": {},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def member(name: str, node_name: str = "") -> dict[str, Any]:
    """A 1-cpu member of group `g` under both APIs."""
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "chaos", "uid": f"uid-{name}",
                     "labels": {"scheduling.x-k8s.io/pod-group": "g"}},
        "spec": {"schedulerName": "chaos-standalone", "schedulingGroup": {"podGroupName": "g"},
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending"}}
    if node_name:
        body["spec"]["nodeName"] = node_name
    return body


def test_members_placed_together_each_seeing_the_ones_before() -> None:
    oracle = Oracle([node("a"), node("b")], [member("bound", "a")], {})
    pending = [member(f"p{i}") for i in range(4)]
    assert oracle.together(pending) == 3  # 4 cpus, 1 taken: 3 of 4 fit at once
    assert oracle.fits(pending[0]) in ("a", "b")
    assert "schedulingGroup" in pending[0]["spec"]  # the pods given are left as they were


def test_nothing_fits_on_a_full_cluster() -> None:
    oracle = Oracle([node("a")], [member("x", "a"), member("y", "a")], {})
    assert oracle.together([member("p")]) == 0 and oracle.fits(member("p")) == ""


def _dra(claims: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    gpu_class = {"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}
    slice_ = {"metadata": {"name": "a-gpu"}, "spec": {"driver": "gpu.example.com", "nodeName": "a",
                                                      "pool": {"name": "a", "generation": 1, "resourceSliceCount": 1},
                                                      "devices": [{"name": "gpu-0"}]}}
    return {"deviceclasses": [gpu_class], "resourceslices": [slice_], "resourceclaims": claims}


def claim(name: str, allocated_to: str = "") -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": name, "namespace": "chaos", "uid": f"claim-{name}"},
                            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}
    if allocated_to:
        body["status"] = {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.example.com", "pool": "a", "device": "gpu-0"}]}},
            "reservedFor": [{"resource": "pods", "name": allocated_to, "uid": f"uid-{allocated_to}"}]}
    return body


def dra_pod(name: str, claim_name: str, node_name: str = "") -> dict[str, Any]:
    body = member(name, node_name)
    body["metadata"]["labels"] = {}
    body["spec"].pop("schedulingGroup")
    body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name}]
    return body


def test_a_pending_pod_whose_claim_can_be_allocated_fits_and_one_whose_device_is_held_does_not() -> None:
    free = Oracle([node("a"), node("b")], [], {}, dra=_dra([claim("c1")]))
    assert free.fits(dra_pod("p", "c1")) == "a"  # the only node with the device
    held = Oracle([node("a"), node("b")], [dra_pod("q", "c0", "a")], {},
                  dra=_dra([claim("c0", allocated_to="q"), claim("c1")]))
    assert held.fits(dra_pod("p", "c1")) == ""
    assert Oracle([node("a")], [], {}, dra=_dra([])).fits(dra_pod("p", "never-made")) == ""
