"""The pod group cycle as a plan (kube-scheduler's podGroupSchedulingDefaultAlgorithm), placing injected."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.gangs.coordinator import Member
from extender.gangs.planning import (
    PREEMPTION_REFUSED,
    Attempt,
    member_order,
    plan_group,
    plan_group_in_domains,
)
from extender.model.podgroups import API_V1ALPHA2, KUBE_MEMBER_UNSCHEDULABLE_MESSAGE, GroupKey

KEY = GroupKey(API_V1ALPHA2, "ns", "pg1")
MESSAGE = KUBE_MEMBER_UNSCHEDULABLE_MESSAGE


def members(*cpus: int) -> list[Member]:
    return [Member(f"p{i}", f"ns/p{i}", KEY, "s", requests={"cpu": cpu}) for i, cpu in enumerate(cpus, 1)]


class Cluster:
    """Free cpu per node; `place` takes the first node (by name) with room, `undo` gives it back."""

    def __init__(self, free: dict[str, int], preempt_on: str = "") -> None:
        self.free = dict(free)
        self.preempt_on = preempt_on
        self.tries: list[tuple[str, frozenset[str] | None]] = []
        self.taken: dict[str, int] = {}  # uid -> cpu tentatively taken

    def place(self, member: Member, nodes: frozenset[str] | None) -> Attempt:
        self.tries.append((member.uid, nodes))
        need = member.requests["cpu"]
        for node in sorted(self.free):
            if (nodes is None or node in nodes) and self.free[node] >= need:
                self.free[node] -= need
                self.taken[member.uid] = need
                return Attempt(member.uid, node)
        if self.preempt_on and (nodes is None or self.preempt_on in nodes):
            self.free[self.preempt_on] -= need  # nominated: counted as there
            self.taken[member.uid] = need
            return Attempt(member.uid, self.preempt_on, preempts=True)
        return Attempt(member.uid, "", "0/1 nodes are available: 1 Insufficient cpu.")

    def undo(self, attempt: Attempt) -> None:
        self.free[attempt.node] += self.taken.pop(attempt.uid)


def plan(cluster: Cluster, group: list[Member], *, scheduled: int = 0, min_count: int = 3, gang: bool = True):
    return plan_group(group, scheduled=scheduled, min_count=min_count, gang=gang, place=cluster.place,
                      undo=cluster.undo, unschedulable_message=MESSAGE)


def test_a_gang_that_fits_is_planned_and_nothing_stays_taken() -> None:
    cluster = Cluster({"n1": 2000, "n2": 2000})
    result = plan(cluster, members(1000, 1000, 1000))
    assert result.complete and not result.unplaced and not result.needs_preemption
    assert [(a.uid, a.node) for a in result.placed] == [("p1", "n1"), ("p2", "n1"), ("p3", "n2")]
    assert cluster.free == {"n1": 2000, "n2": 2000}


def test_a_gang_short_of_room_plans_nothing_and_says_why_per_member() -> None:
    cluster = Cluster({"n1": 2000})
    result = plan(cluster, members(1000, 1000, 1000))
    assert not result.complete and not result.placed and result.reason == MESSAGE
    assert [(a.uid, a.reason) for a in result.unplaced] == [
        ("p1", MESSAGE), ("p2", MESSAGE), ("p3", "0/1 nodes are available: 1 Insufficient cpu.")]
    assert cluster.free == {"n1": 2000}


def test_extra_members_of_a_complete_group() -> None:
    assert plan(Cluster({"n1": 1000}), members(1000), scheduled=3).complete
    alone = plan(Cluster({"n1": 500}), members(1000), scheduled=3)
    assert not alone.complete and alone.unplaced[0].reason.startswith("0/1 nodes")


def test_basic_groups_place_what_fits() -> None:
    result = plan(Cluster({"n1": 2000}), members(1000, 1000, 1000), gang=False)
    assert result.complete and [a.uid for a in result.placed] == ["p1", "p2"]
    assert [a.uid for a in result.unplaced] == ["p3"]


def test_complete_only_by_preemption() -> None:
    result = plan(Cluster({"n1": 2000}, preempt_on="n1"), members(1000, 1000, 1000))
    assert result.complete and result.needs_preemption and result.placed[-1].preempts


def test_a_failing_placement_gives_back_what_was_taken() -> None:
    cluster = Cluster({"n1": 4000})
    calls = []

    def place(member: Member, nodes: frozenset[str] | None) -> Attempt:
        calls.append(member.uid)
        if len(calls) == 2:
            raise RuntimeError("plugin error")
        return cluster.place(member, nodes)

    with pytest.raises(RuntimeError):
        plan_group(members(1000, 1000), scheduled=0, min_count=2, gang=True, place=place, undo=cluster.undo,
                   unschedulable_message=MESSAGE)
    assert cluster.free == {"n1": 4000}


def test_member_order_is_priority_then_first_attempt() -> None:
    group = members(1, 2, 3)
    priority = {"p1": 0, "p2": 10, "p3": 10}
    first = {"p1": 1.0, "p2": 3.0, "p3": 2.0}
    assert [m.uid for m in member_order(group, lambda m: priority[m.uid], lambda m: first[m.uid])] == ["p3", "p2", "p1"]


RACKS = {"r1": ("a1", "a2"), "r2": ("b1",)}


def in_domains(cluster: Cluster, group: list[Member], score=lambda domain, placed: 0, **options):
    defaults = {"scheduled": 0, "min_count": 3, "gang": True}
    return plan_group_in_domains(group, RACKS, place=cluster.place, undo=cluster.undo, domain_score=score,
                                 unschedulable_message=MESSAGE, rng=random.Random(1), **{**defaults, **options})


def test_each_domain_is_tried_on_its_own_nodes_and_the_fitting_one_wins() -> None:
    cluster = Cluster({"a1": 1000, "a2": 1000, "b1": 4000})
    result = in_domains(cluster, members(1000, 1000, 1000))
    assert result.complete and result.domain == "r2" and {a.node for a in result.placed} == {"b1"}
    assert {nodes for _, nodes in cluster.tries} == {frozenset({"a1", "a2"}), frozenset({"b1"})}
    assert cluster.free == {"a1": 1000, "a2": 1000, "b1": 4000}


def test_the_best_scored_domain_wins() -> None:
    cluster = Cluster({"a1": 2000, "a2": 2000, "b1": 4000})
    assert in_domains(cluster, members(1000, 1000), min_count=2).domain in ("r1", "r2")
    assert in_domains(cluster, members(1000, 1000), min_count=2, score=lambda d, p: 50 * (d == "r1")).domain == "r1"
    # More members placed (PodGroupPodsCount) outweighs a small domain score.
    result = in_domains(cluster, members(1000, 1000, 1000, 1000, 1000), min_count=2, gang=True,
                        score=lambda d, p: 10 * (d == "r2"))
    assert result.domain == "r1" or len(result.placed) == 4


def test_no_domain_fits() -> None:
    result = in_domains(Cluster({"a1": 1000, "a2": 1000, "b1": 1000}), members(1000, 1000, 1000))
    assert not result.complete and result.reason.startswith("0/2 placements are available, first placement status: ")
    assert {a.uid for a in result.unplaced} == {"p1", "p2", "p3"}


def test_no_preemption_inside_a_topology_domain() -> None:
    cluster = Cluster({"a1": 1000, "a2": 1000, "b1": 0}, preempt_on="b1")
    result = in_domains(cluster, members(1000, 1000, 1000))
    assert not result.complete
    assert cluster.free == {"a1": 1000, "a2": 1000, "b1": 0}
    only = Cluster({"b1": 0}, preempt_on="b1")
    refused = plan_group_in_domains(members(1000), {"r2": ("b1",)}, scheduled=0, min_count=1, gang=True, place=only.place,
                                    undo=only.undo, domain_score=lambda d, p: 0, unschedulable_message=MESSAGE,
                                    rng=random.Random(1))
    assert [a.reason for a in refused.unplaced] == [PREEMPTION_REFUSED] and only.free == {"b1": 0}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=6), st.lists(st.integers(0, 6), min_size=1, max_size=4),
       st.integers(0, 3), st.integers(1, 6), st.booleans())
def test_a_plan_takes_nothing_and_is_complete_exactly_at_the_quorum(cpus: list, free: list, scheduled: int,
                                                                     min_count: int, gang: bool) -> None:
    cluster = Cluster({f"n{i}": f * 1000 for i, f in enumerate(free)})
    before = dict(cluster.free)
    result = plan(cluster, members(*(c * 1000 for c in cpus)), scheduled=scheduled, min_count=min_count, gang=gang)
    assert cluster.free == before, "a plan leaves nothing taken"
    assert [uid for uid, _ in cluster.tries] == [f"p{i}" for i in range(1, len(cpus) + 1)], "each member tried once"
    # The reference: the same first fit, member after member, on a copy.
    room, fits = sorted(before.items()), 0
    for cpu in cpus:
        index = next((i for i, (_, left) in enumerate(room) if left >= cpu * 1000), None)
        if index is not None:
            room[index] = (room[index][0], room[index][1] - cpu * 1000)
            fits += 1
    assert result.complete == (fits > 0 and (not gang or scheduled + fits >= min_count))
    assert len(result.placed) == (fits if result.complete else 0)
    assert len(result.placed) + len(result.unplaced) == len(cpus)
