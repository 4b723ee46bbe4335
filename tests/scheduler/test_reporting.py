"""Reporting without an API server: repeated identical failures are not re-posted."""

from __future__ import annotations

from typing import Any

from extender.model.pods import PodView
from extender.policy.decisions import Decision
from extender.policy.status import unschedulable
from extender.scheduler.queueing import QueuedPod
from extender.scheduler.reporting import Reporter
from tests.helpers import Clock


def entry(uid: str = "u1") -> QueuedPod:
    view = PodView.from_dict({"metadata": {"name": "p", "namespace": "default", "uid": uid},
                              "spec": {"schedulerName": "s", "containers": [{"name": "c"}]}})
    return QueuedPod(view, "s", 0.0)


def decision(pod: PodView, nodes: int) -> Decision:
    result = Decision(pod=pod, total=nodes)
    for i in range(nodes):
        result.failed[f"n{i}"] = unschedulable("Insufficient cpu")
    return result


class Recorder(Reporter):
    def __init__(self, **options: Any) -> None:
        super().__init__(None, **options)
        self.posted: list[str] = []

    def _submit(self, fn: Any, *args: Any) -> None:
        self.posted.append(args[1])


def test_identical_failures_are_posted_once_a_minute() -> None:
    clock = Clock(0.0)
    reporter = Recorder(clock=clock)
    queued = entry()
    for _ in range(3):
        reporter.unschedulable(queued, decision(queued.pod, 2), duration=0.001)
    assert reporter.posted == ["0/2 nodes are available: 2 Insufficient cpu."]
    reporter.unschedulable(queued, decision(queued.pod, 3), duration=0.001)  # the cluster changed
    assert len(reporter.posted) == 2
    clock.now += 61
    reporter.unschedulable(queued, decision(queued.pod, 3), duration=0.001)
    assert len(reporter.posted) == 3
    assert reporter.repeats_skipped == 2


def test_a_recreated_pod_is_reported_again() -> None:
    reporter = Recorder(clock=Clock(0.0))
    first, second = entry("u1"), entry("u2")
    reporter.unschedulable(first, decision(first.pod, 1), duration=0.0)
    reporter.unschedulable(second, decision(second.pod, 1), duration=0.0)
    assert len(reporter.posted) == 2
