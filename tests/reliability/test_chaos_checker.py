"""The chaos checker (bench/chaos/checker.py) on synthetic histories: each violation it must
find, planted in an otherwise clean run, and a clean run in which it must find none."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from bench.chaos.checker import CHECKS, FaultRecord, PodEvent, Run, Violation, check
from extender.model.devices import ASSIGNMENT_ANNOTATION, INVENTORY_ANNOTATION

ZONE = "topology.kubernetes.io/zone"
NS = "chaos"


def node(name: str, zone: str, cpu: str = "4", pods: str = "10", extra: Mapping[str, str] | None = None,
         gpus: int = 0) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"kubernetes.io/hostname": name, ZONE: zone}}
    if gpus:
        meta["annotations"] = {INVENTORY_ANNOTATION: json.dumps({"version": 1, "devices": [
            {"id": f"GPU-{i}", "memory": 16000, "cores": 100} for i in range(gpus)]})}
    allocatable = {"cpu": cpu, "memory": "16Gi", "pods": pods, **(extra or {})}
    return {"metadata": meta, "status": {"allocatable": allocatable}}


NODES = [node("a-0", "a", extra={"example.com/fpga": "1"}), node("b-0", "b"), node("c-0", "c", gpus=1)]


def pod(name: str, node_name: str = "", *, cpu: str = "100m", labels: Mapping[str, str] | None = None,
        spec: Mapping[str, Any] | None = None, extra: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None, uid: str = "") -> dict[str, Any]:
    requests = {"cpu": cpu, **(extra or {})}
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": NS, "uid": uid or f"uid-{name}", "labels": dict(labels or {}),
                     "annotations": dict(annotations or {})},
        "spec": {"containers": [{"name": "main", "resources": {"requests": requests, "limits": dict(extra or {})}}],
                 **(spec or {})},
        "status": {"phase": "Pending"},
    }
    if node_name:
        body["spec"]["nodeName"] = node_name
    return body


class History:
    """A pod watch written by hand: create, bind, delete, one second apart."""

    def __init__(self) -> None:
        self.events: list[PodEvent] = []
        self.pods: dict[str, dict[str, Any]] = {}
        self.clock = 0.0

    def _add(self, kind: str, body: dict[str, Any]) -> None:
        self.clock += 1.0
        self.events.append(PodEvent(self.clock, kind, json.loads(json.dumps(body))))

    def create(self, body: dict[str, Any]) -> History:
        self.pods[body["metadata"]["name"]] = body
        self._add("ADDED", body)
        return self

    def bind(self, name: str, node_name: str, annotations: Mapping[str, str] | None = None) -> History:
        body = self.pods[name]
        body["spec"]["nodeName"] = node_name
        body["metadata"]["annotations"].update(annotations or {})
        self._add("MODIFIED", body)
        return self

    def place(self, body: dict[str, Any], node_name: str, annotations: Mapping[str, str] | None = None) -> History:
        return self.create(body).bind(body["metadata"]["name"], node_name, annotations)

    def delete(self, name: str) -> History:
        self._add("DELETED", self.pods.pop(name))
        return self

    def run(self, **overrides: Any) -> Run:
        fields: dict[str, Any] = {"events": self.events, "nodes": NODES, "pods": list(self.pods.values()),
                                  "final_at": self.clock + 100.0, "pending_grace": 30.0}
        fields.update(overrides)
        return Run(**fields)


def gpu_share(node_name: str, memory: int, cores: int) -> dict[str, str]:
    return {ASSIGNMENT_ANNOTATION: json.dumps(
        {"node": node_name, "containers": {"main": [{"id": "GPU-0", "memory": memory, "cores": cores}]}})}


def anti(app: str) -> dict[str, Any]:
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}]}}}


def spread(app: str) -> dict[str, Any]:
    return {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                           "labelSelector": {"matchLabels": {"app": app}}}]}


def claim(name: str, volume: str = "") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NS}, "spec": {"volumeName": volume} if volume else {}}


def local_volume(name: str, node_name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name]}]}]}}}}


def with_claim(name: str) -> dict[str, Any]:
    return {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": name}}]}


def scheduled(name: str, node_name: str, count: int = 1) -> dict[str, Any]:
    return {"reason": "Scheduled", "count": count, "message": f"Successfully assigned {NS}/{name} to {node_name}",
            "involvedObject": {"namespace": NS, "name": name, "uid": f"uid-{name}"}}


def preempted(victim: str, preemptor_uid: str, node_name: str) -> dict[str, Any]:
    return {"reason": "Preempted", "message": f"Preempted by pod {preemptor_uid} on node {node_name}",
            "involvedObject": {"namespace": NS, "name": victim, "uid": f"uid-{victim}"}}


def clean() -> tuple[History, dict[str, Any]]:
    """A busy but correct run: every feature used right, deletions, a preemption that worked."""
    h = History()
    h.place(pod("web-0", cpu="1500m"), "a-0").place(pod("web-1", cpu="1500m"), "a-0")
    h.place(pod("fpga", extra={"example.com/fpga": "1"}), "a-0")
    h.place(pod("gpu-0", extra={"extender.example/gpu-memory": "8000"}), "c-0", gpu_share("c-0", 8000, 50))
    h.place(pod("gpu-1", extra={"extender.example/gpu-memory": "8000"}), "c-0", gpu_share("c-0", 8000, 50))
    for i, where in enumerate(("a-0", "b-0", "c-0")):
        h.place(pod(f"anti-{i}", labels={"app": "anti"}, spec=anti("anti")), where)
    for i, where in enumerate(("a-0", "b-0", "c-0", "a-0")):
        h.place(pod(f"spread-{i}", labels={"app": "spread"}, spec=spread("spread")), where)
    h.place(pod("db", spec=with_claim("data")), "b-0")
    h.place(pod("low", cpu="3"), "b-0")
    h.create(pod("high", cpu="3", uid="uid-high")).delete("low").bind("high", "b-0")
    h.create(pod("big", cpu="64"))  # fits nowhere: Pending is right
    h.delete("web-1").place(pod("web-2", cpu="1500m"), "a-0")  # room freed, then taken
    extra = {"claims": [claim("data", "pv-b")], "volumes": [local_volume("pv-b", "b-0")],
             "kube_events": [scheduled("web-0", "a-0"), scheduled("db", "b-0"), preempted("low", "uid-high", "b-0")],
             "faults": [FaultRecord("etcd-restart", 1.0, 5.0, 7.0)],
             "fits": lambda p: ""}
    return h, extra


def kinds(found: list[Violation]) -> list[str]:
    return sorted(v.kind for v in found)


def test_a_clean_run_has_no_violation() -> None:
    h, extra = clean()
    assert check(h.run(**extra)) == []


def test_moved() -> None:
    h, extra = clean()
    h.bind("web-0", "b-0")
    found = check(h.run(**extra))
    assert kinds(found) == ["moved"] and found[0].subject == f"{NS}/web-0"


def test_bound_twice_from_events() -> None:
    h, extra = clean()
    extra["kube_events"] = [*extra["kube_events"], scheduled("web-0", "b-0")]
    assert kinds(check(h.run(**extra))) == ["bound-twice"]
    extra["kube_events"] = [scheduled("db", "b-0", count=2)]  # an aggregated Event counts its repeats
    assert kinds(check(h.run(**extra))) == ["bound-twice"]


@pytest.mark.parametrize("body, where, resource", [
    (pod("extra-cpu", cpu="1"), "a-0", "cpu"),
    (pod("second-fpga", extra={"example.com/fpga": "1"}), "a-0", "example.com/fpga"),
    (pod("no-fpga-here", extra={"example.com/fpga": "1"}), "b-0", "example.com/fpga"),
])
def test_over_allocatable(body: dict[str, Any], where: str, resource: str) -> None:
    h, extra = clean()
    h.place(body, where)
    found = check(h.run(**extra))
    assert kinds(found) == ["over-allocatable"] and found[0].detail.startswith(resource + ":")


def test_over_allocatable_pods_and_transient() -> None:
    h = History()
    for i in range(11):
        h.place(pod(f"p{i}", cpu="0"), "b-0")
    for i in range(11):  # all gone at the end: the moment still counts
        h.delete(f"p{i}")
    found = check(h.run())
    assert kinds(found) == ["over-allocatable"] and found[0].detail.startswith("pods: 11 requested > 10")


def test_gpu_over_shares() -> None:
    h, extra = clean()
    h.place(pod("gpu-2", extra={"extender.example/gpu-memory": "1000"}), "c-0", gpu_share("c-0", 1000, 0))
    found = check(h.run(**extra))
    assert kinds(found) == ["gpu-over-shares"] and found[0].subject == "c-0/GPU-0"


def test_anti_affinity_both_ways() -> None:
    h, extra = clean()
    h.place(pod("anti-3", labels={"app": "anti"}, spec=anti("anti")), "b-0")
    assert kinds(check(h.run(**extra))) == ["anti-affinity"]
    h, extra = clean()  # a pod without terms, selected by an existing pod's term
    h.place(pod("intruder", labels={"app": "anti"}), "c-0")
    assert kinds(check(h.run(**extra))) == ["anti-affinity"]


def test_spread() -> None:
    h, extra = clean()
    h.place(pod("spread-4", labels={"app": "spread"}, spec=spread("spread")), "a-0")  # a=3, b=1, c=1
    found = check(h.run(**extra))
    assert kinds(found) == ["spread"] and "skew 2 > maxSkew 1" in found[0].detail


def test_spread_counts_a_pod_deleted_just_before_the_bind() -> None:
    """A scheduler may have decided before a deletion it could not know of: no violation."""
    h, extra = clean()
    h.delete("spread-1")  # b was 1, now 0; a has 2
    h.place(pod("spread-4", labels={"app": "spread"}, spec=spread("spread")), "c-0")  # c: 1 -> 2, b: 0
    assert check(h.run(**extra)) == []
    assert kinds(check(h.run(**extra, spread_slack=0.0))) == ["spread"]


def test_spread_counts_a_pod_bound_just_after() -> None:
    """Pods a scheduler placed together may be bound in any order: no violation."""
    h, extra = clean()
    for i, where in ((4, "a-0"), (5, "b-0"), (6, "c-0")):  # a=3 before b and c follow: skew 2 for a moment
        h.place(pod(f"spread-{i}", labels={"app": "spread"}, spec=spread("spread")), where)
    assert check(h.run(**extra)) == []
    assert kinds(check(h.run(**extra, spread_slack=0.0))) == ["spread"]


def test_claim_on_another_node_or_unbound() -> None:
    h, extra = clean()
    extra["volumes"] = [local_volume("pv-b", "c-0")]
    assert kinds(check(h.run(**extra))) == ["claim-elsewhere"]
    extra["claims"] = [claim("data")]
    assert kinds(check(h.run(**extra))) == ["claim-unbound"]


NATIVE = {"schedulingGroup": {"podGroupName": "train"}}  # kube-scheduler v1.36's PodGroup member
COSCHEDULING = {"scheduling.x-k8s.io/pod-group": "job"}  # Coscheduling's member label


def gang(h: History, bound: int, members: int, *, native: bool = True) -> History:
    """A gang's `members` created, the first `bound` of them bound, one per node in turn."""
    for i in range(members):
        body = pod(f"train-{i}", spec=NATIVE) if native else pod(f"job-{i}", labels=COSCHEDULING)
        h.create(body)
    for i in range(bound):
        h.bind(f"train-{i}" if native else f"job-{i}", ("a-0", "b-0", "c-0")[i % 3])
    return h


