"""Preemption's dry run per candidate node: the cost PreemptionBasic pays for every pod it places.

A cluster of full nodes (each `--pods-per-node` low-priority pods of 200m on 6 cpu, priorities
0-4) and one high-priority pod of 500m that fits nowhere: `preempt` dry-runs every node
(`exhaustive`, as explain does) and chooses the victims. kube-scheduler's SelectVictimsOnNode
removes every lower-priority pod, then adds them back one at a time (most important first) while
the pod still fits; the figure is this process's CPU per candidate node (best of `--runs`), with
the victims chosen, so that a change can be checked to pick the same ones.

Usage: python bench/bench_preemption.py [--nodes 200] [--pods-per-node 30] [--runs 5]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from extender.policy.defaults import default_policy  # noqa: E402
from extender.policy.engine import Engine  # noqa: E402
from extender.policy.preemption import preempt  # noqa: E402
from tests.policy.builders import cluster_state, incoming, node_dict, placed  # noqa: E402


def run(nodes: int = 200, pods_per_node: int = 30, runs: int = 5) -> list[dict[str, Any]]:
    engine = Engine(default_policy("standalone"))
    state = cluster_state([node_dict(f"n{i}", cpu="6") for i in range(nodes)],
                          [placed(f"p{i}-{j}", f"n{i}", cpu="200m", priority=j % 5)
                           for i in range(nodes) for j in range(pods_per_node)])
    pod = incoming("high", cpu="500m", priority=1000)
    infos = state.all_node_infos()
    decision = engine.filter(pod, infos, state)
    cycle = engine.prepare(pod, state)
    best = float("inf")
    outcome = None
    for _ in range(runs):
        started = time.process_time()
        outcome = preempt(cycle, decision, infos, state, state.disruption_budgets(), rng=random.Random(0),
                          exhaustive=True)
        best = min(best, time.process_time() - started)
    assert outcome is not None and outcome.candidate is not None
    return [{"bench": "preemption dry run", "nodes": nodes, "pods_per_node": pods_per_node,
             "ms_per_candidate_node": round(best * 1000 / len(infos), 3),
             "victims": len(outcome.candidate.victims)}]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args(argv)
    for row in run(options.nodes, options.pods_per_node, options.runs):
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
