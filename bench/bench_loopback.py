"""The webhook against the empty extender over loopback, without a control plane.

`python -m bench e2e` is the real measure but needs etcd, kube-apiserver and
kube-scheduler; this one runs anywhere, in seconds. A kube-scheduler-like client
sends filter then prioritize (a pod and 230 node names, what kube-scheduler sends at
500 nodes) on one kept-alive connection to `extender serve` (defaults, a 500-node
snapshot) and to bench/empty_extender.py, and the server's CPU per pair is read from
/proc. Twice: back to back, and paced like kube-scheduler (a pause between pods, its
own scheduling work): on the real path the server idles between calls and pays for
cold caches on each, which back-to-back figures hide (CPU per pair is 2-3 times
higher paced, for both servers).
"""

from __future__ import annotations

import contextlib
import http.client
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from bench.bench_e2e import process_tree_cpu
from bench.bench_webhook import _pod, _wait_all_workers_ready, _write_snapshot
from bench.objects import make_node, make_pod
from tests.helpers import ROOT, free_port, wait_http

NAMES_SENT = 230  # kube-scheduler's percentageOfNodesToScore at 500 nodes: 46 %


def _drive(port: int, bodies: list[tuple[str, bytes]], pairs: int, pause: float) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        for _ in range(pairs):
            if pause:
                time.sleep(pause)
            for path, body in bodies:
                connection.request("POST", path, body, {"Content-Type": "application/json"})
                reply = connection.getresponse()
                reply.read()
                if reply.status != 200:
                    raise RuntimeError(f"{path} answered {reply.status}")
    finally:
        connection.close()


@contextlib.contextmanager
def _server(kind: str, snapshot: Path) -> Iterator[tuple[int, int]]:
    port = free_port()
    if kind == "empty":
        command = [sys.executable, str(ROOT / "bench" / "empty_extender.py"), str(port)]
    else:
        command = [sys.executable, "-m", "extender", "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1",
                   "--source", "snapshot", "--snapshot", str(snapshot), "--log-level", "WARNING"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_http(f"http://127.0.0.1:{port}/readyz" if kind != "empty" else f"http://127.0.0.1:{port}/healthz",
                  timeout=120)
        if kind != "empty":
            _wait_all_workers_ready(port)
        yield port, process.pid
    finally:
        process.terminate()
        process.wait(30)


def _measure(kind: str, snapshot: Path, bodies: list[tuple[str, bytes]], pairs: int, pause: float
             ) -> dict[str, Any]:
    with _server(kind, snapshot) as (port, pid):
        _drive(port, bodies, 50, 0.0)  # warm up
        cpu = process_tree_cpu(pid)
        started = time.perf_counter()
        _drive(port, bodies, pairs, pause)
        elapsed = time.perf_counter() - started
        cpu = process_tree_cpu(pid) - cpu
    return {"server": kind, "pace": f"{pause * 1000:g} ms between pods" if pause else "back to back",
            "pairs_per_s": round(pairs / elapsed, 1),
            "latency_ms_per_pair": round((elapsed / pairs - pause) * 1000, 3),
            "server_cpu_ms_per_pair": round(cpu * 1000 / pairs, 3)}


def run(quick: bool = False) -> list[dict[str, Any]]:
    nodes = [make_node(i) for i in range(500)]
    names = [node["metadata"]["name"] for node in nodes[:NAMES_SENT]]
    body = orjson.dumps({"Pod": _pod(), "Nodes": None, "NodeNames": names})
    bodies = [("/filter", body), ("/prioritize", body)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        snapshot = _write_snapshot(Path(tmp), nodes, [make_pod(i, 500) for i in range(2000)])
        for pause, pairs in ((0.0, 1000 if quick else 3000), (0.003, 300 if quick else 1000)):
            pair = [_measure(kind, snapshot, bodies, pairs, pause) for kind in ("empty", "extender serve")]
            empty = pair[0]
            for row in pair:
                row["cpu_x_empty"] = round(row["server_cpu_ms_per_pair"] / empty["server_cpu_ms_per_pair"], 2)
                row["latency_x_empty"] = round(row["latency_ms_per_pair"] / empty["latency_ms_per_pair"], 2)
            rows += pair
    return rows
