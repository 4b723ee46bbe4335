"""Which held gangs give way, decided early: one rule that every webhook worker and replica
reaches the same way (docs/gangs.md, "Competing gangs").

In webhook mode a stock kube-scheduler places each member on its own and hands it to our
`/bind`, where it is held until its group's quorum is held too. Two gangs that both got members
held on room for one of them would each wait for the other's room, until their holds ran out,
and then collide again (issue 46: two gangs of 3 on room for 4, 21-24 s a pair, some pairs
livelocked). kube-scheduler's own gang cycle decides a whole group at once, and Coscheduling
backs off a group that failed so that its rival can take the room; here the held gangs are
compared as soon as their holds are known:

1. **Rank** the gangs holding members: one whose quorum is all held first (it is being
   released, never taken back), then more members placed (held or bound), then the older group
   (`metadata.creationTimestamp`), then namespace/name. Every process ranks the same ledgers
   the same way.
2. **Fit**, in that order, each gang's members still to place (the quorum's remainder) on the
   cluster's free room less every place the gangs already kept hold (kube-scheduler has them
   assumed), less the places reserved for the remainders of the gangs kept before it, less its
   own held places. The gangs ranked after it are taken as released: the better-ranked gang
   never waits for a worse one.
3. A gang whose remainder fits is **kept** (its remainder's places are reserved for it). One that
   does not **gives way** to the best-ranked kept gang: its holds are all released at once and
   the group is backed off, so the kept gangs' remainders fit and bind. A gang that cannot
   complete even with every other held gang released gives way too ("no room") when another
   gang holds or waits for room: it would keep their room for nothing until its hold ran out.
   A lone gang, nobody else waiting, keeps waiting for its quorum (room may be freed).

The fit is resources only (requests against allocatable, and the node's pod count), by
best-fit decreasing: the same question kube-scheduler's NodeResourcesFit asks, without the
filters it answers itself (taints, affinity). A misfit by `fitting.fits_at_all` (sums, the
largest member against every node) is certain; a remainder that best-fit cannot place when
some packing could is rare, and costs that gang one backoff, never a partial bind: whatever
is decided, a gang binds only when its whole quorum is held.

Pure: no clock, no API; `extender/webhook/gang_holds.py` feeds it the ledgers and the cluster state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from extender.gangs.fitting import PODS, fits_at_all
from extender.model.podgroups import GroupKey
from extender.model.resources import Resources

#: Short fixed phrases (metric labels, event reasons' details); numbers go in messages.
REASON_OUTRANKED = "outranked"  # a better-ranked gang kept the room this one needs
REASON_NO_ROOM = "no-room"  # cannot complete even with every other held gang released
REASONS = (REASON_OUTRANKED, REASON_NO_ROOM)

Room = dict[str, int]


@dataclass(frozen=True, slots=True)
class Contender:
    """A gang with members held at /bind, as the ledgers and the cluster state show it."""

    key: GroupKey
    min_count: int
    held: Sequence[tuple[str, Resources]]  # (node, requests) of each held member
    to_place: Sequence[Resources]  # requests of the members neither bound nor held
    bound: int = 0
    created: str = ""  # the group's creationTimestamp (RFC 3339); "" ranks after every dated one

    @property
    def placed(self) -> int:
        return self.bound + len(self.held)

    @property
    def need(self) -> int:
        """Members the quorum still needs placed."""
        return max(0, self.min_count - self.placed)


@dataclass(frozen=True, slots=True)
class GiveWay:
    """`loser` releases its held members and backs off; `winner` is the gang it gave way to
    (None: it cannot complete at all now)."""

    loser: GroupKey
    winner: GroupKey | None
    reason: str  # one of REASONS
    message: str


@dataclass(slots=True)
class _Rooms:
    """Each node's free room; mutable, copied per trial."""

    rooms: dict[str, Room] = field(default_factory=dict)
    track_pods: bool = False

    def copy(self) -> _Rooms:
        return _Rooms({name: dict(room) for name, room in self.rooms.items()}, self.track_pods)

    def request(self, requests: Resources) -> Room:
        return {**requests, PODS: 1} if self.track_pods else dict(requests)

    def take(self, node: str, requests: Resources) -> bool:
        """Take `requests` on `node`; False if that overcommits a resource the node had room in
        (a held place that collides with one reserved before it). Unknown nodes take nothing."""
        room = self.rooms.get(node)
        if room is None:
            return True
        fits = True
        for name, amount in self.request(requests).items():
            if amount <= 0:
                continue
            before = room.get(name, 0)
            room[name] = before - amount
            if before >= 0 > room[name]:
                fits = False
        return fits


