"""`extender replay`: replay a trace of pod arrivals through the engine, one pod at a time, under
one or more policies and seeds, and report how much of the cluster's GPUs each puts to work.

The openb CSVs of the FGD paper (`--nodes`, `--pods`) or your own cluster (`--snapshot` and a YAML
pod list as `--pods`). Runs go to `--jobs` processes; the same seed gives every policy the same
arrival order and node order. docs/replay.md.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator, Sequence
from multiprocessing import get_context
from typing import Any

import click

from extender.errors import ExtenderError

__all__ = ["replay"]

_SEEDS = re.compile(r"^(\d+)(?:-(\d+))?$")
_TRACE: Any = None  # the trace, for the worker processes (forked after it is read)


def parse_seeds(values: Sequence[str]) -> list[int]:
    """`42`, `42-51` or several of them, in order, each once."""
    seeds: list[int] = []
    for value in values:
        for part in value.split(","):
            match = _SEEDS.match(part.strip())
            if match is None:
                raise click.BadParameter(f"{part!r} is not a seed or a range of seeds such as 42-51", param_hint="--seed")
            low = int(match.group(1))
            high = int(match.group(2) or low)
            if high < low:
                raise click.BadParameter(f"{part!r}: the range ends before it starts", param_hint="--seed")
            if high - low > 10_000:
                raise click.BadParameter(f"{part!r}: more than 10,000 seeds", param_hint="--seed")
            seeds.extend(s for s in range(low, high + 1) if s not in seeds)
    return seeds


def _one(task: tuple[str, int, float, str, str]) -> Any:
    # late: the worker imports the engine once, in its own process
    from extender.replay.runner import run

    policy, seed, tune, workload, devices = task
    return run(_TRACE, policy, seed, tune=tune, workload=workload, devices=devices)


def _results(tasks: list[tuple[str, int, float, str, str]], jobs: int) -> Iterator[Any]:
    if jobs <= 1 or len(tasks) == 1:
        yield from map(_one, tasks)
        return
    # one run per worker: a process's peak RSS only rises, and a worker that made several DRA runs
    # one after the other grew past 500 MB where one run takes under 300 (docs/replay.md)
    with get_context("fork").Pool(min(jobs, len(tasks)), maxtasksperchild=1) as pool:
        yield from pool.imap_unordered(_one, tasks)


@click.command()
@click.option("--nodes", type=click.Path(exists=True, dir_okay=False), default=None,
              help="The cluster: an openb node list (sn,cpu_milli,memory_mib,gpu,model).")
@click.option("--snapshot", type=click.Path(exists=True, dir_okay=False), default=None,
              help="The cluster: a snapshot YAML (as simulate's), nodes with GPU inventories.")
@click.option("--pods", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The pods, in the trace: an openb pod list (.csv) or a YAML list of pods.")
@click.option("--policy", "policies", multiple=True, required=True, type=click.Path(exists=True, dir_okay=False),
              help="A policy file (config/replay/*.yaml); repeat it to compare policies on the same order.")
@click.option("--seed", "seeds", multiple=True, default=("42",), show_default=True,
              help="Arrival order seed: 42, or a range 42-51; repeatable.")
@click.option("--tune", type=click.FloatRange(0.01, 10), default=1.3, show_default=True,
              help="GPU demand to replay, as a multiple of the cluster's GPUs (pods cloned or dropped at random).")
@click.option("--workload", type=click.Choice(["trace", "online"]), default="trace", show_default=True,
              help="FGD's target workload: the whole trace's shapes (as the paper), or learned as pods arrive.")
@click.option("--devices", type=click.Choice(["annotation", "dra"]), default="annotation", show_default=True,
              help="How the GPUs are published and asked for: node inventory annotations and extended resources, "
                   "or DRA devices with consumable capacity and a ResourceClaim per GPU pod.")
@click.option("--jobs", type=click.IntRange(1, 256), default=None,
              help="Processes running the runs (default: the number of cores).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run on standard output.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Write curves.csv, curves.png, report.html, table.txt and runs.jsonl in this folder.")
def replay(nodes: str | None, snapshot: str | None, pods: str, policies: tuple[str, ...], seeds: tuple[str, ...],
           tune: float, workload: str, devices: str, jobs: int | None, as_json: bool, out_dir: str | None) -> None:
    """Replay a trace through each --policy for each --seed and report the GPU allocation ratio.

    Each pod is placed or dropped before the next one arrives (no retry, no preemption). The
    table gives, per policy, the mean [min-max] over the seeds of the share of the cluster's GPUs
    allocated when x % of them has been asked for, and the fragmentation ratio at x = 90.
    """
    global _TRACE
    # late: the engine and matplotlib's check load only when replaying (`extender --help` needs neither)
    from extender.policy.loading import load_policy_file
    from extender.replay import report
    from extender.replay.dra_model import dra_trace
    from extender.replay.runner import RunResult, policy_name
    from extender.replay.traces import read_trace

    seed_list = parse_seeds(seeds)
    if out_dir is not None and not report.png_available():
        raise click.ClickException("--out draws curves.png with matplotlib, which is not installed: "
                                   "pip install 'extender[replay]'")
    try:
        _TRACE = read_trace(nodes=nodes, snapshot=snapshot, pods=pods)
        if devices == "dra":
            _TRACE = dra_trace(_TRACE, snapshot or nodes or "")  # once, before the workers fork
        for path in policies:
            load_policy_file(path)
    except ExtenderError as exc:
        raise click.ClickException(str(exc)) from None
    tasks = [(policy, seed, tune, workload, devices) for policy in policies for seed in seed_list]
    workers = jobs or os.cpu_count() or 1
    results: list[RunResult] = []
    try:
        with click.progressbar(length=len(tasks), label=f"replaying {len(tasks)} runs", file=sys.stderr,
                               show_pos=True) if sys.stderr.isatty() else _Quiet() as bar:
            for result in _results(tasks, workers):
                results.append(result)
                bar.update(1)
    except ExtenderError as exc:
        raise click.ClickException(str(exc)) from None
    order = {path: i for i, path in enumerate(policies)}
    names = {policy_name(path): order[path] for path in policies}
    results.sort(key=lambda r: (names.get(r.policy, 0), r.seed))
    lines = "".join(json.dumps(r.to_json(), separators=(",", ":")) + "\n" for r in results)
    if out_dir is not None:
        try:
            written = report.write_out(out_dir, results, source=_TRACE.source, json_lines=lines)
        except OSError as exc:
            raise click.ClickException(f"cannot write {out_dir}: {exc}") from None
        click.echo(f"wrote {written}/curves.csv, curves.png, report.html, table.txt, runs.jsonl", err=True)
    if as_json:
        click.echo(lines, nl=False)
    else:
        click.echo(report.render_table(results), nl=False)


class _Quiet:
    """The progress bar's stand-in off a terminal."""

    def __enter__(self) -> _Quiet:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, steps: int) -> None:
        return None
