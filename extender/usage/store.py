"""The usage store: the latest reading per node, the pods placed since, published as immutable samples.

Readers (scheduling cycles, any thread) call `table()` and get the published mapping of
node -> UsageSample: never locked, never edited in place (a sample is replaced whole,
and a fetch swaps in a new mapping), so a cycle reads each node's sample once, whole.

Recent placements, as Trimaran's PodAssignEventHandler: usage lags the pods placed on a
node, so until a sample is taken at least `reportingLag` seconds after a pod was placed,
that pod's requests (with kube-scheduler's non-zero defaults, 100m and 200Mi, for
containers without any) are added to the node's figures. The store hears of placements
through a ClusterState pod hook: a bind the watch reports, a pod the scheduler assumes,
a pod created already bound; a forgotten assumption or a deleted pod stops counting.

Sources without a window statistic (metrics-server, plain annotations) give one value per
sample; for LoadVariationRiskBalancing the store keeps an exponentially weighted mean and
variance over the samples it has seen (weight 2/(varianceSamples+1) for a new one).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from extender.model.records import PodRecord
from extender.model.usage_samples import (
    STARTING,
    STDEV_OBSERVED,
    STDEV_WINDOW,
    UsageSample,
    UsageTable,
)
from extender.policy.usage_settings import UsageSettings
from extender.usage.readings import Capacity, Reading


@dataclass(frozen=True, slots=True)
class _Placement:
    at: float
    cpu: int
    memory: int


@dataclass(slots=True)
class _Trend:
    """Exponentially weighted mean and variance of one node's cpu and memory readings."""

    timestamp: float
    cpu_mean: float | None
    cpu_var: float
    memory_mean: float | None
    memory_var: float


def _update(mean: float | None, variance: float, value: float | None, alpha: float) -> tuple[float | None, float]:
    """One step of the incremental exponentially weighted mean and variance (Finch, 2009)."""
    if value is None:
        return mean, variance
    if mean is None:
        return value, 0.0
    diff = value - mean
    increment = alpha * diff
    return mean + increment, (1 - alpha) * (variance + diff * increment)


