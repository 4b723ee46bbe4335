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