def rank(contender: Contender) -> tuple[int, int, int, int, str, str, str, str]:
    """The sort key: gangs holding members before gangs only waiting, and a gang whose quorum is
    all held (being released) before any other; then more placed first, then older (dated before
    undated), then by name."""
    key = contender.key
    return (0 if contender.held else 1, 0 if contender.need == 0 else 1, -contender.placed,
            0 if contender.created else 1, contender.created, key.namespace, key.name, key.api)


def _dominant(request: Mapping[str, int], total: Mapping[str, int]) -> float:
    return max((amount / total[name] for name, amount in request.items() if amount > 0 and total.get(name, 0) > 0),
               default=0.0)


def pack(to_place: Sequence[Resources], need: int, rooms: _Rooms) -> bool:
    """Place `need` of the members `to_place` on `rooms` (taken out of it on success), the
    smallest ones, largest first, each on the node it leaves least room in (best-fit decreasing).
    False, `rooms` untouched, when they do not all fit."""
    if need <= 0:
        return True
    if len(to_place) < need:
        return False
    requests = [rooms.request(r) for r in to_place]
    if fits_at_all(requests, need, list(rooms.rooms.values())) is not None:
        return False
    total: Room = {}
    for room in rooms.rooms.values():
        for name, amount in room.items():
            if amount > 0:
                total[name] = total.get(name, 0) + amount
    chosen = sorted(requests, key=lambda r: _dominant(r, total))[:need]
    trial = {name: dict(room) for name, room in rooms.rooms.items()}
    for request in sorted(chosen, key=lambda r: -_dominant(r, total)):
        best, best_left = None, 0.0
        for name, room in trial.items():
            if all(amount <= room.get(res, 0) for res, amount in request.items() if amount > 0):
                left = _dominant({res: room.get(res, 0) - amount for res, amount in request.items() if amount > 0},
                                 total)
                if best is None or left < best_left:
                    best, best_left = name, left
        if best is None:
            return False
        room = trial[best]
        for res, amount in request.items():
            room[res] = room.get(res, 0) - amount
    rooms.rooms = trial
    return True


def decide(free: Mapping[str, Mapping[str, int]], contenders: Sequence[Contender], *,
           taken: Sequence[tuple[str, Resources]] = ()) -> list[GiveWay]:
    """The gangs that must give way now, best-ranked loser first; [] when every held gang can
    still complete beside the others, or there is nothing to compare (no gang holds, or one
    holds and no other waits: a lone gang keeps waiting for its quorum).

    `contenders` may include gangs that hold nothing yet but wait to be placed (their members
    refused at /filter for the room a holding gang keeps): they rank after every holding gang
    and only make a holding gang that cannot complete even alone give way ("no-room"), so that
    the waiting one gets the room; they are never losers themselves (nothing to give up).

    `free`: each node's free room (allocatable less the requests of the pods on it; `pods` the
    pod count left, when pod counts should count); `taken`: places already released to bind but
    not in `free` yet (node, requests), which count as taken."""
    if len(contenders) < 2 or not any(c.held for c in contenders):
        return []
    base = _Rooms({name: dict(room) for name, room in free.items()}, any(PODS in room for room in free.values()))
    for node, requests in taken:
        base.take(node, requests)
    kept: list[Contender] = []
    losers: list[GiveWay] = []
    for contender in sorted(contenders, key=rank):
        trial = base.copy()
        collides = not all([trial.take(node, requests) for node, requests in contender.held])
        if not collides and pack(contender.to_place, contender.need, trial):
            kept.append(contender)
            base = trial
            continue
        alone = _Rooms({name: dict(room) for name, room in free.items()}, base.track_pods)
        for node, requests in taken:
            alone.take(node, requests)
        for node, requests in contender.held:
            alone.take(node, requests)
        possible = pack(contender.to_place, contender.need, alone)
        if not contender.held:  # waiting only: nothing to give up (the holders' room refuses it at /filter)
            continue
        if possible and kept:
            winner = kept[0]
            losers.append(GiveWay(contender.key, winner.key, REASON_OUTRANKED,
                                  f"gave way to pod group {winner.key}: {contender.placed} of {contender.min_count} "
                                  f"members placed against its {winner.placed} of {winner.min_count}, and the "
                                  f"room left fits only one of them"))
        elif not possible:
            losers.append(GiveWay(contender.key, None, REASON_NO_ROOM,
                                  f"pod group {contender.key} cannot place the {contender.need} more members its "
                                  f"minCount {contender.min_count} needs, even with the other held gangs released"))
        else:  # fits alone, collides with a worse-ranked held place only: cannot happen (those count as free)
            kept.append(contender)
    return losers
