"""A self-contained HTML report of a simulation: one file, inline CSS and SVG, no scripts.

The report is read in air-gapped clusters and attached to change reviews, so it
loads nothing from the network. It shows, per policy, how full each node was
before and after the simulated pods (an SVG bar chart: grey = already there,
colour = added by the simulation), which pod went where, and why the others could
not be placed, and each pod group's outcome (placed all or nothing). With two policies the
runs sit side by side, followed by the pods they place differently.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Sequence
from html import escape
from pathlib import Path

from extender.model.quantities import format_units
from extender.policy.decisions import FitError
from extender.simulation.simulating import (
    Comparison,
    NodeUsage,
    SimulationResult,
    Unplaced,
    group_policy,
)

RESOURCE_LABELS = (("cpu", "CPU"), ("memory", "Memory"), ("pods", "Pods"))
# One accent per policy; the node chips cycle through a softer palette.
ACCENTS = ("#4f46e5", "#0d9488")
NODE_COLOURS = ("#6366f1", "#0ea5e9", "#10b981", "#f59e0b", "#ec4899", "#8b5cf6", "#14b8a6", "#f97316",
                "#84cc16", "#06b6d4")

_CSS = """
:root { --ink:#0f172a; --muted:#64748b; --line:#e2e8f0; --card:#fff; --bg:#f1f5f9; --bad:#dc2626; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--ink);
  font:14px/1.45 -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
main { max-width:1680px; margin:0 auto; padding:28px 24px 48px; }
header h1 { margin:0; font-size:24px; letter-spacing:-.01em; }
header p { margin:4px 0 0; color:var(--muted); }
.runs { display:grid; gap:20px; margin-top:20px; }
.runs.two { grid-template-columns: 1fr 1fr; }
@media (max-width: 1200px) { .runs.two { grid-template-columns: 1fr; } }
.card { background:var(--card); border:1px solid var(--line); border-radius:14px; padding:18px 20px;
  box-shadow:0 1px 2px rgba(15,23,42,.04); min-width:0; }
.card h2 { margin:0 0 2px; font-size:17px; display:flex; align-items:center; gap:8px; }
.card h3 { margin:22px 0 8px; font-size:13px; text-transform:uppercase; letter-spacing:.06em; color:var(--muted); }
.dot { width:11px; height:11px; border-radius:50%; display:inline-block; }
.source { color:var(--muted); font-size:12px; word-break:break-all; }
.kpis { display:grid; grid-template-columns:repeat(3, 1fr); gap:10px; margin:14px 0 4px; }
.kpi { border:1px solid var(--line); border-radius:10px; padding:10px 12px; }
.kpi b { display:block; font-size:22px; line-height:1.2; }
.kpi span { color:var(--muted); font-size:12px; }
.kpi.bad b { color:var(--bad); }
svg { display:block; width:100%; height:auto; }
svg.usage { width:auto; max-width:100%; height:auto; }  /* natural size: 1 unit = 1 px, shrunk to fit */
.legend { display:flex; gap:16px; color:var(--muted); font-size:12px; margin:6px 0 0; }
.legend i { display:inline-block; width:18px; height:9px; border-radius:3px; margin-right:5px; vertical-align:middle; }
table { width:100%; border-collapse:collapse; font-size:13px; }
th { text-align:left; font-weight:600; color:var(--muted); font-size:12px; padding:6px 8px;
  border-bottom:1px solid var(--line); }
td { padding:6px 8px; border-bottom:1px solid var(--line); vertical-align:top; }
tr:last-child td { border-bottom:none; }
.chip { display:inline-block; padding:1px 8px; border-radius:999px; font-size:12px; font-weight:600;
  color:#fff; white-space:nowrap; }
.none { color:var(--bad); font-weight:600; }
.reason { display:inline-block; background:#fef2f2; color:#991b1b; border-radius:6px; padding:1px 7px;
  margin:2px 4px 2px 0; font-size:12px; }
.headline { color:var(--muted); font-size:12px; }
.headline + .headline, .reason + .headline { margin-top:6px; }
.score { display:flex; align-items:center; gap:8px; }
.score s { display:inline-block; height:6px; border-radius:3px; text-decoration:none; }
.empty { color:var(--muted); font-style:italic; }
.diff td.changed { background:#fffbeb; }
.complete { color:#16a34a; font-weight:600; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size:12px; }
"""


def _node_colours(results: Sequence[SimulationResult]) -> dict[str, str]:
    names: list[str] = []
    for result in results:
        names += [n.node for n in result.nodes if n.node not in names]
    return {name: NODE_COLOURS[i % len(NODE_COLOURS)] for i, name in enumerate(names)}


def _chip(node: str | None, colours: dict[str, str]) -> str:
    if node is None:
        return '<span class="none">unschedulable</span>'
    return f'<span class="chip" style="background:{colours.get(node, "#64748b")}">{escape(node)}</span>'


def _amount(resource: str, units: int) -> str:
    return str(units) if resource == "pods" else format_units(resource, units)


# ---- the chart ----------------------------------------------------------------------------

LABEL_W, BAR_W, GAP, ROW_H, TOP = 124, 112, 18, 46, 26
# Text columns after the bars: why new pods may not go there, and (load-aware policies) the
# measured usage after the run. Characters that fit, at 11.5 px, before the text is cut.
NOTES_W, MEASURED_W, NOTE_CHARS, MEASURED_CHARS = 210, 240, 31, 37
# Notes that close a node to every new pod; a taint closes it only to pods that do not tolerate it.
CLOSED_NOTES = ("cordoned", "NotReady", "unreadable")


MAX_CHART_NODES = 40


def chart_nodes(result: SimulationResult) -> list[NodeUsage]:
    """Every node, for a readable cluster; past MAX_CHART_NODES only the nodes that received pods
    (most cpu added first, at most MAX_CHART_NODES), or the chart would be metres tall."""
    if len(result.nodes) <= MAX_CHART_NODES:
        return list(result.nodes)
    changed = [n for n in result.nodes if n.after != n.before]
    changed.sort(key=lambda n: n.before.get("cpu", 0) - n.after.get("cpu", 0))
    return changed[:MAX_CHART_NODES]


def usage_chart(result: SimulationResult, accent: str) -> str:
    """An SVG with, per node, one bar per resource: grey = before, accent = added by the simulation."""
    placed = Counter(p.node for p in result.placements)
    nodes = chart_nodes(result)
    notes_x = LABEL_W + len(RESOURCE_LABELS) * (BAR_W + GAP)
    measured = any(n.measured for n in result.nodes)
    width = notes_x + NOTES_W + (MEASURED_W if measured else 0)
    height = TOP + ROW_H * len(nodes) + 6
    out = [f'<svg class="usage" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="Node utilisation before and after, policy {escape(result.policy)}" '
           'xmlns="http://www.w3.org/2000/svg" font-family="inherit">']
    headings = [label for _, label in RESOURCE_LABELS] + ["Notes"] + (["Measured usage after"] if measured else [])
    xs = [LABEL_W + column * (BAR_W + GAP) for column in range(len(RESOURCE_LABELS))]
    xs += [notes_x, notes_x + NOTES_W]
    for x, label in zip(xs, headings, strict=False):
        out.append(f'<text x="{x}" y="14" font-size="13" font-weight="600" fill="#64748b">{label}</text>')
    for row, usage in enumerate(nodes):
        y = TOP + row * ROW_H
        added = placed.get(usage.node, 0)
        out.append(f'<g class="node" data-node="{escape(usage.node)}">')
        out.append(_node_label(usage, added, y))
        for column, (resource, label) in enumerate(RESOURCE_LABELS):
            out.append(_bar(usage, resource, label, LABEL_W + column * (BAR_W + GAP), y, accent))
        out.append(_node_notes(usage, notes_x, y))
        if measured:
            out.append(_cells([(usage.measured or "no sample", "#334155", "measured")], notes_x + NOTES_W, y,
                              MEASURED_CHARS))
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def closed(usage: NodeUsage) -> bool:
    """Cordoned, NotReady or unreadable: no new pod may go there (a taint only keeps out the
    pods that do not tolerate it)."""
    return any(note in CLOSED_NOTES for note in usage.notes)


def _hidden(result: SimulationResult) -> str:
    shown = len(chart_nodes(result))
    if shown == len(result.nodes):
        return ""
    return (f'<p class="source">{shown} of {len(result.nodes)} nodes shown: those the simulation added the '
            "most cpu to.</p>")


def _node_label(usage: NodeUsage, added: int, y: int) -> str:
    """The node's name, greyed when no new pod could go there; +n for the pods placed on it."""
    name_colour = "#94a3b8" if closed(usage) and not added else "#0f172a"
    parts = [f'<text x="0" y="{y + 13}" font-size="14" font-weight="600" fill="{name_colour}">'
             f'{escape(usage.node)}</text>']
    if added:
        parts.append(f'<text x="{LABEL_W - 10}" y="{y + 13}" font-size="12.5" font-weight="700" '
                     f'text-anchor="end" fill="#16a34a">+{added}</text>')
    return "".join(parts)


def _cells(texts: list[tuple[str, str, str]], x: int, y: int, chars: int) -> str:
    """A text column's cell: each (text, colour, class) wrapped at `chars`, two lines at most;
    a cut shows as an ellipsis, and the tooltip holds the whole text."""
    lines = [(line, text, colour, kind) for text, colour, kind in texts
             for line in textwrap.wrap(text, chars, break_on_hyphens=False)]
    if len(lines) > 2:
        whole = "; ".join(text for text, _, _ in texts)
        line, _, colour, kind = lines[1]
        lines[1:] = [(line[: chars - 1].rstrip() + "\u2026", whole, colour, kind)]
    return "".join(f'<text class="{kind}" x="{x}" y="{y + 13 + 17 * i}" font-size="11.5" fill="{colour}">'
                   f"<title>{escape(text)}</title>{escape(line)}</text>"
                   for i, (line, text, colour, kind) in enumerate(lines))


def _node_notes(usage: NodeUsage, x: int, y: int) -> str:
    """What closes the node (red) first, then its taints (amber: only pods that tolerate
    them may go there)."""
    shut = ", ".join(n for n in usage.notes if n in CLOSED_NOTES)
    taints = ", ".join(n for n in usage.notes if n not in CLOSED_NOTES)
    texts = [(text, colour, kind) for text, colour, kind in
             ((shut, "#dc2626", "note closed"), (taints, "#b45309", "note taint")) if text]
    return _cells(texts or [("-", "#94a3b8", "note")], x, y, NOTE_CHARS)


def _bar(usage: NodeUsage, resource: str, label: str, x: int, y: int, accent: str) -> str:
    before, after = usage.fraction(resource, "before"), usage.fraction(resource, "after")
    b = min(before, 1.0) * BAR_W
    a = max(min(after, 1.0) * BAR_W - b, 0.0)
    total = _amount(resource, usage.allocatable.get(resource, 0))
    tip = (f"{usage.node} {label}: {_amount(resource, usage.before.get(resource, 0))} \u2192 "
           f"{_amount(resource, usage.after.get(resource, 0))} of {total}")
    text = f"{before:.0%} \u2192 {after:.0%}" if after != before else f"{before:.0%}"
    weight = "700" if after != before else "400"
    return (
        f'<g><title>{escape(tip)}</title>'
        f'<rect x="{x}" y="{y + 3}" width="{BAR_W}" height="12" rx="6" fill="#e2e8f0"/>'
        f'<rect class="bar before" data-node="{escape(usage.node)}" data-resource="{resource}" '
        f'x="{x}" y="{y + 3}" width="{b:.1f}" height="12" rx="6" fill="#94a3b8"/>'
        f'<rect class="bar after" data-node="{escape(usage.node)}" data-resource="{resource}" '
        f'x="{x + b:.1f}" y="{y + 3}" width="{a:.1f}" height="12" rx="{6 if b == 0 else 2}" fill="{accent}"/>'
        f'<text x="{x}" y="{y + 31}" font-size="12.5" font-weight="{weight}" fill="#334155">{text}</text>'
        "</g>"
    )


# ---- tables -------------------------------------------------------------------------------


def _placements(result: SimulationResult, colours: dict[str, str], accent: str) -> str:
    if not result.placements:
        return '<p class="empty">No pod was placed.</p>'
    rows = []
    for p in result.placements:
        if p.score is None:
            score = '<span class="empty" title="the only feasible node: not scored">only fit</span>'
        else:
            score = (f'<div class="score"><s style="width:{max(p.score, 0) * 0.6:.0f}px;background:{accent}"></s>'
                     f"{p.score:.1f}</div>")
        rows.append(f"<tr><td><code>{escape(p.pod)}</code></td><td>{_chip(p.node, colours)}</td>"
                    f"<td>{score}</td><td>{p.feasible}</td><td>{p.priority}</td></tr>")
    return ("<table><tr><th>Pod</th><th>Node</th><th>Score</th><th>Feasible nodes</th><th>Priority</th></tr>"
            + "".join(rows) + "</table>")


def _fit_error_html(fit_error: FitError, lead: str = "") -> str:
    head = f"{lead} {fit_error.headline}" if lead else fit_error.headline
    return (f'<div class="headline">{escape(head)}</div>'
            + "".join(f'<span class="reason">{escape(r)}</span>' for r in fit_error.reasons))


def _reason_html(unplaced: Unplaced) -> str:
    """kube-scheduler's FitError as a headline and one tag per reason, read from the pod's
    FitError and preemption's ("0/6 nodes are available: 3 Insufficient cpu, 1 .... preemption:
    0/6 nodes are available: 6 Preemption is not helpful for scheduling." gives two headlines);
    what follows them (why preemption did not run, the victims) as one more tag."""
    text = unplaced.reason
    if unplaced.fit_error is None:
        return f'<span class="reason">{escape(text)}</span>'
    parts = [_fit_error_html(unplaced.fit_error)]
    rest = text.removeprefix(str(unplaced.fit_error)).strip()
    if unplaced.preemption is not None:
        parts.append(_fit_error_html(unplaced.preemption, "preemption:"))
        rest = rest.removeprefix(f"preemption: {unplaced.preemption}").strip()
    if rest:
        parts.append(f'<span class="reason">{escape(rest)}</span>')
    return "".join(parts)


def _unschedulable(result: SimulationResult) -> str:
    if not result.unschedulable:
        return '<p class="empty">Every pod found a node.</p>'
    rows = "".join(f"<tr><td><code>{escape(u.pod)}</code></td><td>{_reason_html(u)}</td></tr>"
                   for u in result.unschedulable)
    return "<table><tr><th>Pod</th><th>Why not</th></tr>" + rows + "</table>"


def _groups(result: SimulationResult) -> str:
    """Each pod group with pending members: its quorum, members placed and pending, complete or why not."""
    rows = []
    for g in result.groups:
        verdict = '<span class="complete">complete</span>' if g.complete else '<span class="none">incomplete</span>'
        members = "".join(f"<code>{escape(pod)}</code> " for pod in g.placed) or "-"
        pending = "".join(f"<code>{escape(pod)}</code> " for pod in g.pending) or "-"
        why = f'<span class="reason">{escape(g.reason)}</span><div class="headline">{escape(g.message)}</div>' \
            if g.reason else "-"
        rows.append(f'<tr class="group" data-group="{escape(g.group)}"><td><code>{escape(g.group)}</code>'
                    f'<div class="source">{escape(g.api)}</div></td><td>{escape(group_policy(g))}</td>'
                    f"<td>{g.members} ({g.bound} bound)</td><td>{members}</td><td>{pending}</td>"
                    f"<td>{verdict}</td><td>{why}</td></tr>")
    return ("<table><tr><th>Pod group</th><th>Policy</th><th>Members</th><th>Placed</th><th>Pending</th>"
            "<th>Outcome</th><th>Why</th></tr>" + "".join(rows) + "</table>")


def _kpis(result: SimulationResult) -> str:
    total = len(result.placements) + len(result.unschedulable)
    used = len({p.node for p in result.placements})
    bad = " bad" if result.unschedulable else ""
    return (
        '<div class="kpis">'
        f'<div class="kpi"><b>{len(result.placements)}/{total}</b><span>pods placed</span></div>'
        f'<div class="kpi{bad}"><b>{len(result.unschedulable)}</b><span>unschedulable</span></div>'
        f'<div class="kpi"><b>{used}</b><span>node{"s" if used != 1 else ""} received pods</span></div>'
        "</div>"
    )


def _run_notes(result: SimulationResult) -> str:
    """Where the measured usage of load-aware policies came from, and what was dropped."""
    return "".join(f'<p class="source run-note">{escape(note)}</p>' for note in result.notes)


def _run_card(result: SimulationResult, index: int, colours: dict[str, str], label: str) -> str:
    accent = ACCENTS[index % len(ACCENTS)]
    legend = (f'<div class="legend"><span><i style="background:#94a3b8"></i>before</span>'
              f'<span><i style="background:{accent}"></i>added by the simulation</span>'
              f'<span><b style="color:#16a34a">+n</b> pods placed</span>'
              + ('<span style="color:#b45309">taint: only pods that tolerate it</span>'
                 if any(n not in CLOSED_NOTES for u in result.nodes for n in u.notes) else "")
              + "</div>")
    return (
        f'<section class="card run" data-policy="{escape(result.policy)}">'
        f'<h2><span class="dot" style="background:{accent}"></span>{escape(label)}</h2>'
        f'<div class="source">policy <code>{escape(result.policy)}</code> \u00b7 seed {result.seed}</div>'
        f"{_kpis(result)}"
        f"<h3>Requested share of allocatable, per node</h3>{usage_chart(result, accent)}{legend}{_hidden(result)}"
        f"{_run_notes(result)}"
        f"<h3>Placements</h3>{_placements(result, colours, accent)}"
        f"<h3>Unschedulable</h3>{_unschedulable(result)}"
        + (f"<h3>Pod groups</h3>{_groups(result)}" if result.groups else "")
        + "</section>"
    )


def _differences(comparison: Comparison, labels: Sequence[str], colours: dict[str, str]) -> str:
    if not comparison.differences:
        body = '<p class="empty">Both policies place every pod on the same node.</p>'
    else:
        head = "".join(f"<th>{escape(label)}</th>" for label in labels)
        rows = []
        for diff in comparison.differences:
            cells = "".join(f'<td class="changed">{_chip(node, colours)}</td>' for node in diff.nodes)
            rows.append(f"<tr><td><code>{escape(diff.pod)}</code></td>{cells}</tr>")
        body = f'<table class="diff"><tr><th>Pod</th>{head}</tr>{"".join(rows)}</table>'
    count = len(comparison.differences)
    return (f'<section class="card" style="margin-top:20px"><h2>Placed differently</h2>'
            f'<div class="source">{count} pod{"s" if count != 1 else ""} land on a different node '
            f"(or none) depending on the policy</div><h3>Pods</h3>{body}</section>")


def html_page(title: str, subtitle_html: str, body: str) -> str:
    """A whole self-contained page in this report's style (`extender replay` writes one too)."""
    return "".join((
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body><main>",
        f"<header><h1>{escape(title)}</h1><p>{subtitle_html}</p></header>",
        body,
        "</main></body></html>\n",
    ))


def render_report(outcome: SimulationResult | Comparison, *, snapshot: str = "",
                  title: str = "Scheduling simulation") -> str:
    """The whole page as a string."""
    results = (outcome,) if isinstance(outcome, SimulationResult) else outcome.results
    colours = _node_colours(results)
    labels = [f"Policy {chr(ord('A') + i)}" if len(results) > 1 else "Policy" for i in range(len(results))]
    pods = len(results[0].pods) if results else 0
    nodes = len(results[0].nodes) if results else 0
    subtitle = f"{pods} pending pod{'s' if pods != 1 else ''} over {nodes} node{'s' if nodes != 1 else ''}"
    if snapshot:
        subtitle += f" \u00b7 snapshot <code>{escape(snapshot)}</code>"
    cards = "".join(_run_card(r, i, colours, labels[i]) for i, r in enumerate(results))
    body = f'<div class="runs {"two" if len(results) == 2 else "one"}">{cards}</div>'
    if isinstance(outcome, Comparison) and len(results) > 1:
        body += _differences(outcome, labels, colours)
    return html_page(title, subtitle, body)


def write_report(path: str | Path, outcome: SimulationResult | Comparison, *, snapshot: str = "") -> Path:
    target = Path(path)
    target.write_text(render_report(outcome, snapshot=snapshot), encoding="utf-8")
    return target
