"""The gang ledger's transitions, and many processes sharing one through compare-and-swap."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
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
    assert gl.withdraw(doc, "a", now=1).outcome("a") is Outcome.GONE
    doc = gl.hold(doc, "b", entry(), min_count=2, bound=NONE, now=1)
    assert gl.withdraw(doc, "a", now=2).outcome("a") is Outcome.RELEASED
    assert gl.hold(doc, "a", entry(), min_count=2, bound=NONE, now=3).outcome("a") is Outcome.RELEASED
    assert gl.withdraw(GangLedger(), "zz", now=0) == GangLedger()


def test_the_annotation_round_trips_and_bad_documents_read_empty() -> None:
    doc = gl.hold(GangLedger(), "a", entry(), min_count=2, bound=NONE, now=0)
    doc = gl.hold(doc, "b", entry(), min_count=3, bound=NONE, now=0)
    assert gl.read({gl.LEDGER_ANNOTATION: gl.dump(doc)}) == doc
    for text in ("", "{", "[]", '{"version": 2}', orjson.dumps({"version": 1, "holds": {"a": {"node": "n"}}}).decode()):
        assert gl.read({gl.LEDGER_ANNOTATION: text}) == GangLedger()
    assert gl.read(None) == GangLedger()


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


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 4), st.integers(2, 6),
       st.lists(st.tuples(st.sampled_from(["arrive", "write", "poll", "tick"]), st.integers(0, 5),
                          st.floats(0, 6)), max_size=80))
def test_processes_sharing_a_ledger_never_bind_part_of_a_gang(min_count: int, members: int, steps: list) -> None:
    server, now = Server(), 0.0
    state = {m: "idle" for m in range(members)}  # idle -> reading -> holding -> bound | failed
    pending: dict[int, tuple[GangLedger, int]] = {}  # a read, not yet written back
    deadline: dict[int, float] = {}
    bound: set[int] = set()

    def uid(m: int) -> str:
        return f"m{m}"

    def bound_uids() -> frozenset[str]:
        return frozenset(uid(m) for m in bound)

    def settle(m: int) -> None:
        """The holder's last word at its deadline: withdraw (retrying on conflict), then obey."""
        while True:
            doc, version = server.read()
            after = gl.withdraw(doc, uid(m), now=now)
            if after == doc or server.write(after, version):
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
        if action == "arrive" and state[m] in ("idle", "failed"):
            pending[m] = server.read()
            deadline[m] = now + HOLD_LIMIT
            state[m] = "reading"
        elif action == "write" and state[m] == "reading":
            doc, version = pending.pop(m)
            after = gl.hold(doc, uid(m), Entry("n", f"p{m}", deadline[m]), min_count=min_count,
                            bound=bound_uids(), now=now)
            if server.write(after, version):
                state[m] = "holding"
                finish(m, after.outcome(uid(m)))
            else:
                pending[m] = server.read()  # 409: read again
        elif action == "poll" and state[m] == "holding":
            finish(m, gl.expire(server.read()[0], now=now).outcome(uid(m)))
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
    assert not bound or len(bound) >= min_count, f"{sorted(bound)} bound of a gang of {min_count}"
