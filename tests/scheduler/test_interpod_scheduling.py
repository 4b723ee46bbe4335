"""The standalone scheduler on workloads with inter-pod rules, through the API server (fake or real).

The scenarios of the issue that measured kube-scheduler against us: each must bind as many
pods as kube-scheduler does and hold the same invariants (distinct nodes, skew, co-location).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest

from tests.scheduler.conftest import SCHEDULER_NAME

pytestmark = pytest.mark.apiserver

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
SETTLE = 1.5  # seconds without change before "pending" counts as final


def term(labels: dict[str, str], key: str = HOSTNAME) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key}


def affine(kube: Any, name: str, app: str, rule: str, peer: str) -> None:
    """A pod for our scheduler labelled app=``app``, whose required ``rule`` (podAffinity or
    podAntiAffinity) names the pods labelled app=``peer`` on the same node."""
    kube.create_pod(name, scheduler_name=SCHEDULER_NAME, labels={"app": app},
                    affinity={rule: {REQUIRED: [term({"app": peer})]}})


def start_on_nodes(kube: Any, make_scheduler: Any, count: int) -> None:
    """Nodes n0..n<count-1>, then the scheduler."""
    for i in range(count):
        kube.create_node(f"n{i}")
    make_scheduler()


def nodes_of(kube: Any, names: list[str]) -> dict[str, str]:
    found = {}
    for name in names:
        pod = kube.get_pod(name) or {}
        found[name] = (pod.get("spec") or {}).get("nodeName") or ""
    return found


def settle(kube: Any, names: list[str], bound: int, timeout: float = 15.0) -> dict[str, str]:
    """Wait until `bound` of `names` are bound, then until nothing changes for SETTLE seconds."""
    kube.wait_for(lambda: sum(1 for n in nodes_of(kube, names).values() if n) >= bound, timeout=timeout,
                  message=f"{bound} of {len(names)} pods bound")
    last = nodes_of(kube, names)
    deadline = time.monotonic() + SETTLE
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = nodes_of(kube, names)
        if now != last:
            last, deadline = now, time.monotonic() + SETTLE
    return last


def failed_reasons(kube: Any, name: str) -> str:
    events = kube.wait_for(lambda: kube.list_events("default", reason="FailedScheduling", involved_name=name),
                           message=f"FailedScheduling for {name}")
    return " ".join(e.get("message") or e.get("note") or "" for e in events)


def test_anti_affine_replicas_take_one_node_each_and_the_extra_one_waits(kube: Any, make_scheduler: Any) -> None:
    start_on_nodes(kube, make_scheduler, 3)
    names = [f"web-{i}" for i in range(4)]
    for name in names:
        affine(kube, name, "web", "podAntiAffinity", "web")
    placed = settle(kube, names, bound=3)
    assert sorted(n for n in placed.values() if n) == ["n0", "n1", "n2"]
    waiting = [name for name, node in placed.items() if not node]
    assert len(waiting) == 1
    assert "didn't match pod anti-affinity rules" in failed_reasons(kube, waiting[0])


def test_affine_pods_follow_the_running_database(kube: Any, make_scheduler: Any) -> None:
    for i in range(3):
        kube.create_node(f"n{i}")
    kube.create_pod("db", labels={"app": "db"}, node_name="n2")
    make_scheduler()
    names = ["web-0", "web-1"]
    for name in names:
        affine(kube, name, "web", "podAffinity", "db")
    assert settle(kube, names, bound=2) == {"web-0": "n2", "web-1": "n2"}


def test_the_first_pod_of_a_self_affine_group_is_bound(kube: Any, make_scheduler: Any) -> None:
    start_on_nodes(kube, make_scheduler, 2)
    affine(kube, "first", "cache", "podAffinity", "cache")
    assert settle(kube, ["first"], bound=1)["first"] in ("n0", "n1")
    affine(kube, "second", "cache", "podAffinity", "cache")
    together = settle(kube, ["first", "second"], bound=2)
    assert together["first"] == together["second"]


def test_zone_spread_places_seven_pods_three_two_two(kube: Any, make_scheduler: Any) -> None:
    for zone in "abc":
        kube.create_node(f"{zone}-0", labels={ZONE: zone})
    make_scheduler()
    names = [f"web-{i}" for i in range(7)]
    for name in names:
        kube.create_pod(name, scheduler_name=SCHEDULER_NAME, labels={"app": "web"}, spec={
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                           "labelSelector": {"matchLabels": {"app": "web"}}}]})
    placed = settle(kube, names, bound=7)
    assert sorted(Counter(node[0] for node in placed.values()).values()) == [2, 2, 3]


def test_zone_spread_with_a_full_zone_keeps_the_pod_that_would_break_the_skew(
        kube: Any, make_scheduler: Any) -> None:
    kube.create_node("a-0", cpu="2", labels={ZONE: "a"})
    kube.create_node("b-0", cpu="600m", labels={ZONE: "b"})  # room for one pod
    make_scheduler()
    names = [f"web-{i}" for i in range(4)]
    spec = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                           "labelSelector": {"matchLabels": {"app": "web"}}}]}
    for name in names:
        kube.create_pod(name, scheduler_name=SCHEDULER_NAME, labels={"app": "web"}, cpu="500m", spec=spec)
    placed = settle(kube, names, bound=3)
    assert Counter(node[0] for node in placed.values() if node) == {"a": 2, "b": 1}
    waiting = [name for name, node in placed.items() if not node]
    assert len(waiting) == 1
    reasons = failed_reasons(kube, waiting[0])
    assert "didn't match pod topology spread constraints" in reasons and "Insufficient cpu" in reasons


def test_host_port_pods_take_one_node_each(kube: Any, make_scheduler: Any) -> None:
    start_on_nodes(kube, make_scheduler, 2)
    names = [f"agent-{i}" for i in range(3)]
    containers = [{"name": "agent", "image": "registry.k8s.io/pause:3.10",
                   "ports": [{"containerPort": 8080, "hostPort": 8080}]}]
    for name in names:
        kube.create_pod(name, scheduler_name=SCHEDULER_NAME, containers=containers)
    placed = settle(kube, names, bound=2)
    assert sorted(n for n in placed.values() if n) == ["n0", "n1"]
    waiting = [name for name, node in placed.items() if not node]
    assert "didn't have free ports for the requested pod ports" in failed_reasons(kube, waiting[0])


def test_a_waiting_anti_affine_pod_is_placed_when_its_rival_leaves(kube: Any, make_scheduler: Any) -> None:
    kube.create_node("n0")
    kube.create_pod("rival", labels={"app": "web"}, node_name="n0")
    make_scheduler()
    affine(kube, "web", "web", "podAntiAffinity", "web")
    failed_reasons(kube, "web")
    kube.delete_pod("rival", grace_period_seconds=0)
    assert settle(kube, ["web"], bound=1) == {"web": "n0"}


def test_a_waiting_affine_pod_is_placed_when_its_partner_arrives(kube: Any, make_scheduler: Any) -> None:
    start_on_nodes(kube, make_scheduler, 2)
    affine(kube, "web", "web", "podAffinity", "db")
    failed_reasons(kube, "web")
    kube.create_pod("db", labels={"app": "db"}, node_name="n1")
    assert settle(kube, ["web"], bound=1) == {"web": "n1"}
