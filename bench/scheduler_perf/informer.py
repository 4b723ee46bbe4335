"""The pods of the cluster as scheduler_perf's pod informer sees them, and its throughput
collector.

:class:`PodCache` lists every pod once and then watches (resuming from the last
resourceVersion when the server ends the stream), keeping what the barriers and the
collectors read: namespace, labels, nodeName and whether a scheduler attempted the pod
(a PodScheduled condition, as util.go's ``isAttempted``).

:class:`ThroughputCollector` is util.go's ``throughputCollector``: every second
(``throughputSampleInterval``) it counts the pods of its namespaces and labels whose
nodeName appeared since the last sample; the first sample with any pod scheduled only
starts the clock, a sample with none is skipped and the next one's rate is recorded once
per skipped interval too. ``summary`` gives Average and Perc50/90/95/99 over the sorted
samples with the same ``ceil(n * p / 100) - 1`` index.

:class:`ClaimWatch` follows the ResourceClaims of a DRA workload the same way, for the
invariant that no device is allocated twice at any moment.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bench.watchstream import WatchLoop

SAMPLE_INTERVAL = 1.0  # throughputSampleInterval


@dataclass
class PodState:
    namespace: str
    labels: dict[str, str]
    node: str
    attempted: bool


def labels_match(labels: Mapping[str, str], selector: Mapping[str, str] | None) -> bool:
    """util.go's labelsMatch: every key of the selector with the same value."""
    return all(labels.get(k) == v for k, v in (selector or {}).items())


def _state(pod: dict[str, Any]) -> PodState:
    meta = pod.get("metadata") or {}
    conditions = (pod.get("status") or {}).get("conditions") or []
    return PodState(
        namespace=meta.get("namespace", ""),
        labels=meta.get("labels") or {},
        node=(pod.get("spec") or {}).get("nodeName") or "",
        attempted=any(c.get("type") == "PodScheduled" for c in conditions),
    )


