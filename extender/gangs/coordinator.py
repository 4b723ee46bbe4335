"""The gang coordinator: admission before the queue, holds at Permit, release all or none.

One `GangCoordinator` per scheduler process (standalone) or per webhook worker (each worker's
holds; the count across workers and replicas goes through the API server, see docs/gangs.md).
The informer adapters tell it about groups and member pods; the queue asks `admission`; a member
placed by the scheduling cycle is `hold`-ed (kube-scheduler's Permit), and every call that can
decide holds returns the `Verdict`s it made: ALLOW (bind now) or REJECT (give the place back,
retry the pod). Waiting threads may also block in `wait` for their verdict.

Counting follows kube-scheduler's pod group state (backend/cache/podgroupstate.go): a member is
*scheduled* when it is held, allowed (released, binding in progress) or bound; a gang is
released when its scheduled members reach `min_count`. A hold that runs out takes every held
member of its group with it: a gang is never released in part. Pure: the clock is injected and
only `wait` blocks (on a condition variable, for the webhook's request threads).
"""

from __future__ import annotations

import enum
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from extender.model.podgroups import API_COSCHEDULING, GroupKey, PodGroup
from extender.model.resources import Resources

# Short fixed phrases (they are counted in FailedScheduling events); numbers go in messages.
REASON_NO_GROUP = "pod group does not exist"
REASON_TOO_FEW = "pod group has fewer members than its minCount"
REASON_GATED = "pod group has scheduling-gated members"
REASON_SCHEDULER_NAMES = "pod group members use different schedulerNames"
REASON_WAITING = "waiting for the pod group's minCount members to be placed"
REASON_TIMEOUT = "pod group did not reach minCount in time"
REASON_DELETED = "pod group was deleted"
REASON_SIBLING = "another member of the pod group gave up its place"


class Decision(enum.Enum):
    ALLOW = "allow"  # bind now
    WAIT = "wait"  # held: a later call decides
    REJECT = "reject"  # give the place back; the pod is retried


@dataclass(frozen=True, slots=True)
class Member:
    uid: str
    pod: str  # namespace/name, for messages
    group: GroupKey
    scheduler_name: str
    node: str = ""  # the node it is bound to; "" while unbound
    gated: bool = False  # has spec.schedulingGates
    requests: Resources = field(default_factory=dict)  # the pod's effective requests (fitting)


@dataclass(frozen=True, slots=True)
class Admission:
    """May the member enter the queue (be filtered) now? `unresolvable`: only a change to the
    group or its members can help (the webhook answers FailedAndUnresolvableNodes)."""

    admitted: bool
    reason: str = ""
    message: str = ""
    unresolvable: bool = False


ADMITTED = Admission(True)


@dataclass(frozen=True, slots=True)
class Verdict:
    uid: str
    node: str
    decision: Decision
    reason: str = ""
    message: str = ""
    deadline: float | None = None  # WAIT: when the hold runs out (coordinator clock)


@dataclass(frozen=True, slots=True)
class GroupStatus:
    """What `explain`, metrics and the group's status need to know about one group."""

    key: GroupKey
    exists: bool
    min_count: int
    members: int
    bound: int
    held: int
    allowed: int
    waiting_since: float | None  # the earliest hold still waiting

    @property
    def scheduled(self) -> int:
        return self.bound + self.held + self.allowed

    @property
    def missing(self) -> int:
        """Members still to place before the quorum."""
        return max(0, self.min_count - self.scheduled)


@dataclass(slots=True)
class _Hold:
    node: str
    since: float
    deadline: float


@dataclass(slots=True)
class _Group:
    """One group's members and holds, with the counts admission reads kept as members come and
    go (a 1,000-member gang must not rescan its members for each of them)."""

    group: PodGroup | None = None
    members: dict[str, Member] = field(default_factory=dict)
    held: dict[str, _Hold] = field(default_factory=dict)
    allowed: dict[str, str] = field(default_factory=dict)  # uid -> node
    bound_count: int = 0
    gated_unbound: int = 0
    unbound_names: Counter[str] = field(default_factory=Counter)  # schedulerName -> unbound members

    def put(self, member: Member) -> None:
        self.take(member.uid)
        self.members[member.uid] = member
        self._count(member, 1)

    def take(self, uid: str) -> None:
        old = self.members.pop(uid, None)
        if old is not None:
            self._count(old, -1)

    def _count(self, member: Member, sign: int) -> None:
        if member.node:
            self.bound_count += sign
            return
        self.gated_unbound += sign * member.gated
        self.unbound_names[member.scheduler_name] += sign
        if not self.unbound_names[member.scheduler_name]:
            del self.unbound_names[member.scheduler_name]

    def scheduled(self) -> int:
        return self.bound_count + len(self.held) + len(self.allowed)

    def empty(self) -> bool:
        return self.group is None and not self.members


