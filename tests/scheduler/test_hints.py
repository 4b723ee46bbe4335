"""Queueing hints for a placed pod's deletion and arrival, a storage object's change and a node's
update, plugin by plugin, after kube-scheduler v1.36's QueueingHintFns, as the built-ins register
them (`events_to_register`) and scheduler/hints.py gathers them; and the queue moving only the
pods they wake, also for a deletion that happened while the pod was in flight."""

from __future__ import annotations

from typing import Any

import pytest

from extender.cluster import dra_store, listeners, volume_store
from extender.cluster.state import ClusterState
from extender.cluster.volume_store import CLAIMS, VOLUMES
from extender.model.nodes import NodeView
from extender.model.pods import PodView
from extender.model.records import record_from_dict
from extender.policy import enqueue, names
from extender.policy.builtin import FILTERS, OPT_IN_FILTERS
from extender.policy.engine import Policy
from extender.scheduler.hints import QueueingHints
from extender.scheduler.queueing import BACKOFF, UNSCHEDULABLE, SchedulingQueue, Wakes
from tests.helpers import Clock
from tests.policy.builders import placed, pod_affinity, spread, term

PROFILE = "extender-scheduler"
# Every built-in filter, with its default args: what each registered is all the queue knows.
BUILT_INS = QueueingHints.of([Policy(filters=tuple(plugin() for plugin in (*FILTERS, *OPT_IN_FILTERS)))])


def _hinted(wakes: Wakes | None) -> Wakes:
    assert wakes is not None, "some built-in says no to this event"
    return wakes


def after_pod_deleted(deleted: Any) -> Wakes:
    return _hinted(BUILT_INS.wakes(enqueue.PODS, enqueue.DELETE, deleted))


def after_pod_placed(added: Any) -> Wakes:
    return _hinted(BUILT_INS.wakes(enqueue.PODS, enqueue.ADD, added, unrefused=False))


def after_storage_changed(resource: str, key: str) -> Wakes:
    return _hinted(BUILT_INS.wakes(resource, enqueue.UPDATE, key))


def after_node_updated(changed: frozenset[str]) -> Wakes:
    return _hinted(BUILT_INS.wakes(enqueue.NODES, changed, None))


def _ports(*ports: int) -> dict[str, Any]:
    return {"containers": [{"name": "c", "ports": [{"containerPort": p, "hostPort": p} for p in ports]}]}


def _claims(*claims: str) -> dict[str, Any]:
    return {"volumes": [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]}


def _waiting(name: str = "w", *, namespace: str = "default", labels: dict[str, str] | None = None,
             spec: dict[str, Any] | None = None) -> PodView:
    raw = placed(name, "", namespace=namespace, labels=labels, spec=spec)
    raw["spec"]["schedulerName"] = PROFILE
    return PodView.from_dict(raw)


def _deleted(*, namespace: str = "default", labels: dict[str, str] | None = None,
             spec: dict[str, Any] | None = None) -> Any:
    return record_from_dict(placed("gone", "n1", namespace=namespace, labels=labels, spec=spec))


def _wakes(pod: PodView, plugin: str, deleted: Any) -> bool:
    return after_pod_deleted(deleted)(pod, frozenset({plugin}))


@pytest.mark.parametrize(("wanted", "freed", "expected"), [((80,), (80,), True), ((80,), (81,), False),
                                                          ((80,), (), False), ((), (80,), False)])
def test_node_ports_wake_on_a_freed_port_the_pod_wants(wanted: tuple[int, ...], freed: tuple[int, ...],
                                                       expected: bool) -> None:
    assert _wakes(_waiting(spec=_ports(*wanted)), names.NODE_PORTS, _deleted(spec=_ports(*freed))) is expected


def test_spread_wakes_on_a_pod_its_hard_selector_counts_in_its_namespace() -> None:
    pod = _waiting(labels={"app": "a"}, spec={"topologySpreadConstraints": [spread(labels={"app": "a"})]})
    assert _wakes(pod, names.POD_TOPOLOGY_SPREAD, _deleted(labels={"app": "a"}))
    assert not _wakes(pod, names.POD_TOPOLOGY_SPREAD, _deleted(labels={"app": "b"}))
    assert not _wakes(pod, names.POD_TOPOLOGY_SPREAD, _deleted(namespace="other", labels={"app": "a"}))
    soft = _waiting(spec={"topologySpreadConstraints": [spread(labels={"app": "a"}, when="ScheduleAnyway")]})
    assert _wakes(soft, names.POD_TOPOLOGY_SPREAD, _deleted(labels={"app": "b"}))  # defaults: not rebuilt, yes


