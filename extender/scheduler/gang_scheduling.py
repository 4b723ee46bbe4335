"""Pod groups in the standalone scheduler: the gang coordinator wired to the queue, the cycle and the binds.

kube-scheduler v1.36's gang scheduling, from outside its framework (docs/gangs.md):

* **PreEnqueue**: a member enters the active queue only when `GangCoordinator.admission` admits it
  (its group exists, `minCount` members exist, one schedulerName); until then it sits in the
  queue's gated set, and every event of its group or of a member asks again (`queue.ungate`).
* **The group cycle**: a popped member takes its group's other waiting members out of the queue
  with it (`queue.pop_members`); each is placed in turn on the live state and assumed, so the next
  sees it. If the group's quorum (bound + held + placed) is not there, every place is given back
  and the placed members fail with kube-scheduler's gang message; the group's `PodGroupScheduled`
  condition says `Unschedulable`.
* **Permit**: each placed member is `hold`-ed, still assumed (its room counts for every other pod);
  ALLOW verdicts hand every released member to the bind pool together; REJECT verdicts (the wait
  ran out, the group was deleted) give the places back and retry the pods with backoff. `tick`
  runs the time-outs from the loop.

A pod of no group never reaches this module: the scheduler looks at `pod.group` (None) once.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from extender import metrics
from extender.cluster import listeners
from extender.cluster.state import ClusterState
from extender.cycle import steps
from extender.cycle.group import choose_domain, domains, member_order, place_members
from extender.cycle.pod import CycleResult
from extender.gangs.coordinator import REASON_TIMEOUT, Decision, GangCoordinator, Member, Verdict
from extender.kube.events import rfc3339
from extender.kube.podgroup_source import PodGroupSource
from extender.model.nodes import NodeInfo
from extender.model.podgroups import (
    API_COSCHEDULING,
    API_V1ALPHA2,
    KUBE_GROUP_UNSCHEDULABLE_MESSAGE,
    KUBE_MEMBER_UNSCHEDULABLE_MESSAGE,
    REASON_SCHEDULED,
    REASON_UNSCHEDULABLE,
    GroupKey,
    MemberCounts,
    PodGroup,
    coscheduling_status,
    scheduled_condition_patch,
)
from extender.model.pods import TERMINAL_PHASES, PodView
from extender.model.records import PodRecord
from extender.policy.engine import Engine
from extender.policy.reservations import Reservation
from extender.scheduler.queueing import ACTIVE, QueuedPod

if TYPE_CHECKING:
    from extender.scheduler.bind_pool import BindPool
    from extender.scheduler.profiles import Profile
    from extender.scheduler.queueing import SchedulingQueue
    from extender.scheduler.reporting import Reporter

log = logging.getLogger(__name__)

_POD_EVENTS = frozenset({listeners.POD_ADDED, listeners.POD_UPDATED, listeners.POD_DELETED})
# Where a sibling that `pop_members` did not take may be when it is only late: not queued yet, or
# queued (admitted) right after. Elsewhere (gated by its schedulingGates) it is not coming.
_ON_ITS_WAY = frozenset({None, ACTIVE})


class PodCycles(Protocol):
    """What the group cycle needs of the standalone scheduler (standalone.py `Scheduler`): its
    queue, state, reporter and bind pool, and its pod-by-pod steps, each of which reports and
    requeues on failure exactly as a pod of no group is."""

    @property
    def queue(self) -> SchedulingQueue: ...

    @property
    def state(self) -> ClusterState: ...

    @property
    def reporter(self) -> Reporter: ...

    @property
    def binds(self) -> BindPool: ...

    @property
    def rng(self) -> random.Random: ...

    @property
    def profiles(self) -> Mapping[str, Profile]: ...

    def placed_already(self, entry: QueuedPod) -> bool: ...

    def decide(self, entry: QueuedPod, engine: Engine, started: float,
               nodes: Sequence[NodeInfo] | None = None) -> CycleResult | None: ...

    def reserve(self, entry: QueuedPod, engine: Engine, node: str, started: float
                ) -> tuple[Reservation, ...] | None: ...

    def unschedulable(self, entry: QueuedPod, engine: Engine, result: CycleResult, started: float, *,
                      preempt: bool = True) -> None: ...


@dataclass(frozen=True, slots=True)
class Placed:
    """A member placed by a group cycle and assumed on `node`: held, or about to be."""

    entry: QueuedPod
    node: str
    started: float  # perf_counter when the group cycle began
    reservations: tuple[Reservation, ...]

    @property
    def taken(self) -> steps.Taken:
        return steps.Taken(self.entry.pod, self.node, self.reservations)


class _LiveGroup:
    """The live scheduler as one group cycle's host (extender.cycle.group.GroupHost): members
    are queue entries, failures are reported and requeued as the pod-by-pod cycle does."""

    def __init__(self, gangs: GangScheduling, profile: Profile, started: float) -> None:
        self._gangs = gangs
        self._scheduler = gangs.scheduler
        self._profile = profile
        self._started = started
        self.unfit_count = 0
        self.cluster: ClusterState = self._scheduler.state
        self.rng: random.Random = self._scheduler.rng

    def pod(self, member: QueuedPod) -> PodView:
        return member.pod

    def engine(self, member: QueuedPod) -> Engine:
        return self._gangs.engine(member, self._profile)

    def place(self, member: QueuedPod, nodes: Sequence[NodeInfo] | None) -> Placed | CycleResult | None:
        s = self._scheduler
        engine = self.engine(member)
        result = s.decide(member, engine, self._started, nodes)
        if result is None or result.node is None:
            return result
        reservations = s.reserve(member, engine, result.node, self._started)
        if reservations is None:
            return None
        steps.assume(s.state, member.pod, result.node, reservations)
        return Placed(member, result.node, self._started, reservations)

    def unfit(self, member: QueuedPod, result: CycleResult, *, preempting: bool) -> None:
        self.unfit_count += 1
        self._scheduler.unschedulable(member, self.engine(member), result, self._started, preempt=preempting)




def _member(pod: PodView | PodRecord, group: GroupKey, node: str, gated: bool) -> Member:
    return Member(pod.uid, pod.key, group, pod.scheduler_name, node, gated, dict(pod.requests))


class GangScheduling:
    """One per Scheduler. Watch threads call `pod_event` and the group callbacks, the queue calls
    `pre_enqueue` (under its lock), the loop calls `schedule_group` and `tick`, bind workers call
    `undone`."""

    def __init__(self, scheduler: PodCycles, api_client: Any, *, apis: Iterable[str] | None = None,
                 clock: Any = time.monotonic, **watch_options: Any) -> None:
        """`apis`: the pod-group APIs to watch (default: those the API server serves)."""
        self.scheduler = scheduler
        self.coordinator = GangCoordinator(clock=clock)
        self._clock = clock
        self.source = None
        if api_client is not None:
            self.source = PodGroupSource(api_client, self._group_event, apis=apis, **watch_options)
        self.apis = frozenset(self.source.apis if self.source is not None else apis or ())
        self._held: dict[str, Placed] = {}
        self._admitted_at: dict[GroupKey, float] = {}
        self._gated_groups: set[GroupKey] = set()
        self._lock = threading.Lock()
        # PodGroupScheduled writes run on the reporting pool: one at a time, and each group we
        # wrote True is remembered (by its uid), because the source's copy of the group may not
        # show that write yet when a later cycle for extra members reports Unschedulable.
        self._status_lock = threading.Lock()
        self._written_scheduled: dict[GroupKey, str] = {}

    @property
    def enabled(self) -> bool:
        return bool(self.apis)

    @property
    def synced(self) -> bool:
        return self.source is None or self.source.synced

    def start(self) -> None:
        if self.source is not None:
            self.source.start()

    def stop(self) -> None:
        if self.source is not None:
            self.source.stop()

    def handles(self, pod: PodView) -> bool:
        """Is `pod` a member of a group of a watched API? (only asked for pods with a group)"""
        return pod.group is not None and pod.group.api in self.apis

    # ---- membership and admission (watch threads, the queue) ---------------------------------

    def pre_enqueue(self, pod: PodView) -> bool:
        """kube-scheduler's GangScheduling PreEnqueue, for the queue (its lock held)."""
        group = pod.group
        if group is None or group.api not in self.apis:
            return True
        coordinator = self.coordinator
        if not coordinator.is_member(pod.uid):  # the pending watch came before the pod watch
            coordinator.upsert_member(_member(pod, group, "", bool(pod.scheduling_gates)))
        admission = coordinator.admission(pod.uid)
        with self._lock:
            if admission.admitted:
                self._gated_groups.discard(group)
                self._admitted_at.setdefault(group, self._clock())
                return True
            self._gated_groups.add(group)
        log.info("pod group member waits", extra={"fields": {
            "pod": pod.key, "group": str(group), "reason": admission.reason, "message": admission.message}})
        return False

    def pod_event(self, event: str, record: PodRecord) -> None:
        """The cluster state saw a member pod added, changed or deleted (bound ones count whatever
        their scheduler; terminal ones do not)."""
        group = record.group
        if group is None or group.api not in self.apis or event not in _POD_EVENTS:
            return
        if event == listeners.POD_DELETED or record.phase in TERMINAL_PHASES:
            verdicts = self.coordinator.delete_member(record.uid)
        else:
            node = "" if record.assumed else record.node_name
            verdicts = self.coordinator.upsert_member(_member(record, group, node, record.gated))
        self.apply(verdicts)
        self._ungate(group)
        self._write_coscheduling(group)

    def member_queued(self, pod: PodView) -> None:
        """The pending watch queued a member: its siblings parked for it may go now."""
        if self.handles(pod):
            assert pod.group is not None
            self._ungate(pod.group)

    def _group_event(self, key: GroupKey, group: PodGroup | None) -> None:
        if group is None:
            with self._status_lock:
                self._written_scheduled.pop(key, None)
        verdicts = self.coordinator.upsert_group(group) if group is not None else self.coordinator.delete_group(key)
        self.apply(verdicts)
        self._ungate(key)
        self._write_coscheduling(key)

    def _ungate(self, key: GroupKey) -> None:
        """Ask the queue to re-check the group's waiting members, unless the group would admit
        none: admission is the group's answer, the same for each member, and asking (and logging)
        once per member at every member's arrival made a gang of n cost O(n²) (a gang of 1,000:
        about a million refusals logged, most of our CPU in `python -m bench gang-scale`)."""
        if self.coordinator.group_admission(key).admitted:
            self.scheduler.queue.ungate([m.pod for m in self.coordinator.to_place(key)])

    # ---- the group cycle (the loop) -------------------------------------------------------

    def schedule_group(self, first: QueuedPod, profile: Profile) -> None:
        """Place `first` and its group's other waiting members together, then hold them (Permit)."""
        s = self.scheduler
        started = time.perf_counter()
        key = first.pod.group
        assert key is not None
        siblings = [m.pod for m in self.coordinator.to_place(key) if m.uid != first.uid]
        entries = [first, *s.queue.pop_members(siblings)]
        taken = {entry.key for entry in entries}
        if not self.coordinator.quorum_with(key, len(entries)) and any(
                k not in taken and s.queue.where(k) in _ON_ITS_WAY for k in siblings):
            # Members the quorum needs are known (pod watch) but were not queued yet (pending
            # watch; or queued, admitted, just after `pop_members`): wait for them rather than fail
            # the group for a watch's lag (a whole cycle placing every member to fail them all,
            # then another: seen with a gang of 1,000 in `python -m bench gang-scale`).
            for entry in entries:
                s.queue.park(entry)
            if all(s.queue.where(k) is not None for k in siblings):  # arrived meanwhile
                self._ungate(key)
            return
        entries.sort(key=lambda e: member_order(e.pod))
        entries = [e for e in entries if not s.placed_already(e)]
        group = self.coordinator.group_of(first.uid)
        host = _LiveGroup(self, profile, started)
        domain: tuple[str, ...] | None = None
        if group is not None and group.topology_keys:
            domain = self._domain(host, group, entries, started)
            if domain is None:
                return
        placed = place_members(host, entries, domain)
        complete = bool(placed) and self.coordinator.quorum_with(key, len(placed))
        if not complete:
            for member in placed:
                self._give_back(member)
                s.reporter.unschedulable_message(member.entry, KUBE_MEMBER_UNSCHEDULABLE_MESSAGE,
                                                 duration=time.perf_counter() - started)
                s.queue.requeue_unschedulable(member.entry)
            if placed or host.unfit_count:
                self._write_condition(key, REASON_UNSCHEDULABLE, KUBE_GROUP_UNSCHEDULABLE_MESSAGE)
            return
        metrics.SCHEDULING_LATENCY.labels(profile=profile.name).observe(time.perf_counter() - started)
        for member in placed:
            with self._lock:
                self._held[member.entry.uid] = member
            self.apply(self.coordinator.hold(member.entry.uid, member.node))

    def engine(self, entry: QueuedPod, profile: Profile) -> Engine:
        """The engine of the member's own profile (the popped member's when it names none served)."""
        found = self.scheduler.profiles.get(entry.profile)
        return found.engine if found is not None else profile.engine

    def _domain(self, host: _LiveGroup, group: PodGroup, entries: list[QueuedPod],
                started: float) -> tuple[str, ...] | None:
        """The nodes of the topology domain where most members fit, each domain tried on the live
        state and given back; None when no domain is possible (the members are then reported and
        requeued)."""
        s = self.scheduler
        with self._lock:
            held = [m.node for m in self._held.values() if m.entry.pod.group == group.key]
        pinned = [m.node for m in self.coordinator.members(group.key) if m.node] + held
        candidates = domains(group.topology_keys[0], s.state, pinned)
        if not candidates.domains:
            for entry in entries:
                s.reporter.unschedulable_message(entry, f"{candidates.reason}: {candidates.message}",
                                                 duration=time.perf_counter() - started)
                s.queue.requeue_unschedulable(entry)
            self._write_condition(group.key, REASON_UNSCHEDULABLE, KUBE_GROUP_UNSCHEDULABLE_MESSAGE)
            return None
        return choose_domain(host, entries, candidates.domains)

    # ---- verdicts -------------------------------------------------------------------------

    def apply(self, verdicts: Iterable[Verdict]) -> None:
        """ALLOW: bind; REJECT: give the place back and retry with backoff. WAIT: nothing yet."""
        s = self.scheduler
        scheduled: set[GroupKey] = set()
        timed_out: set[GroupKey] = set()
        for verdict in verdicts:
            if verdict.decision is Decision.WAIT:
                continue
            with self._lock:
                member = self._held.pop(verdict.uid, None)
            if member is None:
                continue
            entry = member.entry
            key = entry.pod.group
            assert key is not None
            if verdict.decision is Decision.ALLOW:
                s.binds.submit(entry, member.node, member.started, member.reservations)
                scheduled.add(key)
                continue
            self._give_back(member)
            s.reporter.unschedulable_message(entry, verdict.message or verdict.reason,
                                             duration=time.perf_counter() - member.started)
            s.queue.requeue_backoff(entry)
            if verdict.reason == REASON_TIMEOUT:
                timed_out.add(key)
        for key in scheduled:
            with self._lock:
                since = self._admitted_at.pop(key, None)
            if since is not None:
                metrics.GANG_COMPLETION.observe(max(0.0, self._clock() - since))
            self._write_condition(key, REASON_SCHEDULED, "")
        if timed_out:
            metrics.GANG_TIMEOUTS.inc(len(timed_out))
            s.queue.move_all("pod-group-released")

    def undone(self, entry: QueuedPod) -> None:
        """The bind pool gave a released member's place back (bind refused, leadership lost)."""
        if entry.pod.group is not None and entry.pod.group.api in self.apis:
            self.apply(self.coordinator.withdraw(entry.uid, f"the bind of {entry.key} failed"))

    def tick(self) -> None:
        """From the loop: send back the held members of groups whose wait ran out; publish the gauge."""
        deadline = self.coordinator.next_deadline()
        if deadline is not None and deadline <= self._clock():
            self.apply(self.coordinator.expire())
        with self._lock:
            waiting = self._gated_groups | {m.entry.pod.group for m in self._held.values()}
        metrics.GANG_GROUPS_WAITING.set(len(waiting))

    def _give_back(self, member: Placed) -> None:
        try:
            steps.give_back(self.scheduler.state, member.taken)
        except Exception:  # a plugin's bug must not lose the pod
            log.exception("releasing the reservations of %s failed", member.entry.key)

    # ---- the group's status ---------------------------------------------------------------

    def _write_condition(self, key: GroupKey, reason: str, message: str) -> None:
        """PodGroupScheduled, as kube-scheduler writes it (v1alpha2 groups only), off the loop."""
        if key.api == API_V1ALPHA2 and self.source is not None:
            self.scheduler.reporter.submit(self._patch_condition, key, reason, message)

    def _write_coscheduling(self, key: GroupKey) -> None:
        """Coscheduling's status (phase, running counts), as its controller keeps it, where we
        schedule the group: no scheduler-plugins controller runs beside us."""
        if key.api == API_COSCHEDULING and self.source is not None:
            self.scheduler.reporter.submit(self._patch_coscheduling, key)

    def _patch_coscheduling(self, key: GroupKey) -> None:
        assert self.source is not None
        raw = self.source.raw(key)
        if raw is None:
            return
        state = self.scheduler.state
        members = self.coordinator.members(key)
        records = [state.pod(m.pod) for m in members]
        running = sum(1 for r in records if r is not None and r.phase == "Running")
        patch = coscheduling_status(raw, MemberCounts(len(members), running=running))
        if patch is not None:
            self.source.patch_status(key, patch)

    def _patch_condition(self, key: GroupKey, reason: str, message: str) -> None:
        """Never from True back to False, even before the watch shows our own True."""
        assert self.source is not None
        with self._status_lock:
            raw = self.source.raw(key)
            if raw is None:
                return
            uid = str((raw.get("metadata") or {}).get("uid") or "")
            if reason != REASON_SCHEDULED and self._written_scheduled.get(key) == uid:
                return
            patch = scheduled_condition_patch(raw, reason, message, rfc3339())
            written = patch is None or self.source.patch_status(key, patch)
            if written and reason == REASON_SCHEDULED:
                self._written_scheduled[key] = uid
