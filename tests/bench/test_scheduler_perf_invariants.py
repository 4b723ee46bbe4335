"""bench/scheduler_perf/invariants.py finds each kind of violation, and none in a sound cluster."""

from __future__ import annotations

from typing import Any

from bench.scheduler_perf import invariants

SCHEDULED = [{"type": "PodScheduled", "status": "True"}]


def node(name: str, zone: str = "z1", cpu: str = "4", taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "zone": zone}},
            "spec": {"taints": taints or []}, "status": {"allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"}}}


def pod(name: str, on: str, cpu: str = "1", labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "labels": labels or {}},
            "spec": {"nodeName": on, "containers": [{"resources": {"requests": {"cpu": cpu}}}], **spec},
            "status": {"phase": "Pending", "conditions": SCHEDULED}}


ANTI = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": "kubernetes.io/hostname"}]}}
SPREAD = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchLabels": {"color": "blue"}}}]


def test_sound_cluster_has_no_violation() -> None:
    nodes = [node("a", "z1"), node("b", "z2")]
    pods = [pod("p1", "a", labels={"color": "green"}, affinity=ANTI),
            pod("p2", "b", labels={"color": "green"}, affinity=ANTI),
            pod("s1", "a", labels={"color": "blue"}, topologySpreadConstraints=SPREAD),
            pod("s2", "b", labels={"color": "blue"}, topologySpreadConstraints=SPREAD)]
    assert invariants.check(pods, nodes, {"ns": {}}) == []


def test_each_violation_found() -> None:
    nodes = [node("a", "z1", cpu="1500m"), node("b", "z2", taints=[{"key": "k", "effect": "NoSchedule"}])]
    pods = [pod("p1", "a", labels={"color": "green"}, affinity=ANTI),
            pod("p2", "a", labels={"color": "green"}, affinity=ANTI),
            pod("t", "b", cpu="0"),
            pod("s1", "a", cpu="0", labels={"color": "blue"}, topologySpreadConstraints=SPREAD),
            pod("s2", "a", cpu="0", labels={"color": "blue"}, topologySpreadConstraints=SPREAD)]
    found = invariants.check(pods, nodes, {"ns": {}})
    kinds = {line.split(":")[0] for line in found}
    assert kinds == {"capacity", "anti-affinity", "node rules", "spread"}, found


def test_pods_bound_by_their_template_are_not_held_to_scheduler_rules() -> None:
    """A pod that names its node itself (no PodScheduled condition) counts for capacity only."""
    nodes = [node("b", taints=[{"key": "k", "effect": "NoSchedule"}])]
    blocker = pod("blocker", "b", cpu="0")
    blocker["status"]["conditions"] = []
    assert invariants.check([blocker], nodes, {"ns": {}}) == []


def test_extended_resources_served_by_a_claim_do_not_count_against_the_node() -> None:
    served = pod("gpu", "a", cpu="0")
    served["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"] = "1"
    unserved = pod("plain", "a", cpu="0")
    unserved["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"] = "1"
    served["status"]["extendedResourceClaimStatus"] = {"resourceClaimName": "gpu-extended-resources-x", "requestMappings": [
        {"containerName": "c", "resourceName": "example.com/gpu", "requestName": "container-0-request-0"}]}
    assert invariants.check([served], [node("a")], {"ns": {}}) == []
    assert [v.split(":")[0] for v in invariants.check([unserved], [node("a")], {"ns": {}})] == ["capacity"]
