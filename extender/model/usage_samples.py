"""Node usage as the load-aware plugins read it: one immutable sample per node, and the table of them.

Requests lie (a node at 30% requested can run at 95% CPU), so the load plugins read
what a usage source measured instead. A background loop (extender/usage) fetches the
measurements and publishes a `UsageSample` per node; a request only ever reads the
latest published table, never waits for a fetch, and judges a sample's age against
the table's `now` (the wall clock live, the snapshot's time offline).

Units are the project's: millicores for cpu, bytes for memory. `recent_*` are the
requests of pods placed on the node since the measurement was taken: usage lags, so
a burst of pods must not all land on the node that looked idle a moment ago.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# How a sample's standard deviation was obtained (explain shows it).
STDEV_WINDOW = "window"  # the source measured it over its window (a Prometheus query)
STDEV_OBSERVED = "observed"  # exponentially weighted over the samples the loop has seen

# The usage source's state, as UsageTable.state carries it (with ": <detail>" when there is one).
STARTING = "starting"  # no fetch has answered yet
UP = "up"
DOWN = "down"


@dataclass(frozen=True, slots=True)
class UsageSample:
    node: str
    source: str
    timestamp: float  # Unix seconds at the end of the measurement
    expires: float  # Unix seconds after which the sample is stale (timestamp + maxAge)
    cpu: float | None  # millicores in use; None when the source gave no cpu figure
    memory: float | None  # bytes in use
    cpu_capacity: int  # millicores: the node's status.capacity (allocatable when absent)
    memory_capacity: int  # bytes
    cpu_stdev: float | None = None
    memory_stdev: float | None = None
    stdev_kind: str = ""  # STDEV_WINDOW, STDEV_OBSERVED, or "" (no deviation known)
    window: float = 0.0  # seconds the measurement covers; 0 for an instantaneous one
    recent_cpu: int = 0  # millicores requested by pods placed since the measurement
    recent_memory: int = 0
    recent_pods: int = 0

    def stale(self, now: float) -> bool:
        return now > self.expires

    def age(self, now: float) -> float:
        return max(0.0, now - self.timestamp)

    def cpu_percent(self) -> float | None:
        """Measured plus recently placed cpu, in percent of capacity (None: no figure)."""
        if self.cpu is None or self.cpu_capacity <= 0:
            return None
        return (self.cpu + self.recent_cpu) * 100 / self.cpu_capacity

    def memory_percent(self) -> float | None:
        if self.memory is None or self.memory_capacity <= 0:
            return None
        return (self.memory + self.recent_memory) * 100 / self.memory_capacity


@dataclass(frozen=True, slots=True)
class UsageTable:
    """What a scheduling cycle reads: the published samples, the time to judge them by, the source's state.

    `samples` is the store's published mapping, replaced per node, never edited in place,
    so one lookup per node is all a plugin pays.
    """

    samples: Mapping[str, UsageSample] = field(default_factory=dict)
    now: float = 0.0
    source: str = ""  # "" when no usage source runs
    state: str = ""  # UP, DOWN or STARTING (then ": <detail>"), or "" without a source

    def fresh(self, name: str) -> UsageSample | None:
        """The node's sample when there is one and it is not stale, else None."""
        sample = self.samples.get(name)
        if sample is None or self.now > sample.expires:
            return None
        return sample

    def describe(self, name: str) -> str:
        """One line for explain: the node's usage and the sample's age, or why there is none."""
        sample = self.samples.get(name)
        if sample is None:
            return "no usage data" + (f" ({self.source} {self.state})" if self.source else "")
        age = sample.age(self.now)
        parts = []
        cpu, memory = sample.cpu_percent(), sample.memory_percent()
        if cpu is not None:
            parts.append(f"cpu {cpu:.0f}%")
        if memory is not None:
            parts.append(f"memory {memory:.0f}%")
        if sample.recent_pods:
            parts.append(f"incl. {sample.recent_pods} pod(s) placed since")
        text = ", ".join(parts) or "no cpu or memory figure"
        if self.now > sample.expires:
            return f"{text}; stale: {age:.0f}s old, over the {sample.expires - sample.timestamp:.0f}s limit"
        return f"{text}; {age:.0f}s old"


EMPTY_USAGE = UsageTable()
