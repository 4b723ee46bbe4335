"""Explain one pod's decision: a row per node saying why it was kept or refused, and how it scored.

The engine already records everything (`Decision`); this module only reshapes it
for people (a text table) and for tools (a JSON dict, also served by POST /explain),
so `extender explain`, the webhook and the standalone scheduler can never disagree
about why. Rows list the feasible nodes best first, then the refused ones in the
order they were given. Feasible nodes with equal totals share a rank: the standalone
scheduler breaks such ties at random (as kube-scheduler's selectHost does).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from extender import wire
from extender.explain.device_notes import device_notes
from extender.explain.usage_lines import UsageLines, usage_lines
from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy.builtin.devices import DeviceFit
from extender.policy.cluster_view import EMPTY_CLUSTER, ClusterView
from extender.policy.decisions import Decision, ScoreLine
from extender.policy.engine import Engine, unknown_node_status
from extender.policy.preemption import preempt
from extender.policy.status import Code

FEASIBLE = "feasible"
REFUSED = "refused"
UNRESOLVABLE = "unresolvable"


@dataclass(frozen=True, slots=True)
class Row:
    node: str
    verdict: str  # FEASIBLE, REFUSED (preemption might help) or UNRESOLVABLE
    plugin: str = ""  # the filter that refused the node
    reason: str = ""  # its short fixed phrase, as counted in the summary
    detail: str = ""  # the per-node numbers behind the reason
    scores: tuple[ScoreLine, ...] = ()
    total: float | None = None  # weighted average, 0..100
    wire_score: int | None = None  # what /prioritize would send kube-scheduler, 0..10
    rank: int | None = None  # 1 = best; ties share a rank
    usage: str = ""  # the node's measured usage and its age, when a usage source runs (usage_lines)
    parts: tuple[tuple[str, str], ...] = ()  # (scorer, how its score came about), for load scorers


@dataclass(frozen=True)
class Preemption:
    """What preemption would do for a pod that fits nowhere: every candidate node's victims,
    the node it would pick, and why each other node is no candidate."""

    node: str  # "" when no node can be freed
    message: str  # why not, as kube-scheduler words it after "preemption: "
    victims: tuple[tuple[str, tuple[str, ...], int], ...] = ()  # (node, victims, PDB violations)
    not_candidates: tuple[tuple[str, str], ...] = ()  # (node, reason)


@dataclass(frozen=True)
class Explanation:
    pod: str
    policy: str
    summary: str
    rows: tuple[Row, ...]
    scorers: tuple[tuple[str, int], ...] = ()  # (plugin, weight), in policy order
    notes: tuple[str, ...] = field(default=())
    preemption: Preemption | None = None

    @property
    def best(self) -> list[str]:
        """Every node tied for first place (the scheduler picks one of them)."""
        return [row.node for row in self.rows if row.rank == 1]

    def row(self, node: str) -> Row:
        for row in self.rows:
            if row.node == node:
                return row
        raise KeyError(node)


def _verdict(code: Code) -> str:
    return UNRESOLVABLE if code == Code.UNRESOLVABLE else REFUSED


def explain_decision(decision: Decision, *, policy: str = "", order: Sequence[str] | None = None,
                     notes: Sequence[str] = ()) -> Explanation:
    """Turn a Decision into rows. `order` is the candidate order refused nodes keep (default: as failed)."""
    index = {info.name: i for i, info in enumerate(decision.scored)}
    rows: list[Row] = []
    rank = 0
    previous: float | None = None
    for position, (info, total) in enumerate(decision.ranking(), start=1):
        if total != previous:
            rank, previous = position, total
        i = index[info.name]
        cells = tuple(decision.score_of(i))
        rows.append(Row(info.name, FEASIBLE, scores=cells, total=total,
                        wire_score=wire.to_extender_score(total), rank=rank))
    # Feasible but never scored (engine.filter only): keep them, unranked.
    scored = set(index)
    rows += [Row(info.name, FEASIBLE) for info in decision.feasible if info.name not in scored]
    names = list(order) if order is not None else []
    listed = set(names)
    names += [name for name in decision.failed if name not in listed]
    for name in names:
        status = decision.failed.get(name)
        if status is not None:
            rows.append(Row(name, _verdict(status.code), status.plugin, status.reason, status.detail))
    return Explanation(
        pod=decision.pod.key, policy=policy, summary=decision.summary(), rows=tuple(rows),
        scorers=tuple(decision.weights.items()), notes=tuple(notes),
    )


def explain_pod(engine: Engine, pod: PodView, nodes: Sequence[NodeInfo], *, cluster: ClusterView | None = None,
                unknown: Sequence[str] = (), notes: Sequence[str] = ()) -> Explanation:
    """Run the engine (filter, then score the feasible nodes) and explain the result.

    `unknown` are candidate names with no node behind them; they are refused as the
    webhook refuses them, so the explanation matches what /filter would answer.
    """
    decision = engine.decide(pod, nodes, cluster)
    preemption = _preemption(engine, pod, decision, nodes, cluster) if cluster is not None else None
    for name in unknown:
        decision.failed[name] = unknown_node_status()
    decision.total += len(unknown)
    order = [info.name for info in nodes] + list(unknown)
    notes = [*notes, *device_notes(pod, nodes, cluster, _device_fit(engine))]
    explanation = explain_decision(decision, policy=engine.policy.source, order=order, notes=notes)
    lines = usage_lines(engine, pod, decision.scored, cluster if cluster is not None else EMPTY_CLUSTER)
    return replace(_with_usage(explanation, lines), preemption=preemption)


def _with_usage(explanation: Explanation, lines: UsageLines | None) -> Explanation:
    """The explanation with each row's usage line and score parts (unchanged without either)."""
    if lines is None:
        return explanation
    rows = tuple(replace(row, usage=lines.usage(row.node), parts=lines.parts_of(row.node)) for row in explanation.rows)
    notes = (*explanation.notes, lines.note) if lines.note else explanation.notes
    return replace(explanation, rows=rows, notes=notes)


