"""kube-scheduler v1.36's pod group cycle as a plan: where each member would go, or why the group
cannot go (schedule_one_podgroup.go), with the placing itself injected.

The standalone scheduler gives `plan_group` the members popped together (in `member_order`), a
`place` callback that filters and scores one member on the cycle's copy of the cluster state
(seeing the members placed before it) and tentatively puts it there, and an `undo` that takes
a tentative place back. As kube-scheduler's algorithm does on its snapshot, every tentative
place is taken back before returning: the plan is committed by the caller (assume, then
`GangCoordinator.hold` each member), or dropped. Rules (podGroupSchedulingDefaultAlgorithm):

* members are tried in order; one that fits nowhere is skipped (the group may still complete),
  one that fits only by preemption counts as placed on its nominated node (not in a topology
  domain: a group with a topology constraint gets no preemption);
* the group is complete when members already scheduled plus those placed reach `min_count`
  (at once for a basic group); complete through a preemption means: evict, and retry later;
* not complete: nothing is placed, every member fails.

With a topology constraint the cycle runs once per domain (`extender.gangs.topology`) on that
domain's nodes only; of the domains where the group completes, the one with the best score wins
(kube-scheduler: PodGroupPodsCount, scheduled plus placed members normalised to 0..100 by the
best, plus NodeResourcesFit's MostAllocated over the domain, which `domain_score` supplies),
ties broken by the seeded random. No domain: `0/N placements are available`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from extender.gangs.coordinator import Member


@dataclass(frozen=True, slots=True)
class Attempt:
    """What placing one member gave: a node (tentatively taken), or why not."""

    uid: str
    node: str = ""  # "" when it fits nowhere
    reason: str = ""  # the "0/N nodes are available: ..." summary when it does not fit
    preempts: bool = False  # fits only once victims are evicted; node is the nominated one


@dataclass(frozen=True, slots=True)
class GroupPlan:
    complete: bool
    placed: tuple[Attempt, ...]  # the places to commit (empty when not complete)
    unplaced: tuple[Attempt, ...]  # members that fit nowhere (each with its own reason)
    needs_preemption: bool = False  # complete only by evicting: evict, then plan again
    domain: str | None = None  # the topology domain chosen
    reason: str = ""  # why the group as a whole cannot go

    @property
    def all_attempts(self) -> tuple[Attempt, ...]:
        return self.placed + self.unplaced


PREEMPTION_REFUSED = "preemption is not supported for pod groups with scheduling constraints"

Place = Callable[[Member, frozenset[str] | None], Attempt]  # member, allowed nodes (None: all)
Undo = Callable[[Attempt], None]


def member_order(members: Sequence[Member], priority: Callable[[Member], int],
                 first_attempt: Callable[[Member], float]) -> list[Member]:
    """The cycle's order: higher priority first, then the earlier first attempt."""
    return sorted(members, key=lambda m: (-priority(m), first_attempt(m)))


def _cycle(members: Sequence[Member], scheduled: int, min_count: int, gang: bool, place: Place, undo: Undo,
           nodes: frozenset[str] | None) -> tuple[bool, list[Attempt], list[Attempt]]:
    placed: list[Attempt] = []
    unplaced: list[Attempt] = []
    try:
        for member in members:
            attempt = place(member, nodes)
            if attempt.node and attempt.preempts and nodes is not None:
                # A group with a topology constraint gets no preemption (podgroup_test.go: "tas gang
                # with constraint does not use pod by pod preemption").
                undo(attempt)
                attempt = Attempt(attempt.uid, "", attempt.reason or PREEMPTION_REFUSED)
            (placed if attempt.node else unplaced).append(attempt)
    finally:
        for attempt in reversed(placed):
            undo(attempt)
    complete = bool(placed) and (not gang or scheduled + len(placed) >= min_count)
    return complete, placed, unplaced


def plan_group(
    members: Sequence[Member],
    *,
    scheduled: int,
    min_count: int,
    gang: bool,
    place: Place,
    undo: Undo,
    unschedulable_message: str,
) -> GroupPlan:
    """One cycle over all nodes. `scheduled`: members already held, allowed or bound;
    `unschedulable_message`: what each placed member is told when the gang cannot complete
    (kube-scheduler's KUBE_MEMBER_UNSCHEDULABLE_MESSAGE)."""
    complete, placed, unplaced = _cycle(members, scheduled, min_count, gang, place, undo, None)
    return _plan(complete, placed, unplaced, None, unschedulable_message)


def _plan(complete: bool, placed: list[Attempt], unplaced: list[Attempt], domain: str | None,
          message: str) -> GroupPlan:
    if complete:
        return GroupPlan(True, tuple(placed), tuple(unplaced), any(a.preempts for a in placed), domain)
    failed = tuple(Attempt(a.uid, "", message) for a in placed)
    return GroupPlan(False, (), failed + tuple(unplaced), False, domain, message if placed else "")


def plan_group_in_domains(
    members: Sequence[Member],
    domains: dict[str, tuple[str, ...]],
    *,
    scheduled: int,
    min_count: int,
    gang: bool,
    place: Place,
    undo: Undo,
    domain_score: Callable[[str, Sequence[Attempt]], int],
    unschedulable_message: str,
    rng: random.Random,
) -> GroupPlan:
    """The cycle once per topology domain; the best complete one wins (see the module's doc)."""
    results: dict[str, tuple[list[Attempt], list[Attempt]]] = {}
    first: GroupPlan | None = None
    for domain, nodes in domains.items():
        complete, placed, unplaced = _cycle(members, scheduled, min_count, gang, place, undo, frozenset(nodes))
        if complete:
            results[domain] = (placed, unplaced)
        elif first is None:
            first = _plan(False, placed, unplaced, domain, unschedulable_message)
    if not results:
        reason = f"0/{len(domains)} placements are available"
        if first is not None and first.reason:
            reason += f", first placement status: {first.reason}"
        unplaced = first.unplaced if first is not None else tuple(Attempt(m.uid, "", reason) for m in members)
        return GroupPlan(False, (), unplaced, False, None, reason)
    best_count = max(scheduled + len(placed) for placed, _ in results.values())

    def score(domain: str) -> tuple[int, float]:
        placed = results[domain][0]
        counted = (scheduled + len(placed)) * 100 // best_count  # PodGroupPodsCount, normalised
        return counted + domain_score(domain, placed), rng.random()

    chosen = max(sorted(results), key=score)
    placed, unplaced = results[chosen]
    return _plan(True, placed, unplaced, chosen, unschedulable_message)