def test_anti_affinity_wakes_on_a_pod_it_repelled_or_that_repelled_it() -> None:
    repelling = {"affinity": pod_affinity(anti=[term({"color": "green"})])}
    pod = _waiting(spec=repelling)
    assert _wakes(pod, names.INTER_POD_AFFINITY, _deleted(labels={"color": "green"}))
    assert not _wakes(pod, names.INTER_POD_AFFINITY, _deleted(labels={"color": "blue"}))
    assert not _wakes(pod, names.INTER_POD_AFFINITY, _deleted(namespace="other", labels={"color": "green"}))
    green = _waiting(labels={"color": "green"})
    assert _wakes(green, names.INTER_POD_AFFINITY, _deleted(spec=repelling))
    assert not _wakes(_waiting(labels={"color": "blue"}), names.INTER_POD_AFFINITY, _deleted(spec=repelling))
    selected = {"affinity": pod_affinity(anti=[term({"color": "green"}, namespaceSelector={})])}
    assert _wakes(_waiting(spec=selected), names.INTER_POD_AFFINITY,
                  _deleted(namespace="other", labels={"color": "green"}))  # namespace labels unread: yes
    affine = {"affinity": pod_affinity(required=[term({"color": "green"})])}
    assert not _wakes(_waiting(spec=affine), names.INTER_POD_AFFINITY, _deleted(labels={"color": "green"}))


def test_volume_hints_wake_on_attached_volumes_and_shared_claims() -> None:
    assert _wakes(_waiting(), names.NODE_VOLUME_LIMITS, _deleted(spec=_claims("c1")))
    assert not _wakes(_waiting(), names.NODE_VOLUME_LIMITS, _deleted())
    pod = _waiting(spec=_claims("c1"))
    assert _wakes(pod, names.VOLUME_RESTRICTIONS, _deleted(spec=_claims("c1")))
    assert not _wakes(pod, names.VOLUME_RESTRICTIONS, _deleted(spec=_claims("c2")))
    assert not _wakes(pod, names.VOLUME_RESTRICTIONS, _deleted(namespace="other", spec=_claims("c1")))


def test_resource_fit_unknown_plugins_and_no_plugins_always_wake_node_checks_never() -> None:
    after = after_pod_deleted(_deleted())
    pod = _waiting()
    assert after(pod, frozenset({names.RESOURCE_FIT, names.NODE_PORTS}))
    assert after(pod, frozenset({"SomeonesOwnPlugin"}))
    assert after(pod, frozenset())
    assert not after(pod, frozenset({names.TAINT_TOLERATION, names.NODE_AFFINITY, names.NODE_PORTS}))


def test_the_queue_moves_only_the_pods_a_deletion_wakes() -> None:
    clock = Clock(1000.0)
    queue = SchedulingQueue(clock=clock, publish_metrics=False)
    for name, port in (("wants-80", 80), ("wants-81", 81)):
        queue.add(_waiting(name, spec=_ports(port)), PROFILE)
        entry = queue.pop(timeout=0)
        assert entry is not None
        entry.rejected_by = frozenset({names.NODE_PORTS})
        queue.requeue_unschedulable(entry)
    assert queue.move_all("pod-deleted", wakes=after_pod_deleted(_deleted(spec=_ports(80)))) == 1
    assert queue.where("default/wants-80") == BACKOFF and queue.where("default/wants-81") == UNSCHEDULABLE


@pytest.mark.parametrize(("freed", "where"), [(80, BACKOFF), (81, UNSCHEDULABLE)])
def test_a_deletion_during_the_attempt_sends_the_pod_to_backoff_only_if_it_may_help(freed: int, where: str) -> None:
    queue = SchedulingQueue(clock=Clock(1000.0), publish_metrics=False)
    queue.add(_waiting("wants-80", spec=_ports(80)), PROFILE)
    entry = queue.pop(timeout=0)
    assert entry is not None
    queue.move_all("pod-deleted", wakes=after_pod_deleted(_deleted(spec=_ports(freed))))  # while in flight
    entry.rejected_by = frozenset({names.NODE_PORTS})
    queue.requeue_unschedulable(entry)
    assert queue.where("default/wants-80") == where