class UsageStore:
    def __init__(self, source: str, settings: UsageSettings, *, clock: Callable[[], float] = time.time) -> None:
        self.source = source
        self.settings = settings
        self._clock = clock
        self._lock = threading.Lock()
        self._readings: dict[str, Reading] = {}
        self._capacity: dict[str, Capacity] = {}
        self._trends: dict[str, _Trend] = {}
        self._recent: dict[str, dict[str, _Placement]] = {}
        self._published: dict[str, UsageSample] = {}
        self.state = STARTING  # the source's state, for the table (explain) and /readyz
        self.state_detail = ""

    # ---- reads ---------------------------------------------------------------------------

    def table(self) -> UsageTable:
        state = self.state if not self.state_detail else f"{self.state}: {self.state_detail}"
        return UsageTable(self._published, self._clock(), self.source, state)

    def sample(self, node: str) -> UsageSample | None:
        return self._published.get(node)

    def newest_timestamp(self) -> float | None:
        published = self._published
        return max((s.timestamp for s in published.values()), default=None)

    def fresh_count(self) -> int:
        now = self._clock()
        return sum(1 for s in list(self._published.values()) if now <= s.expires)

    # ---- writes ------------------------------------------------------------------------------

    def set_state(self, state: str, detail: str = "") -> None:
        self.state, self.state_detail = state, detail

    def publish(self, readings: Iterable[Reading], capacities: Mapping[str, Capacity]) -> int:
        """Take a fetch's readings; nodes it missed keep their last sample until it goes stale.

        `capacities` holds every node the cluster has now: samples of the others are dropped.
        Returns how many samples are published.
        """
        alpha = self.settings.smoothing
        now = self._clock()
        horizon = now - self.settings.max_age - self.settings.reporting_lag
        with self._lock:
            for reading in readings:
                known = self._readings.get(reading.node)
                if known is not None and reading.timestamp < known.timestamp:
                    continue  # an older sample than the one we have (a lagging replica)
                self._readings[reading.node] = reading
                self._learn(reading, alpha)
            for name in list(self._readings):
                if name not in capacities:
                    del self._readings[name]
                    self._trends.pop(name, None)
            self._prune(horizon, capacities)
            self._capacity = dict(capacities)
            self._published = {name: self._sample(reading) for name, reading in self._readings.items()}
            return len(self._published)

    def prune(self) -> None:
        """Forget placements too old to count on any fresh sample (the loop calls it when fetches fail)."""
        with self._lock:
            self._prune(self._clock() - self.settings.max_age - self.settings.reporting_lag, None)

    def on_pod_change(self, old: PodRecord | None, new: PodRecord | None) -> None:
        """ClusterState pod hook (called under the state's lock): placements start and stop counting."""
        was = old.node_name if old is not None and old.counts else ""
        now = new.node_name if new is not None and new.counts else ""
        if was == now:
            return
        with self._lock:
            if was:
                placements = self._recent.get(was)
                if placements is not None and placements.pop(old.key, None) is not None:  # type: ignore[union-attr]  # `was` is set only when old is not None
                    self._republish(was)
            if now and new is not None:
                requests = new.score_requests
                self._recent.setdefault(now, {})[new.key] = _Placement(
                    self._clock(), requests.get("cpu", 0), requests.get("memory", 0))
                self._republish(now)

    # ---- internals (lock held) ----------------------------------------------------------------

    def _prune(self, horizon: float, nodes: Mapping[str, Capacity] | None) -> None:
        for name in list(self._recent):
            placements = {k: p for k, p in self._recent[name].items() if p.at > horizon}
            if placements and (nodes is None or name in nodes):
                self._recent[name] = placements
            else:
                del self._recent[name]

    def _learn(self, reading: Reading, alpha: float) -> None:
        trend = self._trends.get(reading.node)
        if trend is None:
            self._trends[reading.node] = _Trend(reading.timestamp, reading.cpu, 0.0, reading.memory, 0.0)
            return
        if reading.timestamp <= trend.timestamp:
            return  # the same sample again (fetched faster than the source's resolution)
        trend.timestamp = reading.timestamp
        trend.cpu_mean, trend.cpu_var = _update(trend.cpu_mean, trend.cpu_var, reading.cpu, alpha)
        trend.memory_mean, trend.memory_var = _update(trend.memory_mean, trend.memory_var, reading.memory, alpha)

    def _republish(self, node: str) -> None:
        reading = self._readings.get(node)
        if reading is not None and node in self._published:
            self._published[node] = self._sample(reading)

    def _sample(self, reading: Reading) -> UsageSample:
        capacity = self._capacity.get(reading.node, Capacity(0, 0))
        recent_cpu = recent_memory = recent_pods = 0
        placements = self._recent.get(reading.node)
        if placements:
            since = reading.timestamp - self.settings.reporting_lag
            for placement in placements.values():
                if placement.at > since:
                    recent_cpu += placement.cpu
                    recent_memory += placement.memory
                    recent_pods += 1
        cpu_stdev, memory_stdev, kind = reading.cpu_stdev, reading.memory_stdev, STDEV_WINDOW
        if cpu_stdev is None and memory_stdev is None:
            trend = self._trends.get(reading.node)
            kind = STDEV_OBSERVED
            cpu_stdev = math.sqrt(trend.cpu_var) if trend is not None and reading.cpu is not None else None
            memory_stdev = math.sqrt(trend.memory_var) if trend is not None and reading.memory is not None else None
        return UsageSample(
            node=reading.node, source=self.source, timestamp=reading.timestamp,
            expires=reading.timestamp + self.settings.max_age, cpu=reading.cpu, memory=reading.memory,
            cpu_capacity=capacity.cpu, memory_capacity=capacity.memory, cpu_stdev=cpu_stdev,
            memory_stdev=memory_stdev, stdev_kind=kind, window=reading.window, recent_cpu=recent_cpu,
            recent_memory=recent_memory, recent_pods=recent_pods,
        )
