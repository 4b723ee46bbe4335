"""The gang ledger: one count of held members across webhook workers and replicas, pure.

In webhook mode a gang's members reach `/bind` on different gunicorn workers and replicas, each
with its own memory, so the count of held members must live where all of them read and write
it with optimistic concurrency: the API server. As the device ledger does
(extender/kube/deviceledger.py), one `coordination.k8s.io/v1` Lease per group
(`lease_name(group uid)`, in the extender's namespace) carries a JSON annotation, and every
change is read-modify-PUT with the resourceVersion read, so of two concurrent writers one gets
409 Conflict and starts over from a fresh read. This module is the "modify" step and nothing
else: it decides, from the document read and the wall clock, what to write and what it means.

The document: `holds` (pod uid -> node, writer, expiry), `released` (pod uid -> node, expiry)
and `holders` (writing process -> when it last wrote, and the call it answered).

A hold is only as good as the request behind it: a process that dies (SIGKILL, OOM) leaves its
holds in the Lease while kube-scheduler, its connections cut, has already forgotten those
places. Counting them could release a gang whose other members are not coming (partial bind).
So a release is a **call** answered by every holding process: the write that brings held +
released + bound members to the quorum opens call N and answers it for its own process; every
other process holding members answers at its next poll (`confirm`); the write that makes the
answers complete moves every hold to `released`. A dead process never answers, so its holds
never take part in a release; they are dropped once the process has not written for
`HOLDER_TTL` (each live holder writes at least every `RENEW_SECONDS`), without taking the
live holds with them, and a member retried through another process takes its entry over. A
member is released only together with its quorum, and once released it binds (a withdrawal of
a released member is refused). A hold past its expiry takes every hold of the group with it
(the next writer drops them all); its holders see their uid gone and answer kube-scheduler with
an error, which retries the pod. Released entries expire too (`RELEASE_TTL`), by when the bound
pods are in every watch and count as bound. Calls are numbered, not timed, so the wall clocks
of replicas need not agree for a release (only, within seconds, for the expiries).

A group that loses to a competing gang (extender.gangs.giveway) **gives way**: one write drops
every hold (their requests see `GAVE_WAY` and answer kube-scheduler with the reason) and records
`gave_way` (the winner, the reason, the members it held, until when it backs off); until then no
new hold is taken. The field is optional: a document without it reads as before.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict, TypeVar

import orjson

from extender.model.devices import PREFIX

LEDGER_ANNOTATION = f"{PREFIX}/gang-ledger"
LEASE_PREFIX = "gang."
VERSION = 2
#: How long a released member counts as scheduled before its bind shows up as a bound pod.
RELEASE_TTL = 60.0
#: A holding process that has not written for this long is dead: its holds no longer count.
HOLDER_TTL = 10.0
#: How often a live holding process writes at the latest (well inside HOLDER_TTL).
RENEW_SECONDS = 3.0


class Outcome(enum.Enum):
    WAITING = "waiting"  # held, the quorum not there yet
    RELEASED = "released"  # bind now
    GONE = "gone"  # not held (expired with its group, withdrawn, or never held): answer an error
    GAVE_WAY = "gave-way"  # not held: the group gave way to another and is backed off (an error, saying so)


# The document as `dump` writes it. `read` takes nothing on trust (an old or foreign writer may have
# left any JSON there): it checks each field and drops what it cannot read.
class EntryDoc(TypedDict):
    node: str
    by: str
    expires: float


class HolderDoc(TypedDict):
    at: float
    answered: int


class GaveWayDoc(TypedDict):
    to: str
    reason: str
    message: str
    until: float
    members: list[str]


class _LedgerDoc(TypedDict):
    version: int
    holds: dict[str, EntryDoc]
    released: dict[str, EntryDoc]
    holders: dict[str, HolderDoc]
    call: int
    calling: bool


class LedgerDoc(_LedgerDoc, total=False):
    gave_way: GaveWayDoc


@dataclass(frozen=True, slots=True)
class Entry:
    node: str
    by: str  # the writing process
    expires: float  # wall clock

    def to_json(self) -> EntryDoc:
        return {"node": self.node, "by": self.by, "expires": round(self.expires, 3)}


@dataclass(frozen=True, slots=True)
class Holder:
    """A holding process's last word: when it wrote (wall clock) and the call it answered."""

    at: float
    answered: int = 0

    def to_json(self) -> HolderDoc:
        return {"at": round(self.at, 3), "answered": self.answered}


@dataclass(frozen=True, slots=True)
class GaveWay:
    """The group gave way to another held gang (extender.gangs.giveway): its holds were all
    released at once, and it is backed off (no new hold, refused at /filter) until `until`."""

    to: str  # "namespace/name" of the gang it gave way to; "" when it could not complete at all
    reason: str  # extender.gangs.giveway.REASONS
    message: str  # for the pods: what a user reads on the losing members
    until: float  # wall clock
    members: frozenset[str] = frozenset()  # the uids that were held when it gave way

    def to_json(self) -> GaveWayDoc:
        return {"to": self.to, "reason": self.reason, "message": self.message, "until": round(self.until, 3),
                "members": sorted(self.members)}


