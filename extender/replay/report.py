"""What a replay shows: the table per policy (mean, min and max over the seeds of the GPU
allocation ratio at x = 50..130, and the fragmentation ratio at x = 90), one JSON line per run,
and, under --out, the curves as CSV, a PNG (matplotlib) and a self-contained HTML page in the
style of `simulate --html` (inline SVG, no scripts, nothing loaded from the network).
"""

from __future__ import annotations

import csv
import io
import shutil
import tempfile
from collections.abc import Sequence
from html import escape
from pathlib import Path

from extender.replay.curves import FRAG_X, TABLE_X, X_MAX, summary, table_columns
from extender.replay.runner import RunResult
from extender.simulation.report import html_page

COLOURS = ("#4f46e5", "#0d9488", "#dc2626", "#f59e0b", "#8b5cf6", "#0ea5e9", "#ec4899", "#84cc16")


def by_policy(results: Sequence[RunResult]) -> dict[str, list[RunResult]]:
    grouped: dict[str, list[RunResult]] = {}
    for result in results:
        grouped.setdefault(result.policy, []).append(result)
    for runs in grouped.values():
        runs.sort(key=lambda r: r.seed)
    return grouped


def render_table(results: Sequence[RunResult]) -> str:
    """One row per policy: each x column as mean [min-max] over the seeds."""
    grouped = by_policy(results)
    header = ["policy", "seeds", *(f"x={x}" for x in TABLE_X), f"frag@{FRAG_X}", "placed", "s/run"]
    rows = []
    for policy, runs in grouped.items():
        columns = table_columns([r.curve for r in runs])
        cells = [policy, str(len(runs))]
        for x in TABLE_X:
            if x in columns:
                mean, low, high = columns[x]
                cells.append(f"{mean:.2f}" if len(runs) == 1 else f"{mean:.2f} [{low:.2f}-{high:.2f}]")
            else:
                cells.append("-")
        frag = [r.fragmentation[str(FRAG_X)] for r in runs if str(FRAG_X) in r.fragmentation]
        cells.append(f"{summary(frag)[0]:.1f}" if frag else "-")
        cells.append(f"{sum(r.placed for r in runs) / len(runs):.0f}/{sum(r.pods for r in runs) / len(runs):.0f}")
        cells.append(f"{sum(r.seconds for r in runs) / len(runs):.1f}")
        rows.append(cells)
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
             for row in (header, *rows)]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "GPU allocation ratio (% of the cluster's GPUs) by GPU demand arrived (x, %)\n" + "\n".join(lines) + "\n"


def curves_csv(results: Sequence[RunResult]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["policy", "seed", "x", "allocation", "fragmentation"])
    for result in sorted(results, key=lambda r: (r.policy, r.seed)):
        for x in range(X_MAX + 1):
            y = result.curve.get(str(x))
            if y is not None:
                frag = result.fragmentation.get(str(x))
                writer.writerow([result.policy, result.seed, x, y, "" if frag is None else round(frag, 2)])
    return out.getvalue()


def mean_curves(results: Sequence[RunResult]) -> dict[str, list[tuple[int, float]]]:
    """Per policy, the mean allocation at each x over its seeds."""
    means = {}
    for policy, runs in by_policy(results).items():
        points = []
        for x in range(X_MAX + 1):
            values = [r.curve[str(x)] for r in runs if str(x) in r.curve]
            if values:
                points.append((x, sum(values) / len(values)))
        means[policy] = points
    return means


