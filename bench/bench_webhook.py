"""Webhook benchmarks: what kube-scheduler pays per pod, in both payload modes.

1. Full-NodeList mode (nodeCacheCapable: false) through gunicorn on 127.0.0.1 at
   N = 100, 500, 1000 realistic ~8 KB nodes: median and p99 over HTTP, plus the
   ratio handler / floor, where floor = orjson.loads(request) + orjson.dumps(reply),
   the JSON work no implementation can avoid. Target: ratio <= 1.5.
2. Node-cache mode (NodeNames) at N = 500 and 5000: in-process (target <= 5 us per
   node per verb) and over HTTP.
3. Throughput: requests/s with C concurrent keep-alive clients, and errors.

Each figure is measured in one run, so ratios compare like with like on a noisy box.
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from bench.objects import make_node, make_pod
from extender.cluster.memory_binder import MemoryBinder
from extender.cluster.snapshot import SnapshotSource
from extender.cluster.state import ClusterState
from extender.startup import make_policy_holder  # noqa: E402
from extender.webhook import verbs
from extender.webhook.nodeviews import NodeViewCache
from extender.webhook.runtime import Runtime
from tests.helpers import ROOT, free_port, start_server, stop_server, wire_body

POLICIES = {"webhook": "", "standalone": str(ROOT / "config" / "policy.yaml")}
CONNECTION_WORKER = "extender.webhook.worker.ConnectionWorker"  # the default (config/gunicorn.conf.py)


def _pod() -> dict[str, Any]:
    return wire_body("filter-request.json")["Pod"]


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _timed(fn: Callable[[], Any], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return samples


def _cluster(n_nodes: int, pods_per_node: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [make_node(i) for i in range(n_nodes)]
    pods = [make_pod(i, n_nodes) for i in range(n_nodes * pods_per_node)]
    return nodes, pods


def _runtime(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], policy: str) -> Runtime:
    state = ClusterState()
    state.replace_nodes(nodes)
    state.replace_pods(pods)
    holder = make_policy_holder(POLICIES[policy], "webhook")
    return Runtime(state, SnapshotSource(state, "/dev/null"), MemoryBinder(state), holder)


@contextmanager
def _server(snapshot: Path, policy: str, workers: int = 2, threads: int = 4,
            worker_class: str = CONNECTION_WORKER) -> Iterator[int]:
    port = free_port()
    args = ["serve", "--bind", f"127.0.0.1:{port}", "--workers", str(workers), "--threads", str(threads),
            "--source", "snapshot", "--snapshot", str(snapshot), "--log-level", "WARNING"]
    if POLICIES[policy]:
        args += ["--policy", POLICIES[policy]]
    # A 5000-node snapshot takes a while to load in each worker.
    process = start_server(args, port, env={"EXTENDER_WORKER_CLASS": worker_class}, timeout=300)
    try:
        _wait_all_workers_ready(port)
        yield port
    finally:
        stop_server(process)


def _wait_all_workers_ready(port: int, in_a_row: int = 20, timeout: float = 300) -> None:
    """/readyz answered by one worker says nothing of the others, still loading the snapshot
    and competing for the CPU: wait until many fresh connections in a row all find it ready."""
    deadline = time.monotonic() + timeout
    streak = 0
    while streak < in_a_row and time.monotonic() < deadline:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/readyz")
        streak = streak + 1 if conn.getresponse().status == 200 else 0
        conn.close()
        time.sleep(0.05 if streak else 0.5)


def _http_samples(port: int, path: str, body: bytes, repeat: int) -> list[float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": "application/json"}
    samples = []
    for _ in range(repeat + 3):
        started = time.perf_counter()
        conn.request("POST", path, body, headers)
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{path} answered {resp.status}")
        samples.append(time.perf_counter() - started)
    conn.close()
    return samples[3:]  # the first calls warm the worker's caches


def _write_snapshot(directory: Path, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> Path:
    path = directory / "cluster.json"
    path.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"kind": "Node", **n} for n in nodes] + [{"kind": "Pod", **p} for p in pods]}))
    return path


def _handle(fn: Callable[..., verbs.Outcome], runtime: Runtime, cache: NodeViewCache, body: bytes) -> bytes:
    """What the server does with a body, minus HTTP: decode, run the verb, encode."""
    return orjson.dumps(fn(runtime, cache, orjson.loads(body)).reply)


def _floor(body: bytes, reply: Any) -> bytes:
    """The JSON work no implementation avoids: decode the request, encode the reply."""
    orjson.loads(body)
    return orjson.dumps(reply)


def full_nodelist(sizes: tuple[int, ...] = (100, 500, 1000), policy: str = "webhook",
                  repeat: int = 40) -> list[dict[str, Any]]:
    rows = []
    pod = _pod()
    with tempfile.TemporaryDirectory() as tmp:
        snapshot = _write_snapshot(Path(tmp), [make_node(i) for i in range(3)], [])
        with _server(snapshot, policy) as port:
            for n in sizes:
                nodes = [make_node(i) for i in range(n)]
                body = orjson.dumps({"Pod": pod, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None})
                runtime = _runtime(nodes[:0], [], policy)
                cache = NodeViewCache()
                for verb, fn in (("filter", verbs.filter_verb), ("prioritize", verbs.prioritize_verb)):
                    handler = partial(_handle, fn, runtime, cache, body)
                    reply = orjson.loads(handler())
                    handler_s = statistics.median(_timed(handler, repeat))
                    floor_s = statistics.median(_timed(partial(_floor, body, reply), repeat))
                    http = _http_samples(port, f"/{verb}", body, repeat)
                    rows.append({
                        "bench": "full-nodelist", "policy": policy, "verb": verb, "nodes": n,
                        "body_kb": round(len(body) / 1024), "http_p50_ms": round(statistics.median(http) * 1e3, 2),
                        "http_p99_ms": round(_percentile(http, 0.99) * 1e3, 2),
                        "handler_ms": round(handler_s * 1e3, 2), "floor_ms": round(floor_s * 1e3, 2),
                        "ratio": round(handler_s / floor_s, 2) if floor_s else None, "target": "ratio <= 1.5",
                    })
    return rows


def node_cache(sizes: tuple[int, ...] = (500, 5000), policy: str = "standalone", pods_per_node: int = 20,
               repeat: int = 30) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            nodes, pods = _cluster(n, pods_per_node)
            snapshot = _write_snapshot(Path(tmp), nodes, pods)
            runtime = _runtime(nodes, pods, policy)
            names = [node["metadata"]["name"] for node in nodes]
            # As in the server: once listed, the raw objects are gone and the state is frozen
            # out of the GC's reach; raw lists kept alive here would slow every collection.
            del nodes, pods
            gc.collect()
            gc.freeze()
            cache = NodeViewCache()
            body_dict = {"Pod": _pod(), "Nodes": None, "NodeNames": names}
            body = orjson.dumps(body_dict)
            in_process = {}
            for verb, fn in (("filter", verbs.filter_verb), ("prioritize", verbs.prioritize_verb)):
                in_process[verb] = _timed(partial(fn, runtime, cache, body_dict), repeat)
            with _server(snapshot, policy) as port:
                for verb in ("filter", "prioritize"):
                    http = _http_samples(port, f"/{verb}", body, repeat)
                    samples = in_process[verb]
                    rows.append({
                        "bench": "node-cache", "policy": policy, "verb": verb, "nodes": n,
                        "inproc_p50_ms": round(statistics.median(samples) * 1e3, 2),
                        "inproc_p99_ms": round(_percentile(samples, 0.99) * 1e3, 2),
                        "us_per_node": round(statistics.median(samples) * 1e6 / n, 2),
                        "http_p50_ms": round(statistics.median(http) * 1e3, 2),
                        "http_p99_ms": round(_percentile(http, 0.99) * 1e3, 2),
                        "target": "<= 5 us/node in-process",
                    })
    return rows


@dataclass
class _ClientResult:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0


def _client(port: int, bodies: dict[str, bytes], deadline: float, result: _ClientResult) -> None:
    """One kube-scheduler-like client: filter then prioritize per pod, on a keep-alive connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    while time.monotonic() < deadline:
        for path, body in bodies.items():
            started = time.perf_counter()
            try:
                conn.request("POST", path, body, {"Content-Type": "application/json"})
                resp = conn.getresponse()
                resp.read()
                ok = resp.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            result.latencies.append(time.perf_counter() - started)
            result.errors += 0 if ok else 1
    conn.close()


