"""python -m bench scheduler-perf --report FILE...: the comparison table of docs/performance-scheduler-perf.md.

Reads the rows that ``--json`` runs printed (one JSON object per line; other lines, such as
the runner's ``#`` progress lines, are skipped) and writes one Markdown row per workload
variant: both schedulers' figures side by side. When a variant was run more than once (the
"median of three alternating runs" of issue 35), each figure is the median over its runs and
the ratio is the median of the per-run ratios, which is what a noisy shared machine allows
comparing; the runs column says how many there were. A variant run under one scheduler only,
or skipped, still gets its row: nothing measured is left out of the table.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

COLUMNS = ("workload", "variant", "runs", "kube pods/s", "ours pods/s", "ours ÷ kube", "kube cpu_s", "ours cpu_s",
           "kube RSS MB", "ours RSS MB", "scheduled (kube / ours) / expected", "ours cycles", "viol", "parity / error")


def read_rows(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """The JSON rows of every file, in order; lines that are not a JSON object are skipped."""
    rows = []
    for path in paths:
        for line in path.read_text().splitlines():
            line = line.strip()
            if line.startswith("#   {"):  # the runner's progress line of a finished row
                line = line[4:]
            if not line.startswith("{"):
                continue
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict) and "workload" in row and "scheduler" in row:
                rows.append(row)
    return rows


def pair_runs(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, dict[str, Any]]]]:
    """(workload, variant) -> its runs, each {scheduler: row}: a kube row opens a run, the ours
    row after it closes it (the runner's ``--scheduler both`` order); a lone row is a run alone."""
    runs: dict[tuple[str, str], list[dict[str, dict[str, Any]]]] = {}
    for row in rows:
        key = (row["workload"], row["variant"])
        sequence = runs.setdefault(key, [])
        if not sequence or row["scheduler"] in sequence[-1]:
            sequence.append({})
        sequence[-1][row["scheduler"]] = row
    return runs


def _median(values: Iterable[Any]) -> float | None:
    numbers = [v for v in values if isinstance(v, int | float)]
    return statistics.median(numbers) if numbers else None


def _figure(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"


def _cycles(row: dict[str, Any] | None) -> str:
    """Ours' scheduling cycles of the whole workload by result (preemption's too): how many tries
    its pods took, from the row's ``attempts``."""
    attempts = (row or {}).get("attempts") or {}
    if not attempts or "unread" in attempts:
        return ""
    return ", ".join(f"{key} {value}" for key, value in sorted(attempts.items()) if value)


def table_row(key: tuple[str, str], runs: Sequence[dict[str, dict[str, Any]]]) -> list[str]:
    kube = [run["kube"] for run in runs if "kube" in run]
    ours = [run["ours"] for run in runs if "ours" in run]
    ratios = [run["ours"]["pods_per_s"] / run["kube"]["pods_per_s"] for run in runs
              if "kube" in run and "ours" in run and run["kube"].get("pods_per_s") and run["ours"].get("pods_per_s")]
    last = runs[-1]
    skipped = next((r.get("skipped") for r in (*kube, *ours) if r.get("skipped")), None)
    if skipped:
        return [key[0], key[1], str(len(runs)), *[""] * 10, f"skipped: {skipped}"]
    ratio = _median(ratios)
    scheduled = " / ".join(str(last[kind].get("scheduled", "")) if kind in last else "–" for kind in ("kube", "ours"))
    expected = next((r.get("expected") for r in (*kube, *ours) if r.get("expected") is not None), "")
    violations = sum(r.get("violations") or 0 for r in (*kube, *ours))
    errors = [f"{r['scheduler']}: {r['error']}" for r in (*kube, *ours) if r.get("error")]
    parities = sorted({r.get("parity") or "" for r in ours} - {""})
    return [
        key[0], key[1], str(len(runs)),
        _figure(_median(r.get("pods_per_s") for r in kube)), _figure(_median(r.get("pods_per_s") for r in ours)),
        f"**{ratio:.2f}**" if ratio is not None else "",
        _figure(_median(r.get("cpu_s") for r in kube)), _figure(_median(r.get("cpu_s") for r in ours)),
        _figure(_median(r.get("rss_mb") for r in kube)), _figure(_median(r.get("rss_mb") for r in ours)),
        f"{scheduled} / {expected}", _cycles(last.get("ours")), str(violations),
        "; ".join(errors) or ", ".join(parities),
    ]


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The table, one line per workload variant in the order first met."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for key, runs in pair_runs(rows).items():
        lines.append("| " + " | ".join(table_row(key, runs)) + " |")
    return "\n".join(lines)


def main(paths: Sequence[Path]) -> int:
    rows = read_rows(paths)
    if not rows:
        print(f"scheduler-perf --report: no rows in {', '.join(map(str, paths))} (write them with --json)")
        return 2
    print(markdown(rows))
    return 0
