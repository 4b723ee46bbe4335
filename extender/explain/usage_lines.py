"""Explain's view of node usage: each node's sample and its age, and the load scorers' score parts.

Kept apart from explanation.py because it only matters to policies with load-aware
plugins: a row gains `usage` ("cpu 62%, memory 40%; 12s old", or why there is no data:
missing, stale, the source down) when a usage source runs, and `parts` (plugin -> how
its number came about) for every scorer whose per-node function carries `explain(info)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.model.usage_samples import UP, UsageTable
from extender.policy.cluster_view import ClusterView
from extender.policy.engine import Engine
from extender.policy.plugins import explainer


def score_parts(engine: Engine, pod: PodView, nodes: Sequence[NodeInfo], cluster: ClusterView
                ) -> dict[str, dict[str, str]]:
    """node -> plugin -> text, from the per-node score functions that can explain themselves."""
    parts: dict[str, dict[str, str]] = {}
    for points, _ in engine.policy.scorer_points:
        if points.prescore is None:
            continue
        explain = explainer(points.prescore(pod, cluster, nodes))
        if explain is None:
            continue
        for info in nodes:
            parts.setdefault(info.name, {})[points.name] = explain(info)
    return parts


@dataclass(frozen=True, slots=True)
class UsageLines:
    """What explain adds to its rows: each node's usage line (when a usage source runs), its
    scorers' parts, and a note when the source is not up."""

    table: UsageTable
    parts: dict[str, dict[str, str]]

    def usage(self, node: str) -> str:
        return self.table.describe(node) if self.table.source else ""

    def parts_of(self, node: str) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(self.parts.get(node, {}).items()))

    @property
    def note(self) -> str:
        table = self.table
        if table.source and table.state and not table.state.startswith(UP):
            return f"node usage source {table.source} is {table.state}"
        return ""


def usage_lines(engine: Engine, pod: PodView, scored: Sequence[NodeInfo], cluster: ClusterView) -> UsageLines | None:
    """The usage lines and score parts for an explanation's rows, or None when there are neither."""
    table = cluster.node_usage()
    parts = score_parts(engine, pod, scored, cluster) if scored else {}
    if not table.source and not parts:
        return None
    return UsageLines(table, parts)
