"""The scenarios of kube-scheduler v1.36.3's test/integration/scheduler/podgroup/podgroup_test.go,
as steps any scheduler can be run through (docs/gangs.md, "Acceptance list").

Each scenario runs in a namespace of its own on one node (`cpu: 4`, zone `zone1`): groups and
pods are created and deleted in order, and after each change the expected state is awaited:
members bound, members not bound (held before the queue: kube-scheduler writes nothing on them),
members unschedulable, some bound and some unschedulable, the group's `PodGroupScheduled`
condition, pods removed by preemption. The scenarios that need `WorkloadAwarePreemption` are
left out (alpha, off in the issue's side-by-side runs); their pod-by-pod counterparts are in.

`WEBHOOK_SCENARIOS` are the issue's webhook checks with Coscheduling's groups, for a stock
kube-scheduler: what it does alone (binds part of a gang), and what it must do with the
extender registered.

No pytest here: tests/e2e/test_podgroups.py runs these under kube-scheduler, and phase 2 runs
them under our standalone scheduler and with the webhook too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from extender.model.podgroups import (
    API_COSCHEDULING,
    API_V1ALPHA2,
    POD_GROUP_LABEL,
    SCHEDULED_CONDITION,
)
from tests.fakeapi.client import KubeTestClient

NODE = {"name": "node", "cpu": "4", "labels": {"topology.kubernetes.io/zone": "zone1"}}
PRIORITY_CLASSES = {"gang-100": 100, "gang-50": 50, "gang-10": 10, "gang-5": 5}
SETTLE = 30.0  # kube-scheduler's backoff reaches 10 s; two rounds and a margin
HELD_FOR = 3.0  # how long "held" members must stay unbound
PODGROUPS = "/apis/scheduling.k8s.io/v1alpha2/namespaces/{ns}/podgroups"

Step = tuple[Any, ...]


def gang(name: str, min_count: int, topology: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if topology:
        spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
    return {"apiVersion": API_V1ALPHA2, "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}


def basic(name: str) -> dict[str, Any]:
    return {"apiVersion": API_V1ALPHA2, "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"schedulingPolicy": {"basic": {}}}}


def member(name: str, group: str, priority: str = "gang-100", cpu: str = "1") -> dict[str, Any]:
    return {"name": name, "cpu": cpu, "priority": priority, "group": group}


def solo(name: str, cpu: str, priority: str = "gang-100") -> dict[str, Any]:
    return {"name": name, "cpu": cpu, "priority": priority, "group": None}


PG1, PG2, BASIC1 = gang("pg1", 3), gang("pg2", 3), basic("pg1")
P = [member(f"p{i}", "pg1") for i in range(1, 5)]
OTHER = [member(f"other-p{i}", "pg2") for i in range(1, 4)]
BLOCKER, SMALL_BLOCKER = solo("blocker", "2"), solo("small-blocker", "1")
LOW_BLOCKER = solo("low-priority-blocker", "2", "gang-10")
VERY_LOW = [solo(f"very-low-p{i}", "1", "gang-5") for i in (1, 2)]
LOW = [solo(f"low-p{i}", "1", "gang-10") for i in (1, 2)]
MID = [member(f"mid-p{i}", "mid-pg", "gang-50") for i in (1, 2)]


@dataclass(frozen=True)
class PodGroupScenario:
    name: str  # podgroup_test.go's name
    steps: tuple[Step, ...]
    needs_topology_gate: bool = False


SCENARIOS = [
    PodGroupScenario("gang schedules when pod group and resources are available", (
        ("group", PG1), ("pods", P[:3]), ("bound", "p1", "p2", "p3"), ("condition", "pg1", "True", "Scheduled"))),
    PodGroupScenario("gang waits for quorum to start, then schedules", (
        ("group", PG1), ("pods", P[:2]), ("held", "p1", "p2"), ("pods", P[2:3]), ("bound", "p1", "p2", "p3"))),
    PodGroupScenario("gang waits for pod group, then for resources, then schedules", (
        ("pods", [BLOCKER]), ("bound", "blocker"), ("pods", P[:3]), ("held", "p1", "p2", "p3"), ("group", PG1),
        ("unschedulable", "p1", "p2", "p3"), ("condition", "pg1", "False", "Unschedulable"),
        ("delete", "blocker"), ("bound", "p1", "p2", "p3"), ("condition", "pg1", "True", "Scheduled"))),
    PodGroupScenario("minCount is scheduled, but one pod from a gang remain unschedulable until the blocked "
                     "resources are released", (
        ("pods", [SMALL_BLOCKER]), ("bound", "small-blocker"), ("pods", P), ("group", PG1),
        ("some", ("p1", "p2", "p3", "p4"), 3, 1), ("delete", "small-blocker"), ("bound", "p1", "p2", "p3", "p4"))),
    PodGroupScenario("two gangs competing for the same resources shouldn't deadlock, reversed order", (
        ("group", PG1), ("group", PG2), ("pods", [OTHER[2], P[2], OTHER[1], P[1], OTHER[0], P[0]]),
        ("bound", "other-p1", "other-p2", "other-p3"), ("unschedulable", "p1", "p2", "p3"))),
    PodGroupScenario("two gangs competing for the same resources shouldn't deadlock", (
        ("group", PG1), ("group", PG2), ("pods", [P[0], OTHER[0], P[1], OTHER[1], P[2], OTHER[2]]),
        ("bound", "p1", "p2", "p3"), ("unschedulable", "other-p1", "other-p2", "other-p3"))),
    PodGroupScenario("gang schedules with preemption", (
        ("pods", [LOW_BLOCKER]), ("bound", "low-priority-blocker"), ("group", PG1), ("pods", P),
        ("bound", "p1", "p2", "p3", "p4"), ("condition", "pg1", "True", "Scheduled"),
        ("removed", "low-priority-blocker"))),
    PodGroupScenario("basic group schedules when pod group and resources are available, without gang enforcement", (
        ("group", BASIC1), ("pods", P[:1]), ("bound", "p1"), ("pods", P[1:3]), ("bound", "p1", "p2", "p3"))),
    PodGroupScenario("basic group waits for pod group, part of it waits for resources, then schedules", (
        ("pods", [BLOCKER]), ("bound", "blocker"), ("pods", P[:3]), ("held", "p1", "p2", "p3"), ("group", BASIC1),
        ("some", ("p1", "p2", "p3"), 2, 1), ("delete", "blocker"), ("bound", "p1", "p2", "p3"))),
    PodGroupScenario("basic group schedules with preemption", (
        ("pods", [LOW_BLOCKER]), ("bound", "low-priority-blocker"), ("group", BASIC1), ("pods", P),
        ("bound", "p1", "p2", "p3", "p4"), ("removed", "low-priority-blocker"))),
    PodGroupScenario("tas gang with constraint does not use pod by pod preemption", (
        ("pods", [*VERY_LOW, *LOW]), ("bound", "very-low-p1", "very-low-p2", "low-p1", "low-p2"),
        ("group", gang("mid-pg", 2, "topology.kubernetes.io/zone")), ("pods", MID),
        ("unschedulable", "mid-p1", "mid-p2")), needs_topology_gate=True),
]


# Webhook mode (docs/gangs.md): a stock kube-scheduler, Coscheduling's groups and labels. The
# steps under kube-scheduler alone are the baseline (members bound one by one: part of a gang);
# with the extender registered (phase 2) the same scenarios must bind all or none.
def cosched_group(name: str, min_member: int) -> dict[str, Any]:
    return {"apiVersion": API_COSCHEDULING, "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"minMember": min_member}}


def labelled(name: str, group: str, cpu: str = "1") -> dict[str, Any]:
    return {"name": name, "cpu": cpu, "priority": "gang-100", "group": None, "label": group}


COSCHEDULING_PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups"
JOB = [labelled(f"w{i}", "job") for i in range(1, 5)]
OTHER_JOB = [labelled(f"v{i}", "other-job") for i in range(1, 5)]


@dataclass(frozen=True)
class WebhookScenario:
    name: str  # the "How it is checked"
    node_cpu: str
    alone: tuple[Step, ...]  # a stock kube-scheduler by itself
    with_extender: tuple[Step, ...]  # the same with the extender registered (phase 2)


WEBHOOK_SCENARIOS = [
    WebhookScenario("a gang of 4 where only 3 fit binds none; room freed, all 4 bind", "4", (
        ("pods", [solo("blocker", "1")]), ("bound", "blocker"), ("cosched", cosched_group("job", 4)),
        ("pods", JOB), ("some", ("w1", "w2", "w3", "w4"), 3, 1)), (
        ("pods", [solo("blocker", "1")]), ("bound", "blocker"), ("cosched", cosched_group("job", 4)),
        ("pods", JOB), ("held", "w1", "w2", "w3", "w4"), ("delete", "blocker"), ("bound", "w1", "w2", "w3", "w4"))),
    WebhookScenario("two competing gangs end with one complete and no partial one", "6", (
        ("cosched", cosched_group("job", 4)), ("cosched", cosched_group("other-job", 4)),
        ("pods", [p for pair in zip(JOB, OTHER_JOB, strict=True) for p in pair]),
        ("bound_count", ("w1", "w2", "w3", "w4", "v1", "v2", "v3", "v4"), 6)), (
        ("cosched", cosched_group("job", 4)), ("cosched", cosched_group("other-job", 4)),
        ("pods", [p for pair in zip(JOB, OTHER_JOB, strict=True) for p in pair]),
        ("one_whole", ("w1", "w2", "w3", "w4"), ("v1", "v2", "v3", "v4")))),
]


def _pod_body(spec: Mapping[str, Any], scheduler_name: str) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {
        "schedulerName": scheduler_name, "priorityClassName": spec["priority"], "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": spec["cpu"]}}}],
    }
    metadata: dict[str, Any] = {"name": spec["name"]}
    if spec.get("label"):
        metadata["labels"] = {POD_GROUP_LABEL: spec["label"]}
    elif spec["group"]:
        pod_spec["schedulingGroup"] = {"podGroupName": spec["group"]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def _wait(what: str, check: Callable[[], bool], timeout: float = SETTLE) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.2)


def _pods(kube: KubeTestClient, namespace: str) -> dict[str, dict[str, Any]]:
    items = kube.call("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
    return {p["metadata"]["name"]: p for p in items}


def _unschedulable(pod: Mapping[str, Any] | None) -> bool:
    if pod is None or (pod.get("spec") or {}).get("nodeName"):
        return False
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _bound(pod: Mapping[str, Any] | None) -> bool:
    return bool(pod and (pod.get("spec") or {}).get("nodeName"))


def run(kube: KubeTestClient, scenario: PodGroupScenario, namespace: str, scheduler_name: str) -> None:
    """Run one scenario's steps; AssertionError names the step that did not happen."""
    kube.ensure_namespace(namespace)
    for name, value in PRIORITY_CLASSES.items():
        kube.ensure_priority_class(name, value)
    for index, step in enumerate(scenario.steps):
        _step(kube, namespace, scheduler_name, step, f"{scenario.name}, step {index} {step[0]} {step[1:]}")


