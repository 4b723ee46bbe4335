"""The gang ledger's transitions, and many processes sharing one through compare-and-swap."""

from __future__ import annotations

import orjson
from hypothesis import example, given, settings
from hypothesis import strategies as st

from extender.gangs import ledger as gl
from extender.gangs.ledger import Entry, GangLedger, Outcome

NONE: frozenset[str] = frozenset()


def entry(node: str = "n1", expires: float = 100.0, by: str = "w1") -> Entry:
    return Entry(node, by, expires)


def test_holds_wait_then_the_quorum_releases_them_all() -> None:
    doc = gl.hold(GangLedger(), "a", entry(), min_count=3, bound=NONE, now=0)
    doc = gl.hold(doc, "b", entry("n2"), min_count=3, bound=NONE, now=1)
    assert (doc.outcome("a"), doc.outcome("b"), doc.outcome("c")) == (Outcome.WAITING, Outcome.WAITING, Outcome.GONE)
    doc = gl.hold(doc, "c", entry(), min_count=3, bound=NONE, now=2)
    assert not doc.holds and {u: e.node for u, e in doc.released.items()} == {"a": "n1", "b": "n2", "c": "n1"}
    assert {e.expires for e in doc.released.values()} == {2 + gl.RELEASE_TTL}


def test_bound_and_released_members_count_once() -> None:
    doc = gl.hold(GangLedger(), "a", entry(), min_count=2, bound=frozenset({"x"}), now=0)
    assert doc.outcome("a") is Outcome.RELEASED
    # "x" released earlier and also already bound in this process's watch: one member, not two.
    earlier = GangLedger({}, {"x": entry()})
    assert gl.hold(earlier, "a", entry(), min_count=3, bound=frozenset({"x"}), now=0).outcome("a") is Outcome.WAITING


def test_a_hold_past_its_expiry_sends_every_hold_back() -> None:
    doc = gl.hold(GangLedger(), "a", entry(expires=10), min_count=3, bound=NONE, now=0)
    doc = gl.hold(doc, "b", entry(expires=20), min_count=3, bound=NONE, now=5)
    assert gl.expire(doc, now=9.9) == doc
    late = gl.expire(doc, now=10)
    assert (late.outcome("a"), late.outcome("b")) == (Outcome.GONE, Outcome.GONE)
    # The next writer starts afresh: "c" alone is not a quorum.
    assert gl.hold(doc, "c", entry(expires=40), min_count=2, bound=NONE, now=11).holds.keys() == {"c"}


def test_a_retried_hold_keeps_its_expiry_and_takes_the_new_node() -> None:
    doc = gl.hold(GangLedger(), "a", entry("n1", expires=10), min_count=3, bound=NONE, now=0)
    doc = gl.hold(doc, "a", entry("n2", expires=50), min_count=3, bound=NONE, now=1)
    assert doc.holds["a"] == entry("n2", expires=10)


def test_withdrawing_and_the_refusal_to_withdraw_a_released_member() -> None:
    doc = gl.hold(GangLedger(), "a", entry(), min_count=2, bound=NONE, now=0)
    assert gl.withdraw(doc, "a", "w1", now=1).outcome("a") is Outcome.GONE
    doc = gl.hold(doc, "b", entry(), min_count=2, bound=NONE, now=1)
    assert gl.withdraw(doc, "a", "w1", now=2).outcome("a") is Outcome.RELEASED
    assert gl.hold(doc, "a", entry(), min_count=2, bound=NONE, now=3).outcome("a") is Outcome.RELEASED
    assert gl.withdraw(GangLedger(), "zz", "w1", now=0) == GangLedger()


def test_the_annotation_round_trips_and_bad_documents_read_empty() -> None:
    doc = gl.hold(GangLedger(), "a", entry(), min_count=2, bound=NONE, now=0)
    doc = gl.hold(doc, "b", entry(), min_count=3, bound=NONE, now=0)
    assert gl.read({gl.LEDGER_ANNOTATION: gl.dump(doc)}) == doc
    for text in ("", "{", "[]", '{"version": 1}', orjson.dumps({"version": 2, "holds": {"a": {"node": "n"}}}).decode()):
        assert gl.read({gl.LEDGER_ANNOTATION: text}) == GangLedger()
    assert gl.read(None) == GangLedger()


def test_a_release_waits_for_every_holding_process_to_answer_the_call() -> None:
    doc = gl.hold(GangLedger(), "a", entry(by="w1"), min_count=3, bound=NONE, now=0)
    doc = gl.hold(doc, "b", entry(by="w2"), min_count=3, bound=NONE, now=1)
    assert not doc.calling and not doc.needs_word_from("w1", 2)
    doc = gl.hold(doc, "c", entry(by="w1"), min_count=3, bound=NONE, now=2)  # the quorum: a call, w1 answered
    assert doc.calling and doc.outcome("c") is Outcome.WAITING
    assert doc.needs_word_from("w2", 2) and not doc.needs_word_from("w1", 2) and not doc.needs_word_from("w3", 2)
    doc = gl.confirm(doc, "w2", {"b"}, min_count=3, bound=NONE, now=2.2)
    assert set(doc.released) == {"a", "b", "c"} and not doc.holds