def _load(port: int, bodies: dict[str, bytes], clients: int, seconds: float) -> tuple[float, list[_ClientResult]]:
    results = [_ClientResult() for _ in range(clients)]
    deadline = time.monotonic() + seconds
    workers = [threading.Thread(target=_client, args=(port, bodies, deadline, r)) for r in results]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return time.perf_counter() - started, results


def throughput(nodes_n: int = 500, clients: tuple[int, ...] = (1, 4, 8), seconds: float = 5.0,
               policy: str = "standalone", workers: int = 2, threads: int = 4,
               worker_class: str = CONNECTION_WORKER) -> list[dict[str, Any]]:
    rows = []
    nodes, pods = _cluster(nodes_n, 20)
    names = [node["metadata"]["name"] for node in nodes]
    bodies = {
        "/filter": orjson.dumps({"Pod": _pod(), "Nodes": None, "NodeNames": names}),
        "/prioritize": orjson.dumps({"Pod": _pod(), "Nodes": None, "NodeNames": names}),
    }
    with tempfile.TemporaryDirectory() as tmp:
        snapshot = _write_snapshot(Path(tmp), nodes, pods)
        with _server(snapshot, policy, workers, threads, worker_class) as port:
            for c in clients:
                elapsed, results = _load(port, bodies, c, seconds)
                merged = [x for r in results for x in r.latencies]
                rows.append({
                    "bench": "throughput", "policy": policy, "worker": f"{worker_class.replace(CONNECTION_WORKER, 'connection')} w{workers} t{threads}",
                    "nodes": nodes_n, "clients": c, "req_per_s": round(len(merged) / elapsed, 1),
                    "pods_per_s": round(len(merged) / 2 / elapsed, 1), "errors": sum(r.errors for r in results),
                    "p50_ms": round(statistics.median(merged) * 1e3, 2),
                    "p99_ms": round(_percentile(merged, 0.99) * 1e3, 2),
                })
    return rows


