"""Competing held gangs: who gives way (extender.gangs.giveway), the same answer from every process."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.gangs.giveway import REASON_NO_ROOM, REASON_OUTRANKED, Contender, decide, rank
from extender.model.podgroups import API_COSCHEDULING, GroupKey

CPU = {"cpu": 1000}


def key(name: str) -> GroupKey:
    return GroupKey(API_COSCHEDULING, "ns", name)


def gang(name: str, size: int, held: int, node: str = "node", *, cpu: int = 1000, created: str = "",
         bound: int = 0) -> Contender:
    return Contender(key(name), size, [(node, {"cpu": cpu})] * held, [{"cpu": cpu}] * (size - held - bound),
                     bound=bound, created=created)


def test_a_pair_on_room_for_one_gives_one_way_to_the_older_at_the_first_hold_each() -> None:
    """Two gangs of 3 on 4 CPUs, one member held each: not both can complete (1 + 1 held, 2 + 2
    needed, 2 left): the younger gives way now, not after its hold."""
    older = gang("b", 3, 1, created="2026-12-07T10:00:00Z")
    younger = gang("a", 3, 1, created="2026-12-07T10:00:01Z")
    for order in ([older, younger], [younger, older]):
        verdicts = decide({"node": {"cpu": 4000}}, order)
        assert [(v.loser, v.winner, v.reason) for v in verdicts] == [(key("a"), key("b"), REASON_OUTRANKED)]
        assert verdicts[0].message.startswith("gave way to pod group ns/b: 1 of 3 members placed against its 1 of 3")


def test_more_members_held_wins_over_age_and_a_gang_that_fits_beside_keeps_its_holds() -> None:
    old = gang("old", 3, 1, created="2026-12-07T10:00:00Z")
    ahead = gang("ahead", 3, 2, created="2026-12-07T11:00:00Z")
    verdicts = decide({"node": {"cpu": 4000}}, [old, ahead])
    assert [(v.loser, v.winner) for v in verdicts] == [(key("old"), key("ahead"))]
    assert decide({"node": {"cpu": 6000}}, [old, ahead]) == []  # room for both: nobody gives way


def test_four_gangs_for_one_room_all_give_way_to_one() -> None:
    gangs = [gang(f"g{i}", 3, 1, created=f"2026-12-07T10:00:0{i}Z") for i in range(4)]
    verdicts = decide({"node": {"cpu": 4000}}, gangs)
    assert sorted((v.loser.name, v.winner and v.winner.name) for v in verdicts) == [
        ("g1", "g0"), ("g2", "g0"), ("g3", "g0")]


def test_the_gang_that_fits_wins_over_a_better_ranked_one_that_cannot_complete() -> None:
    """Nodes of 3 and 1 CPU: the big gang (2 x 2 CPU, one held) outranks by age, but its second
    member fits nowhere once anything is held; the small gang (3 x 1 CPU) fits beside nothing but
    itself. The big one gives way for no room, the small one is kept and binds."""
    big = Contender(key("big"), 2, [("n3", {"cpu": 2000})], [{"cpu": 2000}], created="2026-12-07T10:00:00Z")
    small = Contender(key("small"), 3, [("n3", CPU)], [CPU, CPU], created="2026-12-07T10:00:05Z")
    verdicts = decide({"n3": {"cpu": 3000}, "n1": {"cpu": 1000}}, [big, small])
    assert [(v.loser, v.winner, v.reason) for v in verdicts] == [(key("big"), None, REASON_NO_ROOM)]
    assert "cannot place the 1 more members its minCount 2 needs" in verdicts[0].message


def test_a_held_place_colliding_with_a_better_gangs_reservation_loses() -> None:
    """The room on `a` goes to the first gang's remainder; the second's hold is already on `a`."""
    first = gang("first", 2, 1, "b", created="1")
    second = gang("second", 2, 1, "a", created="2")
    verdicts = decide({"a": {"cpu": 1000}, "b": {"cpu": 1000}}, [first, second])
    # first: 1 held on b, 1 more: fits on a (second's hold on a counts as released). second: its hold on a
    # now collides with first's reservation there.
    assert [(v.loser, v.winner) for v in verdicts] == [(key("second"), key("first"))]


def test_pod_counts_and_released_places_count() -> None:
    a, b = gang("a", 2, 1, created="1"), gang("b", 2, 1, created="2")
    assert decide({"node": {"cpu": 8000, "pods": 4}}, [a, b]) == []
    assert [v.loser for v in decide({"node": {"cpu": 8000, "pods": 3}}, [a, b])] == [key("b")]
    assert [v.loser for v in decide({"node": {"cpu": 4000}}, [a, b], taken=[("node", {"cpu": 1000})])] == [key("b")]


def test_a_lone_held_gang_waits_unless_it_cannot_complete_and_another_waits_for_the_room() -> None:
    """Nothing to compare: a lone gang waits for its quorum (room may be freed). With a gang
    waiting (none held: refused at /filter for the room the holder keeps), the holder is kept if
    it fits, and gives way if it cannot complete at all; the waiting gang never outranks it."""
    assert decide({"node": {"cpu": 1000}}, [gang("a", 3, 1)]) == []
    waiting = gang("b", 3, 0, created="0")  # older, and still after the holder
    assert decide({"node": {"cpu": 3000}}, [gang("a", 3, 1, created="9"), waiting]) == []
    verdicts = decide({"node": {"cpu": 1000}}, [gang("a", 3, 1), waiting])
    assert [(v.loser, v.winner, v.reason) for v in verdicts] == [(key("a"), None, REASON_NO_ROOM)]
    assert decide({"node": {"cpu": 1000}}, [gang("a", 3, 0), waiting]) == []  # nobody holds


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(0, 3), st.integers(1, 2)), min_size=2, max_size=5),
       st.integers(2, 12))
def test_every_order_gives_the_same_answer_and_the_kept_gangs_fit_together(
        shapes: list[tuple[int, int, int]], room: int) -> None:
    """The rule does not depend on the order the ledgers are read in (each process reads its own),
    and what it keeps fits: the kept gangs' held places plus their remainders, first-fit, on the room."""
    gangs = [gang(f"g{i}", size, min(held, size), f"n{1 + i % 2}", cpu=cpu * 1000, created=f"{i:02d}")
             for i, (size, held, cpu) in enumerate(shapes)]
    free = {"n1": {"cpu": room * 500}, "n2": {"cpu": room * 500}}
    answers = {tuple(sorted((v.loser, v.winner, v.reason) for v in decide(free, list(order))))
               for order in itertools.islice(itertools.permutations(gangs), 24)}
    assert len(answers) == 1
    verdicts = answers.pop()
    losers = {loser for loser, _winner, _reason in verdicts}
    for _loser, winner, reason in verdicts:  # outranked means by a gang that stays, holding
        assert reason == REASON_NO_ROOM or (winner not in losers and any(g.key == winner and g.held for g in gangs))
    assert all(g.held for g in gangs if g.key in losers)  # only a holding gang has something to give up
    if not any(g.held for g in gangs):
        assert not losers
        return
    kept = sorted((g for g in gangs if g.held and g.key not in losers), key=rank)  # a waiting gang is promised nothing
    # What the kept gangs hold and still need never exceeds the room (counted the gangs' own way:
    # held places where they are, remainders anywhere).
    needed = sum(req["cpu"] for g in kept for _node, req in g.held)
    needed += sum(req["cpu"] for g in kept for req in sorted(g.to_place, key=lambda r: r["cpu"])[:g.need])
    overcommitted = sum(max(0, sum(r["cpu"] for g in gangs for n, r in g.held if n == node) - free[node]["cpu"])
                        for node in free)
    assert overcommitted or needed <= room * 1000


def test_a_gang_whose_quorum_is_held_is_never_the_one_to_give_way() -> None:
    """A gang of 2 with both held (its release under way) against a gang of 5 with 3 held: the
    bigger one has more placed, but the complete one ranks first and keeps its places."""
    done = gang("done", 2, 2, created="9")
    big = gang("big", 5, 3, created="0")
    verdicts = decide({"node": {"cpu": 6000}}, [big, done])
    assert [(v.loser, v.winner) for v in verdicts] == [(key("big"), key("done"))]
