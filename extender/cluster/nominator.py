"""Preemption's nominations: pending pods holding room on the node their victims are leaving.

kube-scheduler's nominator, kept apart from the cache as there: when a preemption evicts
victims for a pod, the pod is nominated to that node, and until it is bound there every
other pod with a lower priority must leave it that room (engine.FilterCycle counts the
nominated pods on their node). Only the standalone scheduler and simulate track them
(`tracking`); the webhook leaves nominations to kube-scheduler.

The state calls `follow` with every pod change, so a nomination the API server shows
(`status.nominatedNodeName`, after a restart or a fail-over) is adopted, and one whose
pod was bound, finished or deleted is dropped. Readers get immutable tuples without
locking; writers hold the nominator's own lock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import replace

from extender.model.pods import TERMINAL_PHASES, PodView
from extender.model.records import PodRecord, record_from_view


class Nominator:
    def __init__(self) -> None:
        self.tracking = False
        self._lock = threading.RLock()
        self._nominated: dict[str, tuple[PodRecord, ...]] = {}  # node -> pods waiting for room there
        self._node_of: dict[str, str] = {}  # pod key -> node

    # ---- reads (lock-free) -------------------------------------------------------------

    def nominations(self) -> dict[str, tuple[PodRecord, ...]]:
        """Node -> pods nominated there by preemption, as records placed on it."""
        return self._nominated

    def nominated_node(self, key: str) -> str:
        return self._node_of.get(key, "")

    # ---- the scheduler's writes ---------------------------------------------------------

    def nominate(self, view: PodView, node: str) -> None:
        """Hold room on `node` for a pending pod whose preemption is under way ("" clears it)."""
        with self._lock:
            self._drop(view.key)
            if node:
                self._add(record_from_view(view, node_name=node))

    def clear(self, key: str) -> str:
        """Give up a pod's nomination; returns the node it was nominated to ("" if none)."""
        with self._lock:
            return self._drop(key)

    # ---- following the cluster ----------------------------------------------------------

    def follow(self, record: PodRecord) -> None:
        """Keep nominations in step with a pod event: adopt one the API server shows, drop one
        whose pod was bound or finished."""
        if not self.tracking:
            return
        with self._lock:
            if record.node_name or record.phase in TERMINAL_PHASES:
                self._drop(record.key)
            elif record.nominated_node and record.view is not None \
                    and self._node_of.get(record.key) != record.nominated_node:
                self._drop(record.key)
                self._add(replace(record, node_name=record.nominated_node, view=None))

    def follow_all(self, records: Iterable[PodRecord], listed: set[str] | dict[str, PodRecord]) -> None:
        """After a full pod list: drop the nominations of pods no longer listed, follow the rest."""
        with self._lock:
            for key in [k for k in self._node_of if k not in listed]:
                self._drop(key)
            for record in records:
                self.follow(record)

    def placed(self, key: str) -> None:
        """The pod was placed (assumed on a node) or deleted: it no longer waits for room."""
        with self._lock:
            self._drop(key)

    def node_deleted(self, node: str) -> None:
        with self._lock:
            for record in self._nominated.get(node, ()):
                self._drop(record.key)

    # ---- internals (lock held) -----------------------------------------------------------

    def _add(self, record: PodRecord) -> None:
        node = record.node_name
        self._node_of[record.key] = node
        self._nominated[node] = (*self._nominated.get(node, ()), record)

    def _drop(self, key: str) -> str:
        node = self._node_of.pop(key, "")
        if node:
            left = tuple(r for r in self._nominated.get(node, ()) if r.key != key)
            if left:
                self._nominated[node] = left
            else:
                self._nominated.pop(node, None)
        return node
