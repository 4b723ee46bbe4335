"""Load-aware plugins: per-node cost of NodeLoad and each load scorer, against the engine's 5 µs target.

The cluster is bench_engine's (5000 nodes of 8 cores with 10-40 pods each), plus a usage
sample per node as the store publishes them: cpu and memory in use, an observed standard
deviation, a few pods placed since the sample on one node in ten, one node in twenty with
a stale sample and one in fifty with none. Each plugin runs alone in a policy through the
engine (filter over every node, score over every node), then all three together; the
figure is the median over several runs of the incoming pod mix, in CPU time per node.

Off the request path, for scale: the store's publish of 5000 samples (once per fetch
interval, on the usage thread) and one placement through the pod hook.

Usage: python bench/bench_load.py [--sizes 1000,5000] [--runs 7]
`run(sizes)` returns the rows for `make bench`.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_engine import TARGET_US, make_cluster, make_incoming  # noqa: E402
from bench.tables import print_table
from extender.model.nodes import NodeInfo  # noqa: E402
from extender.model.records import PodRecord  # noqa: E402
from extender.model.usage_samples import STDEV_OBSERVED, UsageSample, UsageTable  # noqa: E402
from extender.policy.builtin.load_aware import (  # noqa: E402
    LoadVariationRiskBalancing,
    NodeLoad,
    TargetLoadPacking,
)
from extender.policy.engine import Engine, Policy, WeightedScorer  # noqa: E402
from extender.policy.usage_settings import UsageSettings  # noqa: E402
from extender.usage.readings import Capacity, Reading  # noqa: E402
from extender.usage.store import UsageStore  # noqa: E402

NOW = 1_700_000_000.0


class _Cluster:
    """What the engine hands the load plugins: the published usage table."""

    def __init__(self, table: UsageTable) -> None:
        self.table = table

    def node_usage(self) -> UsageTable:
        return self.table

    def nominations(self) -> dict[str, Any]:
        return {}


def make_usage(nodes: Sequence[NodeInfo], seed: int = 2) -> UsageTable:
    rng = random.Random(seed)
    samples = {}
    for index, info in enumerate(nodes):
        if index % 50 == 7:
            continue  # no sample yet (a new node)
        cpu_capacity = info.node.allocatable.get("cpu", 0)
        memory_capacity = info.node.allocatable.get("memory", 0)
        age = 400.0 if index % 20 == 3 else rng.uniform(0, 30)  # one in twenty stale (maxAge 90s)
        recent = index % 10 == 1
        samples[info.name] = UsageSample(
            info.name, "metrics-server", NOW - age, NOW - age + 90, rng.uniform(0.05, 0.95) * cpu_capacity,
            rng.uniform(0.1, 0.9) * memory_capacity, cpu_capacity, memory_capacity,
            rng.uniform(0, 0.1) * cpu_capacity, rng.uniform(0, 0.1) * memory_capacity, STDEV_OBSERVED, 20.0,
            500 if recent else 0, 2**30 if recent else 0, 2 if recent else 0)
    return UsageTable(samples, NOW, "metrics-server", "up")


POLICIES: dict[str, Policy] = {
    "NodeLoad": Policy(filters=(NodeLoad(85.0, 90.0),)),
    "TargetLoadPacking": Policy(scorers=(WeightedScorer(TargetLoadPacking(), 1),)),
    "LoadVariationRiskBalancing": Policy(scorers=(WeightedScorer(LoadVariationRiskBalancing(1.0, 2.0), 1),)),
    "all three": Policy(filters=(NodeLoad(85.0, 90.0),),
                        scorers=(WeightedScorer(TargetLoadPacking(), 2),
                                 WeightedScorer(LoadVariationRiskBalancing(1.0, 2.0), 1))),
}


def _per_node_cpu_us(engine: Engine, pods: Sequence[Any], nodes: Sequence[NodeInfo], cluster: _Cluster,
                     ) -> tuple[float, float]:
    cpu = time.process_time_ns
    filter_ns = score_ns = 0
    for pod in pods:
        c0 = cpu()
        engine.filter(pod, nodes, cluster)
        c1 = cpu()
        engine.score(pod, nodes, cluster=cluster)
        c2 = cpu()
        filter_ns += c1 - c0
        score_ns += c2 - c1
    count = len(pods) * len(nodes)
    return filter_ns / count / 1000, score_ns / count / 1000


def measure(name: str, size: int, runs: int = 7) -> dict[str, Any]:
    policy = POLICIES[name]
    engine = Engine(policy)
    nodes = make_cluster(size)
    cluster = _Cluster(make_usage(nodes))
    pods = make_incoming()
    gc.collect()
    gc.freeze()
    _per_node_cpu_us(engine, pods, nodes, cluster)  # warm up
    filters, scores = [], []
    for _ in range(runs):
        f, s = _per_node_cpu_us(engine, pods, nodes, cluster)
        filters.append(f)
        scores.append(s)
    gc.unfreeze()
    filter_us = statistics.median(filters) if policy.filters else None
    score_us = statistics.median(scores) if policy.scorers else None
    worst = max(v for v in (filter_us, score_us) if v is not None)
    return {
        "plugins": name, "nodes": size,
        "filter_cpu_us": "-" if filter_us is None else round(filter_us, 2),
        "score_cpu_us": "-" if score_us is None else round(score_us, 2),
        "target_us": TARGET_US, "within_target": worst <= TARGET_US,
    }


def measure_store(size: int) -> dict[str, Any]:
    """The background side: publishing a fetch, and one placement through the pod hook."""
    nodes = make_cluster(size)
    store = UsageStore("metrics-server", UsageSettings(), clock=lambda: NOW)
    capacities = {info.name: Capacity(info.node.allocatable["cpu"], info.node.allocatable["memory"])
                  for info in nodes}
    readings = [Reading(info.name, NOW - 5, 1000.0, 2.0 * 2**30, window=20) for info in nodes]
    store.publish(readings, capacities)
    times = []
    for _ in range(5):
        started = time.perf_counter()
        store.publish(readings, capacities)
        times.append(time.perf_counter() - started)
    record = PodRecord("default/p", "uid", nodes[0].name, "s", "Pending", False, False, {"cpu": 500},
                       {"cpu": 500, "memory": 2**28})
    hook = []
    for _ in range(200):
        started = time.perf_counter()
        store.on_pod_change(None, record)
        store.on_pod_change(record, None)
        hook.append((time.perf_counter() - started) / 2)
    return {"plugins": "store (background)", "nodes": size,
            "publish_ms": round(statistics.median(times) * 1000, 1),
            "placement_hook_us": round(statistics.median(hook) * 1e6, 1)}


def run(sizes: Sequence[int] = (1000, 5000), runs: int = 7) -> list[dict[str, Any]]:
    rows = [measure(name, size, runs) for name in POLICIES for size in sizes]
    return rows + [measure_store(max(sizes))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000", help="comma-separated node counts")
    parser.add_argument("--runs", type=int, default=7, help="runs per figure (the median is shown)")
    options = parser.parse_args(argv)
    print_table("load-aware plugins", run([int(s) for s in options.sizes.split(",") if s], options.runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
