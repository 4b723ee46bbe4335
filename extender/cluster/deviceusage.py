"""Per-node device use, kept up to date from the cluster state's pods, plus the claims in flight.

A bound pod holds the shares its assignment annotation names (`PodRecord.devices`); a pod
being bound by this process holds a *claim*, made at Reserve under the state's lock and
checked against the node's capacity there, so two threads never take the same share. A
claim ends when the bind fails (released), when the pod shows up bound with its
assignment (the pod itself now holds the shares), when the pod goes away, or after the
state's assume TTL.

The ClusterState calls the mutators with its lock held; readers get an immutable
`NodeDeviceUse` per node without locking, like NodeInfos. Departures (pods deleted or
finished) and released claims are remembered for a ledger TTL: the cross-process
ledger uses them to drop entries that no longer hold anything.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from extender.model.devices import (
    EMPTY_USE,
    LEDGER_TTL_SECONDS,
    NodeDeviceUse,
    Shares,
    Use,
    add_shares,
    shortage,
)
from extender.model.records import PodRecord


@dataclass(frozen=True, slots=True)
class _Claim:
    key: str
    node: str
    ident: str
    shares: Shares
    expires: float  # monotonic


def ident_of(record: PodRecord) -> str:
    return record.uid or record.key


class DeviceUsage:
    def __init__(self, *, claim_ttl: float = 30.0, memory: float = LEDGER_TTL_SECONDS,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 on_change: Callable[[str], None] | None = None) -> None:
        self.claim_ttl = claim_ttl
        # Told the node whenever its use changes: the state rebuilds that node's NodeInfo, so a
        # NodeInfo's identity also stands for its device use (the engine's memos rely on it).
        self._on_change = on_change
        self.memory = memory
        self._clock = clock
        self._wall = wall
        self._holders: dict[str, dict[str, Shares]] = {}  # node -> pod ident -> shares (bound pods)
        self._claims: dict[int, _Claim] = {}
        self._tokens = itertools.count(1)
        self._gone: dict[str, dict[str, float]] = {}  # node -> ident -> wall time it left
        self._released: dict[str, dict[str, float]] = {}  # node -> ident -> wall time we released
        self._views: dict[str, NodeDeviceUse] = {}

    # ---- reads (lock-free) ----------------------------------------------------------------

    def use(self, node: str) -> NodeDeviceUse:
        return self._views.get(node, EMPTY_USE)

    def nodes(self) -> list[str]:
        return list(self._views)

    # ---- pods (caller holds the state's lock) ----------------------------------------------

    def pod_changed(self, old: PodRecord | None, new: PodRecord | None) -> None:
        """`old` replaced by `new` (None: added, or deleted)."""
        old_holds = old is not None and old.devices is not None and old.counts
        new_holds = new is not None and new.devices is not None and new.counts
        key = (new or old).key  # type: ignore[union-attr]  # one of old and new is set (the caller's contract)
        claims = [token for token, claim in self._claims.items() if claim.key == key] if self._claims else []
        if not old_holds and not new_holds and not claims:
            return
        touched: set[str] = set()
        if old_holds:
            assert old is not None
            holders = self._holders.get(old.node_name)
            if holders is not None:
                holders.pop(ident_of(old), None)
                if not holders:
                    del self._holders[old.node_name]
            touched.add(old.node_name)
            if new is None or not new_holds or new.node_name != old.node_name or ident_of(new) != ident_of(old):
                self._remember(self._gone, old.node_name, ident_of(old))
        if new_holds:
            assert new is not None and new.devices is not None
            self._holders.setdefault(new.node_name, {})[ident_of(new)] = new.devices
            touched.add(new.node_name)
        for token in claims:
            claim = self._claims[token]
            if new is None or new.phase in ("Succeeded", "Failed") or ident_of(new) != claim.ident:
                self._remember(self._gone, claim.node, claim.ident)  # deleted, finished or recreated
            elif not new_holds:
                continue  # still on its way (assumed, or the watch has not seen the bind yet)
            del self._claims[token]
            touched.add(claim.node)
        for node in touched:
            self._rebuild(node)

    def reset(self, records: Iterable[PodRecord]) -> None:
        """A full pod list: holders from scratch; those that vanished count as departed."""
        previous = self._holders
        self._holders = {}
        bound: dict[str, str] = {}
        for record in records:
            if record.devices is not None and record.counts:
                self._holders.setdefault(record.node_name, {})[ident_of(record)] = record.devices
                bound[record.key] = ident_of(record)
        for node, holders in previous.items():
            now = self._holders.get(node, {})
            for ident in holders.keys() - now.keys():
                self._remember(self._gone, node, ident)
        for token, claim in list(self._claims.items()):
            if bound.get(claim.key) == claim.ident:
                del self._claims[token]
        self._views = {}
        for node in {*self._holders, *previous, *(c.node for c in self._claims.values()), *self._gone,
                     *self._released}:
            self._rebuild(node)

    # ---- claims (caller holds the state's lock) --------------------------------------------

    def claim(self, node: str, key: str, ident: str, shares: Shares, capacity: Mapping[str, tuple[int, int]],
              replacing: int | None = None) -> tuple[int, NodeDeviceUse] | None:
        """Take `shares` on `node` for the pod if they still fit; the token releases them.

        `replacing`: the pod's current claim, given up in the same step if the new one fits
        (a move to other devices: not a release, the pod is still being bound)."""
        old = self._claims.pop(replacing, None) if replacing is not None else None
        if old is not None:
            self._rebuild(old.node)
        if shortage(capacity, self.use(node).totals, shares):
            if old is not None:
                self._claims[replacing] = old  # type: ignore[index]  # replacing is set: old was popped from it
                self._rebuild(old.node)
            return None
        token = next(self._tokens)
        self._claims[token] = _Claim(key, node, ident, shares, self._clock() + self.claim_ttl)
        self._rebuild(node)
        return token, self.use(node)

    def release(self, token: int) -> None:
        """The bind did not happen: free the claim, and remember it for the ledger."""
        claim = self._claims.pop(token, None)
        if claim is None:
            return
        self._remember(self._released, claim.node, claim.ident)
        self._rebuild(claim.node)

    def expire(self) -> list[str]:
        """Drop claims older than the TTL (their pod never showed up bound); returns their pods."""
        now = self._clock()
        expired = [token for token, claim in self._claims.items() if claim.expires <= now]
        pods = []
        for token in expired:
            claim = self._claims.pop(token)
            pods.append(claim.key)
            self._rebuild(claim.node)
        return pods

    # ---- internals ----------------------------------------------------------------------------

    def _remember(self, table: dict[str, dict[str, float]], node: str, ident: str) -> None:
        table.setdefault(node, {})[ident] = self._wall()

    def _recent(self, table: dict[str, dict[str, float]], node: str) -> dict[str, float]:
        entries = table.get(node)
        if not entries:
            return {}
        horizon = self._wall() - self.memory
        for ident in [i for i, at in entries.items() if at < horizon]:
            del entries[ident]
        if not entries:
            del table[node]
            return {}
        return dict(entries)

    def _rebuild(self, node: str) -> None:
        if self._on_change is not None:
            self._on_change(node)
        holders: dict[str, Shares] = dict(self._holders.get(node, {}))
        for claim in self._claims.values():
            if claim.node == node:
                holders.setdefault(claim.ident, claim.shares)
        gone = self._recent(self._gone, node)
        released = self._recent(self._released, node)
        if not holders and not gone and not released:
            self._views.pop(node, None)
            return
        totals: dict[str, Use] = {}
        for shares in holders.values():
            add_shares(totals, shares)
        self._views[node] = NodeDeviceUse(totals, holders, frozenset(gone), released)
