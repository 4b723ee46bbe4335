"""A node's status.declaredFeatures changing lets the pods NodeDeclaredFeatures refused retry.

kube-scheduler v1.36.3 turns such an update into its UpdateNodeDeclaredFeature event, which
only NodeDeclaredFeatures registers for; before this, a status patch that changed nothing but
declaredFeatures left the standalone scheduler's node signature equal, so no pod moved.
"""

from __future__ import annotations

from typing import Any

from extender.cluster.state import ClusterState
from extender.scheduler.queueing import ACTIVE, UNSCHEDULABLE, SchedulingQueue
from extender.scheduler.standalone import Scheduler
from tests.helpers import Clock
from tests.policy.builders import node_dict
from tests.scheduler.conftest import standalone_profile
from tests.scheduler.test_queueing import PROFILE, refused


def _node(features: list[str] | None = None, **kwargs: Any) -> dict[str, Any]:
    raw = node_dict("n1", **kwargs)
    if features is not None:
        raw["status"]["declaredFeatures"] = features
    return raw


def _waiting() -> tuple[SchedulingQueue, ClusterState]:
    """A scheduler's queue and state with node n1 known and two pods unschedulable, one refused
    by NodeDeclaredFeatures and one by ResourceFit, past their backoff."""
    clock = Clock(1000.0)
    queue = SchedulingQueue(clock=clock, publish_metrics=False)
    state = ClusterState()
    scheduler = Scheduler(None, [standalone_profile(PROFILE)], state=state, queue=queue, binder=object())
    state.listeners.add(scheduler._on_cluster_event)  # what start() does, without the threads
    state.upsert_node(_node())
    refused(queue, {"needs-feature": "NodeDeclaredFeatures", "too-big": "ResourceFit"})
    clock.now += 60
    return queue, state


def test_a_declared_features_change_moves_the_pods_it_may_help() -> None:
    queue, state = _waiting()
    state.upsert_node(_node())  # a heartbeat: nothing a pod could use
    assert queue.where("default/needs-feature") == UNSCHEDULABLE
    state.upsert_node(_node(["RestartAllContainersOnContainerExits"]))
    assert queue.where("default/needs-feature") == ACTIVE
    assert queue.where("default/too-big") == UNSCHEDULABLE  # only NodeDeclaredFeatures registers the event
    state.upsert_node(_node([]))  # features withdrawn: a change too
    assert queue.where("default/too-big") == UNSCHEDULABLE


def test_other_changes_still_move_every_pod() -> None:
    queue, state = _waiting()
    state.upsert_node(_node(["A"], cpu="8"))  # allocatable and features at once
    assert queue.where("default/too-big") == ACTIVE
    assert queue.where("default/needs-feature") == ACTIVE