@dataclass(frozen=True, slots=True)
class GangLedger:
    holds: Mapping[str, Entry] = field(default_factory=dict)
    released: Mapping[str, Entry] = field(default_factory=dict)
    holders: Mapping[str, Holder] = field(default_factory=dict)
    call: int = 0  # the number of the last call for a release
    calling: bool = False  # that call is open: the quorum is counted, answers are awaited
    gave_way: GaveWay | None = None  # backed off after giving way (dropped once over)

    def outcome(self, uid: str) -> Outcome:
        if uid in self.released:
            return Outcome.RELEASED
        if uid in self.holds:
            return Outcome.WAITING
        return Outcome.GAVE_WAY if self.gave_way is not None else Outcome.GONE

    def needs_word_from(self, by: str, now: float) -> bool:
        """Whether process `by`, holding members here, must write now: to answer the open call,
        or to stay alive (RENEW_SECONDS since its last write)."""
        if not any(e.by == by for e in self.holds.values()):
            return False
        holder = self.holders.get(by)
        return (holder is None or now - holder.at >= RENEW_SECONDS
                or (self.calling and holder.answered != self.call))


def lease_name(group_uid: str) -> str:
    """`gang.<group uid>`: the uid, not the name, so a group recreated under the same name starts
    a fresh ledger; hashed when not a valid name part."""
    if group_uid and len(group_uid) <= 200 and group_uid.replace("-", "").isalnum() and group_uid.islower():
        return LEASE_PREFIX + group_uid
    return LEASE_PREFIX + hashlib.sha256(group_uid.encode()).hexdigest()


T = TypeVar("T")


def _readable(raw: Any, build: Callable[[Mapping[str, Any]], T]) -> dict[str, T]:
    """`build` of each object in the mapping `raw`, by key. An unreadable one is dropped: an entry
    that cannot be read protects nothing, a holder that cannot be read is a dead one (its holds
    are dropped), and the next write leaves both out."""
    found = {}
    for key, value in (raw.items() if isinstance(raw, Mapping) else ()):
        if isinstance(value, Mapping):
            try:
                found[str(key)] = build(value)
            except (KeyError, TypeError, ValueError):
                continue
    return found


def _entry(value: Mapping[str, Any]) -> Entry:
    return Entry(str(value.get("node", "")), str(value.get("by", "")), float(value["expires"]))


def _holder(value: Mapping[str, Any]) -> Holder:
    return Holder(float(value["at"]), int(value.get("answered", 0)))


def _gave_way(value: Any) -> GaveWay | None:
    if not isinstance(value, Mapping):
        return None
    try:
        members = value.get("members")
        return GaveWay(str(value.get("to", "")), str(value.get("reason", "")), str(value.get("message", "")),
                       float(value["until"]),
                       frozenset(str(m) for m in members) if isinstance(members, list) else frozenset())
    except (KeyError, TypeError, ValueError):
        return None


def read(annotations: Mapping[str, str] | None) -> GangLedger:
    """The ledger in a Lease's annotations; an absent or unreadable one reads as empty (a
    stale or foreign document must not block a group forever)."""
    text = (annotations or {}).get(LEDGER_ANNOTATION)
    if not text:
        return GangLedger()
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        return GangLedger()
    if not isinstance(doc, Mapping) or doc.get("version") != VERSION:
        return GangLedger()
    call = doc.get("call")
    return GangLedger(_readable(doc.get("holds"), _entry), _readable(doc.get("released"), _entry),
                      _readable(doc.get("holders"), _holder),
                      call if isinstance(call, int) and call >= 0 else 0, doc.get("calling") is True,
                      _gave_way(doc.get("gave_way")))


def dump(ledger: GangLedger) -> str:
    """The annotation value to write."""
    doc: LedgerDoc = {
        "version": VERSION,
        "holds": {uid: e.to_json() for uid, e in sorted(ledger.holds.items())},
        "released": {uid: e.to_json() for uid, e in sorted(ledger.released.items())},
        "holders": {by: h.to_json() for by, h in sorted(ledger.holders.items())},
        "call": ledger.call,
        "calling": ledger.calling,
    }
    if ledger.gave_way is not None:
        doc["gave_way"] = ledger.gave_way.to_json()
    return orjson.dumps(doc).decode()


