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

Pods given a ``node_name`` are bound at creation (running pods, for affinity or as
preemption victims; give victims ``spec={"terminationGracePeriodSeconds": 0}``, as no
kubelet finishes their deletion). ``priority_classes`` are created before the pods;
``deleted`` names the pods that must be gone at the end (preemption's victims);
``checks`` are invariants on the placements (distinct nodes, skew, co-location), each
returning a list of problems. ``storage(namespace)`` returns the storage objects to create
before the pods (claims in that namespace, volumes named after it: each scheduler's run
gets its own), with ``binds`` pairs (claim, volume) completed as the PV controller would.

Not here: a NotReady node with a pod tolerating the not-ready taint, a deliberate difference
(the standalone policy's NodeReady filter refuses NotReady nodes outright).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.storage_objects import claim, local_class, persistent_volume, storage_class

PAUSE = "registry.k8s.io/pause:3.10"


def claim_volume(name: str) -> dict[str, Any]:
    """A pod spec fragment mounting claim `name`."""
    return {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": name}}]}
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


# An invariant: (pod -> node of the bound pods, node -> its labels) -> the problems found.
Check = Callable[[Mapping[str, str], Mapping[str, Mapping[str, str]]], list[str]]
# Storage for one run: namespace -> (objects to create, (claim, volume) bindings to complete).
Storage = Callable[[str], tuple[list[dict[str, Any]], list[tuple[str, str]]]]


@dataclass(frozen=True)
class Scenario:
    name: str
    why: str
    nodes: tuple[dict[str, Any], ...]
    pods: tuple[dict[str, Any], ...]
    bound: frozenset[str]  # the pods that must end up bound; every other pod stays Pending
    placements: Mapping[str, frozenset[str]] = field(default_factory=dict)  # pod -> allowed nodes
    deleted: frozenset[str] = frozenset()  # pods that must be gone (preempted)
    priority_classes: Mapping[str, int | tuple[int, str]] = field(default_factory=dict)  # value[, policy]
    checks: tuple[Check, ...] = ()
    storage: Storage | None = None

    def __post_init__(self) -> None:
        names = [p["name"] for p in self.pods]
        assert len(set(names)) == len(names), f"{self.name}: duplicate pod names"
        assert self.bound <= set(names), f"{self.name}: bound names unknown pods"
        assert not self.bound & self.deleted, f"{self.name}: a pod cannot be both bound and deleted"
        assert set(self.placements) <= self.bound, f"{self.name}: placements for pods not bound"


def scenario(name: str, why: str, *, nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
             bound: set[str], placements: Mapping[str, set[str]] | None = None,
             deleted: frozenset[str] | set[str] = frozenset(),
             priority_classes: Mapping[str, int | tuple[int, str]] | None = None,
             checks: tuple[Check, ...] = (), storage: Storage | None = None) -> Scenario:
    return Scenario(name, why, tuple(nodes), tuple(pods), frozenset(bound),
                    {k: frozenset(v) for k, v in (placements or {}).items()}, frozenset(deleted),
                    dict(priority_classes or {}), checks, storage)


HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
GRACE_0 = {"terminationGracePeriodSeconds": 0}


def term(labels: Mapping[str, str], key: str = HOSTNAME) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": key}


def zone_spread(labels: Mapping[str, str], max_skew: int = 1) -> dict[str, Any]:
    return {"topologySpreadConstraints": [{"maxSkew": max_skew, "topologyKey": ZONE,
                                           "whenUnsatisfiable": "DoNotSchedule",
                                           "labelSelector": {"matchLabels": dict(labels)}}]}


def distinct_nodes(*names: str) -> Check:
    def check(bound: Mapping[str, str], nodes: Mapping[str, Mapping[str, str]]) -> list[str]:
        placed = [bound[n] for n in names if n in bound]
        return [] if len(placed) == len(set(placed)) else [f"{names} share nodes: {placed}"]
    return check


def same_node(*names: str) -> Check:
    def check(bound: Mapping[str, str], nodes: Mapping[str, Mapping[str, str]]) -> list[str]:
        placed = {bound.get(n) for n in names}
        return [] if len(placed) == 1 else [f"{names} not together: {placed}"]
    return check


def zone_skew(names: list[str], zones: list[str], max_skew: int) -> Check:
    def check(bound: Mapping[str, str], nodes: Mapping[str, Mapping[str, str]]) -> list[str]:
        counts = dict.fromkeys(zones, 0)
        for name in names:
            if name in bound:
                counts[nodes[bound[name]][ZONE]] += 1
        skew = max(counts.values()) - min(counts.values())
        return [] if skew <= max_skew else [f"zone skew {skew} > {max_skew}: {counts}"]
    return check


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
    # ---- inter-pod rules, host ports ------------------------------------------------------
    scenario(
        "anti-affinity-replicas",
        "4 replicas with required hostname anti-affinity on 3 nodes: 3 on distinct nodes, 1 Pending",
        nodes=[node("n1"), node("n2"), node("n3")],
        pods=[pod(f"web-{i}", labels={"app": "web"}, affinity={"podAntiAffinity": {REQUIRED: [term({"app": "web"})]}})
              for i in range(4)],
        bound={"web-0", "web-1", "web-2"},
        checks=(distinct_nodes("web-0", "web-1", "web-2"),),
    ),
    scenario(
        "affinity-to-a-running-pod",
        "pods with required affinity to a running db pod go to its node",
        nodes=[node("n1"), node("n2"), node("n3")],
        pods=[pod("db", labels={"app": "db"}, node_name="n2"),
              *(pod(f"web-{i}", labels={"app": "web"}, affinity={"podAffinity": {REQUIRED: [term({"app": "db"})]}})
                for i in range(2))],
        bound={"db", "web-0", "web-1"},
        placements={"web-0": {"n2"}, "web-1": {"n2"}},
    ),
    scenario(
        "first-pod-of-a-group",
        "a pod whose required affinity matches only its own labels is bound; the next joins it",
        nodes=[node("n1"), node("n2")],
        pods=[pod(f"cache-{i}", labels={"app": "cache"},
                  affinity={"podAffinity": {REQUIRED: [term({"app": "cache"})]}}) for i in range(2)],
        bound={"cache-0", "cache-1"},
        checks=(same_node("cache-0", "cache-1"),),
    ),
    scenario(
        "zone-spread",
        "7 pods, zone spread maxSkew 1, DoNotSchedule, 3 zones: all bound, 3/2/2",
        nodes=[node(f"{z}-0", labels={ZONE: z}) for z in "abc"],
        pods=[pod(f"web-{i}", labels={"app": "web"}, spec=zone_spread({"app": "web"})) for i in range(7)],
        bound={f"web-{i}" for i in range(7)},
        checks=(zone_skew([f"web-{i}" for i in range(7)], ["a", "b", "c"], 1),),
    ),
    scenario(
        "zone-spread-with-a-full-zone",
        "4 pods of 500m, zone spread maxSkew 1, zone b has room for one: 3 bound, 1 Pending",
        nodes=[node("a-0", cpu="2", labels={ZONE: "a"}), node("b-0", cpu="600m", labels={ZONE: "b"})],
        pods=[pod(f"web-{i}", cpu="500m", labels={"app": "web"}, spec=zone_spread({"app": "web"}))
              for i in range(4)],
        bound={"web-0", "web-1", "web-2"},
        checks=(zone_skew(["web-0", "web-1", "web-2"], ["a", "b"], 1),),
    ),
    scenario(
        "host-ports",
        "3 pods with hostPort 8080 on 2 nodes: 2 bound on different nodes, 1 Pending",
        nodes=[node("n1"), node("n2")],
        pods=[pod(f"agent-{i}", containers=[{"name": "agent", "image": PAUSE,
                                              "ports": [{"containerPort": 8080, "hostPort": 8080}]}])
              for i in range(3)],
        bound={"agent-0", "agent-1"},
        checks=(distinct_nodes("agent-0", "agent-1"),),
    ),
    # ---- volumes -------------------------------------------------------------------------------
    scenario(
        "missing-claim",
        "a pod whose PersistentVolumeClaim does not exist stays Pending",
        nodes=[node("n1"), node("n2")],
        pods=[pod("lost", spec=claim_volume("nope")), pod("plain")],
        bound={"plain"},
    ),
    scenario(
        "local-volume-pins-the-pod",
        "a claim bound to a local PersistentVolume pinned to one node takes its pod there",
        nodes=[node("n1"), node("n2"), node("n3")],
        pods=[pod("db", spec=claim_volume("data"))],
        bound={"db"},
        placements={"db": {"n2"}},
        storage=lambda ns: ([local_class(), persistent_volume(f"pv-{ns}", node="n2"), claim("data", namespace=ns)],
                            [("data", f"pv-{ns}")]),
    ),
    scenario(
        "unbound-immediate-claim",
        "an unbound claim of an Immediate class keeps its pod Pending (the PV controller binds it first)",
        nodes=[node("n1")],
        pods=[pod("waits", spec=claim_volume("now-data"))],
        bound=set(),
        storage=lambda ns: ([storage_class("now", mode="Immediate"), claim("now-data", namespace=ns, cls="now")],
                            []),
    ),
    # ---- priority and preemption ----------------------------------------------------------
    scenario(
        "preemption",
        "a 1500m pod of priority 100000 evicts a 1500m pod of priority 100 from a 2-cpu node",
        nodes=[node("n1", cpu="2")],
        pods=[pod("low", cpu="1500m", node_name="n1", priority_class_name="e2e-low", spec=GRACE_0),
              pod("high", cpu="1500m", priority_class_name="e2e-high")],
        bound={"high"},
        deleted={"low"},
        priority_classes={"e2e-low": 100, "e2e-high": 100000},
    ),
    scenario(
        "preemption-picks-the-cheapest-node",
        "the victim is the lowest-priority pod among the nodes where eviction helps",
        nodes=[node("n1", cpu="2"), node("n2", cpu="2")],
        pods=[pod("mid", cpu="1500m", node_name="n1", priority_class_name="e2e-mid", spec=GRACE_0),
              pod("low", cpu="1500m", node_name="n2", priority_class_name="e2e-low", spec=GRACE_0),
              pod("high", cpu="1500m", priority_class_name="e2e-high")],
        bound={"mid", "high"},
        deleted={"low"},
        placements={"high": {"n2"}},
        priority_classes={"e2e-low": 100, "e2e-mid": 1000, "e2e-high": 100000},
    ),
    scenario(
        "no-preemption-of-equal-priority",
        "pods of the same priority are never victims; preemptionPolicy Never never preempts",
        nodes=[node("n1", cpu="2")],
        pods=[pod("peer", cpu="1500m", node_name="n1", priority_class_name="e2e-high", spec=GRACE_0),
              pod("same", cpu="1500m", priority_class_name="e2e-high"),
              pod("polite", cpu="1500m", priority_class_name="e2e-high-never")],
        bound={"peer"},
        priority_classes={"e2e-high": 100000, "e2e-high-never": (200000, "Never")},
    ),
]
