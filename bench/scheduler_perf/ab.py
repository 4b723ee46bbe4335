"""python -m bench.scheduler_perf.ab: two code trees of ours on the same workloads, in turn.

"Must not get slower" is a ratio of two runs, and on a shared 2-core machine the load of
whatever else runs moves a single run's pods/s by 20-30 %. So both trees run in the same
session, alternating, and which goes first flips every pair (ABBA), so a load that rises or
falls over the session weighs on both alike; the figure is the median of the per-pair ratios
(new ÷ old), with every pair's own ratio beside it; the last column divides each run's CPU
seconds by those of its control plane first (see `_share`), the steadiest of the three. Each run is the ordinary
``python -m bench scheduler-perf --scheduler ours --json`` started from that tree (its code on
``PYTHONPATH``, its bench), so the old tree needs nothing added. The 1-minute load average
at the start and end of each run is kept with its row and summarised under the table.

    python -m bench.scheduler_perf.ab --tree old=/work/wt-old --tree new=. \\
        --workload EventHandlingPodAdd/1000Pods --pairs 3 --out ab.jsonl
    python -m bench.scheduler_perf.ab --report ab.jsonl        # the table again, from the rows

A tree is ``NAME=DIR`` (run with DIR/.venv/bin/python) or ``NAME=DIR:PYTHON`` (a tree without
a venv of its own, such as a ``git archive`` of a commit, run with another tree's interpreter).
The first tree is the one divided by ("old").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Tree:
    """A code tree to run the benchmark from, and the interpreter that runs it."""

    name: str
    root: Path
    python: Path

    @classmethod
    def parse(cls, text: str) -> Tree:
        """``NAME=DIR`` or ``NAME=DIR:PYTHON``."""
        name, sep, rest = text.partition("=")
        if not sep or not name or not rest:
            raise argparse.ArgumentTypeError(f"--tree {text!r}: expected NAME=DIR or NAME=DIR:PYTHON")
        root, _, python = rest.partition(":")
        tree = cls(name, Path(root).resolve(), Path(python) if python else Path(root).resolve() / ".venv/bin/python")
        if not (tree.root / "bench" / "scheduler_perf").is_dir():
            raise argparse.ArgumentTypeError(f"--tree {text!r}: {tree.root} has no bench/scheduler_perf")
        if not tree.python.exists():
            raise argparse.ArgumentTypeError(f"--tree {text!r}: no interpreter at {tree.python} (make install there)")
        return tree


def order(trees: Sequence[Tree], pair: int) -> list[Tree]:
    """The trees in the order pair `pair` runs them: as given, then reversed (ABBA)."""
    return list(trees) if pair % 2 == 0 else list(reversed(trees))


def run_once(tree: Tree, workload: str, stall: float) -> dict[str, Any] | None:
    """One ``scheduler-perf --json`` run of `workload` from `tree`: its row, or None (its stderr
    tail is printed)."""
    env = {**os.environ, "PYTHONPATH": str(tree.root)}
    command = [str(tree.python), "-m", "bench", "scheduler-perf", "--scheduler", "ours", "--workload", workload,
               "--stall", str(stall), "--json"]
    done = subprocess.run(command, cwd=tree.root, env=env, capture_output=True, text=True, check=False)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            row: dict[str, Any] = json.loads(line)
            return row
    print(f"# {tree.name} {workload}: no row (exit {done.returncode}): {done.stderr[-400:]}", file=sys.stderr)
    return None


def series(trees: Sequence[Tree], workloads: Sequence[str], pairs: int, stall: float,
           run: Callable[[Tree, str, float], dict[str, Any] | None] = run_once,
           load: Callable[[], float] = lambda: os.getloadavg()[0]) -> Iterable[dict[str, Any]]:
    """Every pair of every workload, pair by pair (so each workload's pairs spread over the
    session), each tree's record as it finishes: tree, pair, load at start and end, the row."""
    for pair in range(pairs):
        for workload in workloads:
            for tree in order(trees, pair):
                start = load()
                row = run(tree, workload, stall)
                yield {"tree": tree.name, "pair": pair, "workload": workload, "load_start": start,
                       "load_end": load(), "row": row}


def _ratio(new: Any, old: Any) -> float | None:
    return new / old if isinstance(new, int | float) and isinstance(old, int | float) and old else None


