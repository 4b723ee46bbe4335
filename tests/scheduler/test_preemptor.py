"""Preemption by the standalone scheduler through the API server (fake or real).

Victims run on nodes without a kubelet, so they get terminationGracePeriodSeconds 0:
their deletion completes at once, as the kubelet would finish it.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from extender import metrics
from tests.scheduler.conftest import SCHEDULER_NAME

pytestmark = pytest.mark.apiserver

GRACE_0 = {"terminationGracePeriodSeconds": 0}


def node_of(kube: Any, name: str) -> str:
    return ((kube.get_pod(name) or {}).get("spec") or {}).get("nodeName") or ""


def counter(metric: Any, **labels: str) -> float:
    return metric.labels(**labels)._value.get()  # type: ignore[no-any-return]


@pytest.fixture
def classes(kube: Any) -> None:
    kube.ensure_priority_class("extender-test-low", 100)
    kube.ensure_priority_class("extender-test-mid", 1000)
    kube.ensure_priority_class("extender-test-high", 100000)
    kube.ensure_priority_class("extender-test-high-never", 100000, preemption_policy="Never")


def low_pod(kube: Any, name: str, node: str, cpu: str = "1500m", cls: str = "extender-test-low",
            labels: dict[str, str] | None = None) -> dict[str, Any]:
    return kube.create_pod(name, cpu=cpu, node_name=node, priority_class_name=cls, labels=labels, spec=GRACE_0)


def nominate_over_a_held_victim(kube: Any, make_scheduler: Any) -> str:
    """A high-priority pod preempts "low" on n1, whose finalizer keeps it visible after its
    deletion (as a slow kubelet would): the node the preemptor is nominated for."""
    kube.create_node("n1", cpu="2")
    kube.create_pod("low", cpu="1500m", node_name="n1", priority_class_name="extender-test-low",
                    finalizers=["example.com/hold"], spec=GRACE_0)
    make_scheduler()
    kube.create_pod("high", cpu="1500m", scheduler_name=SCHEDULER_NAME, priority_class_name="extender-test-high")
    return kube.wait_for(lambda: (kube.get_pod("high") or {}).get("status", {}).get("nominatedNodeName"),
                         timeout=20, message="nominatedNodeName set")


def test_a_high_priority_pod_evicts_a_low_priority_one(kube: Any, make_scheduler: Any, classes: None) -> None:
    kube.create_node("n1", cpu="2")
    victim_uid = low_pod(kube, "low", "n1")["metadata"]["uid"]
    attempts = counter(metrics.PREEMPTION_ATTEMPTS, result="nominated")
    make_scheduler()
    kube.create_pod("high", cpu="1500m", scheduler_name=SCHEDULER_NAME, priority_class_name="extender-test-high")
    assert kube.wait_for(lambda: node_of(kube, "high"), timeout=20, message="preemptor bound") == "n1"
    assert kube.get_pod("low") is None
    preempted = kube.wait_for(lambda: kube.list_events("default", reason="Preempted", involved_name="low"),
                              message="Preempted event on the victim")
    uid = kube.get_pod("high")["metadata"]["uid"]
    assert preempted[0]["message"] == f"Preempted by pod {uid} on node n1"
    assert preempted[0]["involvedObject"]["uid"] == victim_uid
    failed = kube.list_events("default", reason="FailedScheduling", involved_name="high")
    assert failed and failed[0]["message"].startswith("0/1 nodes are available: 1 Insufficient cpu.")
    assert counter(metrics.PREEMPTION_ATTEMPTS, result="nominated") == attempts + 1


def test_the_victim_is_marked_and_the_preemptor_nominated(apiserver: Any, kube: Any, make_scheduler: Any,
                                                        classes: None) -> None:
    assert nominate_over_a_held_victim(kube, make_scheduler) == "n1"
    low = kube.wait_for(lambda: (lambda p: p if p["metadata"].get("deletionTimestamp") else None)(
        kube.get_pod("low")), message="victim being deleted")
    target = [c for c in low["status"].get("conditions") or [] if c["type"] == "DisruptionTarget"]
    assert target and target[0]["status"] == "True" and target[0]["reason"] == "PreemptionByScheduler"
    assert target[0]["message"] == f"{SCHEDULER_NAME}: preempting to accommodate a higher priority pod"
    assert node_of(kube, "high") == ""  # the victim still holds the room
    kube.patch_pod("low", {"metadata": {"finalizers": None}}, content_type="application/merge-patch+json")
    assert kube.wait_for(lambda: node_of(kube, "high"), timeout=20, message="preemptor bound") == "n1"


def test_preemption_policy_never_waits(kube: Any, make_scheduler: Any, classes: None) -> None:
    kube.create_node("n1", cpu="2")
    low_pod(kube, "low", "n1")
    make_scheduler()
    kube.create_pod("polite", cpu="1500m", scheduler_name=SCHEDULER_NAME,
                    priority_class_name="extender-test-high-never")
    events = kube.wait_for(lambda: kube.list_events("default", reason="FailedScheduling", involved_name="polite"),
                           message="FailedScheduling")
    assert "preemption: not eligible due to preemptionPolicy=Never." in events[0]["message"]
    assert kube.get_pod("low") is not None and node_of(kube, "polite") == ""


def test_pods_of_equal_priority_are_never_evicted(kube: Any, make_scheduler: Any, classes: None) -> None:
    kube.create_node("n1", cpu="2")
    low_pod(kube, "peer", "n1", cls="extender-test-high")
    make_scheduler()
    kube.create_pod("same", cpu="1500m", scheduler_name=SCHEDULER_NAME, priority_class_name="extender-test-high")
    events = kube.wait_for(lambda: kube.list_events("default", reason="FailedScheduling", involved_name="same"),
                           message="FailedScheduling")
    assert events[0]["message"] == ("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are "
                                    "available: 1 No preemption victims found for incoming pod.")
    assert kube.get_pod("peer") is not None


def test_the_node_with_the_least_important_victims_is_chosen(kube: Any, make_scheduler: Any,
                                                             classes: None) -> None:
    kube.create_node("n1", cpu="2")
    kube.create_node("n2", cpu="2")
    low_pod(kube, "mid", "n1", cls="extender-test-mid")
    low_pod(kube, "low", "n2", cls="extender-test-low")
    make_scheduler()
    kube.create_pod("high", cpu="1500m", scheduler_name=SCHEDULER_NAME, priority_class_name="extender-test-high")
    assert kube.wait_for(lambda: node_of(kube, "high"), timeout=20, message="preemptor bound") == "n2"
    assert kube.get_pod("mid") is not None and kube.get_pod("low") is None


def test_a_budget_protected_pod_is_spared_when_another_node_will_do(kube: Any, make_scheduler: Any,
                                                                     classes: None) -> None:
    kube.create_node("n1", cpu="2")
    kube.create_node("n2", cpu="2")
    low_pod(kube, "guarded", "n1", labels={"app": "db"})
    low_pod(kube, "spare", "n2", cls="extender-test-mid", labels={"app": "web"})
    kube.create_pdb("db", {"app": "db"}, disruptions_allowed=0)
    make_scheduler()
    kube.create_pod("high", cpu="1500m", scheduler_name=SCHEDULER_NAME, priority_class_name="extender-test-high")
    assert kube.wait_for(lambda: node_of(kube, "high"), timeout=20, message="preemptor bound") == "n2"
    assert kube.get_pod("guarded") is not None


def test_a_nominated_node_is_not_taken_by_a_lower_priority_pod(kube: Any, make_scheduler: Any,
                                                               classes: None) -> None:
    nominate_over_a_held_victim(kube, make_scheduler)
    kube.patch_pod("low", {"metadata": {"finalizers": None}}, content_type="application/merge-patch+json")
    kube.create_pod("sneaky", cpu="1", scheduler_name=SCHEDULER_NAME, priority_class_name="extender-test-mid")
    assert kube.wait_for(lambda: node_of(kube, "high"), timeout=20, message="preemptor bound") == "n1"
    assert node_of(kube, "sneaky") == ""


def test_a_failed_eviction_is_counted_and_retried_not_looped(apiserver: Any, kube: Any, make_scheduler: Any,
                                                             classes: None) -> None:
    from tests.fakeapi import skip_unless_fake

    fake = skip_unless_fake(apiserver, "refuses the eviction twice with 403 on demand (the fake's fail_next)")
    kube.create_node("n1", cpu="2")
    low_pod(kube, "low", "n1")
    failed = counter(metrics.PREEMPTION_VICTIMS, outcome="failed")
    fake.fail_next(2, status=403, path_regex=r"/pods/low$", method="DELETE")
    make_scheduler()
    kube.create_pod("high", cpu="1500m", scheduler_name=SCHEDULER_NAME, priority_class_name="extender-test-high")
    assert kube.wait_for(lambda: node_of(kube, "high"), timeout=30, message="preemptor bound") == "n1"
    assert counter(metrics.PREEMPTION_VICTIMS, outcome="failed") == failed + 2
    deletes = fake.requests_matching("DELETE", r"/pods/low$")
    assert len(deletes) == 3  # two refused, retried after the backoff, then done


def test_the_preemptor_is_not_tried_again_while_its_victims_are_evicted(monkeypatch: pytest.MonkeyPatch) -> None:
    """kube-scheduler's async preemption gates the preemptor until its eviction calls end: a
    cycle in between finds the victims still there and would preempt again, elsewhere."""
    import threading

    from extender.policy.defaults import default_policy
    from extender.policy.engine import Engine
    from extender.scheduler import preemptor as preemptor_module
    from extender.scheduler.preemptor import Preemptor
    from extender.scheduler.queueing import ACTIVE, GATED, SchedulingQueue
    from tests.helpers import Clock
    from tests.policy.builders import cluster_state, incoming, node_dict, placed

    release = threading.Event()
    monkeypatch.setattr(preemptor_module.evicting, "mark_disruption_target", lambda *a: release.wait(10) or True)
    monkeypatch.setattr(preemptor_module.evicting, "delete_pod", lambda *a: True)
    monkeypatch.setattr(preemptor_module, "post_event", lambda *a, **k: None)
    state = cluster_state([node_dict("n1", cpu="2")], [placed("low", "n1", cpu="1500m", priority=1)])
    state.nominator.tracking = True
    clock = Clock(1000.0)
    queue = SchedulingQueue(clock=clock, publish_metrics=False)
    preemptor = Preemptor(object(), state, queue, workers=1)
    queue.preempting = preemptor.running
    engine = Engine(default_policy("standalone"))
    queue.add(incoming("high", cpu="1500m", priority=1000), SCHEDULER_NAME)
    entry = queue.pop(timeout=0)
    assert entry is not None
    outcome, nominated = preemptor.attempt(entry, engine, engine.filter(entry.pod, state.all_node_infos(), state))
    assert nominated == "n1" and outcome.candidate is not None
    try:
        queue.requeue_unschedulable(entry)
        queue.move_all("pod-deleted")
        clock.advance(2.0)  # past its backoff
        assert queue.pop(timeout=0) is None and queue.where(entry.key) == GATED
    finally:
        release.set()
    deadline = time.monotonic() + 10
    while queue.where(entry.key) != ACTIVE and time.monotonic() < deadline:
        time.sleep(0.01)
    preemptor.close()
    assert queue.where(entry.key) == ACTIVE and not preemptor.running(entry.pod)