def test_a_dead_processs_holds_release_nothing_and_are_dropped_alone() -> None:
    """Three members held by a process that was then killed, the fourth arrives through a new
    one: no release (kube-scheduler has forgotten the three), and once the dead process has
    been silent for HOLDER_TTL its holds are gone while the live one stays."""
    doc = GangLedger()
    for uid in ("a", "b", "c"):
        doc = gl.hold(doc, uid, entry(by="dead", expires=100), min_count=4, bound=NONE, now=0)
    doc = gl.hold(doc, "d", entry(by="new", expires=100), min_count=4, bound=NONE, now=1)
    assert doc.outcome("d") is Outcome.WAITING and doc.calling  # counted, but "dead" never answers
    assert gl.confirm(doc, "new", {"d"}, min_count=4, bound=NONE, now=2).released == {}
    late = gl.expire(doc, now=gl.HOLDER_TTL)
    assert set(late.holds) == {"d"} and not late.calling and set(late.holders) == {"new"}
    # A member retried through the new process takes its entry over (one entry, one holder).
    doc = gl.hold(doc, "a", entry("n2", by="new", expires=200), min_count=4, bound=NONE, now=2)
    assert doc.holds["a"] == Entry("n2", "new", 100) and len(doc.holds) == 4
    # ... and the dead process can no longer withdraw it.
    assert gl.withdraw(doc, "a", "dead", now=3).holds["a"].by == "new"


def test_a_holder_drops_its_holds_of_members_it_no_longer_holds() -> None:
    doc = gl.hold(GangLedger(), "a", entry(by="w1"), min_count=3, bound=NONE, now=0)
    doc = gl.hold(doc, "b", entry(by="w1"), min_count=3, bound=NONE, now=0)
    assert set(gl.confirm(doc, "w1", {"b"}, min_count=3, bound=NONE, now=1).holds) == {"b"}
    assert gl.confirm(doc, "w1", set(), min_count=3, bound=NONE, now=1).holds == {}


def test_lease_names() -> None:
    assert gl.lease_name("0b4e8f7c-2a1d-4c3e-9f00-1234567890ab") == "gang.0b4e8f7c-2a1d-4c3e-9f00-1234567890ab"
    hashed = gl.lease_name("Not/A Name")
    assert hashed.startswith("gang.") and len(hashed) == len("gang.") + 64


# --- many processes, one ledger: an API server's compare-and-swap, interleaved at random ---------

HOLD_LIMIT = 25.0


class Server:
    """A Lease: the document and its resourceVersion; a write with a stale version fails (409)."""

    def __init__(self) -> None:
        self.text, self.version = "", 0

    def read(self) -> tuple[GangLedger, int]:
        return gl.read({gl.LEDGER_ANNOTATION: self.text}), self.version

    def write(self, doc: GangLedger, version: int) -> bool:
        if version != self.version:
            return False
        self.text, self.version = gl.dump(doc), self.version + 1
        return True


@settings(max_examples=400, deadline=None)
@given(st.integers(2, 4), st.integers(2, 6),
       st.lists(st.tuples(st.sampled_from(["arrive", "write", "poll", "tick", "die"]), st.integers(0, 5),
                          st.floats(0, 6)), max_size=80))
@example(2, 2, [("arrive", 0, 0), ("write", 0, 0), ("die", 0, 0), ("arrive", 1, 0), ("write", 1, 0)])
@example(2, 2, [("arrive", 0, 0), ("write", 0, 0), ("arrive", 1, 0), ("write", 1, 0), ("die", 1, 0),
                ("poll", 0, 0), ("tick", 0, 5), ("poll", 0, 0), ("arrive", 1, 0), ("write", 1, 0), ("poll", 0, 0)])