@pytest.mark.parametrize("native", [True, False], ids=["v1alpha2", "coscheduling"])
def test_gang_partly_bound_at_the_end(native: bool) -> None:
    group = f"{NS}/train" if native else f"{NS}/job"
    h, extra = clean()
    gang(h, bound=2, members=4, native=native)  # minCount 3: two bound is a violation
    found = check(h.run(**extra, pod_groups={group: 3}))
    assert kinds(found) == ["gang-partly-bound"] and found[0].subject == group
    assert "at the end, 2 of 3" in found[0].detail
    h, extra = clean()
    gang(h, bound=3, members=4, native=native)  # the quorum bound, the extra member Pending: fine
    assert check(h.run(**extra, pod_groups={group: 3})) == []
    h, extra = clean()
    gang(h, bound=0, members=4, native=native)  # none bound: all or nothing holds
    assert check(h.run(**extra, pod_groups={group: 3})) == []
    h, extra = clean()
    gang(h, bound=1, members=3, native=native)  # minCount unknown: every member counts
    assert kinds(check(h.run(**extra))) == ["gang-partly-bound"]


def test_gang_partly_bound_for_too_long_during_the_run() -> None:
    groups = {f"{NS}/train": 3}
    h, extra = clean()
    gang(h, bound=2, members=3)
    started = h.clock - 1.0  # the first bind
    h.clock += 40.0  # 40 s with two of three bound, no fault: more than gang_settle (15 s)
    h.bind("train-2", "c-0")
    found = check(h.run(**extra, pod_groups=groups))
    assert kinds(found) == ["gang-partly-bound"] and found[0].at == started
    # Faults under way for all but 10 s of the spell (a bind cut by one, retried after): fine.
    cut = [FaultRecord("apiserver-restart", started + 1.0, started + 20.0, started + 21.0),
           FaultRecord("etcd-compaction", started + 23.0, started + 23.0, started + 35.0)]
    assert check(h.run(**{**extra, "faults": cut}, pod_groups=groups)) == []
    assert kinds(check(h.run(**{**extra, "faults": cut[:1]}, pod_groups=groups))) == ["gang-partly-bound"]
    assert kinds(check(h.run(**extra, pod_groups=groups, gang_settle=60.0))) == []