class GangCoordinator:
    """Thread-safe; every method takes the one lock briefly, `wait` releases it while blocked.

    `hold_limit` caps how long a member may be held whatever its group's timeout: the webhook
    sets it below kube-scheduler's `httpTimeout`; the standalone scheduler leaves it None.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, hold_limit: float | None = None) -> None:
        if hold_limit is not None and hold_limit <= 0:
            raise ValueError("hold_limit must be positive")
        self._clock = clock
        self._hold_limit = hold_limit
        self._groups: dict[GroupKey, _Group] = {}
        self._member_group: dict[str, GroupKey] = {}
        self._mailbox: dict[str, Verdict] = {}
        self._lock = threading.Lock()
        self._decided = threading.Condition(self._lock)

    # --- what the informers say -------------------------------------------------------------

    def upsert_group(self, group: PodGroup) -> list[Verdict]:
        """A group appeared or changed (recreated under the same name): held members may now be due."""
        with self._lock:
            state = self._groups.setdefault(group.key, _Group())
            state.group = group
            return self._post(self._settle(state))

    def delete_group(self, key: GroupKey) -> list[Verdict]:
        """The group object is gone: every held member goes back to the queue, where it waits for
        the group again. Members already allowed keep binding (they were released whole)."""
        with self._lock:
            state = self._groups.get(key)
            if state is None:
                return []
            state.group = None
            verdicts = self._reject_held(state, REASON_DELETED, f"pod group {key} was deleted while "
                                         f"{len(state.held)} members waited")
            self._forget_if_empty(key)
            return self._post(verdicts)

    def upsert_member(self, member: Member) -> list[Verdict]:
        """A member pod was added or changed (bound, gated, ungated). A bound member leaves the
        holds; since bound members count, it can complete a quorum for the held ones."""
        with self._lock:
            previous = self._member_group.get(member.uid)
            verdicts: list[Verdict] = []
            if previous is not None and previous != member.group:  # the pod was recreated elsewhere
                verdicts += self._drop(member.uid, previous)
            state = self._groups.setdefault(member.group, _Group())
            state.put(member)
            self._member_group[member.uid] = member.group
            if member.node:
                state.held.pop(member.uid, None)
                state.allowed.pop(member.uid, None)
                self._mailbox.pop(member.uid, None)
            verdicts += self._settle(state)
            return self._post(verdicts)

    def delete_member(self, uid: str) -> list[Verdict]:
        """A member pod is gone (deleted, or finished). Held, it is simply forgotten in a v1alpha2
        group (kube-scheduler rejects only that pod); in a Coscheduling group its held siblings are
        rejected too (Coscheduling's Unreserve)."""
        with self._lock:
            key = self._member_group.get(uid)
            return self._post(self._drop(uid, key)) if key is not None else []

    # --- the queue ----------------------------------------------------------------------------

    def admission(self, uid: str) -> Admission:
        """kube-scheduler's GangScheduling PreEnqueue (and Coscheduling's PreFilter quorum checks).
        KeyError for a pod never passed to `upsert_member`."""
        with self._lock:
            key = self._member_group[uid]
            return self._admission(key, self._groups[key])

    def group_admission(self, key: GroupKey) -> Admission:
        """What `admission` answers every member of the group: it depends on the group alone, so
        a caller re-checking all members can ask once."""
        with self._lock:
            return self._admission(key, self._groups.get(key, _Group()))

    def _admission(self, key: GroupKey, state: _Group) -> Admission:
        """`admission` for the group `key` (the lock held)."""
        if state.group is None:
            return Admission(False, REASON_NO_GROUP, f"pod group {key} does not exist (yet)", True)
        names = sorted(state.unbound_names)
        if len(names) > 1:
            return Admission(False, REASON_SCHEDULER_NAMES,
                             f"members of pod group {key} use schedulerNames {', '.join(map(repr, names))}; "
                             "all must use one", True)
        group = state.group
        if not group.is_gang:
            return ADMITTED
        members = len(state.members)
        if members < group.min_count:
            return Admission(False, REASON_TOO_FEW, f"pod group {key} has {members} of {group.min_count} "
                             f"members (minCount {group.min_count}); {group.min_count - members} missing", True)
        if key.api == API_COSCHEDULING:
            gated = state.gated_unbound
            if members - gated < group.min_count:
                return Admission(False, REASON_GATED, f"pod group {key} has {gated} scheduling-gated of "
                                 f"{members} members, minCount {group.min_count}", True)
        return ADMITTED

    def status(self, key: GroupKey) -> GroupStatus:
        with self._lock:
            state = self._groups.get(key, _Group())
            group = state.group
            since = min((h.since for h in state.held.values()), default=None)
            return GroupStatus(key, group is not None, group.min_count if group else 0, len(state.members),
                               state.bound_count, len(state.held), len(state.allowed), since)

    def describe(self, uid: str) -> list[str]:
        """What `explain` says about a member: its group, the quorum, and what it waits for.
        Empty for a pod of no group."""
        with self._lock:
            key = self._member_group.get(uid)
        if key is None:
            return []
        status = self.status(key)
        group = self.group_of(uid)
        lines = [f"member of pod group {key} ({key.api})"]
        if group is None:
            return [*lines, "waits for: the pod group to exist"]
        quorum = f"gang, minCount {group.min_count}" if group.is_gang else "basic (no quorum)"
        lines.append(f"policy: {quorum}; members {status.members}, bound {status.bound}, held {status.held}, "
                     f"allowed {status.allowed}")
        admission = self.admission(uid)
        if not admission.admitted:
            lines.append(f"waits for: {admission.message}")
        elif group.is_gang and status.missing:
            lines.append(f"waits for: {status.missing} more member(s) placed (held members wait up to "
                         f"{group.timeout:g} s)")
        return lines

    def members(self, key: GroupKey) -> list[Member]:
        """Every known member of the group (bound ones have `node`)."""
        with self._lock:
            state = self._groups.get(key)
            return list(state.members.values()) if state is not None else []

    def is_member(self, uid: str) -> bool:
        with self._lock:
            return uid in self._member_group

    def group_of(self, uid: str) -> PodGroup | None:
        """The group object of a known member (None: not a member, or the group does not exist)."""
        with self._lock:
            key = self._member_group.get(uid)
            return self._groups[key].group if key is not None else None

    def to_place(self, key: GroupKey) -> list[Member]:
        """Members neither bound, held nor allowed: the ones a group cycle, or the webhook's fit
        check, still has to find room for."""
        with self._lock:
            state = self._groups.get(key)
            if state is None:
                return []
            busy = state.held.keys() | state.allowed.keys()
            return [m for m in state.members.values() if not m.node and m.uid not in busy]

    def quorum_with(self, key: GroupKey, placed: int) -> bool:
        """Would `placed` more members (placed in a group cycle, not held yet) complete the group?
        Always true for a basic group; false for a group that does not exist."""
        with self._lock:
            state = self._groups.get(key)
            if state is None or state.group is None:
                return False
            return not state.group.is_gang or state.scheduled() + placed >= state.group.min_count

    # --- Permit ---------------------------------------------------------------------------------

    def hold(self, uid: str, node: str) -> list[Verdict]:
        """A member was placed on `node` (and assumed). Its own verdict is among those returned:
        WAIT (held until the quorum or its deadline), ALLOW (the quorum is there: it and every
        held member of its group are released), or REJECT (its group does not exist)."""
        with self._lock:
            key = self._member_group[uid]
            state = self._groups[key]
            group = state.group
            self._mailbox.pop(uid, None)
            if group is None:
                return self._post([Verdict(uid, node, Decision.REJECT, REASON_NO_GROUP,
                                           f"pod group {key} does not exist")])
            if uid in state.allowed:  # asked again (a retried request): same answer
                return self._post([Verdict(uid, state.allowed[uid], Decision.ALLOW)])
            if not group.is_gang:
                state.allowed[uid] = node
                return self._post([Verdict(uid, node, Decision.ALLOW)])
            now = self._clock()
            current = state.held.get(uid)
            if current is None:
                limit = group.timeout if self._hold_limit is None else min(group.timeout, self._hold_limit)
                state.held[uid] = _Hold(node, now, now + limit)
            else:
                current.node = node
            verdicts = self._settle(state)
            if not verdicts:
                hold = state.held[uid]
                verdicts = [Verdict(uid, node, Decision.WAIT, REASON_WAITING,
                                    f"pod group {key}: {state.scheduled()} of {group.min_count} members placed",
                                    hold.deadline)]
            return self._post(verdicts)

    def withdraw(self, uid: str, reason: str) -> list[Verdict]:
        """A held or allowed member gave up its place for a reason of its own (another Permit
        plugin said no, its bind failed, its webhook request ended). An allowed member just leaves
        (the others were released with it and keep binding); a held one is forgotten, and in a
        Coscheduling group its held siblings are rejected with it (Unreserve)."""
        with self._lock:
            key = self._member_group.get(uid)
            if key is None:
                return []
            state = self._groups[key]
            self._mailbox.pop(uid, None)
            state.allowed.pop(uid, None)
            was_held = state.held.pop(uid, None) is not None
            if not was_held or key.api != API_COSCHEDULING:
                return []
            return self._post(self._reject_held(state, REASON_SIBLING, f"pod group {key}: {reason}"))

    def expire(self) -> list[Verdict]:
        """Every group with a hold past its deadline sends all its held members back."""
        with self._lock:
            now = self._clock()
            verdicts: list[Verdict] = []
            for key, state in self._groups.items():
                if any(h.deadline <= now for h in state.held.values()):
                    group = state.group
                    min_count = group.min_count if group is not None else 0
                    placed = state.scheduled()
                    verdicts += self._reject_held(
                        state, REASON_TIMEOUT,
                        f"pod group {key}: {placed} of {min_count} members placed before the wait ran out")
            return self._post(verdicts)

    def next_deadline(self) -> float | None:
        """When `expire` next has something to do (coordinator clock), for a timer."""
        with self._lock:
            return min((h.deadline for s in self._groups.values() for h in s.held.values()), default=None)

    def wait(self, uid: str, timeout: float) -> Verdict | None:
        """Block until `uid`'s hold is decided (ALLOW or REJECT) or `timeout` real seconds pass;
        the verdict is consumed. None: still undecided (the caller may `expire` or `withdraw`)."""
        with self._decided:
            self._decided.wait_for(lambda: uid in self._mailbox, timeout)
            return self._mailbox.pop(uid, None)

    # --- internals (lock held) ----------------------------------------------------------------

    def _settle(self, state: _Group) -> list[Verdict]:
        """Release every held member if the group's quorum is there (or it is no gang any more)."""
        group = state.group
        if group is None or not state.held:
            return []
        if group.is_gang and state.scheduled() < group.min_count:
            return []
        verdicts = [Verdict(uid, hold.node, Decision.ALLOW) for uid, hold in state.held.items()]
        state.allowed.update((uid, hold.node) for uid, hold in state.held.items())
        state.held.clear()
        return verdicts

    def _reject_held(self, state: _Group, reason: str, message: str) -> list[Verdict]:
        verdicts = [Verdict(uid, hold.node, Decision.REJECT, reason, message) for uid, hold in state.held.items()]
        state.held.clear()
        return verdicts

    def _drop(self, uid: str, key: GroupKey) -> list[Verdict]:
        state = self._groups[key]
        state.take(uid)
        state.allowed.pop(uid, None)
        self._member_group.pop(uid, None)
        self._mailbox.pop(uid, None)
        verdicts: list[Verdict] = []
        if state.held.pop(uid, None) is not None and key.api == API_COSCHEDULING:
            verdicts = self._reject_held(state, REASON_SIBLING, f"pod group {key}: a held member was deleted")
        self._forget_if_empty(key)
        return verdicts

    def _forget_if_empty(self, key: GroupKey) -> None:
        if self._groups[key].empty():
            del self._groups[key]

    def _post(self, verdicts: Iterable[Verdict]) -> list[Verdict]:
        """Decided verdicts also go to the mailbox `wait` reads; WAIT verdicts do not."""
        verdicts = list(verdicts)
        decided = False
        for verdict in verdicts:
            if verdict.decision is not Decision.WAIT:
                self._mailbox[verdict.uid] = verdict
                decided = True
        if decided:
            self._decided.notify_all()
        return verdicts
