"""End to end against the fake API server: placement, failure reports, gates, bind failures."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest

from extender import metrics
from extender.cluster.state import ClusterState
from extender.scheduler.queueing import SchedulingQueue
from tests.fakeapi import skip_unless_fake
from tests.fakeapi.patches import MERGE_PATCH
from tests.scheduler.conftest import SCHEDULER_NAME, RecordingBinder

pytestmark = pytest.mark.apiserver

BIND_FAULTS_FAKE_ONLY = (
    "a real kube-apiserver cannot be made to answer a bind with 500 or 429 on demand "
    "(the fake injects them); binds refused for real (409) run on both servers"
)
TOLERATE_DEDICATED = {"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}


def node_of(kube: Any, name: str, namespace: str = "default") -> str:
    return ((kube.get_pod(name, namespace) or {}).get("spec") or {}).get("nodeName") or ""


def wait_bound(kube: Any, name: str, timeout: float = 10.0) -> str:
    return kube.wait_for(lambda: node_of(kube, name), timeout=timeout, message=f"pod {name} bound")


def events_for(kube: Any, name: str, reason: str) -> list[dict[str, Any]]:
    return kube.list_events("default", reason=reason, involved_name=name)


def pod_scheduled(kube: Any, name: str) -> dict[str, Any]:
    conditions = ((kube.get_pod(name) or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "PodScheduled"), {})


def our_binding_posts(apiserver: Any, scheduler: Any, name: str) -> int:
    """Binds of `name` the scheduler attempted: its binder's record, and on the fake also the
    Binding POSTs the server received from us (the test client has another User-Agent)."""
    attempts = scheduler.binder.attempts_for(name)
    if apiserver.fake is not None:
        posts = sum(1 for r in apiserver.fake.requests_matching("POST", rf"/pods/{name}/binding$")
                    if r.headers.get("user-agent", "").startswith("extender/"))
        assert posts == attempts, (posts, attempts)
    return attempts


def counter_value(counter: Any, **labels: str) -> float:
    return counter.labels(**labels)._value.get()  # type: ignore[no-any-return]


def test_resources_pick_the_only_fitting_node(kube: Any, make_scheduler: Any) -> None:
    kube.create_node("small-1", cpu="1")
    kube.create_node("small-2", cpu="1")
    kube.create_node("big", cpu="8")
    make_scheduler()
    kube.create_pod("wide", cpu="4", scheduler_name=SCHEDULER_NAME)
    assert wait_bound(kube, "wide") == "big"
    scheduled = kube.wait_for(lambda: events_for(kube, "wide", "Scheduled"), message="Scheduled event")
    assert scheduled[0]["message"] == "Successfully assigned default/wide to big"


def test_a_pod_whose_status_lost_its_phase_is_still_scheduled(kube: Any, make_scheduler: Any) -> None:
    """kube-scheduler's informer selects unfinished pods, not Pending ones: a pod whose status was
    replaced without a phase (scheduler_perf's EventHandlingPodUpdate does it) is scheduled too."""
    kube.create_node("n1", cpu="2")
    kube.create_pod("phaseless", cpu="100m", scheduler_name=SCHEDULER_NAME)
    patched = kube.patch_pod("phaseless", {"status": {"phase": None}}, status_subresource=True,
                             content_type=MERGE_PATCH)
    assert not patched.get("status", {}).get("phase")
    make_scheduler()
    assert wait_bound(kube, "phaseless") == "n1"


def test_taints_and_node_selector_pick_the_only_right_node(kube: Any, make_scheduler: Any) -> None:
    kube.create_node("zone-a", labels={"zone": "a"})
    kube.create_node("zone-b-db", labels={"zone": "b"}, taints=["dedicated=db:NoSchedule"])
    kube.create_node("zone-b", labels={"zone": "b"})
    kube.create_node("zone-b-cordoned", labels={"zone": "b"}, unschedulable=True)
    kube.create_node("zone-b-notready", labels={"zone": "b"}, ready=False)
    make_scheduler()
    kube.create_pod("web", scheduler_name=SCHEDULER_NAME, node_selector={"zone": "b"})
    kube.create_pod("db", scheduler_name=SCHEDULER_NAME, tolerations=[TOLERATE_DEDICATED],
                    affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["zone-b-db"]}]}]}}})
    assert wait_bound(kube, "web") == "zone-b"
    assert wait_bound(kube, "db") == "zone-b-db"


