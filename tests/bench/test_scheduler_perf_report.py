"""The comparison table written from --json rows: pairs, medians over repeats, lone and skipped rows."""

from __future__ import annotations

import json
from pathlib import Path

from bench.scheduler_perf import report


def row(scheduler: str, pods_per_s: float | None, *, workload: str = "SchedulingBasic", variant: str = "500Nodes",
        **extra: object) -> dict[str, object]:
    return {"workload": workload, "variant": variant, "scheduler": scheduler, "pods_per_s": pods_per_s,
            "scheduled": 10, "expected": 10, "cpu_s": 2.0, "rss_mb": 100.0 if scheduler == "kube" else 60.0,
            "violations": 0, "parity": "same" if scheduler == "ours" else None, "skipped": None, "error": None,
            **extra}


def write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("# a progress line\n" + "\n".join(json.dumps(r) for r in rows) + "\nnot json\n")
    return path


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_three_alternating_runs_give_the_median_ratio(tmp_path: Path) -> None:
    rows = [row("kube", 100.0), row("ours", 90.0), row("kube", 100.0), row("ours", 120.0),
            row("kube", 200.0), row("ours", 210.0, attempts={"scheduled": 12, "unschedulable": 3})]
    table = report.markdown(report.read_rows([write(tmp_path / "runs.json", rows)])).splitlines()
    assert len(table) == 3
    line = dict(zip(report.COLUMNS, cells(table[2]), strict=True))
    assert line["runs"] == "3"
    assert line["ours ÷ kube"] == "**1.05**"  # ratios 0.9, 1.2, 1.05: their median, not the medians' ratio
    assert (line["kube pods/s"], line["ours pods/s"]) == ("100", "120")
    assert line["ours cycles"] == "scheduled 12, unschedulable 3"
    assert line["parity / error"] == "same"


def test_a_lone_or_skipped_variant_keeps_its_row(tmp_path: Path) -> None:
    rows = [row("ours", 50.0, workload="Alone"), row("kube", None, workload="Skipped", skipped="needs a gate"),
            row("ours", None, workload="Skipped", skipped="needs a gate"),
            row("kube", 10.0, workload="Broken"), row("ours", None, workload="Broken", error="stalled")]
    lines = report.markdown(report.read_rows([write(tmp_path / "rows.json", rows)])).splitlines()[2:]
    by_name = {cells(line)[0]: dict(zip(report.COLUMNS, cells(line), strict=True)) for line in lines}
    assert by_name["Alone"]["ours pods/s"] == "50" and by_name["Alone"]["ours ÷ kube"] == ""
    assert by_name["Alone"]["scheduled (kube / ours) / expected"] == "– / 10 / 10"
    assert by_name["Skipped"]["parity / error"] == "skipped: needs a gate"
    assert by_name["Broken"]["parity / error"] == "ours: stalled"


def test_no_rows_is_an_error(tmp_path: Path) -> None:
    assert report.main([write(tmp_path / "empty.json", [])]) == 2