def _svg(results: Sequence[RunResult]) -> str:
    """Unallocated GPUs (100 - y) against x, one line per policy, as the paper's Fig. 9(a)."""
    width, height, left, bottom, top, right = 760, 380, 56, 40, 16, 150
    span = 100
    curves = mean_curves(results)

    def px(x: float) -> float:
        return left + x * (width - left - right) / X_MAX

    def py(unallocated: float) -> float:
        return top + (height - top - bottom) * (1 - min(unallocated, span) / span)

    parts = [f'<svg viewBox="0 0 {width} {height}" role="img" aria-label="unallocated GPUs by arrived demand">']
    for tick in range(0, X_MAX + 1, 10):
        parts.append(f'<line x1="{px(tick):.1f}" x2="{px(tick):.1f}" y1="{top}" y2="{height - bottom}" '
                     'stroke="#e2e8f0"/>')
        parts.append(f'<text x="{px(tick):.1f}" y="{height - bottom + 16}" font-size="11" text-anchor="middle" '
                     f'fill="#64748b">{tick}</text>')
    for i in range(6):
        value = span * i / 5
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{py(value):.1f}" y2="{py(value):.1f}" '
                     'stroke="#e2e8f0"/>')
        parts.append(f'<text x="{left - 6}" y="{py(value) + 4:.1f}" font-size="11" text-anchor="end" '
                     f'fill="#64748b">{value:.0f}</text>')
    parts.append(f'<text x="{(left + width - right) / 2:.0f}" y="{height - 6}" font-size="12" text-anchor="middle" '
                 'fill="#0f172a">GPU demand arrived (% of the cluster)</text>')
    parts.append(f'<text x="14" y="{(top + height - bottom) / 2:.0f}" font-size="12" text-anchor="middle" '
                 f'fill="#0f172a" transform="rotate(-90 14 {(top + height - bottom) / 2:.0f})">unallocated GPUs (%)'
                 '</text>')
    for index, (policy, points) in enumerate(curves.items()):
        colour = COLOURS[index % len(COLOURS)]
        path = " ".join(f"{'M' if i == 0 else 'L'}{px(x):.1f},{py(100 - y):.1f}"
                        for i, (x, y) in enumerate(points))
        parts.append(f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        legend_y = top + 14 + index * 18
        parts.append(f'<line x1="{width - right + 12}" x2="{width - right + 32}" y1="{legend_y - 4}" '
                     f'y2="{legend_y - 4}" stroke="{colour}" stroke-width="3"/>')
        parts.append(f'<text x="{width - right + 38}" y="{legend_y}" font-size="12" fill="#0f172a">'
                     f'{escape(policy)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def render_html(results: Sequence[RunResult], *, source: str) -> str:
    table = render_table(results)
    seeds = sorted({r.seed for r in results})
    body = (f'<section class="card"><h2>GPU allocation</h2><p class="source">{escape(source)}; seeds '
            f'{escape(", ".join(map(str, seeds)))}</p>'
            "<h3>Unallocated GPUs (100 - y, mean over the seeds) while the demand arrives; past x = 100 "
            "more is asked for than the cluster has</h3>"
            f"{_svg(results)}<h3>The table</h3><pre>{escape(table)}</pre></section>")
    return html_page("extender replay", escape(f"{len(results)} runs of {source}"), body)


def _png(results: Sequence[RunResult], path: Path) -> None:
    # late: matplotlib is optional (pip install 'extender[replay]') and slow to import
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 4.5), dpi=120)
    for index, (policy, points) in enumerate(mean_curves(results).items()):
        xs = [x for x, _ in points]
        unallocated = [100 - y for _, y in points]
        axis.plot(xs, unallocated, label=policy, color=COLOURS[index % len(COLOURS)], linewidth=1.8)
    axis.set_xlabel("GPU demand arrived (% of the cluster)")
    axis.set_ylabel("unallocated GPUs (%)")
    axis.grid(color="#e2e8f0")
    axis.legend(frameon=False)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def png_available() -> bool:
    try:
        import matplotlib  # noqa: F401  # late: only whether it can be imported
    except ImportError:
        return False
    return True


def write_out(directory: str | Path, results: Sequence[RunResult], *, source: str, json_lines: str) -> Path:
    """curves.csv, curves.png, report.html, table.txt and runs.jsonl under `directory`, all or
    nothing: written to a folder beside it, then moved into place."""
    target = Path(directory)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        (staging / "curves.csv").write_text(curves_csv(results), encoding="utf-8")
        (staging / "table.txt").write_text(render_table(results), encoding="utf-8")
        (staging / "runs.jsonl").write_text(json_lines, encoding="utf-8")
        (staging / "report.html").write_text(render_html(results, source=source), encoding="utf-8")
        _png(results, staging / "curves.png")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target
