"""What dynamic resource allocation costs per node and per request: DynamicResources in the standalone policy.

The cluster: N nodes, each publishing one ResourceSlice of 8 GPUs (driver gpu.example.com,
attributes model and index, capacity memory), a DeviceClass selecting the driver, and half of
each node's GPUs allocated to claims of running pods. The incoming pods:

  no-claims        a plain pod: what pods without claims pay for the plugin being there
                   (compared with the same policy without DynamicResources, same run)
  1-device         one claim, one request of 1 device
  2-devices-sel    one request of 2 devices with a CEL selector on an attribute
  4-requests       four requests of 1 device each (the per-request cost)
  first-available  a firstAvailable request whose first choice is on no node
  match-attribute  2 requests of 2 devices constrained to one model (a backtracking search)

Figures: the median over runs of engine.filter over all nodes (process CPU: µs per node), and
the allocator alone (gather_pools + allocate: µs per node, and per request for the multi-request
pods). The first run of each pod builds the devices' CEL views; the figures are of later runs.

Usage: python bench/bench_dra.py [--sizes 1000,5000] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from extender.cluster import dra_store  # noqa: E402
from extender.cluster.state import ClusterState  # noqa: E402
from extender.dra.allocator import NodeAllocation, allocate  # noqa: E402
from extender.dra.objects import ResourceClaim  # noqa: E402
from extender.model.nodes import NodeInfo  # noqa: E402
from extender.model.pods import PodView  # noqa: E402
from extender.policy.defaults import default_policy  # noqa: E402
from extender.policy.engine import Engine  # noqa: E402

DRIVER = "gpu.example.com"
GPUS = 8
MODELS = ("a100", "h100")


def _node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _slice(node: str, index: int) -> dict[str, Any]:
    model = MODELS[index % 2]
    devices = [{"name": f"gpu-{i}", "attributes": {"model": {"string": model}, "index": {"int": i}},
                "capacity": {"memory": {"value": "80Gi"}}} for i in range(GPUS)]
    return {"metadata": {"name": f"{node}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                  "resourceSliceCount": 1}, "devices": devices}}


def _request(name: str, count: int = 1, selector: str = "") -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"name": name, "exactly": exactly}


def _claim(name: str, requests: list[dict[str, Any]], constraints: list[dict[str, Any]] | None = None,
           allocation: dict[str, Any] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "1"},
            "spec": {"devices": devices}, "status": {"allocation": allocation} if allocation else {}}


def _held(node: str) -> dict[str, Any]:
    results = [{"request": "r", "driver": DRIVER, "pool": node, "device": f"gpu-{i}"} for i in range(GPUS // 2)]
    return _claim(f"held-{node}", [_request("r", GPUS // 2)], allocation={"devices": {"results": results}})


POD_CLAIMS: dict[str, dict[str, Any] | None] = {
    "no-claims": None,
    "1-device": _claim("one", [_request("r")]),
    "2-devices-sel": _claim("sel", [_request("r", 2, 'device.attributes["gpu.example.com"].model == "h100"')]),
    "4-requests": _claim("four", [_request(f"r{i}") for i in range(4)]),
    "first-available": _claim("fa", [{"name": "r", "firstAvailable": [
        {"name": "b200", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1,
         "selectors": [{"cel": {"expression": 'device.attributes["gpu.example.com"].model == "b200"'}}]},
        {"name": "any", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}]}]),
    "match-attribute": _claim("match", [_request("a", 2), _request("b", 2)],
                              [{"requests": ["a", "b"], "matchAttribute": "gpu.example.com/model"}]),
}


def cluster(nodes: int) -> ClusterState:
    state = ClusterState()
    names = [f"node-{i}" for i in range(nodes)]
    state.replace_nodes([_node(n) for n in names])
    state.replace_pods([])
    state.namespaces.replace([])
    state.dra_store.replace(dra_store.CLASSES, [{"metadata": {"name": "gpu"}, "spec": {
        "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}])
    state.dra_store.replace(dra_store.SLICES, [_slice(n, i) for i, n in enumerate(names)])
    claims = [_held(n) for n in names] + [c for c in POD_CLAIMS.values() if c is not None]
    state.dra_store.replace(dra_store.CLAIMS, claims)
    return state


def _pod(kind: str) -> PodView:
    raw: dict[str, Any] = {"metadata": {"name": kind, "namespace": "default", "uid": f"uid-pod-{kind}"},
                           "spec": {"containers": [{"name": "c"}]}}
    claim = POD_CLAIMS[kind]
    if claim is not None:
        raw["spec"]["resourceClaims"] = [{"name": "c", "resourceClaimName": claim["metadata"]["name"]}]
    return PodView.from_dict(raw)


def _cpu(fn: Any, runs: int) -> float:
    fn()  # warm: the devices' CEL views, the compiled selectors
    samples = []
    for _ in range(runs):
        started = time.process_time()
        fn()
        samples.append(time.process_time() - started)
    return statistics.median(samples)


def _allocator_only(claim: ResourceClaim, state: ClusterState, nodes: list[NodeInfo]) -> int:
    """The allocator alone on every node (pools from the store's cache); the backtracks taken."""
    store = state.dra_store
    backtracks = 0
    in_use = store.in_use()
    for info in nodes:
        name, labels = info.node.name, info.node.labels
        out = allocate([claim], name, labels, store.pools_for(name, labels), store.device_class, in_use)
        backtracks += out.backtracks if isinstance(out, NodeAllocation) else 0
    return backtracks


def _row(kind: str, state: ClusterState, nodes: list[NodeInfo], engines: dict[str, Engine],
         runs: int) -> dict[str, Any]:
    size, pod, raw = len(nodes), _pod(kind), POD_CLAIMS[kind]
    row: dict[str, Any] = {"nodes": size, "pod": kind}
    seconds = _cpu(partial(engines["with"].filter, pod, nodes, state), runs)
    row["filter_us_per_node"] = round(seconds / size * 1e6, 2)
    row["feasible"] = len(engines["with"].filter(pod, nodes, state).feasible)
    if raw is None:
        base = _cpu(partial(engines["without"].filter, pod, nodes, state), runs)
        row["without_plugin_us_per_node"] = round(base / size * 1e6, 2)
        row["with_over_without"] = round(seconds / base, 3) if base else ""
        return row
    claim = ResourceClaim.parse(raw)
    alloc = _cpu(partial(_allocator_only, claim, state, nodes), runs)
    row["allocator_us_per_node"] = round(alloc / size * 1e6, 2)
    row["allocator_us_per_request"] = round(alloc / size / len(claim.requests) * 1e6, 2)
    row["backtracks_per_node"] = round(_allocator_only(claim, state, nodes) / size, 2)
    return row


def run(sizes: tuple[int, ...] = (1000, 5000), runs: int = 5) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        state = cluster(size)
        nodes = state.all_node_infos()
        standalone = default_policy("standalone")
        without = replace(standalone, filters=tuple(f for f in standalone.filters if f.name != "DynamicResources"),
                          scorers=tuple(s for s in standalone.scorers if s.plugin.name != "DynamicResources"))
        engines = {"with": Engine(standalone), "without": Engine(without)}
        rows += [_row(kind, state, nodes, engines, runs) for kind in POD_CLAIMS]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,5000", help="comma-separated node counts")
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args(argv)
    rows = run(tuple(int(s) for s in options.sizes.split(",")), options.runs)
    columns = list(dict.fromkeys(key for row in rows for key in row))
    print("  ".join(columns))
    for row in rows:
        print("  ".join(str(row.get(c, "")) for c in columns))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
