"""Engine cost per node for the default policies: filter and score, µs per node, against the 5 µs target.

The cluster is realistic for what the policy reads: zone/pool/instance labels, a
capacity-type label, taints on some nodes (GPU NoSchedule, dedicated NoSchedule,
PreferNoSchedule), hugepages and extended resources on some, a few cordoned or
NotReady nodes, and 10-40 pods already accounted on each NodeInfo. The incoming pods
are a mix: a plain web pod, a pod with a nodeSelector, a pod with required and
preferred affinity, a GPU pod with a toleration, and a best-effort pod.

Each figure is the median of several runs of the whole mix, divided by the nodes each
verb saw (filter: every node; score: the feasible ones): wall time
(time.perf_counter_ns) and this process's CPU time (time.process_time_ns), which a
busy shared machine disturbs much less; `within_target` is judged on CPU time.

Every run takes a fresh Engine, so each node is judged and scored (the first pod of a
shape). The `*_memo_cpu_us` columns are the same mix again on an Engine that has seen it:
a replica of a shape seen before, on nodes that did not change since, gets the verdicts
and scores the engine remembers (`memo_key`, docs/plugins.md).

Usage: python bench/bench_engine.py [--sizes 100,1000,5000] [--runs 7] [--profile]
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

from extender.model.nodes import NodeInfo, NodeView  # noqa: E402
from extender.model.pods import PodView  # noqa: E402
from extender.model.resources import add_into  # noqa: E402
from extender.policy.defaults import default_policy  # noqa: E402
from extender.policy.engine import Engine  # noqa: E402

TARGET_US = 5.0
ZONES = ("eu-west-1a", "eu-west-1b", "eu-west-1c")
# Running pods: about 55% of cpu and 30% of memory requested on an average node.
SHAPES = (("100m", "128Mi"), ("250m", "256Mi"), ("200m", "512Mi"), ("500m", "1Gi"), ("50m", "64Mi"), (None, None))
DEFAULT_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
]


def _pod(name: str, cpu: str | None, memory: str | None, **spec: Any) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    extra = spec.pop("extra_requests", {})
    container = {"name": "c", "image": "app:1", "resources": {"requests": {**requests, **extra}}}
    return {
        "metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}", "labels": {"app": name}},
        "spec": {"containers": [container], "tolerations": list(DEFAULT_TOLERATIONS), **spec},
        "status": {"phase": "Pending"},
    }


RUNNING = [PodView.from_dict(_pod(f"r{i}", cpu, mem)) for i, (cpu, mem) in enumerate(SHAPES)]


def _node(index: int, rng: random.Random) -> dict[str, Any]:
    name = f"node-{index:05d}"
    allocatable = {"cpu": "7910m", "memory": "31391728Ki", "pods": "110", "ephemeral-storage": "95551679124",
                   "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    labels = {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "topology.kubernetes.io/zone": ZONES[index % 3], "node.kubernetes.io/instance-type": "m5.2xlarge",
        "pool": f"pool-{index % 7}", "node.kubernetes.io/capacity-type": "spot" if index % 3 else "on-demand",
    }
    taints = []
    if index % 10 == 0:  # GPU nodes
        allocatable["nvidia.com/gpu"] = "4"
        labels["accelerator"] = "nvidia-a10g"
        taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
    if index % 13 == 0:
        allocatable["hugepages-2Mi"] = "1Gi"
    if index % 17 == 0:
        taints.append({"key": "dedicated", "value": "db", "effect": "NoSchedule"})
    if index % 11 == 0:
        taints.append({"key": "spot-interruption", "value": "", "effect": "PreferNoSchedule"})
    conditions = [{"type": t, "status": "False"} for t in ("MemoryPressure", "DiskPressure", "PIDPressure")]
    conditions.append({"type": "Ready", "status": "False" if index % 97 == 5 else "True"})
    spec: dict[str, Any] = {"taints": taints} if taints else {}
    if index % 89 == 3:
        spec["unschedulable"] = True
    return {"metadata": {"name": name, "labels": labels}, "spec": spec,
            "status": {"allocatable": allocatable, "capacity": allocatable, "conditions": conditions}}


def make_cluster(size: int, seed: int = 1) -> list[NodeInfo]:
    """NodeInfos as the cluster state builds them: 10-40 pods accounted on each node."""
    rng = random.Random(seed)
    infos = []
    for index in range(size):
        view = NodeView.from_dict(_node(index, rng))
        requested: dict[str, int] = {}
        score_requested: dict[str, int] = {}
        count = rng.randint(10, 40)
        for _ in range(count):
            pod = rng.choice(RUNNING)
            add_into(requested, pod.requests)
            add_into(score_requested, pod.score_requests)
        infos.append(NodeInfo(view, requested, score_requested, count))
    return infos


def make_incoming() -> list[PodView]:
    """The pods to place: what a mixed cluster schedules."""
    affinity = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["eu-west-1a", "eu-west-1b"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "preference": {"matchExpressions": [
                {"key": "node.kubernetes.io/capacity-type", "operator": "In", "values": ["spot"]}]}}],
    }}
    gpu_toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    raw = [
        _pod("web", "250m", "256Mi"),
        _pod("pinned", "500m", "512Mi", nodeSelector={"pool": "pool-3"}),
        _pod("zonal", "1", "1Gi", affinity=affinity),
        _pod("gpu", "2", "8Gi", extra_requests={"nvidia.com/gpu": "1"},
             tolerations=[*DEFAULT_TOLERATIONS, gpu_toleration]),
        _pod("besteffort", None, None),
    ]
    return [PodView.from_dict(item) for item in raw]


def _time_once(engine: Engine, pods: Sequence[PodView], nodes: Sequence[NodeInfo]) -> tuple[int, ...]:
    """One pass over the pod mix: (filter wall ns, filter cpu ns, nodes filtered,
    score wall ns, score cpu ns, nodes scored)."""
    wall = time.perf_counter_ns
    cpu = time.process_time_ns
    f_wall = f_cpu = s_wall = s_cpu = filtered = scored = 0
    for pod in pods:
        w0, c0 = wall(), cpu()
        decision = engine.filter(pod, nodes)
        w1, c1 = wall(), cpu()
        if decision.feasible:
            engine.score(pod, decision.feasible, decision)
        w2, c2 = wall(), cpu()
        f_wall += w1 - w0
        f_cpu += c1 - c0
        s_wall += w2 - w1
        s_cpu += c2 - c1
        filtered += len(nodes)
        scored += len(decision.feasible)
    return f_wall, f_cpu, filtered, s_wall, s_cpu, scored


def measure(mode: str, size: int, runs: int = 7) -> dict[str, Any]:
    policy = default_policy(mode)
    engine = Engine(policy)
    nodes = make_cluster(size)
    pods = make_incoming()
    # As the cluster state does after a full list: long-lived objects leave the GC's young
    # generations, so a collection during a request does not walk the whole cluster.
    gc.collect()
    gc.freeze()
    for _ in range(2):  # warm up caches; the second pass of a shape fills the engine's memo
        _time_once(engine, pods, nodes)
    figures: dict[str, list[float]] = {"filter": [], "score": [], "filter_cpu": [], "score_cpu": [], "ms": [],
                                       "filter_memo": [], "score_memo": []}
    for _ in range(runs):
        f_wall, f_cpu, f_n, s_wall, s_cpu, s_n = _time_once(Engine(policy), pods, nodes)
        _, m_f_cpu, _, _, m_s_cpu, _ = _time_once(engine, pods, nodes)
        figures["filter_memo"].append(m_f_cpu / f_n / 1000)
        figures["score_memo"].append(m_s_cpu / s_n / 1000 if s_n else 0.0)
        figures["filter"].append(f_wall / f_n / 1000)
        figures["filter_cpu"].append(f_cpu / f_n / 1000)
        figures["score"].append(s_wall / s_n / 1000 if s_n else 0.0)
        figures["score_cpu"].append(s_cpu / s_n / 1000 if s_n else 0.0)
        figures["ms"].append((f_wall + s_wall) / len(pods) / 1e6)
    feasible = statistics.mean(len(engine.filter(p, nodes).feasible) for p in pods)
    gc.unfreeze()
    median = {key: statistics.median(values) for key, values in figures.items()}
    return {
        "policy": mode,
        "nodes": size,
        "filter_us_per_node": round(median["filter"], 2),
        "score_us_per_node": round(median["score"], 2),
        # CPU time of this process: the same work without the time other processes took
        # from us, which on a shared machine is most of the spread between runs.
        "filter_cpu_us": round(median["filter_cpu"], 2),
        "score_cpu_us": round(median["score_cpu"], 2),
        "filter_memo_cpu_us": round(median["filter_memo"], 2),
        "score_memo_cpu_us": round(median["score_memo"], 2),
        "target_us": TARGET_US,
        "within_target": median["filter_cpu"] <= TARGET_US and median["score_cpu"] <= TARGET_US,
        "feasible_avg": round(feasible),
        "ms_per_pod": round(median["ms"], 2),
    }


def run(sizes: Sequence[int] = (100, 1000, 5000), runs: int = 7) -> list[dict[str, Any]]:
    """One row per (default policy, cluster size)."""
    return [measure(mode, size, runs) for mode in ("standalone", "webhook") for size in sizes]


def _print(rows: list[dict[str, Any]]) -> None:
    columns = list(rows[0])
    widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in columns]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    for row in rows:
        print("  ".join(str(row[c]).ljust(w) for c, w in zip(columns, widths, strict=True)))


def _profile(size: int) -> None:
    import cProfile
    import pstats

    engine = Engine(default_policy("standalone"))
    nodes, pods = make_cluster(size), make_incoming()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(5):
        _time_once(engine, pods, nodes)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,5000", help="comma-separated node counts")
    parser.add_argument("--runs", type=int, default=7, help="runs per figure (the median is shown)")
    parser.add_argument("--profile", action="store_true", help="cProfile the standalone policy at the largest size")
    options = parser.parse_args(argv)
    sizes = [int(s) for s in options.sizes.split(",") if s]
    if options.profile:
        _profile(max(sizes))
        return 0
    _print(run(sizes, options.runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
