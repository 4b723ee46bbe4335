"""The scheduling queue: order, backoff, moves on cluster events, gates, de-duplication."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from extender.model.pods import PodView
from extender.scheduler.queueing import (
    ACTIVE,
    BACKOFF,
    GATED,
    IN_FLIGHT,
    UNSCHEDULABLE,
    QueuedPod,
    SchedulingQueue,
    backoff_seconds,
)
from tests.helpers import Clock

PROFILE = "extender-scheduler"


def pod(name: str, *, priority: int = 0, created: str = "2024-01-01T00:00:00Z", uid: str = "",
        gates: tuple[str, ...] = (), labels: dict[str, str] | None = None) -> PodView:
    spec: dict[str, Any] = {"schedulerName": PROFILE, "priority": priority, "containers": [{"name": "c"}]}
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return PodView.from_dict({
        "metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}",
                     "creationTimestamp": created, "labels": labels or {}},
        "spec": spec,
    })


@pytest.fixture
def clock() -> Clock:
    return Clock(1000.0)


@pytest.fixture
def queue(clock: Clock) -> SchedulingQueue:
    return SchedulingQueue(clock=clock, publish_metrics=False)


def popped(queue: SchedulingQueue, name: str) -> QueuedPod:
    """Add pod ``name`` and pop it, as the scheduling cycle would (it is then in flight)."""
    queue.add(pod(name), PROFILE)
    entry = queue.pop(timeout=0)
    assert entry is not None and entry.pod.name == name
    return entry


def refused(queue: SchedulingQueue, refusals: dict[str, str]) -> None:
    """Each pod named added, popped and refused by its plugin: unschedulable, waiting for an event."""
    for name, plugin in refusals.items():
        queue.add(pod(name), PROFILE)
        entry = queue.pop(timeout=0)
        assert entry is not None
        entry.rejected_by = frozenset({plugin})
        queue.requeue_unschedulable(entry)


def names(queue: SchedulingQueue) -> list[str]:
    popped = []
    while (entry := queue.pop(timeout=0)) is not None:
        popped.append(entry.pod.name)
    return popped


def test_priority_first_then_age(queue: SchedulingQueue) -> None:
    queue.add(pod("old-low", created="2024-01-01T00:00:00Z"), PROFILE)
    queue.add(pod("new-high", priority=100, created="2024-01-03T00:00:00Z"), PROFILE)
    queue.add(pod("new-low", created="2024-01-02T00:00:00Z"), PROFILE)
    queue.add(pod("old-high", priority=100, created="2024-01-01T00:00:00Z"), PROFILE)
    assert names(queue) == ["old-high", "new-high", "old-low", "new-low"]


def test_duplicate_adds_keep_one_entry(queue: SchedulingQueue) -> None:
    for _ in range(3):
        queue.add(pod("a"), PROFILE)
    assert len(queue) == 1
    assert names(queue) == ["a"]
    assert queue.pop(timeout=0) is None


def test_priority_update_reorders(queue: SchedulingQueue) -> None:
    queue.add(pod("a", created="2024-01-01T00:00:00Z"), PROFILE)
    queue.add(pod("b", created="2024-01-02T00:00:00Z"), PROFILE)
    queue.add(pod("b", priority=5, created="2024-01-02T00:00:00Z"), PROFILE)
    assert names(queue) == ["b", "a"]


def test_backoff_doubles_to_ten_seconds() -> None:
    assert [backoff_seconds(n) for n in range(1, 8)] == [1, 2, 4, 8, 10, 10, 10]


def test_backoff_waits_with_the_clock(queue: SchedulingQueue, clock: Clock) -> None:
    queue.add(pod("a"), PROFILE)
    for expected in (1, 2, 4, 8, 10, 10):
        entry = queue.pop(timeout=0)
        assert entry is not None
        queue.requeue_backoff(entry)
        assert queue.where(entry.key) == BACKOFF
        clock.now += expected - 0.01
        assert queue.pop(timeout=0) is None, f"popped before its {expected} s backoff"
        clock.now += 0.02
    assert queue.pop(timeout=0) is not None


def test_unschedulable_waits_for_an_event(queue: SchedulingQueue, clock: Clock) -> None:
    entry = popped(queue, "a")
    queue.requeue_unschedulable(entry)
    clock.now += 60  # long past the backoff: still waiting, nothing changed in the cluster
    assert queue.pop(timeout=0) is None
    assert queue.where(entry.key) == UNSCHEDULABLE
    assert queue.move_all("node-added") == 1
    assert queue.pop(timeout=0) is entry


def test_move_respects_the_remaining_backoff_while_other_pods_are_active(queue: SchedulingQueue,
                                                                         clock: Clock) -> None:
    entry = popped(queue, "a")
    queue.requeue_unschedulable(entry)
    queue.move_all("node-added")
    assert queue.where(entry.key) == BACKOFF
    queue.add(pod("b"), PROFILE)
    assert queue.pop(timeout=0).pod.name == "b"  # active first: a still backs off
    clock.now += 1.01
    assert queue.pop(timeout=0) is entry


def test_an_idle_loop_pops_the_refused_pod_whose_backoff_ends_first(queue: SchedulingQueue, clock: Clock) -> None:
    """kube-scheduler's SchedulerPopFromBackoffQ: nothing active, so a backing-off pod is tried now."""
    first, second = popped(queue, "a"), popped(queue, "b")
    queue.requeue_unschedulable(second)
    clock.now += 0.5
    queue.requeue_unschedulable(first)
    queue.move_all("node-added")
    assert [queue.where(e.key) for e in (first, second)] == [BACKOFF, BACKOFF]
    assert queue.pop(timeout=0) is second and queue.pop(timeout=0) is first


