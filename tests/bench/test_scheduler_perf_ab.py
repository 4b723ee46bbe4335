"""The same-run A/B of two code trees: ABBA order, the median of per-pair ratios, what is left out."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from bench.scheduler_perf import ab


def tree(tmp_path: Path, name: str) -> ab.Tree:
    root = tmp_path / name
    (root / "bench" / "scheduler_perf").mkdir(parents=True)
    python = root / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    return ab.Tree.parse(f"{name}={root}")


def row(pods_per_s: float | None, cpu_s: float, cp_cpu_s: float = 10.0, **extra: Any) -> dict[str, Any]:
    return {"workload": "EventHandlingPodAdd", "variant": "1000Pods", "scheduler": "ours", "pods_per_s": pods_per_s,
            "cpu_s": cpu_s, "cp_cpu_s": cp_cpu_s, "error": None, **extra}


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_pairs_alternate_which_tree_goes_first(tmp_path: Path) -> None:
    old, new = tree(tmp_path, "old"), tree(tmp_path, "new")
    ran: list[tuple[str, str]] = []

    def run(t: ab.Tree, workload: str, stall: float) -> dict[str, Any]:
        ran.append((t.name, workload))
        return row(100.0, 10.0)

    loads = iter(float(i) for i in range(100))
    records = list(ab.series([old, new], ["A/x", "B/y"], 2, 60.0, run=run, load=lambda: next(loads)))
    assert ran == [("old", "A/x"), ("new", "A/x"), ("old", "B/y"), ("new", "B/y"),
                   ("new", "A/x"), ("old", "A/x"), ("new", "B/y"), ("old", "B/y")]
    assert [r["pair"] for r in records] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert (records[0]["load_start"], records[0]["load_end"]) == (0.0, 1.0)


def test_the_ratio_is_the_median_of_the_pairs_ratios() -> None:
    records = []
    # pods/s ratios 0.9, 1.5, 1.0 -> median 1.0 (the medians' ratio would be 110/100 = 1.1)
    for pair, (old, new) in enumerate([((100.0, 10.0), (90.0, 11.0)), ((80.0, 10.0), (120.0, 9.0)),
                                       ((110.0, 20.0), (110.0, 20.0))]):
        records.append({"tree": "old", "pair": pair, "workload": "W/v", "load_start": 2.0, "load_end": 4.0,
                        "row": row(*old)})
        records.append({"tree": "new", "pair": pair, "workload": "W/v", "load_start": 6.0, "load_end": 8.0,
                        "row": row(*new)})
    table = ab.markdown(records).splitlines()
    line = cells(table[2])
    assert line[:2] == ["W/v", "3"]
    assert line[2:4] == ["100.0, 80.0, 110.0", "90.0, 120.0, 110.0"]
    assert line[4] == "**1.00** (0.90, 1.50, 1.00)"
    assert line[7] == "**1.00** (1.10, 0.90, 1.00)"
    assert line[8] == line[7]  # the same control-plane CPU in every run: the share moves as cpu_s does
    assert "min 2.00, median 5.00, max 8.00 (12 readings)" in table[-1]


def test_the_share_of_control_plane_cpu_takes_out_a_crowded_machine() -> None:
    # The new run was crowded: its scheduler and its control plane both took 30 % more CPU.
    records = [{"tree": "old", "pair": 0, "workload": "W/v", "load_start": 2.0, "load_end": 2.0,
                "row": row(100.0, 20.0, cp_cpu_s=40.0)},
               {"tree": "new", "pair": 0, "workload": "W/v", "load_start": 9.0, "load_end": 9.0,
                "row": row(80.0, 26.0, cp_cpu_s=52.0)}]
    line = cells(ab.markdown(records).splitlines()[2])
    assert line[7] == "**1.30** (1.30)"
    assert line[8] == "**1.00** (1.00)"


def test_failed_runs_are_left_out_of_the_ratio_and_named() -> None:
    records = [
        {"tree": "old", "pair": 0, "workload": "W/v", "load_start": 1.0, "load_end": 1.0, "row": row(100.0, 10.0)},
        {"tree": "new", "pair": 0, "workload": "W/v", "load_start": 1.0, "load_end": 1.0, "row": row(50.0, 5.0)},
        {"tree": "old", "pair": 1, "workload": "W/v", "load_start": 1.0, "load_end": 1.0, "row": None},
        {"tree": "new", "pair": 1, "workload": "W/v", "load_start": 1.0, "load_end": 1.0, "row": row(99.0, 1.0)},
        {"tree": "old", "pair": 2, "workload": "W/v", "load_start": 1.0, "load_end": 1.0, "row": row(100.0, 10.0)},
        {"tree": "new", "pair": 2, "workload": "W/v", "load_start": 1.0, "load_end": 1.0,
         "row": row(None, 10.0, error="stalled: 3 of 10 pods scheduled")},
    ]
    table = ab.markdown(records).splitlines()
    line = cells(table[2])
    assert line[1] == "1"  # only pair 0 has both rows
    assert line[4] == "**0.50** (0.50)"
    assert "old W/v pair 1: no row" in table[-1]
    assert "new W/v pair 2: stalled: 3 of 10 pods scheduled" in table[-1]


def test_report_reprints_the_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = [{"tree": name, "pair": 0, "workload": "W/v", "load_start": 1.0, "load_end": 1.0, "row": row(pods, 1.0)}
               for name, pods in (("base", 100.0), ("fix", 105.0))]
    path = tmp_path / "ab.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert ab.main(["--report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "pods/s fix ÷ base" in out and "**1.05** (1.05)" in out


@pytest.mark.parametrize("text", ["old", "=dir", "old="])
def test_a_malformed_tree_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="NAME=DIR"):
        ab.Tree.parse(text)


def test_a_tree_without_an_interpreter_is_refused(tmp_path: Path) -> None:
    (tmp_path / "bench" / "scheduler_perf").mkdir(parents=True)
    with pytest.raises(argparse.ArgumentTypeError, match="make install"):
        ab.Tree.parse(f"old={tmp_path}")
    with pytest.raises(argparse.ArgumentTypeError, match="no bench/scheduler_perf"):
        ab.Tree.parse(f"old={tmp_path / 'nowhere'}")