def test_other_schedulers_pods_are_left_alone(apiserver: Any, kube: Any, make_scheduler: Any) -> None:
    kube.create_node("n1")
    scheduler = make_scheduler()
    kube.create_pod("theirs")  # default-scheduler
    kube.create_pod("ours", scheduler_name=SCHEDULER_NAME)
    wait_bound(kube, "ours")
    time.sleep(0.3)
    assert node_of(kube, "theirs") == ""
    assert our_binding_posts(apiserver, scheduler, "theirs") == 0


def test_many_pods_spread_evenly(kube: Any, make_scheduler: Any) -> None:
    for i in range(4):
        kube.create_node(f"n{i}", cpu="4", memory="8Gi")
    for i in range(20):
        kube.create_pod(f"p{i}", cpu="100m", memory="128Mi", scheduler_name=SCHEDULER_NAME)
    make_scheduler()
    placed = Counter(wait_bound(kube, f"p{i}") for i in range(20))
    assert sorted(placed.values()) == [5, 5, 5, 5], placed


def test_capacity_is_never_overcommitted(kube: Any, make_scheduler: Any) -> None:
    kube.create_node("n1", cpu="2")
    kube.create_node("n2", cpu="2")
    for i in range(6):
        kube.create_pod(f"p{i}", cpu="1", scheduler_name=SCHEDULER_NAME)
    make_scheduler()
    kube.wait_for(lambda: sum(1 for i in range(6) if node_of(kube, f"p{i}")) == 4, message="4 pods bound")
    kube.wait_for(lambda: len(events_for(kube, "p5", "FailedScheduling")) + len(
        events_for(kube, "p4", "FailedScheduling")) >= 2, message="two pods reported unschedulable")
    placed = Counter(node_of(kube, f"p{i}") for i in range(6))
    assert placed == {"n1": 2, "n2": 2, "": 2}


def test_unschedulable_pod_is_reported_then_bound_when_a_node_arrives(
        apiserver: Any, kube: Any, make_scheduler: Any) -> None:
    kube.create_node("n1", cpu="1")
    kube.create_node("n2", cpu="1")
    scheduler = make_scheduler()
    kube.create_pod("big", cpu="2", scheduler_name=SCHEDULER_NAME)
    expected = ("0/2 nodes are available: 2 Insufficient cpu. "
                "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
    failed = kube.wait_for(lambda: events_for(kube, "big", "FailedScheduling"), message="FailedScheduling")
    assert failed[0]["message"] == expected
    assert failed[0]["type"] == "Warning"
    condition = kube.wait_for(lambda: pod_scheduled(kube, "big"), message="PodScheduled condition")
    assert (condition["status"], condition["reason"], condition["message"]) == ("False", "Unschedulable", expected)

    # Past its 1 s backoff the pod waits for a cluster change instead of retrying in a loop.
    time.sleep(1.5)
    assert len(events_for(kube, "big", "FailedScheduling")) == 1

    added = time.monotonic()
    kube.create_node("n3", cpu="4")
    assert wait_bound(kube, "big", timeout=5) == "n3"
    assert time.monotonic() - added < 3, "retry should follow the node event, not the 10 s max backoff"
    assert our_binding_posts(apiserver, scheduler, "big") == 1


def test_uncordoning_a_node_retries_waiting_pods(kube: Any, make_scheduler: Any) -> None:
    kube.create_node("n1", unschedulable=True)
    make_scheduler()
    kube.create_pod("p", scheduler_name=SCHEDULER_NAME)
    failed = kube.wait_for(lambda: events_for(kube, "p", "FailedScheduling"), message="FailedScheduling")
    assert failed[0]["message"] == ("0/1 nodes are available: 1 node(s) were unschedulable. "
                                    "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")
    kube.cordon_node("n1", unschedulable=False)
    assert wait_bound(kube, "p", timeout=5) == "n1"


def test_pod_tolerating_the_cordon_is_bound_to_a_cordoned_node(kube: Any, make_scheduler: Any) -> None:
    """As kube-scheduler does (DaemonSet pods carry this toleration). The policy let such a
    pod through but the bind-time check refused the cordoned node, so the pod was retried
    forever; found by tests/e2e/test_side_by_side.py against kube-scheduler."""
    kube.create_node("cordoned", unschedulable=True)
    make_scheduler()
    kube.create_pod("daemon", scheduler_name=SCHEDULER_NAME, tolerations=[
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}])
    kube.create_pod("plain", scheduler_name=SCHEDULER_NAME)
    assert wait_bound(kube, "daemon") == "cordoned"
    kube.wait_for(lambda: events_for(kube, "plain", "FailedScheduling"), message="plain refused")
    assert node_of(kube, "plain") == ""