def test_a_pod_backing_off_after_an_error_waits_its_backoff_out(queue: SchedulingQueue, clock: Clock) -> None:
    entry = popped(queue, "a")
    queue.requeue_backoff(entry)
    assert queue.pop(timeout=0) is None
    clock.now += 1.01
    assert queue.pop(timeout=0) is entry


def test_event_during_the_attempt_is_not_lost(queue: SchedulingQueue, clock: Clock) -> None:
    entry = popped(queue, "a")
    queue.move_all("node-added")  # arrives while the pod is being scheduled
    queue.requeue_unschedulable(entry)
    assert queue.where(entry.key) == BACKOFF  # retried after its backoff, no new event needed


def test_a_retry_asked_during_the_attempt_is_not_lost(queue: SchedulingQueue, clock: Clock) -> None:
    """An eviction fails in the background before the cycle that started it has requeued the pod."""
    entry = popped(queue, "a")
    queue.retry(entry.key)  # the pod is still in flight
    queue.requeue_unschedulable(entry)
    assert queue.where(entry.key) == BACKOFF
    clock.now += 1.01
    assert queue.pop(timeout=0) is entry
    queue.requeue_unschedulable(entry)  # the request was for one attempt, not for ever
    assert queue.where(entry.key) == UNSCHEDULABLE


def test_hinted_moves_only_wake_pods_the_named_plugins_refused(queue: SchedulingQueue, clock: Clock) -> None:
    queue.add(pod("affine"), PROFILE)
    queue.add(pod("big"), PROFILE)
    for entry, plugin in zip([queue.pop(timeout=0), queue.pop(timeout=0)], ["InterPodAffinity", "ResourceFit"],
                             strict=True):
        entry.rejected_by = frozenset({plugin})
        queue.requeue_unschedulable(entry)
    clock.now += 60
    assert queue.move_all("pod-added", rejected_by=frozenset({"InterPodAffinity", "PodTopologySpread"})) == 1
    assert queue.where("default/affine") == ACTIVE and queue.where("default/big") == UNSCHEDULABLE


def test_a_hinted_event_during_the_attempt_is_not_lost_for_the_pods_it_concerns(
        queue: SchedulingQueue, clock: Clock) -> None:
    queue.add(pod("affine"), PROFILE)
    queue.add(pod("big"), PROFILE)
    affine, big = queue.pop(timeout=0), queue.pop(timeout=0)
    queue.move_all("pod-added", rejected_by=frozenset({"InterPodAffinity"}))
    affine.rejected_by, big.rejected_by = frozenset({"InterPodAffinity"}), frozenset({"ResourceFit"})
    queue.requeue_unschedulable(affine)
    queue.requeue_unschedulable(big)
    assert queue.where("default/affine") == BACKOFF and queue.where("default/big") == UNSCHEDULABLE


