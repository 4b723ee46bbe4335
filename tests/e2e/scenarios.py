"""Scenarios run by both kube-scheduler and our standalone scheduler (test_side_by_side.py).

A scenario is a cluster (nodes), the pods to place, and what must come out: which pods
end up bound (the others stay Pending) and, where it matters, on which nodes. Each
scheduler gets the same nodes and its own copy of the pods (in a namespace of its own,
under its own schedulerName); the harness (sidebyside.py) then requires both to reach
the expected outcome, hence the same one, with no node over its allocatable.

To add one, append to ``SCENARIOS``. ``node(...)`` takes the keyword arguments of
``KubeTestClient.create_node`` and ``pod(...)`` those of ``KubeTestClient.create_pod``;
pods are created in the order given, and both schedulers take them first come, first
served (same priority). Keep outcomes independent of scoring: when a pod may land on
several nodes, list them all in ``placements``, and do not let the set of bound pods
depend on which of two equally good nodes a scorer picked.

Not here (yet): inter-pod affinity, topology spread, host ports, volumes and preemption,
which the standalone scheduler still refuses through its UnsupportedConstraints filter;
and a NotReady node with a pod tolerating the not-ready taint, a deliberate difference
(the standalone policy's NodeReady filter refuses NotReady nodes outright).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PAUSE = "registry.k8s.io/pause:3.10"
GPU = "example.com/gpu"


def node(name: str, **spec: Any) -> dict[str, Any]:
    """A node: ``KubeTestClient.create_node`` keyword arguments (cpu, memory, pods, labels,
    taints, ready, unschedulable, extra_resources, allocatable)."""
    return {"name": name, **spec}


def pod(name: str, **spec: Any) -> dict[str, Any]:
    """A pod: ``KubeTestClient.create_pod`` keyword arguments (cpu, memory, requests, limits,
    node_selector, tolerations, affinity, scheduling_gates, containers, init_containers...)."""
    return {"name": name, **spec}


def container(name: str, *, cpu: str = "", memory: str = "", extended: Mapping[str, str] | None = None,
              restart_policy: str = "") -> dict[str, Any]:
    """A container with requests; extended resources get equal limits, as they must.
    ``restart_policy="Always"`` on an init container makes it a sidecar."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    requests.update(extended or {})
    spec: dict[str, Any] = {"name": name, "image": PAUSE, "resources": {"requests": requests}}
    if extended:
        spec["resources"]["limits"] = dict(extended)
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return spec


def tolerate(key: str, effect: str = "NoSchedule", value: str | None = None) -> dict[str, Any]:
    toleration: dict[str, Any] = {"key": key, "effect": effect}
    if value is None:
        toleration["operator"] = "Exists"
    else:
        toleration.update(operator="Equal", value=value)
    return toleration