def _pruned(ledger: GangLedger, now: float) -> GangLedger:
    """Expired releases dropped; the holds of dead processes dropped; any expired hold drops
    every hold (the group goes back whole). A dropped hold closes the open call: the count it
    was made for is no longer there."""
    released = {uid: e for uid, e in ledger.released.items() if e.expires > now}
    holders = {by: h for by, h in ledger.holders.items() if now - h.at < HOLDER_TTL}
    holds = {uid: e for uid, e in ledger.holds.items() if e.by in holders}
    if any(e.expires <= now for e in holds.values()):
        holds = {}
    calling = ledger.calling and len(holds) == len(ledger.holds)
    gave_way = ledger.gave_way if ledger.gave_way is not None and ledger.gave_way.until > now else None
    return GangLedger(holds, released, holders, ledger.call, calling, gave_way)


def scheduled(ledger: GangLedger, bound: frozenset[str]) -> int:
    """Members held, released or bound, each counted once (a released member may already show
    up bound in this process's watch)."""
    return len(set(ledger.holds) | set(ledger.released) | bound)


def _settle(ledger: GangLedger, by: str, *, min_count: int, bound: frozenset[str], now: float) -> GangLedger:
    """`by` has written (it is alive): open a call if the quorum is counted, answer it for
    `by`, and release every hold once every holding process has answered."""
    holding = {e.by for e in ledger.holds.values()}
    holders = {who: h for who, h in ledger.holders.items() if who in holding}
    if scheduled(ledger, bound) < min_count:
        holders[by] = Holder(now, ledger.call)
        return replace(ledger, holders=holders, calling=False)
    call = ledger.call if ledger.calling else ledger.call + 1
    holders[by] = Holder(now, call)
    if any(holders.get(e.by, Holder(0.0)).answered != call for e in ledger.holds.values()):
        return replace(ledger, holders=holders, call=call, calling=True)
    release_until = now + RELEASE_TTL
    released = {**ledger.released, **{u: replace(e, expires=release_until) for u, e in ledger.holds.items()}}
    return GangLedger({}, released, {}, call, False)


def hold(
    ledger: GangLedger, uid: str, entry: Entry, *, min_count: int, bound: frozenset[str], now: float
) -> GangLedger:
    """Add (or take over) `uid`'s hold for `entry.by`; if that completes the quorum and every
    holding process has answered, release every hold. The caller writes the result (if it
    differs from what it read) and reads `outcome(uid)`."""
    ledger = _pruned(ledger, now)
    if uid in ledger.released or ledger.gave_way is not None:  # released; or backed off: no new hold
        return ledger
    current = ledger.holds.get(uid)  # a retried request keeps its first expiry, takes node and holder
    taken = entry if current is None else replace(current, node=entry.node, by=entry.by)
    ledger = replace(ledger, holds={**ledger.holds, uid: taken})
    return _settle(ledger, entry.by, min_count=min_count, bound=bound, now=now)


def confirm(ledger: GangLedger, by: str, mine: Set[str], *, min_count: int, bound: frozenset[str],
            now: float) -> GangLedger:
    """Process `by`, which holds the members `mine` now, says it is alive: holds written under
    its name for members it no longer holds are dropped, the open call is answered, and the
    answer that completes it releases every hold."""
    ledger = _pruned(ledger, now)
    holds = {u: e for u, e in ledger.holds.items() if e.by != by or u in mine}
    if len(holds) != len(ledger.holds):
        ledger = replace(ledger, holds=holds, calling=False)
    if not any(e.by == by for e in holds.values()):
        return ledger
    return _settle(ledger, by, min_count=min_count, bound=bound, now=now)


def withdraw(ledger: GangLedger, uid: str, by: str, *, now: float) -> GangLedger:
    """`uid` gives up its hold (its request in process `by` is about to end); a hold another
    process has taken over since is left alone. A released member cannot withdraw: the caller
    sees `outcome(uid)` RELEASED and binds."""
    ledger = _pruned(ledger, now)
    current = ledger.holds.get(uid)
    if current is None or current.by != by:
        return ledger
    return replace(ledger, holds={u: e for u, e in ledger.holds.items() if u != uid}, calling=False)


def give_way(ledger: GangLedger, to: str, reason: str, message: str, *, until: float, now: float) -> GangLedger:
    """The group gives way to the gang `to` (extender.gangs.giveway): every hold is released at
    once (their requests answer kube-scheduler with `message` and it retries them), no new hold
    is taken until `until`, and members already released keep binding. Nothing to give up (no
    hold), or a call for the release open (the quorum is held: it is being released, not taken
    back), leaves the ledger as it is."""
    ledger = _pruned(ledger, now)
    if not ledger.holds or ledger.calling:  # nothing held; or the quorum is counted, its release under way
        return ledger
    return GangLedger({}, ledger.released, {}, ledger.call, False,
                      GaveWay(to, reason, message, until, frozenset(ledger.holds)))


def expire(ledger: GangLedger, *, now: float) -> GangLedger:
    """The document as the next writer leaves it (dead processes' holds dropped, and any expired
    hold sends every hold back): read `expire(read(...), now).outcome(uid)` to know where a held
    member stands."""
    return _pruned(ledger, now)
