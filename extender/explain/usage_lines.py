"""Explain's view of node usage: each node's sample and its age, and the load scorers' score parts.

Kept apart from explaining.py because it only matters to policies with load-aware
plugins: a row gains `usage` ("cpu 62%, memory 40%; 12s old", or why there is no data:
missing, stale, the source down) when a usage source runs, and `parts` (plugin -> how
its number came about) for every scorer whose per-node function carries `explain(info)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy.cluster_view import ClusterView
from extender.policy.engine import Engine
from extender.policy.plugins import explainer

if TYPE_CHECKING:
    from extender.explain.explanation import Explanation


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


def with_usage(explanation: Explanation, engine: Engine, pod: PodView, scored: Sequence[NodeInfo],
               cluster: ClusterView) -> Explanation:
    """The explanation with each row's usage line and score parts (unchanged without a usage source)."""
    table = cluster.node_usage()
    parts = score_parts(engine, pod, scored, cluster) if scored else {}
    if not table.source and not parts:
        return explanation
    rows = tuple(
        replace(row, usage=table.describe(row.node) if table.source else "",
                parts=tuple(sorted(parts.get(row.node, {}).items())))
        for row in explanation.rows
    )
    notes = explanation.notes
    if table.source and table.state and not table.state.startswith("up"):
        notes = (*notes, f"node usage source {table.source} is {table.state}")
    return replace(explanation, rows=rows, notes=notes)