def test_unschedulable_pods_are_retried_eventually(clock: Clock) -> None:
    queue = SchedulingQueue(clock=clock, max_unschedulable_seconds=30, publish_metrics=False)
    entry = popped(queue, "a")
    queue.requeue_unschedulable(entry)
    clock.now += 31
    assert queue.pop(timeout=0) is entry


def test_status_only_update_does_not_move(queue: SchedulingQueue, clock: Clock) -> None:
    entry = popped(queue, "a")
    queue.requeue_unschedulable(entry)
    clock.now += 5
    queue.add(pod("a"), PROFILE)  # e.g. our own PodScheduled=False patch
    assert queue.where(entry.key) == UNSCHEDULABLE
    queue.add(pod("a", labels={"changed": "yes"}), PROFILE)
    assert queue.where(entry.key) == ACTIVE


def test_gated_pods_are_held_until_the_gates_go(queue: SchedulingQueue) -> None:
    queue.add(pod("gated", gates=("example.com/wait",)), PROFILE)
    assert queue.where("default/gated") == GATED
    assert queue.pop(timeout=0) is None
    queue.move_all("node-added")
    assert queue.pop(timeout=0) is None
    queue.add(pod("gated"), PROFILE)
    assert [e for e in names(queue)] == ["gated"]


def test_recreated_pod_replaces_the_old_one(queue: SchedulingQueue) -> None:
    queue.add(pod("a", uid="one"), PROFILE)
    entry = queue.pop(timeout=0)
    assert entry is not None
    queue.add(pod("a", uid="two"), PROFILE)  # deleted and created again while in flight
    queue.requeue_backoff(entry)  # the old attempt's outcome must not requeue the old pod
    fresh = queue.pop(timeout=0)
    assert fresh is not None and fresh.uid == "two" and fresh.attempts == 1
    assert queue.depth()[IN_FLIGHT] == 1


def test_delete_while_in_flight_drops_on_outcome(queue: SchedulingQueue) -> None:
    entry = popped(queue, "a")
    queue.delete(entry.key)
    queue.requeue_backoff(entry)
    assert len(queue) == 0
    assert queue.depth() == {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0, IN_FLIGHT: 0}


def test_sync_drops_pods_missing_from_a_relist(queue: SchedulingQueue) -> None:
    queue.add(pod("a"), PROFILE)
    queue.add(pod("b"), PROFILE)
    queue.add(pod("other"), "another-scheduler")
    queue.sync(PROFILE, ["default/b"])
    assert sorted(names(queue)) == ["b", "other"]


def test_give_back_does_not_count_the_attempt(queue: SchedulingQueue) -> None:
    queue.add(pod("a"), PROFILE)
    entry = queue.pop(timeout=0)
    assert entry is not None and entry.attempts == 1
    queue.give_back(entry)
    again = queue.pop(timeout=0)
    assert again is entry and entry.attempts == 1


def test_pop_blocks_until_a_pod_arrives() -> None:
    queue = SchedulingQueue(publish_metrics=False)
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(queue.pop(timeout=5)))
    waiter.start()
    queue.add(pod("late"), PROFILE)
    waiter.join(5)
    assert got and got[0].pod.name == "late"


def test_close_wakes_poppers() -> None:
    queue = SchedulingQueue(publish_metrics=False)
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(queue.pop(timeout=5)))
    waiter.start()
    queue.close()
    waiter.join(5)
    assert got == [None]


def test_a_pod_running_preemption_waits_gated_until_ungated(queue: SchedulingQueue, clock: Clock) -> None:
    """DefaultPreemption's PreEnqueue: a cluster event during the evictions does not bring the
    preemptor back for a cycle that would find its victims still there."""
    evicting: set[str] = set()
    queue.preempting = lambda p: p.key in evicting
    entry = popped(queue, "high")
    evicting.add(entry.key)  # the attempt preempted: its evictions start
    queue.requeue_unschedulable(entry)
    queue.move_all("pod-deleted")  # one victim gone, the others not yet
    clock.advance(20)  # past its backoff
    assert queue.pop(timeout=0) is None
    assert queue.where("default/high") == GATED
    evicting.clear()  # the evictions ended
    assert queue.ungate(["default/high"]) == 1
    assert names(queue) == ["high"]