def test_a_gang_the_workload_deletes_is_not_partly_bound_meanwhile() -> None:
    h, extra = clean()
    gang(h, bound=3, members=3)
    h.delete("train-0")
    h.clock += 100.0  # the other deletions wait for the API server: still not a violation
    h.delete("train-1").delete("train-2")
    deleted = frozenset({"uid-train-0", "uid-train-1", "uid-train-2"})
    assert check(h.run(**extra, pod_groups={f"{NS}/train": 3}, workload_deleted=deleted)) == []
    # Deleted by someone else (an eviction): the gang was left partly bound.
    assert kinds(check(h.run(**extra, pod_groups={f"{NS}/train": 3}))) == ["gang-partly-bound"]
    # Partly bound for 40 s before the workload deleted it: the spell up to then counts.
    h, extra = clean()
    gang(h, bound=2, members=3)
    h.clock += 40.0
    h.delete("train-0").delete("train-1").delete("train-2")
    found = check(h.run(**extra, pod_groups={f"{NS}/train": 3}, workload_deleted=deleted))
    assert kinds(found) == ["gang-partly-bound"]


def test_a_pending_gang_is_judged_whole() -> None:
    h, extra = clean()
    gang(h, bound=0, members=4)  # minCount 3; each member alone fits, only two together
    extra["fits"] = lambda p: "b-0" if p["metadata"]["name"].startswith("train") else ""
    groups = {f"{NS}/train": 3}
    assert check(h.run(**extra, pod_groups=groups, fits_together=lambda pods: 2)) == []
    found = check(h.run(**extra, pod_groups=groups, fits_together=lambda pods: 3))
    assert kinds(found) == ["pending-but-fits"] and found[0].subject == f"{NS}/train"
    h, extra = clean()
    gang(h, bound=3, members=4)  # the quorum bound: the extra member is judged alone
    extra["fits"] = lambda p: "b-0" if p["metadata"]["name"] == "train-3" else ""
    found = check(h.run(**extra, pod_groups=groups, fits_together=lambda pods: 0))
    assert kinds(found) == ["pending-but-fits"] and found[0].subject == f"{NS}/train-3"


