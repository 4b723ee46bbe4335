"""Whole replays of a small trace: every shipped policy, the invariants a run checks, the CLI's
outputs (table, JSON lines, --out) and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from extender.cli.replay import parse_seeds, replay
from extender.replay.arrivals import Arrivals
from extender.replay.runner import run
from extender.replay.traces import read_trace
from tests.replay.traces import small_cluster, write_pods

POLICIES = ["random", "dotprod", "clustering", "packing", "bestfit", "fgd", "recommended"]


@pytest.fixture
def trace_files(tmp_path: Path) -> tuple[Path, Path]:
    return small_cluster(tmp_path)


@pytest.mark.parametrize("name", POLICIES)
def test_each_policy_replays_and_its_assignments_add_up(trace_files, name):
    nodes, pods = trace_files
    trace = read_trace(nodes=str(nodes), pods=str(pods))
    result = run(trace, f"config/replay/{name}.yaml", 42)  # raises if a GPU is over capacity
    again = run(trace, f"config/replay/{name}.yaml", 42)
    assert result.curve == again.curve and result.placed == again.placed  # a seed is one run
    assert 0 < result.placed <= result.pods
    assert result.gpu_milli <= trace.gpu_capacity
    # pods never leave: y only grows with x, and ends at what was placed
    ys = [result.curve[x] for x in sorted(result.curve, key=int)]
    assert ys == sorted(ys) and 0 <= ys[0] and ys[-1] <= 100
    last = max(result.curve, key=int)
    assert abs(result.curve[last] - 100 * result.gpu_milli / trace.gpu_capacity) < 5
    assert sum(result.failed_shapes.values()) == result.pods - result.placed


def test_the_free_gpus_are_read_when_the_demand_reaches_the_cluster(tmp_path):
    # One node of 2 GPUs: two 810-milli shares bring x to 81, a third would bring it to 122 (and
    # is dropped), then a 110-milli share fits beside one of the first two. The snapshot is the
    # state at x = 100 (two GPUs with 190 free), not the run's end (one of them down to 80).
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,32000,131072,2,T4\n")
    pods = write_pods(tmp_path / "pods.csv", ["a,1000,1024,1,810,", "b,1000,1024,1,810,",
                                              "c,1000,1024,1,810,", "d,1000,1024,1,110,"])
    trace = read_trace(nodes=str(nodes), pods=str(pods))
    order = Arrivals(trace.pods, {"n0": "0000-n0"})
    result = run(trace, "config/replay/fgd.yaml", 42, order=order)
    assert result.placed == 3 and result.gpu_milli == 1730
    assert result.free_gpus_at_100 == {"190": 2}
    assert result.to_json()["free_gpus_at_100"] == {"190": 2}


def test_a_run_that_stops_short_of_the_cluster_reports_its_end(tmp_path):
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,32000,131072,2,T4\n")
    pods = write_pods(tmp_path / "pods.csv", ["a,1000,1024,1,810,", "b,1000,1024,1,320,"])
    trace = read_trace(nodes=str(nodes), pods=str(pods))
    result = run(trace, "config/replay/bestfit.yaml", 42, order=Arrivals(trace.pods, {"n0": "0000-n0"}))
    # x ends at 57: the end state, the 320 on the idle GPU (190 is too little room beside the 810).
    assert result.free_gpus_at_100 == {"680": 1, "190": 1}


def test_fgd_strands_less_than_random_on_a_sharing_trace(tmp_path):
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
        f"n{i},96000,393216,4,T4\n" for i in range(8)))
    rows = [f"p{i:03d},2000,4096,1,{(300, 700, 500, 1000)[i % 4]}," for i in range(80)]
    pods = write_pods(tmp_path / "pods.csv", rows)
    trace = read_trace(nodes=str(nodes), pods=str(pods))
    fgd = [run(trace, "config/replay/fgd.yaml", seed).gpu_milli for seed in (1, 2, 3)]
    rnd = [run(trace, "config/replay/random.yaml", seed).gpu_milli for seed in (1, 2, 3)]
    assert sum(fgd) > sum(rnd)


def test_seeds_are_single_values_or_ranges():
    assert parse_seeds(("42",)) == [42]
    assert parse_seeds(("42-44", "43", "50")) == [42, 43, 44, 50]
    assert parse_seeds(("1,3-4",)) == [1, 3, 4]
    with pytest.raises(Exception, match="not a seed"):
        parse_seeds(("x",))
    with pytest.raises(Exception, match="ends before it starts"):
        parse_seeds(("5-3",))


def test_the_cli_prints_one_json_line_per_policy_and_seed(trace_files):
    nodes, pods = trace_files
    result = CliRunner().invoke(replay, ["--nodes", str(nodes), "--pods", str(pods), "--policy",
                                         "config/replay/bestfit.yaml", "--policy", "config/replay/fgd.yaml",
                                         "--seed", "1-2", "--jobs", "2", "--json"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(line["policy"], line["seed"]) for line in lines] == [("bestfit", 1), ("bestfit", 2), ("fgd", 1),
                                                                   ("fgd", 2)]
    for line in lines:
        assert {"policy", "seed", "pods", "placed", "seconds", "rss_mb", "curve"} <= line.keys()
        assert line["curve"]["0"] <= line["curve"].get("100", 100)


def test_the_table_and_the_out_folder(trace_files, tmp_path):
    nodes, pods = trace_files
    out = tmp_path / "out"
    result = CliRunner().invoke(replay, ["--nodes", str(nodes), "--pods", str(pods), "--policy",
                                         "config/replay/packing.yaml", "--seed", "3-4", "--jobs", "1",
                                         "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "packing" in result.stdout and "x=100" in result.stdout and "frag@90" in result.stdout
    assert sorted(p.name for p in out.iterdir()) == ["curves.csv", "curves.png", "report.html", "runs.jsonl",
                                                     "table.txt"]
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (out / "report.html").read_text()
    assert "<svg" in html and "packing" in html and "<script" not in html
    header, *rows = (out / "curves.csv").read_text().splitlines()
    assert header == "policy,seed,x,allocation,fragmentation" and len(rows) > 50


def test_bad_input_is_one_line_and_nothing_is_written(trace_files, tmp_path):
    nodes, _ = trace_files
    pods = write_pods(tmp_path / "bad.csv", ["a,1000,100,1,500,", "b,1000,100,1,500,H100"])
    out = tmp_path / "out"
    result = CliRunner().invoke(replay, ["--nodes", str(nodes), "--pods", str(pods), "--policy",
                                         "config/replay/fgd.yaml", "--out", str(out)])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"Error: {pods}:3: gpu_spec: unknown GPU model 'H100' (the nodes have G2, T4, V100)"]
    assert not out.exists() and not list(tmp_path.glob(".out.*"))
