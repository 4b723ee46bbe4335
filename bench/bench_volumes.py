"""What the volume filters cost per pod: the standalone policy over every node, pods with and without claims.

The cluster: N nodes, each with 3 Available local PVs (class local-storage, WaitForFirstConsumer,
no provisioner: 3N volumes for the static matching to search), a CSINode allowing 39 volumes of
csi.example.com, and 30 running pods, every 10th with a claim bound to a CSI PV (counted by
NodeVolumeLimits). The incoming pods:

  no-volumes     a plain pod (the volume plugins only look at its spec)
  bound-local    a claim bound to a local PV on one node (every other node refused)
  wffc-local     an unbound local-storage claim (static matching over the 3N volumes)
  wffc-csi       an unbound claim of a provisioned CSI class (provisioning + attach limits)

Figures: the median over runs of engine.filter over all nodes (µs per node and ms per pod,
process CPU time) and of the standalone cycle (schedule_one, which stops early on big clusters).

Usage: python bench/bench_volumes.py [--sizes 1000,5000] [--runs 5]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.timing import median_cpu_us  # noqa: E402
from extender.cluster.snapshot import Snapshot, load_into  # noqa: E402
from extender.cluster.state import ClusterState  # noqa: E402
from extender.cluster.volume_store import KIND_NAMES  # noqa: E402
from extender.cycle.pod import schedule_one  # noqa: E402
from extender.model.pods import PodView  # noqa: E402
from extender.policy.defaults import default_policy  # noqa: E402
from extender.policy.engine import Engine  # noqa: E402
from tests.storage_objects import (  # noqa: E402
    CSI_DRIVER,
    FAST,
    claim,
    csi_node,
    local_class,
    persistent_volume,
    storage_class,
)

PODS_PER_NODE = 30
CLAIM_EVERY = 10


def _node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(name: str, claims: list[str], node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m",
                                                                                   "memory": "128Mi"}}}],
                            "volumes": [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
                                        for i, c in enumerate(claims)]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec,
            "status": {"phase": "Running" if node else "Pending"}}


def build(nodes: int) -> ClusterState:
    snapshot = Snapshot(nodes=[_node(f"node-{n:05d}") for n in range(nodes)])
    objects = [local_class(), storage_class(FAST)]
    for n in range(nodes):
        name = f"node-{n:05d}"
        objects.append(csi_node(name, {CSI_DRIVER: 39}))
        objects += [persistent_volume(f"local-{n}-{i}", node=name) for i in range(3)]
        for p in range(PODS_PER_NODE):
            claims = []
            if p % CLAIM_EVERY == 0:
                claims = [f"data-{n}-{p}"]
                objects.append(claim(claims[0], cls=FAST, volume=f"csi-{n}-{p}", bound=True))
                objects.append(persistent_volume(f"csi-{n}-{p}", cls=FAST, csi=(CSI_DRIVER, f"h-{n}-{p}"),
                                                 claim=("default", claims[0])))
            snapshot.pods.append(_pod(f"run-{n}-{p}", claims, name))
    pinned = nodes // 2
    objects += [claim("pinned", volume=f"local-{pinned}-0", bound=True), claim("wffc-local"),
                claim("wffc-csi", cls=FAST)]
    objects[objects.index(next(o for o in objects if o["metadata"]["name"] == f"local-{pinned}-0"))] = \
        persistent_volume(f"local-{pinned}-0", node=f"node-{pinned:05d}", claim=("default", "pinned"),
                          phase="Bound")
    for obj in objects:
        snapshot.storage.setdefault(KIND_NAMES[obj["kind"]], []).append(obj)
    state = ClusterState(assume_ttl=float("inf"))
    load_into(state, snapshot)
    return state


CASES = {"no-volumes": [], "bound-local": ["pinned"], "wffc-local": ["wffc-local"], "wffc-csi": ["wffc-csi"]}


def run(sizes: tuple[int, ...] = (1000, 5000), runs: int = 5) -> list[dict[str, Any]]:
    rows = []
    engine = Engine(default_policy("standalone"))
    for size in sizes:
        state = build(size)
        nodes = state.all_node_infos()
        for case, claims in CASES.items():
            pod = PodView.from_dict(_pod(f"new-{case}", claims))
            decision = engine.filter(pod, nodes, state)
            filter_ms = median_cpu_us(lambda p=pod, n=nodes, s=state: engine.filter(p, n, s), runs) / 1000
            cycle_ms = median_cpu_us(lambda p=pod, s=state: schedule_one(engine, s, p, rng=random.Random(0)), runs) / 1000
            rows.append({"nodes": size, "pod": case, "feasible": len(decision.feasible),
                         "filter_ms": round(filter_ms, 2), "filter_us_per_node": round(filter_ms * 1000 / size, 2),
                         "cycle_ms": round(cycle_ms, 2)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,5000")
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args(argv)
    for row in run(tuple(int(s) for s in options.sizes.split(",")), options.runs):
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