def test_processes_sharing_a_ledger_never_release_the_hold_of_a_dead_one(min_count: int, members: int,
                                                                         steps: list) -> None:
    """Each member's request runs in a process of its own; a process may die holding (its
    request is gone, kube-scheduler forgets the place) and the member may come back through
    another. Whatever the interleaving: nothing is bound twice, and a release never takes in
    the hold of a process that is dead at that moment (that member would not bind, and the
    others would be a partial gang)."""
    server, now = Server(), 0.0
    state = {m: "idle" for m in range(members)}  # idle -> reading -> holding -> bound | failed | dead
    process = dict.fromkeys(range(members), 0)  # the generation of the member's current process
    pending: dict[int, tuple[GangLedger, int]] = {}  # a read, not yet written back
    deadline: dict[int, float] = {}
    bound: set[int] = set()
    died_in: dict[int, int | None] = {}  # the call open when the member's process died

    def uid(m: int) -> str:
        return f"m{m}"

    def by(m: int) -> str:
        return f"p{m}.{process[m]}"

    def bound_uids() -> frozenset[str]:
        return frozenset(uid(m) for m in bound)

    def write(before: GangLedger, after: GangLedger, version: int) -> bool:
        if after == before or not server.write(after, version):
            return after == before
        for u in set(after.released) - set(before.released):
            m = int(u[1:])
            assert state[m] != "dead" or died_in[m] == after.call, f"{u} released, its process dead before the call"
        return True

    def settle(m: int) -> None:
        """The holder's last word at its deadline: withdraw (retrying on conflict), then obey."""
        while True:
            doc, version = server.read()
            after = gl.withdraw(doc, uid(m), by(m), now=now)
            if write(doc, after, version):
                break
        finish(m, after.outcome(uid(m)))

    def finish(m: int, outcome: Outcome) -> None:
        if outcome is Outcome.RELEASED:
            assert m not in bound, "bound twice"
            bound.add(m)
            state[m] = "bound"
        elif outcome is Outcome.GONE:
            state[m] = "failed"

    for action, who, dt in steps:
        m = who % members
        if action == "arrive" and state[m] in ("idle", "failed", "dead"):
            process[m] += 1
            pending[m] = server.read()
            deadline[m] = now + HOLD_LIMIT
            state[m] = "reading"
        elif action == "write" and state[m] == "reading":
            doc, version = pending.pop(m)
            after = gl.hold(doc, uid(m), Entry("n", by(m), deadline[m]), min_count=min_count,
                            bound=bound_uids(), now=now)
            if write(doc, after, version):
                state[m] = "holding"
                finish(m, after.outcome(uid(m)))
            else:
                pending[m] = server.read()  # 409: read again
        elif action == "poll" and state[m] == "holding":
            doc, version = server.read()
            seen = gl.expire(doc, now=now)
            if seen.outcome(uid(m)) is Outcome.WAITING and seen.needs_word_from(by(m), now):
                after = gl.confirm(doc, by(m), {uid(m)}, min_count=min_count, bound=bound_uids(), now=now)
                if write(doc, after, version):
                    seen = after
            finish(m, seen.outcome(uid(m)))
        elif action == "die" and state[m] in ("holding", "reading"):
            pending.pop(m, None)
            state[m] = "dead"
            doc = gl.expire(server.read()[0], now=now)
            died_in[m] = doc.call if doc.calling else None
        elif action == "tick":
            now += dt
            for holder in [h for h, s in state.items() if s == "holding" and deadline[h] <= now]:
                settle(holder)
            for reader in [r for r, s in state.items() if s == "reading" and deadline[r] <= now]:
                state[reader] = "failed"  # its request ran out before it could write
                pending.pop(reader)
        for holder in [h for h, s in state.items() if s == "holding"]:
            if gl.expire(server.read()[0], now=now).outcome(uid(holder)) is Outcome.RELEASED:
                finish(holder, Outcome.RELEASED)  # a released holder always gets to bind in time

    now += HOLD_LIMIT  # every request ends
    for holder in [h for h, s in state.items() if s == "holding"]:
        settle(holder)
    # kube-scheduler retries the members whose process died; a released one binds at once.
    released_dead = {m for m, s in state.items() if s == "dead" and uid(m) in server.read()[0].released}
    assert not bound or len(bound | released_dead) >= min_count, f"{sorted(bound)} bound of a gang of {min_count}"


def test_giving_way_releases_every_hold_backs_off_and_keeps_the_released() -> None:
    doc = gl.hold(GangLedger(), "a", entry(by="w1"), min_count=3, bound=NONE, now=0)
    doc = gl.hold(doc, "b", entry(by="w2"), min_count=3, bound=NONE, now=1)
    doc = GangLedger(doc.holds, {"x": entry()}, doc.holders, doc.call, doc.calling)
    gave = gl.give_way(doc, "ns/winner", "outranked", "gave way to pod group ns/winner", until=7.0, now=2)
    assert not gave.holds and not gave.holders and set(gave.released) == {"x"}
    assert gave.gave_way is not None and gave.gave_way.members == {"a", "b"} and gave.gave_way.to == "ns/winner"
    assert (gave.outcome("a"), gave.outcome("b"), gave.outcome("x")) == (Outcome.GAVE_WAY, Outcome.GAVE_WAY,
                                                                         Outcome.RELEASED)
    assert gl.read({gl.LEDGER_ANNOTATION: gl.dump(gave)}) == gave  # round trip
    # backed off: no new hold until 7, a retried member is answered GAVE_WAY at once
    again = gl.hold(gave, "a", entry(expires=50), min_count=3, bound=NONE, now=5)
    assert again.outcome("a") is Outcome.GAVE_WAY and not again.holds
    # over: held as usual, and an old document without the field reads as before
    later = gl.hold(gave, "a", entry(expires=50), min_count=3, bound=NONE, now=8)
    assert later.outcome("a") is Outcome.WAITING and later.gave_way is None
    assert gl.give_way(GangLedger(), "ns/w", "outranked", "m", until=9, now=1) == GangLedger()  # nothing held
    calling = GangLedger({"a": entry(by="w1"), "b": entry(by="w2")}, {}, {"w1": gl.Holder(0.5, 1), "w2": gl.Holder(0.5)},
                         1, True)  # the quorum held, w2's answer to the call awaited: being released
    assert gl.give_way(calling, "ns/w", "outranked", "m", until=9, now=1) == calling
