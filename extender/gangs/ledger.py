"""The gang ledger: one count of held members across webhook workers and replicas, pure.

In webhook mode a gang's members reach `/bind` on different gunicorn workers and replicas, each
with its own memory, so the count of held members must live where all of them read and write
it with optimistic concurrency: the API server. As the device ledger does
(extender/kube/deviceledger.py), one `coordination.k8s.io/v1` Lease per group
(`lease_name(group uid)`, in the extender's namespace) carries a JSON annotation, and every
change is read-modify-PUT with the resourceVersion read, so of two concurrent writers one gets
409 Conflict and starts over from a fresh read. This module is the "modify" step and nothing
else: it decides, from the document read and the wall clock, what to write and what it means.

The document: `holds` (pod uid -> node, writer, expiry) and `released` (pod uid -> node, expiry).
A hold that brings held + released + bound members to the quorum moves every hold to
`released` in the same write: a member is released only together with its quorum, and once
released it binds (a withdrawal of a released member is refused). A hold past its expiry takes
every hold of the group with it (the next writer drops them all); its holders see their uid
gone and answer kube-scheduler with an error, which retries the pod. Released entries expire
too (`RELEASE_TTL`), by when the bound pods are in every watch and count as bound.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from extender.model.devices import PREFIX

LEDGER_ANNOTATION = f"{PREFIX}/gang-ledger"
LEASE_PREFIX = "gang."
VERSION = 1
#: How long a released member counts as scheduled before its bind shows up as a bound pod.
RELEASE_TTL = 60.0


class Outcome(enum.Enum):
    WAITING = "waiting"  # held, the quorum not there yet
    RELEASED = "released"  # bind now
    GONE = "gone"  # not held (expired with its group, withdrawn, or never held): answer an error


@dataclass(frozen=True, slots=True)
class Entry:
    node: str
    by: str  # the writing process
    expires: float  # wall clock

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "by": self.by, "expires": round(self.expires, 3)}


@dataclass(frozen=True, slots=True)
class GangLedger:
    holds: Mapping[str, Entry] = field(default_factory=dict)
    released: Mapping[str, Entry] = field(default_factory=dict)

    def outcome(self, uid: str) -> Outcome:
        if uid in self.released:
            return Outcome.RELEASED
        return Outcome.WAITING if uid in self.holds else Outcome.GONE


def lease_name(group_uid: str) -> str:
    """`gang.<group uid>`: the uid, not the name, so a group recreated under the same name starts
    a fresh ledger; hashed when not a valid name part."""
    if group_uid and len(group_uid) <= 200 and group_uid.replace("-", "").isalnum() and group_uid.islower():
        return LEASE_PREFIX + group_uid
    return LEASE_PREFIX + hashlib.sha256(group_uid.encode()).hexdigest()


def _entries(raw: Any) -> dict[str, Entry]:
    entries = {}
    for uid, value in (raw.items() if isinstance(raw, Mapping) else ()):
        if not isinstance(value, Mapping):
            continue
        try:
            entries[str(uid)] = Entry(str(value.get("node", "")), str(value.get("by", "")), float(value["expires"]))
        except (KeyError, TypeError, ValueError):
            continue  # an unreadable entry protects nothing: dropped at the next write
    return entries


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
    return GangLedger(_entries(doc.get("holds")), _entries(doc.get("released")))


def dump(ledger: GangLedger) -> str:
    """The annotation value to write."""
    return orjson.dumps({
        "version": VERSION,
        "holds": {uid: e.to_json() for uid, e in sorted(ledger.holds.items())},
        "released": {uid: e.to_json() for uid, e in sorted(ledger.released.items())},
    }).decode()


def _pruned(ledger: GangLedger, now: float) -> GangLedger:
    """Expired releases dropped; any expired hold drops every hold (the group goes back whole)."""
    released = {uid: e for uid, e in ledger.released.items() if e.expires > now}
    holds = dict(ledger.holds)
    if any(e.expires <= now for e in holds.values()):
        holds = {}
    return GangLedger(holds, released)


def scheduled(ledger: GangLedger, bound: frozenset[str]) -> int:
    """Members held, released or bound, each counted once (a released member may already show
    up bound in this process's watch)."""
    return len(set(ledger.holds) | set(ledger.released) | bound)


def hold(
    ledger: GangLedger, uid: str, entry: Entry, *, min_count: int, bound: frozenset[str], now: float
) -> GangLedger:
    """Add (or refresh) `uid`'s hold; if that completes the quorum, release every hold. The
    caller writes the result (if it differs from what it read) and reads `outcome(uid)`."""
    ledger = _pruned(ledger, now)
    if uid in ledger.released:
        return ledger
    current = ledger.holds.get(uid)  # a retried request keeps its first expiry, takes the new node
    holds = {**ledger.holds, uid: entry if current is None else replace(current, node=entry.node)}
    ledger = GangLedger(holds, ledger.released)
    if scheduled(ledger, bound) < min_count:
        return ledger
    release_until = now + RELEASE_TTL
    released = {**ledger.released, **{u: replace(e, expires=release_until) for u, e in holds.items()}}
    return GangLedger({}, released)


def withdraw(ledger: GangLedger, uid: str, *, now: float) -> GangLedger:
    """`uid` gives up its hold (its request is about to end). A released member cannot: the
    caller sees `outcome(uid)` RELEASED and binds."""
    ledger = _pruned(ledger, now)
    if uid not in ledger.holds:
        return ledger
    return GangLedger({u: e for u, e in ledger.holds.items() if u != uid}, ledger.released)


def expire(ledger: GangLedger, *, now: float) -> GangLedger:
    """The document as the next writer leaves it (any expired hold sends every hold back): read
    `expire(read(...), now).outcome(uid)` to know where a held member stands."""
    return _pruned(ledger, now)
