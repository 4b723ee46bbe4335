"""The standalone scheduler's Permit for pod groups without an API server: a held member whose
wait runs out, or whose group is deleted, gives its place back and is retried; the group's
members are gated while the group is missing. Time is a fake clock; the state is in memory."""

from __future__ import annotations

from typing import Any

from extender import metrics
from extender.cluster.memory_binder import MemoryBinder
from extender.cluster.state import ClusterState
from extender.gangs.coordinator import Decision
from extender.model import podgroups as pg
from extender.model.pods import PodView
from extender.scheduler import queueing
from extender.scheduler.gang_scheduling import GangScheduling, Placed
from extender.scheduler.queueing import SchedulingQueue
from extender.scheduler.standalone import Scheduler
from tests.scheduler.conftest import SCHEDULER_NAME, standalone_profile

KEY = pg.GroupKey(pg.API_V1ALPHA2, "default", "pg1")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def group(min_count: int = 2) -> pg.PodGroup:
    return pg.parse_pod_group({"apiVersion": pg.API_V1ALPHA2, "kind": "PodGroup",
                               "metadata": {"name": "pg1", "namespace": "default", "uid": "g1"},
                               "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}})


def member(name: str) -> PodView:
    return PodView.from_dict({"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
                              "spec": {"schedulerName": SCHEDULER_NAME, "schedulingGroup": {"podGroupName": "pg1"},
                                       "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}})


def setup() -> tuple[Scheduler, GangScheduling, Clock]:
    clock = Clock()
    state = ClusterState()
    state.upsert_node({"metadata": {"name": "n1"}, "spec": {},
                       "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                                  "conditions": [{"type": "Ready", "status": "True"}]}})
    queue = SchedulingQueue(clock=clock, publish_metrics=False)
    scheduler = Scheduler(None, [standalone_profile()], state=state, binder=MemoryBinder(state), queue=queue)
    gangs = GangScheduling(scheduler, None, apis=[pg.API_V1ALPHA2], clock=clock)
    scheduler.gangs = gangs
    queue.pre_enqueue = gangs.pre_enqueue
    return scheduler, gangs, clock


def hold_one(scheduler: Scheduler, gangs: GangScheduling) -> Any:
    """Group pg1 (minCount 2) and both its members queued; one member popped, placed on n1 and
    held (1 of 2), as a group cycle leaves it."""
    gangs._group_event(KEY, group(min_count=2))
    scheduler.queue.add(member("p1"), SCHEDULER_NAME)
    scheduler.queue.add(member("p2"), SCHEDULER_NAME)
    gangs.member_queued(member("p2"))
    entry = scheduler.queue.pop(timeout=0)
    assert entry is not None
    scheduler.state.assume(entry.key, "n1", uid=entry.uid, view=entry.pod)
    gangs._held[entry.uid] = Placed(entry, "n1", 0.0, ())
    [verdict] = gangs.coordinator.hold(entry.uid, "n1")
    assert verdict.decision is Decision.WAIT
    return entry


def test_members_wait_for_their_group_then_for_the_quorum() -> None:
    scheduler, gangs, _clock = setup()
    scheduler.queue.add(member("p1"), SCHEDULER_NAME)
    assert scheduler.queue.where("default/p1") == queueing.GATED
    gangs._group_event(KEY, group(min_count=2))
    assert scheduler.queue.where("default/p1") == queueing.GATED  # 1 of 2 members
    scheduler.queue.add(member("p2"), SCHEDULER_NAME)
    gangs.member_queued(member("p2"))
    assert {scheduler.queue.where(k) for k in ("default/p1", "default/p2")} == {queueing.ACTIVE}


def test_a_held_member_whose_wait_runs_out_gives_its_place_back() -> None:
    scheduler, gangs, clock = setup()
    entry = hold_one(scheduler, gangs)
    timeouts = metrics.GANG_TIMEOUTS._value.get()  # type: ignore[attr-defined]
    clock.now += pg.V1ALPHA2_TIMEOUT_SECONDS - 1
    gangs.tick()
    assert scheduler.state.pod(entry.key).node_name == "n1"  # still held
    clock.now += 2
    gangs.tick()
    assert scheduler.state.pod(entry.key).node_name == ""  # the assumption is forgotten
    assert scheduler.queue.where(entry.key) == queueing.BACKOFF
    assert metrics.GANG_TIMEOUTS._value.get() == timeouts + 1  # type: ignore[attr-defined]
    assert gangs.coordinator.status(KEY).held == 0


def test_a_group_deleted_while_a_member_is_held_sends_it_back_to_wait_for_the_group() -> None:
    scheduler, gangs, clock = setup()
    entry = hold_one(scheduler, gangs)
    gangs._group_event(KEY, None)
    assert scheduler.state.pod(entry.key).node_name == ""
    clock.now += 60  # past any backoff: popping finds it no longer admitted and gates it
    assert scheduler.queue.pop(timeout=0) is None
    assert {scheduler.queue.where(k) for k in ("default/p1", "default/p2")} == {queueing.GATED}


class StaleSource:
    """A pod-group source whose copy of the group never shows our writes (the watch lags)."""

    apis = (pg.API_V1ALPHA2,)

    def __init__(self) -> None:
        self.raw_group = {"apiVersion": pg.API_V1ALPHA2, "kind": "PodGroup",
                          "metadata": {"name": "pg1", "namespace": "default", "uid": "g1"},
                          "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}
        self.patches: list[tuple[str, str]] = []

    def raw(self, key: pg.GroupKey) -> dict[str, Any] | None:
        return self.raw_group if key == KEY else None

    def patch_status(self, key: pg.GroupKey, patch: dict[str, Any]) -> bool:
        [condition] = patch["status"]["conditions"]
        self.patches.append((condition["status"], condition["reason"]))
        return True


def test_a_scheduled_group_is_not_set_back_to_unschedulable_before_the_watch_shows_it() -> None:
    scheduler, gangs, _clock = setup()
    source = StaleSource()
    gangs.source = source  # type: ignore[assignment]
    scheduler.reporter.submit = lambda fn, *args: fn(*args)  # type: ignore[method-assign]
    gangs._write_condition(KEY, pg.REASON_SCHEDULED, "")
    gangs._write_condition(KEY, pg.REASON_UNSCHEDULABLE, pg.KUBE_GROUP_UNSCHEDULABLE_MESSAGE)  # an extra member
    assert source.patches == [("True", pg.REASON_SCHEDULED)]
    source.raw_group["metadata"]["uid"] = "g2"  # deleted and created again: a new group may fail
    gangs._write_condition(KEY, pg.REASON_UNSCHEDULABLE, pg.KUBE_GROUP_UNSCHEDULABLE_MESSAGE)
    assert source.patches[-1] == ("False", pg.REASON_UNSCHEDULABLE)