def _share(row: dict[str, Any]) -> float | None:
    """The scheduler's CPU seconds per CPU second of etcd + kube-apiserver over the same workload.
    Both are charged for the same stalls when other work crowds the machine, so their quotient
    moves far less from run to run than either (EventHandling*: within ±5 % where cpu_s moved
    ±30 %); the control plane's work depends on the scheduler's only through its API calls."""
    return _ratio(row.get("cpu_s"), row.get("cp_cpu_s"))


def _cell(ratios: Sequence[float | None]) -> str:
    found = [r for r in ratios if r is not None]
    if not found:
        return ""
    return f"**{statistics.median(found):.2f}** ({', '.join(f'{r:.2f}' for r in found)})"


def markdown(records: Sequence[dict[str, Any]], old: str = "", new: str = "") -> str:
    """Per workload: each tree's pods/s and CPU seconds by pair, and the median of the per-pair
    ratios new ÷ old (the pairs' own ratios in brackets); then the load averages seen."""
    names = list(dict.fromkeys(r["tree"] for r in records))
    old, new = old or names[0], new or names[-1]
    pairs: dict[str, dict[int, dict[str, dict[str, Any]]]] = {}
    for record in records:
        row = record.get("row")
        if row and not row.get("error"):
            pairs.setdefault(record["workload"], {}).setdefault(record["pair"], {})[record["tree"]] = row
    lines = [f"| workload | pairs | {old} pods/s | {new} pods/s | pods/s {new} ÷ {old} | {old} cpu_s | {new} cpu_s "
             f"| cpu_s {new} ÷ {old} | cpu_s per control-plane cpu_s, {new} ÷ {old} |", "|---|---|---|---|---|---|---|---|---|"]
    for workload, by_pair in pairs.items():
        both = [(p[old], p[new]) for _, p in sorted(by_pair.items()) if old in p and new in p]
        if not both:
            continue

        def figures(side: int, key: str, rows: list[tuple[dict[str, Any], dict[str, Any]]] = both) -> str:
            return ", ".join(str(pair[side].get(key)) for pair in rows)

        lines.append(f"| {workload} | {len(both)} | {figures(0, 'pods_per_s')} | {figures(1, 'pods_per_s')} "
                     f"| {_cell([_ratio(n.get('pods_per_s'), o.get('pods_per_s')) for o, n in both])} "
                     f"| {figures(0, 'cpu_s')} | {figures(1, 'cpu_s')} "
                     f"| {_cell([_ratio(n.get('cpu_s'), o.get('cpu_s')) for o, n in both])} "
                     f"| {_cell([_ratio(_share(n), _share(o)) for o, n in both])} |")
    loads = [r[k] for r in records for k in ("load_start", "load_end") if isinstance(r.get(k), int | float)]
    if loads:
        lines.append(f"\n1-minute load average at the runs' starts and ends: min {min(loads):.2f}, "
                     f"median {statistics.median(loads):.2f}, max {max(loads):.2f} ({len(loads)} readings)")
    missing = [f"{r['tree']} {r['workload']} pair {r['pair']}" for r in records if not r.get("row")]
    errors = [f"{r['tree']} {r['workload']} pair {r['pair']}: {r['row']['error']}"
              for r in records if r.get("row") and r["row"].get("error")]
    if missing or errors:
        lines.append("left out: " + "; ".join([*(f"{m}: no row" for m in missing), *errors]))
    return "\n".join(lines)


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scheduler_perf.ab", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tree", type=Tree.parse, action="append", default=[], metavar="NAME=DIR[:PYTHON]",
                        help="a code tree (twice: the first is divided by)")
    parser.add_argument("--workload", action="append", default=[], metavar="NAME/VARIANT")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--stall", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=None, help="append each run's record here (JSON lines)")
    parser.add_argument("--report", type=Path, default=None, help="print the table of earlier --out records; run nothing")
    options = parser.parse_args(argv)
    if options.report is not None:
        print(markdown(read(options.report)))
        return 0
    if len(options.tree) != 2 or not options.workload or options.pairs < 1:
        parser.error("give two --tree, at least one --workload and --pairs >= 1")
    records = []
    for record in series(options.tree, options.workload, options.pairs, options.stall):
        records.append(record)
        row = record["row"] or {}
        print(f"# pair {record['pair']} {record['tree']} {record['workload']}: pods/s {row.get('pods_per_s')}, "
              f"cpu_s {row.get('cpu_s')}, load {record['load_start']:.2f} -> {record['load_end']:.2f}",
              file=sys.stderr, flush=True)
        if options.out is not None:
            with options.out.open("a") as out:
                out.write(json.dumps(record) + "\n")
    print(markdown(records, options.tree[0].name, options.tree[1].name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
