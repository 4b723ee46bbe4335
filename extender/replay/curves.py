"""The published curve of a replay: after every pod event (placed or not), x is the GPU demand
arrived so far and y the GPU milli allocated, both in percent of the cluster's GPUs; the curve
at each integer x is the mean y of the events whose x rounds to it (or, with none, of those
within one point). The fragmentation ratio is read the same way. docs/replay.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

X_MAX = 130
TABLE_X = (50, 80, 90, 100, 110, 120, 130)
FRAG_X = 90


@dataclass
class Curve:
    """Events binned by rounded x: the sum and count of y per bin."""

    sums: dict[int, float] = field(default_factory=dict)
    counts: dict[int, int] = field(default_factory=dict)

    def add(self, x: int, y: float) -> None:
        self.sums[x] = self.sums.get(x, 0.0) + y
        self.counts[x] = self.counts.get(x, 0) + 1

    def at(self, x: int) -> float | None:
        """The mean y at `x`, or of x-1..x+1 when no event rounds to x; None when none do."""
        if self.counts.get(x):
            return round(self.sums[x] / self.counts[x], 2)
        near = [b for b in (x - 1, x, x + 1) if self.counts.get(b)]
        if not near:
            return None
        return round(sum(self.sums[b] for b in near) / sum(self.counts[b] for b in near), 2)

    def points(self, last: int = X_MAX) -> dict[str, float]:
        """x -> y for 0 up to the last x reached (at most `last`). An x no event is near (a small
        cluster, where one pod moves x by several points) gets the y of the x before it: what was
        allocated when the demand passed it."""
        reached = max(self.counts, default=-1)
        found = {}
        previous = 0.0
        for x in range(min(last, reached) + 1):
            y = self.at(x)
            previous = previous if y is None else y
            found[str(x)] = previous
        return found


def percent_x(arrived: int, capacity: int) -> int:
    """Rounded as the published analysis rounds (Python's round: halves to even)."""
    return round(arrived * 100 / capacity) if capacity else 0


def summary(values: Sequence[float]) -> tuple[float, float, float]:
    """Mean, min and max."""
    return (round(sum(values) / len(values), 2), min(values), max(values)) if values else (0.0, 0.0, 0.0)


def table_columns(curves: Sequence[Mapping[str, float]]) -> dict[int, tuple[float, float, float]]:
    """The table's x columns: mean, min, max over runs of each run's y there."""
    columns = {}
    for x in TABLE_X:
        values = [curve[str(x)] for curve in curves if str(x) in curve]
        if values:
            columns[x] = summary(values)
    return columns