@dataclass
class PodCache:
    """Every pod of the cluster, kept current by one list and a watch."""

    kube: Any  # tests.fakeapi.client.KubeTestClient
    pods: dict[tuple[str, str], PodState] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    collectors: list[ThroughputCollector] = field(default_factory=list)
    _watch: WatchLoop | None = None

    def start(self) -> PodCache:
        listed = self.kube.call("GET", "/api/v1/pods")
        with self.lock:
            for pod in listed.get("items") or []:
                meta = pod["metadata"]
                self.pods[(meta["namespace"], meta["name"])] = _state(pod)
        self._watch = WatchLoop(self.kube, "/api/v1/pods", "pod cache", self._event, self._relist)
        self._watch.start(listed["metadata"]["resourceVersion"])
        return self

    def _event(self, kind: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        with self.lock:
            old = self.pods.get(key)
            if kind == "DELETED":
                self.pods.pop(key, None)
                return
            new = self.pods[key] = _state(obj)
            collectors = list(self.collectors)
        if new.node and (old is None or not old.node):
            for collector in collectors:
                collector.observe(new)

    def _relist(self) -> str:
        listed = self.kube.call("GET", "/api/v1/pods")
        fresh = {(p["metadata"]["namespace"], p["metadata"]["name"]): _state(p) for p in listed.get("items") or []}
        with self.lock:
            before = self.pods
            self.pods = fresh
            collectors = list(self.collectors)
        for key, state in fresh.items():
            if state.node and not (before.get(key) and before[key].node):
                for collector in collectors:
                    collector.observe(state)
        return str(listed["metadata"]["resourceVersion"])

    def counts(self, namespace: str | None, selector: Mapping[str, str] | None) -> tuple[int, int, int]:
        """(scheduled, attempted but unscheduled, unattempted) pods of ``namespace`` (None: all)
        matching ``selector``: util.go's getScheduledPods."""
        scheduled = attempted = unattempted = 0
        with self.lock:
            for state in self.pods.values():
                if (namespace is None or state.namespace == namespace) and labels_match(state.labels, selector):
                    if state.node:
                        scheduled += 1
                    elif state.attempted:
                        attempted += 1
                    else:
                        unattempted += 1
        return scheduled, attempted, unattempted

    def names(self, namespace: str, selector: Mapping[str, str] | None) -> list[str]:
        with self.lock:
            return [name for (ns, name), state in self.pods.items()
                    if ns == namespace and labels_match(state.labels, selector)]

    def subscribe(self, collector: ThroughputCollector) -> None:
        """Register a collector, replaying the pods already scheduled in its namespaces as
        an informer replays its cache to a new handler."""
        with self.lock:
            self.collectors.append(collector)
            existing = [s for s in self.pods.values() if s.node]
        for state in existing:
            collector.observe(state)

    def unsubscribe(self, collector: ThroughputCollector) -> None:
        with self.lock:
            if collector in self.collectors:
                self.collectors.remove(collector)

    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()


@dataclass
class ThroughputCollector:
    """util.go's throughputCollector over a PodCache."""

    name: str
    namespaces: frozenset[str]
    selector: Mapping[str, str] | None = None
    scheduled: int = 0
    samples: list[float] = field(default_factory=list)
    started_at: float | None = None
    stopped_at: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def observe(self, state: PodState) -> None:
        if state.namespace in self.namespaces and labels_match(state.labels, self.selector):
            with self._lock:
                self.scheduled += 1

    def start(self, cache: PodCache) -> ThroughputCollector:
        cache.subscribe(self)
        self._thread = threading.Thread(target=self._run, name=f"throughput-{self.name}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        started = False
        skipped = 0
        last_count = 0
        last_time = time.monotonic()
        next_tick = time.monotonic() + SAMPLE_INTERVAL
        while not self._stop.wait(max(0.0, next_tick - time.monotonic())):
            next_tick += SAMPLE_INTERVAL
            now = time.monotonic()
            with self._lock:
                scheduled = self.scheduled
            if scheduled == 0:
                continue
            if not started:
                started, last_count, last_time, self.started_at = True, scheduled, now, now
                continue
            new = scheduled - last_count
            if new == 0:
                skipped += 1
                continue
            rate = new / (now - last_time)
            self.samples += [rate] * (skipped + 1)
            last_count, last_time, skipped = scheduled, now, 0

    def stop(self, cache: PodCache) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        cache.unsubscribe(self)
        self.stopped_at = time.monotonic()

    def summary(self) -> dict[str, float] | None:
        """SchedulingThroughput as util.go's collect(): None when no interval was sampled."""
        values = sorted(self.samples)
        if not values:
            return None

        def percentile(p: int) -> float:
            return values[math.ceil(len(values) * p / 100) - 1]

        return {"Average": sum(values) / len(values), "Perc50": percentile(50), "Perc90": percentile(90),
                "Perc95": percentile(95), "Perc99": percentile(99)}


@dataclass
class ClaimWatch:
    """Every ResourceClaim event, in order, handed to ``observe(kind, claim)`` (for
    invariants.DeviceHolders): one list, then a watch resumed from the last
    resourceVersion; a 410 lists again, reporting the claims that vanished as DELETED."""

    kube: Any  # tests.fakeapi.client.KubeTestClient
    observe: Any  # Callable[[str, dict], None]
    path: str = "/apis/resource.k8s.io/v1/resourceclaims"
    _uids: set[str] = field(default_factory=set)
    _watch: WatchLoop | None = None

    def start(self) -> ClaimWatch:
        self._watch = WatchLoop(self.kube, self.path, "claim watch", self._event, self._list)
        self._watch.start(self._list())
        return self

    def _list(self) -> str:
        listed = self.kube.call("GET", self.path)
        items = listed.get("items") or []
        fresh = {c["metadata"]["uid"] for c in items}
        for uid in self._uids - fresh:
            self.observe("DELETED", {"metadata": {"uid": uid}})
        for claim in items:
            self.observe("MODIFIED" if claim["metadata"]["uid"] in self._uids else "ADDED", claim)
        self._uids = fresh
        return str(listed["metadata"]["resourceVersion"])

    def _event(self, kind: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        (self._uids.discard if kind == "DELETED" else self._uids.add)(meta.get("uid", ""))
        self.observe(kind, obj)

    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()
