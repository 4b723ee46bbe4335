"""A Decision records everything the engine concluded for one pod (kube-scheduler's Diagnosis).

One formatter, `FitError`, turns it into the "0/N nodes are available: ..." summary, so the
webhook's logs, the standalone scheduler's Events, preemption's message and `explain` say the
same thing; simulate's HTML report reads the FitError's parts, not its text.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import attrgetter

from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy.status import Code, Status

_REASONS = attrgetter("reasons")


@dataclass(frozen=True, slots=True)
class FitError:
    """kube-scheduler's FitError: how many of the nodes are available, and why the others are
    not, each reason with the number of nodes that gave it (`counted`, sorted as strings, as
    Go sorts them); or a PreFilter refusal, said once (`prefilter`)."""

    available: int
    total: int
    counted: tuple[str, ...] = ()
    prefilter: str = ""

    @classmethod
    def of(cls, statuses: Iterable[Status], available: int, total: int,
           extra: Iterable[tuple[str, int]] = ()) -> FitError:
        """The FitError of the refusals `statuses` (one per node), plus `extra` (reason, nodes).

        Counted by each status's reasons first, in C (Counter over a map): a failed attempt
        has a status per node, thousands, and a few distinct reasons among them; a Python loop
        of Counter.update per node was a tenth of the standalone scheduler's time on the
        EventHandling workloads (each failed attempt counts twice: its own and preemption's)."""
        counts: Counter[str] = Counter()
        for reasons, nodes in Counter(map(_REASONS, statuses)).items():
            for reason in reasons:
                counts[reason] += nodes
        for reason, nodes in extra:
            counts[reason] += nodes
        return cls(available, total, tuple(sorted(f"{count} {reason}" for reason, count in counts.items())))

    @property
    def headline(self) -> str:
        return f"{self.available}/{self.total} nodes are available"

    @property
    def reasons(self) -> tuple[str, ...]:
        """The parts after the headline: the counted reasons, or the PreFilter refusal."""
        return (self.prefilter,) if self.prefilter else self.counted

    def __str__(self) -> str:
        reasons = self.reasons
        return f"{self.headline}: {', '.join(reasons)}." if reasons else f"{self.headline}."


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

    def fit_error(self) -> FitError:
        """kube-scheduler's FitError of this decision: the refused nodes' reasons counted (the
        nodes a PreFilterResult left out under its status), or the PreFilter refusal."""
        available = len(self.feasible)
        if self.prefilter is not None:
            return FitError(available, self.total, prefilter=self.prefilter.reason)
        absent = self.absent_count()
        extra = [(reason, absent) for reason in self.absent.reasons] if self.absent is not None and absent else []
        return FitError.of(self.failed.values(), available, self.total, extra)

    def summary(self) -> str:
        """The FitError's text ("0/3 nodes are available: 3 Insufficient cpu.")."""
        return str(self.fit_error())