def _device_fit(engine: Engine) -> DeviceFit | None:
    """The policy's DeviceFit, whose inventory (annotations or DRA) explain's GPU notes show."""
    return next((f for f in engine.policy.filters if isinstance(f, DeviceFit)), None)


def _preemption(engine: Engine, pod: PodView, decision: Decision, nodes: Sequence[NodeInfo],
                cluster: ClusterView) -> Preemption | None:
    """The standalone scheduler's preemption for a pod that fits nowhere, every node dry-run."""
    if decision.feasible:
        return None
    outcome = preempt(engine.prepare(pod, cluster), decision, nodes, cluster, cluster.disruption_budgets(),
                      rng=random.Random(0), nominated=cluster.nominated_node(pod.key) or pod.nominated_node_name,
                      exhaustive=True)
    return Preemption(
        node=outcome.candidate.node if outcome.candidate else "",
        message=outcome.message,
        victims=tuple((c.node, tuple(v.key for v in c.victims), c.pdb_violations) for c in outcome.candidates),
        not_candidates=tuple((node, status.reason) for node, status in outcome.statuses.items()),
    )


# ---- JSON -------------------------------------------------------------------------------


def _number(value: float) -> float | int:
    """Integers stay integers in JSON; other values keep three decimals (enough to compare)."""
    return int(value) if float(value).is_integer() else round(float(value), 3)


def row_to_dict(row: Row) -> dict[str, Any]:
    entry: dict[str, Any] = {"node": row.node, "verdict": row.verdict}
    if row.verdict == FEASIBLE:
        entry["rank"] = row.rank
        entry["total"] = None if row.total is None else _number(row.total)
        entry["wireScore"] = row.wire_score
        entry["scores"] = [
            {"plugin": c.plugin, "raw": _number(c.raw), "normalized": _number(c.normalized),
             "weight": c.weight, "weighted": _number(c.weighted)}
            for c in row.scores
        ]
    else:
        entry.update({"plugin": row.plugin, "reason": row.reason, "detail": row.detail})
    if row.usage:
        entry["usage"] = row.usage
    if row.parts:
        entry["scoreParts"] = dict(row.parts)
    return entry


