"""Pod groups in simulate: members placed all or nothing, as the standalone scheduler's group cycle.

The same coordinator as the schedulers (extender.gangs), fed once with the snapshot's PodGroups
(both APIs) and their member pods: bound members count whatever their scheduler, pending ones
are the run's queue. When the queue reaches a group's first member, the whole group is decided
at once by the one group cycle (`extender.cycle.group`), as the standalone scheduler does live:

* **admission** (PreEnqueue): the group must exist, a gang must have `minCount` members, and the
  unbound members must share one schedulerName; otherwise no member is tried and each is reported
  with the coordinator's message;
* **the cycle**: the members (scheduling-gated ones aside) are placed in turn on the live state
  (`extender.cycle.group.member_order`), each assumed so the next sees it, inside the best domain
  of a topology constraint (`extender.gangs.topology`, `extender.cycle.group.choose_domain`); the
  members no node fits then preempt, with the group's places still taken (not in a topology
  domain), and are retried at once, as simulate retries every preempting pod;
* **all or nothing**: if bound + placed members do not reach the quorum
  (`GangCoordinator.quorum_with`), every place is given back and the placed members are reported
  with kube-scheduler's message (`KUBE_MEMBER_UNSCHEDULABLE_MESSAGE`), the others with their own;
  otherwise every placed member is bound, and members that fit nowhere stay pending alone. A
  `basic` group binds what fits.

Each group's outcome (quorum, members placed and pending, complete or not and why) is a
`GroupOutcome` for the report.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.cluster.state import ClusterState
from extender.cycle.group import choose_domain, domains, member_order, place_members
from extender.cycle.pod import CycleResult
from extender.errors import InvalidObject
from extender.gangs.coordinator import GangCoordinator, Member
from extender.model.nodes import NodeInfo
from extender.model.podgroups import (
    APIS,
    KUBE_MEMBER_UNSCHEDULABLE_MESSAGE,
    GroupKey,
    api_of,
    parse_pod_group,
)
from extender.model.pods import PodView
from extender.model.records import PodRecord
from extender.policy.engine import Engine
from extender.simulation.placing import Placement, Placer, Taken, Unfit, Unplaced

# Short fixed phrases, as the coordinator's REASON_* (which give the admission reasons).
REASON_NO_ROOM = "pod group's quorum does not fit"
REASON_INVALID = "pod group object is invalid"
REASON_SOME_PENDING = "some members stay pending"


@dataclass(frozen=True, slots=True)
class GroupOutcome:
    """What simulate did with one pod group that had pending members."""

    group: str  # namespace/name
    api: str  # the apiVersion of the group's API
    policy: str  # "gang" or "basic"; "" when the group does not exist or cannot be read
    min_count: int  # the quorum (1 for basic groups); 0 when unknown
    members: int  # members known: bound before the run, pending, gated
    bound: int  # members already on nodes before the run
    placed: tuple[str, ...]  # members this run placed
    pending: tuple[str, ...]  # members left pending
    complete: bool  # the quorum is on nodes (basic: some member is), as kube-scheduler's PodGroupScheduled=True
    reason: str = ""  # short fixed phrase: why incomplete (or why members stay pending)
    message: str = ""  # the same with the numbers


def gates_reason(view: PodView) -> str:
    return f"waiting for scheduling gates: [{' '.join(view.scheduling_gates)}]"


def _uid(pod: PodView | PodRecord) -> str:
    return pod.uid or pod.key


def _raw_key(raw: Mapping[str, Any]) -> GroupKey | None:
    """The key of a group object that cannot be parsed, when enough of it is readable."""
    meta = raw.get("metadata")
    version = raw.get("apiVersion")
    if not isinstance(meta, Mapping) or version not in APIS:
        return None
    namespace, name = meta.get("namespace"), meta.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str) or not namespace or not name:
        return None
    return GroupKey(str(version), namespace, name)


class _SimulatedGroup:
    """Simulate as one group cycle's host (extender.cycle.group.GroupHost): members are pods,
    what stays pending is collected in `unplaced`, and a member no node fits preempts and is
    retried at once, as simulate retries every preempting pod."""

    def __init__(self, placer: Placer, group: str, unplaced: list[Unplaced]) -> None:
        self._placer = placer
        self._group = group
        self.unplaced = unplaced
        self.cluster: ClusterState = placer.state
        self.rng: random.Random = placer.rng

    def pod(self, member: PodView) -> PodView:
        return member

    def engine(self, member: PodView) -> Engine:
        return self._placer.engine

    def place(self, member: PodView, nodes: Sequence[NodeInfo] | None) -> Taken | CycleResult | None:
        outcome = self._placer.take(member, nodes=nodes, preempting=False, group=self._group)
        if isinstance(outcome, Unfit):
            return outcome.result
        if isinstance(outcome, Unplaced):
            self.unplaced.append(outcome)
            return None
        return outcome

    def unfit(self, member: PodView, result: CycleResult, *, preempting: bool) -> Taken | None:
        if not preempting:
            fit_error = result.decision.fit_error()
            self.unplaced.append(Unplaced(member.key, str(fit_error), member.priority, self._group, fit_error))
            return None
        # Tried again first: an earlier member's preemption may have made room already.
        retried = self._placer.take(member, group=self._group)
        if isinstance(retried, Taken):
            return retried
        assert isinstance(retried, Unplaced)
        self.unplaced.append(retried)
        return None




class GroupCycles:
    """The run's pod groups. `run(first)` decides the group of the queue's first member reached."""

    def __init__(self, placer: Placer, raw_groups: Iterable[Mapping[str, Any]], queue: Sequence[PodView]) -> None:
        self.placer = placer
        self.coordinator = GangCoordinator()
        self.outcomes: list[GroupOutcome] = []
        self.notes: list[str] = []
        self._invalid: dict[GroupKey, str] = {}
        self._pending: dict[GroupKey, list[PodView]] = {}
        self._done: set[GroupKey] = set()
        for index, raw in enumerate(raw_groups):
            try:
                self.coordinator.upsert_group(parse_pod_group(raw, api_of(raw)))
            except InvalidObject as exc:
                key = _raw_key(raw)
                if key is None:
                    self.notes.append(f"PodGroup #{index} ignored: {exc}")
                else:
                    self._invalid[key] = str(exc)
        for info in placer.state.all_node_infos():  # bound members count, whatever their scheduler
            for record in info.pods:
                if record.group is not None and record.counts:
                    self.coordinator.upsert_member(Member(_uid(record), record.key, record.group,
                                                          record.scheduler_name, record.node_name, record.gated,
                                                          dict(record.requests)))
        for view in queue:
            if view.group is not None:
                self.coordinator.upsert_member(Member(_uid(view), view.key, view.group, view.scheduler_name, "",
                                                      bool(view.scheduling_gates), dict(view.requests)))
                self._pending.setdefault(view.group, []).append(view)

    def run(self, first: PodView) -> tuple[list[Placement], list[Unplaced]]:
        """Decide `first`'s whole group (nothing when it was decided already): what was placed and
        what stays pending, every member of the group in one go."""
        key = first.group
        assert key is not None
        if key in self._done:
            return [], []
        self._done.add(key)
        name = str(key)
        members = self._pending[key]
        for member in self.coordinator.members(key):  # bound members an earlier preemption removed
            if member.node and self.placer.state.pod(member.pod) is None:
                self.coordinator.delete_member(member.uid)
        status = self.coordinator.status(key)
        gated = [Unplaced(v.key, gates_reason(v), v.priority, name) for v in members if v.scheduling_gates]
        entries = sorted((v for v in members if not v.scheduling_gates), key=member_order)
        group = self.coordinator.group_of(_uid(first))
        policy, min_count = (group.policy, group.min_count) if group is not None else ("", 0)

        order = {v.key: i for i, v in enumerate(sorted(members, key=member_order))}

        def outcome(placed: Sequence[Placement], unplaced: list[Unplaced], complete: bool, reason: str,
                    message: str) -> None:
            unplaced.sort(key=lambda u: order[u.pod])  # reported in the cycle's order
            self.outcomes.append(GroupOutcome(name, key.api, policy, min_count, status.members, status.bound,
                                              tuple(p.pod for p in placed), tuple(u.pod for u in unplaced),
                                              complete, reason, message))

        def refuse(reason: str, message: str) -> tuple[list[Placement], list[Unplaced]]:
            unplaced = gated + [Unplaced(v.key, message, v.priority, name) for v in entries]
            outcome([], unplaced, False, reason, message)
            return [], unplaced

        if key in self._invalid:
            return refuse(REASON_INVALID, f"pod group {key} cannot be read: {self._invalid[key]}")
        admission = self.coordinator.admission(_uid(first))
        if not admission.admitted:
            return refuse(admission.reason, admission.message)
        assert group is not None
        domain: tuple[str, ...] | None = None
        if group.topology_keys:
            found = self._domain(key, group.topology_keys[0], entries)
            if isinstance(found, str):
                return refuse(found.partition(": ")[0], found)
            domain = found

        unplaced: list[Unplaced] = list(gated)
        taken = place_members(_SimulatedGroup(self.placer, name, unplaced), entries, domain)

        if not self.coordinator.quorum_with(key, len(taken)):
            for place in taken:
                self.placer.give_back(place)
            unplaced += [Unplaced(t.view.key, KUBE_MEMBER_UNSCHEDULABLE_MESSAGE, t.view.priority, name) for t in taken]
            scheduled = status.scheduled + len(taken)
            message = (f"pod group {key}: {scheduled} of minCount {min_count} members fit ({status.scheduled} bound, "
                       f"{len(taken)} placed, {len(entries) - len(taken)} not); every place given back")
            victims = [victim for t in taken for victim in t.placement.victims]
            if victims:  # evicted live too: kube-scheduler's preemption does not wait for the group's outcome
                message += f"; preempted for it all the same: {', '.join(victims)}"
            outcome([], unplaced, False, REASON_NO_ROOM, message)
            return [], unplaced
        placed: list[Placement] = []
        for place in taken:
            bound = self.placer.bind(place)
            if isinstance(bound, Placement):
                placed.append(bound)
            else:
                unplaced.append(bound)
        on_nodes = status.scheduled + len(placed)
        complete = on_nodes >= min_count
        reason = message = ""
        if not complete:  # a basic group none of whose members fits (or a gang whose binds failed)
            reason = REASON_NO_ROOM
            message = (f"pod group {key}: none of its {len(entries)} pending members fits" if not group.is_gang
                       else f"pod group {key}: {on_nodes} of minCount {min_count} members bound")
        elif unplaced:
            reason = REASON_SOME_PENDING
            message = (f"pod group {key}: {len(unplaced)} member(s) beyond the quorum stay pending" if group.is_gang
                       else f"pod group {key}: {len(unplaced)} member(s) stay pending (basic: no quorum)")
        outcome(placed, unplaced, complete, reason, message)
        return placed, unplaced

    def _domain(self, key: GroupKey, label: str, entries: Sequence[PodView]) -> tuple[str, ...] | str:
        """The nodes of the domain where most members fit (each domain tried on the state and given
        back, as the scheduler's); a "reason: message" string when no domain is possible."""
        pinned = [m.node for m in self.coordinator.members(key) if m.node]
        candidates = domains(label, self.placer.state, pinned)
        if not candidates.domains:
            return f"{candidates.reason}: {candidates.message}"
        return choose_domain(_SimulatedGroup(self.placer, str(key), []), entries, candidates.domains)
