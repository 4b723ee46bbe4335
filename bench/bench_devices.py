"""Shared GPUs: what DeviceFit, DeviceAllocation, the device use in the state and the ledger cost.

* engine: a GPU pod (1 device, 8 GiB, 30 %) filtered and scored over every node of a cluster
  where a quarter of the nodes carry 8 A100s already shared by 0-12 pods each, with
  config/policy-devices.yaml (the whole standalone policy), and DeviceFit and
  DeviceAllocation alone on the GPU nodes; µs per node of CPU time (the 5 µs target of the
  other plugins), and the extra cost of having them in the policy for a pod without GPUs;
* reserve: choosing and claiming the devices, then releasing them, µs per pod;
* state: a watch event for a bound GPU pod (its assignment parsed and counted) against a
  plain pod, µs per event; the metrics tick over every node, ms;
* ledger: recording a claim in the node's Lease through a fake API server in a child
  process: one writer (a cached Lease, one PUT), two writers taking turns on one node
  (each write a 409 then a read and a PUT), and 16 threads of one process on one node.

Usage: python bench/bench_devices.py [--nodes 2000] ; `run(quick)` returns rows for `make bench`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.children import serve_fake_until_closed, serving_child  # noqa: E402
from bench.timing import median_cpu_us  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
POLICY = ROOT / "config" / "policy-devices.yaml"
GPUS_PER_NODE = 8
A100 = 40960
TARGET_US = 5.0


def _inventory() -> str:
    return json.dumps({"version": 1, "devices": [
        {"id": f"GPU-{i}", "type": "NVIDIA-A100-SXM4-40GB", "memory": A100, "cores": 100}
        for i in range(GPUS_PER_NODE)]})


def _node(index: int) -> dict[str, Any]:
    name = f"node-{index:05d}"
    meta: dict[str, Any] = {"name": name, "labels": {"kubernetes.io/hostname": name}}
    if index % 4 == 0:
        meta["annotations"] = {"extender.example/gpu-devices": _inventory()}
    return {"metadata": meta, "spec": {},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(name: str, node: str = "", device: int | None = None, memory: int = 8192, cores: int = 30,
         gpu: bool = True) -> dict[str, Any]:
    limits = {"extender.example/gpu-memory": str(memory), "extender.example/gpu-cores": str(cores)} if gpu else {}
    meta: dict[str, Any] = {"name": name, "namespace": "ml", "uid": f"uid-{name}"}
    if node and device is not None:
        meta["annotations"] = {"extender.example/gpu-assignment": json.dumps(
            {"node": node, "containers": {"main": [{"id": f"GPU-{device}", "memory": memory, "cores": cores}]}})}
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": {
        "requests": {"cpu": "500m", "memory": "1Gi"}, "limits": limits}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": {"phase": "Running" if node else "Pending"}}


def _cluster(nodes: int) -> Any:
    from extender.cluster.state import ClusterState

    rng = random.Random(7)
    state = ClusterState()
    state.replace_nodes(_node(i) for i in range(nodes))
    pods = []
    for i in range(0, nodes, 4):
        for j in range(rng.randint(0, 12)):
            pods.append(_pod(f"run-{i}-{j}", f"node-{i:05d}", rng.randrange(GPUS_PER_NODE),
                             memory=rng.choice((4096, 8192, 10240)), cores=rng.choice((0, 10, 25))))
    state.replace_pods(pods)
    return state


def engine_rows(nodes: int, repeat: int = 7) -> list[dict[str, Any]]:
    from extender.model.pods import PodView
    from extender.policy.engine import Engine, Policy
    from extender.policy.loading import load_policy_file

    state = _cluster(nodes)
    policy = load_policy_file(POLICY)
    engine = Engine(policy)
    infos = state.all_node_infos()
    pod = PodView.from_dict(_pod("incoming"))
    decision = engine.filter(pod, infos, state)
    feasible = decision.feasible
    filter_us = median_cpu_us(lambda: engine.filter(pod, infos, state), repeat)
    score_us = median_cpu_us(lambda: engine.score(pod, feasible, cluster=state), repeat)
    plain = PodView.from_dict(_pod("web", gpu=False))
    without = Engine(Policy(filters=tuple(f for f in policy.filters if f.name != "DeviceFit"),  # type: ignore[attr-defined]
                            scorers=tuple(s for s in policy.scorers if s.name != "DeviceAllocation")))
    with_devices_us = median_cpu_us(lambda: engine.decide(plain, infos, state), repeat)
    without_devices_us = median_cpu_us(lambda: without.decide(plain, infos, state), repeat)
    fit_only = Engine(Policy(filters=tuple(f for f in policy.filters if f.name == "DeviceFit")))  # type: ignore[attr-defined]
    allocation_only = Engine(Policy(scorers=tuple(s for s in policy.scorers if s.name == "DeviceAllocation")))
    fit_us = median_cpu_us(lambda: fit_only.filter(pod, feasible, state), repeat)
    allocation_us = median_cpu_us(lambda: allocation_only.score(pod, feasible, cluster=state), repeat)
    info = feasible[0]

    def reserve_and_release() -> None:
        from extender.policy.reservations import release_all

        reserved = engine.reserve(pod, info, state)
        assert isinstance(reserved, list)
        release_all(reserved)

    reserve_us = median_cpu_us(lambda: [reserve_and_release() for _ in range(100)], repeat) / 100
    return [
        {"bench": "GPU pod: filter, all nodes", "nodes": nodes, "gpu_nodes": nodes // 4,
         "feasible": len(feasible), "us_per_node": round(filter_us / nodes, 2), "target_us": TARGET_US},
        {"bench": "GPU pod: score, feasible nodes", "nodes": len(feasible),
         "us_per_node": round(score_us / max(len(feasible), 1), 2), "target_us": TARGET_US},
        {"bench": "DeviceFit alone, per GPU node (8 devices)", "nodes": len(feasible),
         "us_per_node": round(fit_us / max(len(feasible), 1), 2), "target_us": TARGET_US},
        {"bench": "DeviceAllocation alone, per GPU node (8 devices)", "nodes": len(feasible),
         "us_per_node": round(allocation_us / max(len(feasible), 1), 2), "target_us": TARGET_US},
        {"bench": "plain pod: filter+score, DeviceFit/DeviceAllocation in the policy, extra", "nodes": nodes,
         "us_per_node": round((with_devices_us - without_devices_us) / nodes, 3)},
        {"bench": "GPU pod: reserve (choose + claim) and release", "us_per_pod": round(reserve_us, 1)},
    ]


def state_rows(nodes: int, events: int = 20000) -> list[dict[str, Any]]:
    from extender.kube.devicemetrics import DeviceGauges

    state = _cluster(nodes)
    gpu_pods = [_pod(f"ev-{i}", f"node-{(i % (nodes // 4)) * 4:05d}", i % GPUS_PER_NODE, memory=1, cores=0)
                for i in range(events)]
    plain_pods = [_pod(f"pl-{i}", f"node-{i % nodes:05d}", gpu=False) for i in range(events)]

    def apply(pods: list[dict[str, Any]]) -> float:
        started = time.process_time_ns()
        for raw in pods:
            state.upsert_pod(raw)
        return (time.process_time_ns() - started) / 1000 / len(pods)

    plain_us, gpu_us = apply(plain_pods), apply(gpu_pods)
    first_us = median_cpu_us(lambda: DeviceGauges().publish(state), 5)
    gauges = DeviceGauges()
    gauges.publish(state)
    tick_us = median_cpu_us(lambda: gauges.publish(state), 5)
    return [
        {"bench": "watch event, bound pod without GPUs", "us_per_event": round(plain_us, 1)},
        {"bench": "watch event, bound GPU pod (assignment parsed, use rebuilt)", "us_per_event": round(gpu_us, 1)},
        {"bench": "GPU gauges, first housekeeping tick", "nodes": nodes, "gpu_nodes": nodes // 4,
         "ms_per_tick": round(first_us / 1000, 2)},
        {"bench": "GPU gauges, a tick with nothing changed", "nodes": nodes, "ms_per_tick": round(tick_us / 1000, 2)},
    ]


# ---- the ledger, against a fake API server in a child process ----------------------------------


def serve_fake(ready_file: str) -> None:
    from tests.fakeapi.client import KubeTestClient
    from tests.fakeapi.server import FAKE_TOKEN, FakeApiServer

    fake = FakeApiServer().start()
    KubeTestClient(fake.url, token=FAKE_TOKEN).ensure_namespace("bench")
    serve_fake_until_closed(fake, ready_file)


def _claim(index: int, node: str = "gpu-1") -> Any:
    from extender.model.devices import LedgerClaim, NodeDeviceUse

    return LedgerClaim(node, f"ml/p{index}", f"uid-{index}", (("GPU-0", 1, 0),), {"GPU-0": (10**9, 100)},
                       NodeDeviceUse())


def ledger_rows(writes: int) -> list[dict[str, Any]]:
    with serving_child(__file__, ["--child-server"], timeout=60) as kubeconfig:
        from extender.kube.client import build_api_client
        from extender.kube.deviceledger import Ledger

        client = build_api_client(kubeconfig)
        other_client = build_api_client(kubeconfig)
        try:
            one = Ledger(client, namespace="bench", ttl=0.001)  # entries expire at once: the Lease stays small
            one.record(_claim(0, "warm"))
            started = time.perf_counter()
            for i in range(writes):
                one.record(_claim(i, "solo"))
            solo_ms = (time.perf_counter() - started) * 1000 / writes

            two = Ledger(other_client, namespace="bench", ttl=0.001)
            started = time.perf_counter()
            for i in range(writes):
                (one if i % 2 else two).record(_claim(i, "shared"))
            alternating_ms = (time.perf_counter() - started) * 1000 / writes

            threads = 16
            barrier = threading.Barrier(threads)

            def burst(offset: int) -> None:
                barrier.wait()
                for i in range(writes // threads):
                    one.record(_claim(offset * 10_000 + i, "busy"))

            started = time.perf_counter()
            workers = [threading.Thread(target=burst, args=(t,)) for t in range(threads)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            burst_s = time.perf_counter() - started
        finally:
            client.close()
            other_client.close()
    done = (writes // threads) * threads
    return [
        {"bench": "ledger write, one process (cached Lease: one PUT)", "writes": writes,
         "ms_per_write": round(solo_ms, 2)},
        {"bench": "ledger write, two processes taking turns (409, GET, PUT)", "writes": writes,
         "ms_per_write": round(alternating_ms, 2)},
        {"bench": "ledger writes, 16 threads of one process, one node", "writes": done,
         "writes_per_s": round(done / burst_s, 1)},
    ]


def run(quick: bool = False) -> list[dict[str, Any]]:
    nodes = 1000 if quick else 4000
    return [*engine_rows(nodes), *state_rows(nodes), *ledger_rows(100 if quick else 400)]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child-server":
        serve_fake(argv[1])
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=4000)
    parser.add_argument("--writes", type=int, default=400)
    args = parser.parse_args(argv)
    for row in [*engine_rows(args.nodes), *state_rows(args.nodes), *ledger_rows(args.writes)]:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