def to_json(explanation: Explanation) -> dict[str, Any]:
    """The JSON form (`-o json`, POST /explain): camelCase keys, like Kubernetes objects."""
    return {
        "pod": explanation.pod,
        "policy": explanation.policy,
        "summary": explanation.summary,
        "best": explanation.best,
        "scorers": [{"plugin": name, "weight": weight} for name, weight in explanation.scorers],
        "nodes": [row_to_dict(row) for row in explanation.rows],
        **({"notes": list(explanation.notes)} if explanation.notes else {}),
        **({"preemption": _preemption_json(explanation.preemption)} if explanation.preemption else {}),
    }


def _preemption_json(preemption: Preemption) -> dict[str, Any]:
    return {
        "node": preemption.node or None,
        "message": preemption.message,
        "candidates": [{"node": node, "victims": list(victims), "pdbViolations": violations}
                       for node, victims, violations in preemption.victims],
        "notCandidates": [{"node": node, "reason": reason} for node, reason in preemption.not_candidates],
    }


# ---- text table --------------------------------------------------------------------------


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def _cell(cell: ScoreLine) -> str:
    """Normalised score, with the raw value when the plugin's own unit differs."""
    if cell.raw == cell.normalized:
        return _fmt(cell.normalized)
    return f"{_fmt(cell.normalized)} (raw {_fmt(cell.raw)})"


def _layout(header: Sequence[str], lines: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header, *lines]) for i in range(len(header))]
    out = []
    for line in [header, *lines]:
        out.append("  ".join(str(v).ljust(w) for v, w in zip(line, widths, strict=True)).rstrip())
    return out


def render_table(explanation: Explanation) -> str:
    """A kubectl-style table: one line per node, scores per scorer, then why refused nodes were refused."""
    scorer_names = [name for name, _ in explanation.scorers]
    header = ["RANK", "NODE", "VERDICT", "TOTAL", "WIRE", *(f"{n} x{w}" for n, w in explanation.scorers),
              "FILTER", "REASON"]
    lines = []
    for row in explanation.rows:
        cells = {c.plugin: _cell(c) for c in row.scores}
        lines.append([
            str(row.rank) if row.rank is not None else "-",
            row.node,
            row.verdict,
            _fmt(row.total) if row.total is not None else "-",
            str(row.wire_score) if row.wire_score is not None else "-",
            *(cells.get(name, "-") for name in scorer_names),
            row.plugin or "-",
            row.reason or "-",
        ])
    text = [f"Pod {explanation.pod}   policy {explanation.policy}", explanation.summary]
    if explanation.best:
        text.append(f"Best: {', '.join(explanation.best)}")
    text.append("")
    text += _layout(header, lines)
    details = [row for row in explanation.rows if row.detail]
    if details:
        text += ["", "Details:"]
        text += [f"  {row.node}: {row.plugin}: {row.detail}" for row in details]
    usage = [row for row in explanation.rows if row.usage or row.parts]
    if usage:
        text += ["", "Usage:"]
        for row in usage:
            text += [f"  {row.node}: {row.usage}"] if row.usage else []
            text += [f"  {row.node}: {plugin}: {part}" for plugin, part in row.parts]
    if explanation.scorers:
        text += ["", "TOTAL is the weighted average of the scorers' 0..100 scores (column header: x weight); "
                 "WIRE is the 0..10 score /prioritize sends."]
    text += [f"Note: {note}" for note in explanation.notes]
    if explanation.preemption is not None:
        text += ["", *_preemption_lines(explanation.preemption)]
    return "\n".join(text) + "\n"


def _preemption_lines(preemption: Preemption) -> list[str]:
    if preemption.node:
        lines = [f"Preemption: would nominate {preemption.node} and evict "
                 f"{', '.join(dict((n, v) for n, v, _ in preemption.victims)[preemption.node])}."]
    else:
        lines = [f"Preemption: none possible: {preemption.message}"]
    for node, victims, violations in preemption.victims:
        budget = f" ({violations} PodDisruptionBudget violation(s))" if violations else ""
        lines.append(f"  {node}: would evict {', '.join(victims)}{budget}")
    lines += [f"  {node}: not a candidate: {reason}" for node, reason in preemption.not_candidates]
    return lines
