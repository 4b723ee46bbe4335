"""One declaration per watched keyed kind (cluster/kinds.py) gives it everything: its store in
the cluster state, its reflector, its RBAC rule, its place in a snapshot, and the events the
plugins that registered for it hear. A kind added the way docs/architecture.md's recipe says
must need nothing else in the adapters: this test declares one and follows it through."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from extender.checks.permissions import MODES, Permission, required_permissions
from extender.cluster import kinds, listeners
from extender.cluster.snapshot import Snapshot, load_into
from extender.cluster.state import ClusterState
from extender.kube.client import api_client_for
from extender.kube.source import KubeSource
from extender.model.fields import as_object, object_name
from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy import enqueue
from extender.policy.engine import Engine, Policy
from extender.scheduler.profiles import Profile
from extender.scheduler.queueing import ACTIVE, UNSCHEDULABLE, SchedulingQueue
from extender.scheduler.standalone import Scheduler
from tests.helpers import Clock
from tests.scheduler.test_queueing import PROFILE, refused

PRIORITY_CLASSES = "priorityclasses"


def _value(raw: Mapping[str, Any]) -> tuple[str, int]:
    meta = as_object(raw.get("metadata"), "metadata")
    return object_name(meta), int(raw.get("value", 0))


CLASSES = kinds.WatchedKind("PriorityClass", PRIORITY_CLASSES, "scheduling.k8s.io", "v1", False, _value,
                            "priority_classes", frozenset({kinds.STANDALONE}), "read priority classes",
                            event=PRIORITY_CLASSES)


@pytest.fixture
def declared(monkeypatch: pytest.MonkeyPatch) -> Iterator[kinds.WatchedKind[int]]:
    """PriorityClass declared beside the built-in keyed kinds, as the recipe adds one."""
    monkeypatch.setattr(kinds, "KINDS", (*kinds.KINDS, CLASSES))
    monkeypatch.setattr(kinds, "BY_RESOURCE", {**kinds.BY_RESOURCE, PRIORITY_CLASSES: CLASSES})
    yield CLASSES


class _ClassFilter:
    """A filter that reads priority classes and registers for their changes."""

    name = "ClassFilter"

    def filter(self, pod: PodView, node: NodeInfo) -> str:
        return "no class"

    def events_to_register(self) -> Sequence[enqueue.EventHint]:
        return (enqueue.on(PRIORITY_CLASSES),)


def test_the_declared_modes_are_the_modes_that_have_permissions() -> None:
    assert set().union(*(kind.modes for kind in kinds.KINDS)) <= set(MODES)
    assert {kind.path for kind in kinds.KINDS} == {"/api/v1/namespaces", "/apis/policy/v1/poddisruptionbudgets"}


def test_a_declared_kind_gets_its_store_reflector_rule_and_snapshot_place(declared: kinds.WatchedKind[int]) -> None:
    state = ClusterState()
    changes: list[Any] = []
    state.listeners.add(lambda event, obj: changes.append(obj) if event == listeners.KIND_CHANGED else None)
    store = state.kind_stores[PRIORITY_CLASSES]
    store.upsert({"metadata": {"name": "high"}, "value": 1000})
    assert store.get("high") == 1000 and changes == [(PRIORITY_CLASSES, "high")]
    assert state.kind_objects(PRIORITY_CLASSES) == {"high": 1000}  # what a plugin reads (ClusterView)

    standalone = KubeSource(ClusterState(), api_client_for("http://127.0.0.1:1"), mode=kinds.STANDALONE)
    assert standalone.kinds[PRIORITY_CLASSES].path == "/apis/scheduling.k8s.io/v1/priorityclasses"
    webhook_state = ClusterState()
    webhook = KubeSource(webhook_state, api_client_for("http://127.0.0.1:1"))
    assert PRIORITY_CLASSES not in webhook.kinds and webhook_state.kind_stores[PRIORITY_CLASSES].synced

    read = {Permission(verb, PRIORITY_CLASSES, "scheduling.k8s.io") for verb in ("get", "list", "watch")}
    assert read <= set(required_permissions("standalone"))
    assert not read & set(required_permissions("webhook"))

    loaded = ClusterState()
    load_into(loaded, Snapshot(kinds={PRIORITY_CLASSES: [{"metadata": {"name": "low"}, "value": 1}]}))
    assert loaded.kind_stores[PRIORITY_CLASSES].get("low") == 1


def test_its_changes_wake_the_pods_a_filter_registered_for_it_refused(declared: kinds.WatchedKind[int]) -> None:
    clock = Clock(1000.0)
    queue = SchedulingQueue(clock=clock, publish_metrics=False)
    state = ClusterState()
    profile = Profile.from_engine(PROFILE, Engine(Policy(filters=(_ClassFilter(),))))
    scheduler = Scheduler(None, [profile], state=state, queue=queue, binder=object())
    state.listeners.add(scheduler._on_cluster_event)  # what start() does, without the threads
    refused(queue, {"classy": "ClassFilter", "other": "SomeonesOwnPlugin"})
    clock.now += 60
    state.namespaces.upsert({"metadata": {"name": "team-a", "labels": {"a": "b"}}})
    assert queue.where("default/classy") == UNSCHEDULABLE  # ClassFilter did not register namespaces
    assert queue.where("default/other") == ACTIVE  # a plugin that registered nothing: every event
    state.kind_stores[PRIORITY_CLASSES].upsert({"metadata": {"name": "high"}, "value": 1000})
    assert queue.where("default/classy") == ACTIVE