def test_a_placed_pod_wakes_the_affinity_it_satisfies_and_the_spreads_that_count_it() -> None:
    affine = _waiting(spec={"affinity": pod_affinity(required=[term({"color": "green"})])})
    placed_green = after_pod_placed(_deleted(labels={"color": "green"}))
    assert placed_green(affine, frozenset({names.INTER_POD_AFFINITY}))
    assert not after_pod_placed(_deleted(labels={"color": "blue"}))(affine, frozenset({names.INTER_POD_AFFINITY}))
    repelled = _waiting(spec={"affinity": pod_affinity(anti=[term({"color": "green"})])})
    assert not placed_green(repelled, frozenset({names.INTER_POD_AFFINITY}))  # more of them cannot help
    spreading = _waiting(spec={"topologySpreadConstraints": [spread(labels={"color": "green"})]})
    assert placed_green(spreading, frozenset({names.POD_TOPOLOGY_SPREAD}))
    assert not placed_green(spreading, frozenset({names.RESOURCE_FIT, names.NODE_PORTS}))
    assert not placed_green(spreading, frozenset())


def test_the_state_tells_a_pod_placed_from_a_placed_pod_updated() -> None:
    state = ClusterState()
    seen: list[tuple[str, str]] = []
    state.listeners.add(lambda event, obj: seen.append((event, obj.key)) if event in (
        listeners.POD_PLACED, listeners.POD_RELABELED) else None)
    pending = placed("p", "")
    state.upsert_pod(pending)
    assert seen == []
    state.assume("default/p", "n1")
    state.upsert_pod(placed("p", "n1"))  # the watch confirms the bind
    state.upsert_pod(placed("p", "n1", status={"podIP": "10.0.0.1"}))  # status only
    state.upsert_pod(placed("p", "n1", labels={"color": "green"}))
    state.upsert_pod(placed("q", "n1"))  # arrives bound
    assert seen == [(listeners.POD_PLACED, "default/p"), (listeners.POD_RELABELED, "default/p"),
                    (listeners.POD_PLACED, "default/q")]


def test_a_storage_change_wakes_the_pods_volume_plugins_refused_and_a_claim_only_its_users() -> None:
    user = _waiting(spec=_claims("c1"))
    volume_binding = frozenset({names.VOLUME_BINDING})
    assert after_storage_changed(CLAIMS, "default/c1")(user, volume_binding)
    assert not after_storage_changed(CLAIMS, "default/c2")(user, volume_binding)
    assert not after_storage_changed(CLAIMS, "other/c1")(user, volume_binding)
    assert after_storage_changed(VOLUMES, "pv1")(user, volume_binding)
    assert not after_storage_changed(VOLUMES, "pv1")(user, frozenset({names.RESOURCE_FIT, names.NODE_PORTS}))
    assert after_storage_changed(CLAIMS, "default/c2")(user, frozenset({"SomeonesOwnPlugin"}))
    assert after_storage_changed(CLAIMS, "default/c2")(user, frozenset())


def test_a_node_update_wakes_the_pods_refused_by_a_plugin_that_reads_what_changed() -> None:
    labels = after_node_updated(frozenset({enqueue.UPDATE_NODE_LABEL}))
    pod = _waiting()
    assert labels(pod, frozenset({names.NODE_AFFINITY}))
    assert not labels(pod, frozenset({names.RESOURCE_FIT, names.TAINT_TOLERATION, names.NODE_PORTS}))
    assert labels(pod, frozenset({names.DYNAMIC_RESOURCES}))  # reads every part
    assert labels(pod, frozenset({"SomeonesOwnPlugin"})) and labels(pod, frozenset())
    grown = after_node_updated(frozenset({enqueue.UPDATE_NODE_ALLOCATABLE, enqueue.UPDATE_NODE_DECLARED_FEATURE}))
    assert grown(pod, frozenset({names.RESOURCE_FIT}))
    assert grown(pod, frozenset({names.NODE_DECLARED_FEATURES}))
    devices = after_node_updated(frozenset({enqueue.UPDATE_NODE_DEVICES}))  # only DeviceFit reads the inventory
    assert devices(pod, frozenset({names.DEVICE_FIT})) and devices(pod, frozenset({"SomeonesOwnPlugin"}))
    assert not devices(pod, frozenset({names.RESOURCE_FIT}))
    readable = after_node_updated(frozenset({enqueue.UPDATE_NODE_READABLE}))  # the engine's own refusal
    assert readable(pod, frozenset({names.NODE_UNUSABLE})) and not readable(pod, frozenset({names.NODE_AFFINITY}))