def worker_matrix(seconds: float = 4.0) -> list[dict[str, Any]]:
    """Loopback figures behind config/gunicorn.conf.py's defaults (with `python -m bench e2e`,
    which puts kube-scheduler in front)."""
    rows = []
    for worker_class, workers, threads in ((CONNECTION_WORKER, 1, 1), (CONNECTION_WORKER, 2, 1),
                                           ("sync", 1, 1), ("sync", 2, 1), ("gthread", 1, 4),
                                           ("gthread", 2, 4), ("gthread", 2, 1)):
        rows += throughput(clients=(1, 8), seconds=seconds, workers=workers, threads=threads,
                           worker_class=worker_class)
    return rows


def run(quick: bool = False) -> list[dict[str, Any]]:
    rows = full_nodelist(policy="webhook", repeat=15 if quick else 40)
    rows += full_nodelist(sizes=(1000,), policy="standalone", repeat=15 if quick else 40)
    rows += node_cache(sizes=(500,) if quick else (500, 5000), policy="standalone")
    rows += node_cache(sizes=(500,) if quick else (500, 5000), policy="webhook")
    rows += throughput(seconds=3 if quick else 8)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--matrix", action="store_true", help="compare gunicorn worker setups")
    options = parser.parse_args()
    for row in worker_matrix() if options.matrix else run(options.quick):
        print(json.dumps(row))
