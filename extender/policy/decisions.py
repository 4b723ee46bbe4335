"""A Decision records everything the engine concluded for one pod (kube-scheduler's Diagnosis).

One formatter turns it into the "0/N nodes are available: ..." summary, so the
webhook's logs, the standalone scheduler's Events and `explain` say the same thing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy.status import Code, Status


@dataclass(frozen=True, slots=True)
class ScoreLine:
    plugin: str
    raw: float
    normalized: float
    weight: int

    @property
    def weighted(self) -> float:
        return self.normalized * self.weight


@dataclass
class Decision:
    pod: PodView
    total: int
    feasible: list[NodeInfo] = field(default_factory=list)
    failed: dict[str, Status] = field(default_factory=dict)
    scored: list[NodeInfo] = field(default_factory=list)
    totals: list[float] = field(default_factory=list)
    raw_scores: dict[str, list[float]] = field(default_factory=dict)
    normalized_scores: dict[str, list[float]] = field(default_factory=dict)
    weights: dict[str, int] = field(default_factory=dict)
    # A refusal of every node by one plugin's per-pod step (kube-scheduler's PreFilter):
    # the summary then says it once, without a node count.
    prefilter: Status | None = None
    # The status of every node neither feasible nor in `failed` (kube-scheduler's
    # AbsentNodesStatus): the nodes a PreFilterResult left out, never filtered one by one.
    absent: Status | None = None

    def absent_count(self) -> int:
        return self.total - len(self.feasible) - len(self.failed) if self.absent is not None else 0

    def refusing_plugins(self) -> frozenset[str]:
        """The plugins that refused some node (the queue's hints read them)."""
        plugins = {status.plugin for status in self.failed.values()}
        if self.absent is not None and self.absent_count():
            plugins.add(self.absent.plugin)
        return frozenset(plugins)

    def unresolvable(self) -> dict[str, Status]:
        return {name: s for name, s in self.failed.items() if s.code == Code.UNRESOLVABLE}

    def resolvable(self) -> dict[str, Status]:
        return {name: s for name, s in self.failed.items() if s.code != Code.UNRESOLVABLE}

    def score_of(self, index: int) -> list[ScoreLine]:
        """The per-scorer breakdown of the `index`-th scored node."""
        return [
            ScoreLine(name, raw[index], self.normalized_scores[name][index], self.weights[name])
            for name, raw in self.raw_scores.items()
        ]

    def ranking(self) -> list[tuple[NodeInfo, float]]:
        """Scored nodes, best first (stable: equal totals keep input order)."""
        return sorted(zip(self.scored, self.totals, strict=True), key=lambda pair: -pair[1])

    def summary(self) -> str:
        """kube-scheduler's FitError text: reasons counted, sorted as strings, as Go sorts them;
        a PreFilter refusal said once ("0/3 nodes are available: persistentvolumeclaim "x" not found.")."""
        available = len(self.feasible)
        if self.prefilter is not None:
            return f"{available}/{self.total} nodes are available: {self.prefilter.reason}."
        counts: Counter[str] = Counter()
        for status in self.failed.values():
            counts.update(status.reasons)
        if self.absent is not None and (absent := self.absent_count()):
            for reason in self.absent.reasons:
                counts[reason] += absent
        parts = sorted(f"{count} {reason}" for reason, count in counts.items())
        text = f"{available}/{self.total} nodes are available"
        return f"{text}: {', '.join(parts)}." if parts else f"{text}."