def _step(kube: KubeTestClient, namespace: str, scheduler_name: str, step: Step, where: str) -> None:
    kind, args = step[0], step[1:]
    groups = PODGROUPS.format(ns=namespace)

    def pods() -> dict[str, dict[str, Any]]:
        return _pods(kube, namespace)

    if kind == "group":
        kube.call("POST", groups, args[0])
    elif kind == "pods":
        for spec in args[0]:
            kube.call("POST", f"/api/v1/namespaces/{namespace}/pods", _pod_body(spec, scheduler_name))
    elif kind == "delete":
        for name in args:
            kube.delete_pod(name, namespace, grace_period_seconds=0)
    elif kind == "bound":
        _wait(where, lambda: all(_bound(pods().get(n)) for n in args))
    elif kind == "unschedulable":
        _wait(where, lambda: all(_unschedulable(pods().get(n)) for n in args))
    elif kind == "held":
        time.sleep(HELD_FOR)
        assert not any(_bound(pods().get(n)) for n in args), where
    elif kind == "some":
        names, bound, unschedulable = args

        def counts() -> tuple[int, int]:
            now = pods()
            return sum(_bound(now.get(n)) for n in names), sum(_unschedulable(now.get(n)) for n in names)

        _wait(where, lambda: counts() == (bound, unschedulable))
    elif kind == "cosched":
        kube.call("POST", COSCHEDULING_PODGROUPS.format(ns=namespace), args[0])
    elif kind == "bound_count":
        names, count = args
        _wait(where, lambda: sum(_bound(pods().get(n)) for n in names) == count)
        time.sleep(HELD_FOR)
        assert sum(_bound(pods().get(n)) for n in names) == count, where
    elif kind == "one_whole":
        first, second = args

        def one_whole() -> bool:
            now = pods()
            bound = [sum(_bound(now.get(n)) for n in group) for group in (first, second)]
            return sorted(bound) == [0, len(first)]

        _wait(where, one_whole)
        time.sleep(HELD_FOR)
        assert one_whole(), where
    elif kind == "removed":
        _wait(where, lambda: not any(n in pods() for n in args))
    elif kind == "condition":
        group, status, reason = args

        def has_condition() -> bool:
            conditions = (kube.call("GET", f"{groups}/{group}").get("status") or {}).get("conditions") or []
            return any(c.get("type") == SCHEDULED_CONDITION and c.get("status") == status
                       and c.get("reason") == reason for c in conditions)

        _wait(where, has_condition)
    else:
        raise ValueError(f"unknown step {kind!r}")


def clean(kube: KubeTestClient, namespace: str) -> None:
    """Delete the scenario's pods at once and let its groups go (no controller drops their
    protection finalizer on a test control plane)."""
    for name in _pods(kube, namespace):
        kube.delete_pod(name, namespace, grace_period_seconds=0)
    for path in (PODGROUPS, COSCHEDULING_PODGROUPS):
        groups = path.format(ns=namespace)
        if kube.request("GET", groups).status_code != 200:
            continue  # that API is not served here
        for item in kube.call("GET", groups)["items"]:
            name = item["metadata"]["name"]
            kube.call("PATCH", f"{groups}/{name}", {"metadata": {"finalizers": None}},
                      content_type="application/merge-patch+json")
            kube.request("DELETE", f"{groups}/{name}")
    _wait(f"namespace {namespace} emptied", lambda: not _pods(kube, namespace))