def test_pending_but_fits_after_the_grace() -> None:
    h, extra = clean()
    extra["fits"] = lambda p: "b-0" if p["metadata"]["name"] == "big" else ""
    found = check(h.run(**extra))
    assert kinds(found) == ["pending-but-fits"] and found[0].subject == f"{NS}/big"
    # Within the grace after the last fault: not yet a violation.
    late_fault = FaultRecord("apiserver-restart", h.clock, h.clock + 80.0, h.clock + 81.0)
    assert check(h.run(**{**extra, "faults": [late_fault]})) == []


def test_victim_evicted_for_a_preemptor_that_never_bound() -> None:
    h, extra = clean()
    h.place(pod("low-2", cpu="1"), "c-0").create(pod("high-2", cpu="4", uid="uid-high-2")).delete("low-2")
    extra["kube_events"] = [*extra["kube_events"], preempted("low-2", "uid-high-2", "c-0")]
    found = check(h.run(**extra))
    assert kinds(found) == ["victim-for-nothing"] and f"{NS}/high-2" in found[0].detail
    # The workload deleting the preemptor itself excuses it.
    assert check(h.run(**extra, workload_deleted=frozenset({"uid-high-2"}))) == []


def test_process_not_back_and_fault_not_recovered() -> None:
    h, extra = clean()
    extra["processes_down"] = ["webhook: master exited, no replacement after 60 s"]
    extra["faults"] = [*extra["faults"], FaultRecord("leader-sigkill", 10.0, 10.0, None, "probes unbound")]
    found = check(h.run(**extra))
    assert kinds(found) == ["no-recovery", "process-not-back"]
    assert found[0].subject == "webhook"


def test_every_check_is_exercised_here() -> None:
    """A check added to CHECKS needs a planted violation in this file too (the DRA ones:
    test_chaos_dra_checker.py)."""
    assert set(CHECKS) - {"device-twice", "device-over-capacity", "counters-over", "dra-pod-claims",
                          "settled-claims", "tainted-device-allocated"} == {"moved", "bound-twice", "over-allocatable", "gpu-over-shares", "anti-affinity",
                           "spread", "claims", "gangs", "pending-but-fits", "victims", "processes", "recovery"}