def on_hosts(*names: str) -> dict[str, Any]:
    """Required node affinity to these node names (kubernetes.io/hostname)."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": list(names)}]}
    ]}}}  # fmt: skip


@dataclass(frozen=True)
class Scenario:
    name: str
    why: str
    nodes: tuple[dict[str, Any], ...]
    pods: tuple[dict[str, Any], ...]
    bound: frozenset[str]  # the pods that must end up bound; every other pod stays Pending
    placements: Mapping[str, frozenset[str]] = field(default_factory=dict)  # pod -> allowed nodes

    def __post_init__(self) -> None:
        names = [p["name"] for p in self.pods]
        assert len(set(names)) == len(names), f"{self.name}: duplicate pod names"
        assert self.bound <= set(names), f"{self.name}: bound names unknown pods"
        assert set(self.placements) <= self.bound, f"{self.name}: placements for pods not bound"


def scenario(name: str, why: str, *, nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
             bound: set[str], placements: Mapping[str, set[str]] | None = None) -> Scenario:
    return Scenario(name, why, tuple(nodes), tuple(pods), frozenset(bound),
                    {k: frozenset(v) for k, v in (placements or {}).items()})


SCENARIOS: list[Scenario] = [
    scenario(
        "resources",
        "cpu and memory requests against allocatable; what fits nowhere stays Pending",
        nodes=[node("small", cpu="1", memory="2Gi"), node("big", cpu="4", memory="8Gi")],
        pods=[
            pod("fits-big", cpu="3"),
            pod("too-much-cpu", cpu="8"),
            pod("too-much-memory", memory="16Gi"),
            pod("small", cpu="500m", memory="1Gi"),
            pod("no-requests"),
        ],
        bound={"fits-big", "small", "no-requests"},
        placements={"fits-big": {"big"}},
    ),
    scenario(
        "allocatable-below-capacity",
        "allocatable, not capacity, is what can be requested",
        nodes=[node("reserved", cpu="4", allocatable={"cpu": "2", "memory": "8Gi", "pods": "110"})],
        pods=[pod("three-cpus", cpu="3"), pod("two-cpus", cpu="2")],
        bound={"two-cpus"},
    ),
    scenario(
        "init-containers-and-sidecars",
        "the effective request: max(init containers, containers), sidecars counted with both",
        nodes=[node("n", cpu="2")],
        pods=[
            pod("big-init", containers=[container("main", cpu="500m")],
                init_containers=[container("init", cpu="3")]),
            pod("sidecar-too-much", containers=[container("main", cpu="1500m")],
                init_containers=[container("proxy", cpu="1", restart_policy="Always")]),
            pod("init-fits", containers=[container("main", cpu="1")],
                init_containers=[container("init", cpu="1500m")]),
        ],
        bound={"init-fits"},
    ),
    scenario(
        "extended-resources",
        "extended resources are counted per node like cpu",
        nodes=[node("gpu", extra_resources={GPU: "2"}), node("plain")],
        pods=[
            pod("two-gpus", containers=[container("main", extended={GPU: "2"})]),
            pod("one-more-gpu", containers=[container("main", extended={GPU: "1"})]),
            pod("three-gpus", containers=[container("main", extended={GPU: "3"})]),
            pod("cpu-only", cpu="100m"),
        ],
        bound={"two-gpus", "cpu-only"},
        placements={"two-gpus": {"gpu"}},
    ),
    scenario(
        "taints-and-tolerations",
        "NoSchedule and NoExecute taints keep out the pods that do not tolerate them",
        nodes=[
            node("db", taints=["dedicated=db:NoSchedule"]),
            node("draining", taints=["maintenance=true:NoExecute"]),
        ],
        pods=[
            pod("db-pod", tolerations=[tolerate("dedicated", value="db")]),
            pod("wrong-value", tolerations=[tolerate("dedicated", value="cache")]),
            pod("intolerant"),
            pod("maintenance", tolerations=[tolerate("maintenance", "NoExecute")]),
            pod("tolerates-all", tolerations=[{"operator": "Exists"}]),
        ],
        bound={"db-pod", "maintenance", "tolerates-all"},
        placements={"db-pod": {"db"}, "maintenance": {"draining"}},
    ),
    scenario(
        "node-selector-and-affinity",
        "nodeSelector and required node affinity (In, NotIn, Exists), preferences not binding",
        nodes=[
            node("zone-a", labels={"zone": "a"}),
            node("zone-b-ssd", labels={"zone": "b", "disk": "ssd"}),
            node("zone-c", labels={"zone": "c"}),
        ],
        pods=[
            pod("selector-b", node_selector={"zone": "b"}),
            pod("selector-nowhere", node_selector={"zone": "d"}),
            pod("in-a-or-c", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["a", "c"]}]}]}}}),
            pod("not-in-any-zone", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "zone", "operator": "NotIn", "values": ["a", "b", "c"]}]}]}}}),
            pod("needs-ssd", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "disk", "operator": "Exists"}]}]}}}),
            pod("prefers-gpu", affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [
                    {"key": "gpu", "operator": "Exists"}]}}]}}),
        ],
        bound={"selector-b", "in-a-or-c", "needs-ssd", "prefers-gpu"},
        placements={"selector-b": {"zone-b-ssd"}, "in-a-or-c": {"zone-a", "zone-c"},
                    "needs-ssd": {"zone-b-ssd"}},
    ),
    scenario(
        "cordoned-and-not-ready",
        "no new pods on a cordoned node (unless they tolerate the cordon) or a NotReady one",
        nodes=[
            node("cordoned", unschedulable=True),
            node("not-ready", ready=False),
            node("ok"),
        ],
        pods=[
            pod("to-cordoned", affinity=on_hosts("cordoned")),
            pod("to-not-ready", affinity=on_hosts("not-ready")),
            pod("tolerates-cordon", affinity=on_hosts("cordoned"),
                tolerations=[tolerate("node.kubernetes.io/unschedulable")]),
            pod("anywhere"),
        ],
        bound={"tolerates-cordon", "anywhere"},
        placements={"tolerates-cordon": {"cordoned"}, "anywhere": {"ok"}},
    ),
    scenario(
        "scheduling-gates",
        "a pod with scheduling gates is not scheduled",
        nodes=[node("n")],
        pods=[pod("gated", scheduling_gates=["example.com/quota"]), pod("free")],
        bound={"free"},
    ),
    scenario(
        "pod-count",
        "allocatable pods caps how many pods a node takes, first come first served",
        nodes=[node("two-slots", pods="2")],
        pods=[pod("first"), pod("second"), pod("third")],
        bound={"first", "second"},
    ),
]