def test_in_flight_events_are_kept_only_while_an_attempt_older_than_them_runs() -> None:
    """Binds keep some pod in flight at all times: the events must still be forgotten once
    every attempt still running started after them, or they would pile up for good."""
    queue = SchedulingQueue(clock=Clock(1000.0), publish_metrics=False)
    queue.add(_waiting("binding"), PROFILE)
    binding = queue.pop(timeout=0)
    assert binding is not None
    for port in range(100):
        queue.move_all("pod-deleted", wakes=after_pod_deleted(_deleted(spec=_ports(port))))
    queue.add(_waiting("next", spec=_ports(7)), PROFILE)
    following = queue.pop(timeout=0)
    assert following is not None
    queue.done(binding)  # bound: only `following` is in flight, popped after all 100 events
    assert len(queue._events) == 0
    queue.move_all("pod-deleted", wakes=after_pod_deleted(_deleted(spec=_ports(7))))
    following.rejected_by = frozenset({names.NODE_PORTS})
    queue.requeue_unschedulable(following)
    assert queue.where("default/next") == BACKOFF  # the event after its pop still counts


class _ZonedFilter:
    """A third-party filter as docs/plugins.md shows one: it registers node label updates only,
    with a hint that reads the node."""

    name = "Zoned"

    def filter(self, pod: PodView, node: Any) -> str:
        return "not in zone a"

    def events_to_register(self) -> tuple[enqueue.EventHint, ...]:
        return (enqueue.on(enqueue.NODES, enqueue.UPDATE_NODE_LABEL, hint=lambda pod, node: node.labels.get("zone") == "a"),)


class _SilentFilter:
    """A filter that registers nothing: every event may change its answer."""

    name = "Silent"

    def filter(self, pod: PodView, node: Any) -> str:
        return "no"


def test_a_plugin_of_a_policys_own_is_asked_for_the_events_it_registered_and_a_silent_one_for_every_event() -> None:
    hints = QueueingHints.of([Policy(filters=(_ZonedFilter(), _SilentFilter()))])
    pod, zoned, silent = _waiting(), frozenset({"Zoned"}), frozenset({"Silent"})
    relabelled = _hinted(hints.wakes(enqueue.NODES, frozenset({enqueue.UPDATE_NODE_LABEL, enqueue.UPDATE_NODE_TAINT}),
                                     _node({"zone": "a"})))
    assert relabelled(pod, zoned)
    assert not _hinted(hints.wakes(enqueue.NODES, enqueue.UPDATE_NODE_LABEL, _node({"zone": "b"})))(pod, zoned)
    assert not _hinted(hints.wakes(enqueue.NODES, enqueue.UPDATE_NODE_TAINT, _node({"zone": "a"})))(pod, zoned)
    assert not _hinted(hints.wakes(enqueue.PODS, enqueue.DELETE, _deleted()))(pod, zoned)
    for resource, action in ((enqueue.PODS, enqueue.DELETE), (enqueue.NODES, enqueue.UPDATE_NODE_DEVICES),
                             (enqueue.RESOURCE_CLAIMS, enqueue.UPDATE), (enqueue.NAMESPACES, enqueue.UPDATE)):
        assert _hinted(hints.wakes(resource, action, None))(pod, silent)
        assert _hinted(hints.wakes(resource, action, None))(pod, zoned | silent)
    assert hints.wakes(enqueue.PODS, enqueue.DELETE, None, unrefused=True) is not None  # Zoned says no
    only_silent = QueueingHints.of([Policy(filters=(_SilentFilter(),))])
    assert only_silent.wakes(enqueue.NODES, enqueue.ADD, None) is None  # all yes: every pod, unasked
    assert only_silent.wakes(enqueue.NODES, enqueue.ADD, None, unrefused=False) is not None
    assert only_silent.wakes(enqueue.PODS, enqueue.DELETE, None) is not None  # an unreadable node: no


def _node(labels: dict[str, str]) -> NodeView:
    return NodeView.from_dict({"metadata": {"name": "n1", "labels": labels}, "status": {}})


def test_every_built_in_filter_registers_a_node_added_so_it_moves_every_pod_unasked() -> None:
    """A node added is a yes from each built-in (and the engine's unreadable-node refusal): the
    queue moves every waiting pod without a hint per pod, as before hints (EventHandlingNodeAdd)."""
    assert BUILT_INS.wakes(enqueue.NODES, enqueue.ADD, None) is None
    assert BUILT_INS.wakes(enqueue.PODS, enqueue.DELETE, None) is not None


def test_the_stores_name_their_kinds_as_the_registrations_do() -> None:
    """The scheduler hands the storage and DRA stores' resource names to the hints as they are:
    a store that named a kind otherwise would leave the pods its plugins refused unwoken."""
    assert set(volume_store.KINDS) <= set(enqueue.STORAGE)
    assert set(dra_store.RESOURCES) == set(enqueue.DRA)