def test_gated_pod_is_left_alone_until_its_gates_are_removed(
        apiserver: Any, kube: Any, make_scheduler: Any) -> None:
    kube.create_node("n1")
    scheduler = make_scheduler()
    kube.create_pod("gated", scheduler_name=SCHEDULER_NAME, scheduling_gates=["example.com/quota"])
    kube.create_pod("free", scheduler_name=SCHEDULER_NAME)
    wait_bound(kube, "free")
    kube.wait_for(lambda: scheduler.queue.where("default/gated") == "gated", message="gated pod queued")
    # A gated pod may wait for days: kube-apiserver's managedFields (which the fake does not
    # stamp) are not kept with it.
    queued = scheduler.queue.get("default/gated")
    assert queued is not None and "managedFields" not in queued.pod.raw["metadata"]
    time.sleep(0.5)
    assert node_of(kube, "gated") == ""
    assert our_binding_posts(apiserver, scheduler, "gated") == 0
    assert events_for(kube, "gated", "FailedScheduling") == []

    kube.patch_pod("gated", {"spec": {"schedulingGates": []}}, content_type="application/merge-patch+json")
    assert wait_bound(kube, "gated", timeout=5) == "n1"


def test_deleted_pending_pod_leaves_the_queue(kube: Any, make_scheduler: Any) -> None:
    kube.create_node("n1", cpu="1")
    scheduler = make_scheduler()
    kube.create_pod("doomed", cpu="2", scheduler_name=SCHEDULER_NAME)
    kube.wait_for(lambda: scheduler.queue.where("default/doomed") == "unschedulable", message="unschedulable")
    kube.delete_pod("doomed", grace_period_seconds=0)
    kube.wait_for(lambda: "default/doomed" not in scheduler.queue, message="pod left the queue")


def test_bind_conflict_is_dropped_without_retry(apiserver: Any, kube: Any, make_scheduler: Any,
                                                api_client: Any) -> None:
    kube.create_node("n1")
    kube.create_node("n2")
    state = ClusterState()
    # The scheduler's bind of "racer" waits in its binder (a real race, on either server).
    binder = RecordingBinder(api_client, state, hold=["racer"])
    scheduler = make_scheduler(queue=SchedulingQueue(initial_backoff=0.1, max_backoff=0.5),
                               state=state, binder=binder)
    before = counter_value(metrics.BIND_ERRORS, reason="already-bound")
    kube.create_pod("racer", scheduler_name=SCHEDULER_NAME)
    assert binder.waiting["racer"].wait(10), "the scheduler never tried to bind"
    assert "default/racer" in scheduler.state.assumed_keys()
    reply = kube.bind_pod("racer", "n2")  # someone else binds it first
    assert reply.status_code == 201, reply.text
    binder.release("racer")
    kube.wait_for(lambda: counter_value(metrics.BIND_ERRORS, reason="already-bound") == before + 1,
                  message="conflict counted")
    time.sleep(1.0)  # several backoff periods: a retry loop would show up here
    assert our_binding_posts(apiserver, scheduler, "racer") == 1
    assert binder.bound == []
    if apiserver.fake is not None:
        assert apiserver.fake.binding_count("default", "racer") == 1
    assert "default/racer" not in scheduler.state.assumed_keys()
    assert "default/racer" not in scheduler.queue
    kube.wait_for(lambda: (scheduler.state.pod("default/racer") or None) is not None
                  and scheduler.state.pod("default/racer").node_name == "n2", message="state follows the watch")
    assert node_of(kube, "racer") == "n2"


