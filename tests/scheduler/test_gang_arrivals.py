"""A gang's members arriving one by one, as the two watches deliver them, found slow at scale by
`python -m bench gang-scale` (docs/gangs.md "Benchmarks"):

* each member is asked at the queue's gate a bounded number of times, not once per later
  sibling (re-checking every gated member, and logging each refusal, at every arrival made a
  gang of 1,000 cost about a million admissions);
* a member queued just after its group's cycle took its siblings out of the queue is waited
  for, not taken as missing (a whole cycle placed every member only to fail them all).

No API server: the pod events are given as the watches would give them.
"""

from __future__ import annotations

from extender.cluster import listeners
from extender.cluster.memory_binder import MemoryBinder
from extender.cluster.state import ClusterState
from extender.gangs.coordinator import GangCoordinator
from extender.model import podgroups as pg
from extender.model.pods import PodView
from extender.model.records import record_from_dict
from extender.scheduler import queueing
from extender.scheduler.gang_scheduling import GangScheduling
from extender.scheduler.queueing import SchedulingQueue
from extender.scheduler.standalone import Scheduler
from tests.scheduler.conftest import SCHEDULER_NAME, standalone_profile

KEY = pg.GroupKey(pg.API_V1ALPHA2, "default", "pg1")
MEMBERS = 60


def member(i: int) -> dict:
    return {"metadata": {"name": f"m{i}", "namespace": "default", "uid": f"uid-m{i}"},
            "spec": {"schedulerName": SCHEDULER_NAME, "schedulingGroup": {"podGroupName": "pg1"},
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]},
            "status": {"phase": "Pending"}}


def test_members_arriving_one_by_one_are_asked_a_bounded_number_of_times() -> None:
    queue = SchedulingQueue(publish_metrics=False)
    state = ClusterState()
    scheduler = Scheduler(None, [standalone_profile()], state=state, binder=MemoryBinder(state), queue=queue)
    gangs = GangScheduling(scheduler, None, apis=[pg.API_V1ALPHA2])
    scheduler.gangs = gangs
    asked = []

    def pre_enqueue(pod: PodView) -> bool:
        asked.append(pod.key)
        return gangs.pre_enqueue(pod)

    queue.pre_enqueue = pre_enqueue
    gangs.coordinator.upsert_group(pg.PodGroup(KEY, "g1", 0, pg.GANG, MEMBERS, pg.V1ALPHA2_TIMEOUT_SECONDS, {}, ()))
    for i in range(MEMBERS):  # each member as both watches deliver it: the pod watch, then the pending one
        raw = member(i)
        gangs.pod_event(listeners.POD_ADDED, record_from_dict(raw))
        view = PodView.from_dict(raw)
        queue.add(view, SCHEDULER_NAME)
        gangs.member_queued(view)
    assert {queue.where(f"default/m{i}") for i in range(MEMBERS)} == {queueing.ACTIVE}
    # each asked when it arrives, and once more when the last one completes the group
    assert len(asked) <= 2 * MEMBERS + 2, len(asked)


def test_the_group_admission_is_each_members_admission() -> None:
    coordinator = GangCoordinator()
    assert not coordinator.group_admission(KEY).admitted  # unknown group
    coordinator.upsert_group(pg.PodGroup(KEY, "g1", 0, pg.GANG, 2, pg.V1ALPHA2_TIMEOUT_SECONDS, {}, ()))
    from extender.gangs.coordinator import Member

    coordinator.upsert_member(Member("u1", "default/m1", KEY, SCHEDULER_NAME))
    assert coordinator.group_admission(KEY) == coordinator.admission("u1")
    assert not coordinator.group_admission(KEY).admitted
    coordinator.upsert_member(Member("u2", "default/m2", KEY, SCHEDULER_NAME))
    assert coordinator.group_admission(KEY) == coordinator.admission("u2") == coordinator.admission("u1")
    assert coordinator.group_admission(KEY).admitted


def test_a_member_queued_while_its_group_cycle_starts_is_waited_for_not_failed() -> None:
    """The pod watch knows all members, the pending watch queues the last one just after the
    cycle took its siblings out of the queue: the cycle waits for it (the members go back to the
    gate and are let out together), it does not fail the group for the watch's lag."""
    queue = SchedulingQueue(publish_metrics=False)
    state = ClusterState()
    state.upsert_node({"metadata": {"name": "n1"}, "spec": {},
                       "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                                  "conditions": [{"type": "Ready", "status": "True"}]}})
    binder = MemoryBinder(state)
    scheduler = Scheduler(None, [standalone_profile()], state=state, binder=binder, queue=queue)
    gangs = GangScheduling(scheduler, None, apis=[pg.API_V1ALPHA2])
    scheduler.gangs = gangs
    queue.pre_enqueue = gangs.pre_enqueue
    gangs.coordinator.upsert_group(pg.PodGroup(KEY, "g1", 0, pg.GANG, 3, pg.V1ALPHA2_TIMEOUT_SECONDS, {}, ()))
    raws = [member(i) for i in range(3)]
    for raw in raws:  # the pod watch: all three known
        gangs.pod_event(listeners.POD_ADDED, record_from_dict(raw))
    for raw in raws[:2]:  # the pending watch: two queued so far
        queue.add(PodView.from_dict(raw), SCHEDULER_NAME)
    original = queue.pop_members

    def pop_members_then_the_last_arrives(keys: list[str]) -> list:
        taken = original(keys)
        if queue.where("default/m2") is None:
            late = PodView.from_dict(raws[2])
            queue.add(late, SCHEDULER_NAME)
            gangs.member_queued(late)
        return taken

    queue.pop_members = pop_members_then_the_last_arrives  # type: ignore[method-assign]
    failed: list[str] = []
    scheduler.reporter.unschedulable_message = lambda entry, *a, **k: failed.append(entry.key)  # type: ignore[method-assign]
    try:
        for _ in range(3):  # the first cycle waits; the next one takes all three
            entry = queue.pop(timeout=0)
            if entry is None:
                break
            scheduler.schedule(entry)
        scheduler.binds.shutdown(5)
    finally:
        scheduler.stop(timeout=1)
    assert failed == []  # no group cycle placed the two and failed them for the third's lag
    assert sorted(key for key, _ in binder.bindings) == ["default/m0", "default/m1", "default/m2"]