@pytest.mark.parametrize("statuses", [(500,), (429,), (500, 429)])
def test_bind_server_errors_are_retried_with_backoff(
        apiserver: Any, kube: Any, make_scheduler: Any, statuses: tuple[int, ...]) -> None:
    fake = skip_unless_fake(apiserver, BIND_FAULTS_FAKE_ONLY)
    kube.create_node("n1")
    scheduler = make_scheduler(queue=SchedulingQueue(initial_backoff=0.2, max_backoff=1.0))
    for status in statuses:
        fake.fail_next(1, status=status, path_regex=r"/pods/flaky/binding$", method="POST")
    started = time.monotonic()
    kube.create_pod("flaky", scheduler_name=SCHEDULER_NAME)
    assert wait_bound(kube, "flaky") == "n1"
    assert our_binding_posts(apiserver, scheduler, "flaky") == len(statuses) + 1
    assert fake.binding_count("default", "flaky") == 1
    # Backoff 0.2 s, then 0.4 s: the retries were spaced, not immediate.
    assert time.monotonic() - started >= sum(0.2 * 2 ** i for i in range(len(statuses))) * 0.9
    failures = events_for(kube, "flaky", "FailedScheduling")
    assert failures and all("Binding rejected" in e["message"] for e in failures)


def test_node_that_vanished_before_the_bind_is_not_used(kube: Any, make_scheduler: Any) -> None:
    from extender.scheduler.bind_pool import node_problem

    kube.create_node("n1")
    kube.create_node("n2", ready=False)
    scheduler = make_scheduler()
    assert node_problem(scheduler.state, "n1") == ""
    assert node_problem(scheduler.state, "n2") == "node n2 is not Ready"
    assert node_problem(scheduler.state, "gone") == "node gone no longer exists"
    kube.cordon_node("n1")
    kube.wait_for(lambda: node_problem(scheduler.state, "n1") == "node n1 is cordoned", message="cordon seen")


def test_status_patches_do_not_cause_retries(apiserver: Any, kube: Any, make_scheduler: Any) -> None:
    kube.create_node("n1", cpu="1")
    scheduler = make_scheduler()
    kube.create_pod("stuck", cpu="2", scheduler_name=SCHEDULER_NAME)
    kube.wait_for(lambda: pod_scheduled(kube, "stuck"), message="PodScheduled condition")
    time.sleep(2.5)  # past two backoff periods
    assert len(events_for(kube, "stuck", "FailedScheduling")) == 1
    assert scheduler.queue.where("default/stuck") == "unschedulable"


def test_a_bound_pod_resized_down_retries_the_pods_it_crowded_out_at_once(kube: Any, make_scheduler: Any) -> None:
    """kube-scheduler's NodeResourcesFit queues the pods it refused when a pod on a node is scaled
    down in place (the `resize` subresource; scheduler_perf's EventHandlingPodUpdate): without that
    hint the waiting pod would wait for the 5-minute flush of the unschedulable queue."""
    kube.create_node("n1", cpu="2", memory="4Gi")
    kube.create_pod("blocker", memory="3Gi", node_name="n1")
    make_scheduler()
    kube.create_pod("waiting", memory="2Gi", scheduler_name=SCHEDULER_NAME)
    kube.wait_for(lambda: pod_scheduled(kube, "waiting").get("reason") == "Unschedulable",
                  message="waiting reported Unschedulable")
    blocker = kube.get_pod("blocker")
    blocker["spec"]["containers"][0]["resources"]["requests"]["memory"] = "1Gi"
    resized = kube.call("PUT", "/api/v1/namespaces/default/pods/blocker/resize", blocker)
    assert resized["spec"]["containers"][0]["resources"]["requests"]["memory"] == "1Gi"
    assert wait_bound(kube, "waiting", timeout=10) == "n1"
