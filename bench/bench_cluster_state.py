"""Memory and initial-list time of the cluster state for a big cluster (5000 nodes, 150,000 pods,
every 10th pod with a claim bound to a local PersistentVolume: 15,000 claims and volumes).

Each measurement runs in a fresh subprocess, so the RSS it reports is the state's
and not this script's: RSS is read before loading, after loading (raw objects freed,
gc run) and at its peak (VmHWM). Objects arrive in pages of 500 decoded by orjson,
as a paginated list delivers them; only one page of raw objects is alive at a time.

Modes:
  state      state.replace_nodes/replace_pods in-process (slim nodes, as KubeSource keeps them)
  state-raw  the same, keeping whole node dicts (what NodeView.raw holds without slimming)
  http-list  real HTTP lists through KubeSource as it lists (pods in one reply read an object at a
             time, the rest in pages of 500), from bench/list_server.py in another process (the
             test fake copies its whole store per page: far too slow at this size)

Usage: python bench/bench_cluster_state.py [--nodes N] [--pods N] [--modes state,http-list] [--trace]
`run()` returns the result rows for `make bench`. Target: <= 400 MB RSS for the state.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench.children import serving_child  # noqa: E402 (needs the path above)

TARGET_MB = 400
PAGE = 500


def rss_mb() -> tuple[float, float]:
    """(current RSS, peak RSS) in MB, from /proc/self/status."""
    values = {}
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value = line.split(":", 1)
                values[key] = int(value.split()[0]) / 1024
    return values.get("VmRSS", 0.0), values.get("VmHWM", 0.0)


def _pages(kind: str, count: int, nodes: int) -> Iterator[dict[str, Any]]:
    """Objects as a paginated list delivers them: one page of 500 decoded by orjson at a time."""
    import orjson
    from objects import list_page

    for start in range(0, count, PAGE):
        page = orjson.loads(list_page(kind, start, PAGE, count, nodes))["items"]
        yield from page
        del page


class _Timed:
    """Wraps an iterator and adds up the time spent producing items, to leave it out of the load time."""

    def __init__(self, items: Iterator[Any]) -> None:
        self.items = items
        self.seconds = 0.0

    def __iter__(self) -> _Timed:
        return self

    def __next__(self) -> Any:
        started = time.perf_counter()
        try:
            return next(self.items)
        finally:
            self.seconds += time.perf_counter() - started


# ---- child processes -------------------------------------------------------------------


def child_state(nodes: int, pods: int, slim: bool, trace: bool) -> dict[str, Any]:
    import tracemalloc

    from objects import claim_count

    from extender.cluster.state import ClusterState
    from extender.cluster.volume_store import CLAIMS, VOLUMES
    from extender.kube.source import slim_node

    gc.collect()
    before, _ = rss_mb()
    if trace:
        tracemalloc.start(3)
    state = ClusterState()
    nodes_in = _Timed(_pages("nodes", nodes, nodes))
    pods_in = _Timed(_pages("pods", pods, nodes))
    started = time.perf_counter()
    state.replace_nodes((slim_node(n) if slim else n) for n in nodes_in)
    nodes_done = time.perf_counter()
    state.replace_pods(pods_in)
    claims = claim_count(pods)
    claims_in = _Timed(_pages("claims", claims, nodes))
    volumes_in = _Timed(_pages("volumes", claims, nodes))
    state.volumes.replace(CLAIMS, claims_in)
    state.volumes.replace(VOLUMES, volumes_in)
    finished = time.perf_counter()
    gc.collect()
    after, peak = rss_mb()
    result = {
        "mode": "state" if slim else "state-raw",
        "nodes": state.node_count(), "pods": state.pod_count(), "claims": state.volumes.counts()[CLAIMS],
        "volumes": state.volumes.counts()[VOLUMES],
        "rss_before_mb": round(before, 1), "rss_after_mb": round(after, 1),
        "state_rss_mb": round(after - before, 1), "peak_rss_mb": round(peak, 1),
        "node_load_seconds": round(nodes_done - started - nodes_in.seconds, 2),
        "pod_load_seconds": round(finished - nodes_done - pods_in.seconds - claims_in.seconds - volumes_in.seconds, 2),
        "generate_seconds": round(nodes_in.seconds + pods_in.seconds + claims_in.seconds + volumes_in.seconds, 2),
    }
    if trace:
        snapshot = tracemalloc.take_snapshot()
        result["top_allocations"] = [
            f"{stat.size / 2**20:.1f} MB {stat.count} blocks {stat.traceback[0]}"
            for stat in snapshot.statistics("lineno")[:12]
        ]
        tracemalloc.stop()
    return result


def child_list_server(nodes: int, pods: int, ready_file: str) -> None:
    """Serve paginated lists of the benchmark objects until stdin closes."""
    from list_server import serve

    serve(nodes, pods, ready_file)


def child_http_list(url: str, nodes: int, pods: int) -> dict[str, Any]:
    from extender.cluster.state import ClusterState
    from extender.kube.client import api_client_for
    from extender.kube.source import KubeSource

    gc.collect()
    before, _ = rss_mb()
    api_client = api_client_for(url)
    state = ClusterState()
    source = KubeSource(state, api_client, request_timeout=600.0)
    started = time.perf_counter()
    source.start()
    synced = source.wait_synced(timeout=900)
    total = time.perf_counter() - started
    source.stop()
    gc.collect()
    after, peak = rss_mb()
    return {
        "mode": "http-list", "synced": synced, "nodes": state.node_count(), "pods": state.pod_count(),
        "claims": state.volumes.counts()["persistentvolumeclaims"],
        "rss_before_mb": round(before, 1), "rss_after_mb": round(after, 1),
        "state_rss_mb": round(after - before, 1), "peak_rss_mb": round(peak, 1),
        "load_seconds": round(total, 2),
    }


# ---- parent ---------------------------------------------------------------------------------


def _child(args: list[str], timeout: float = 1800) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True,
                         timeout=timeout, cwd=ROOT)
    if out.returncode != 0:
        raise RuntimeError(f"benchmark child {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _http_list(nodes: int, pods: int, trace: bool) -> dict[str, Any]:
    with serving_child(__file__, ["--child", "list-server", str(nodes), str(pods)], timeout=900) as url:
        return _child(["http-list", url, str(nodes), str(pods)])


def run(nodes: int = 5000, pods: int = 150_000, modes: tuple[str, ...] = ("state", "state-raw", "http-list"),
        trace: bool = False) -> list[dict[str, Any]]:
    """Run each mode in its own subprocess and return one result row per mode."""
    rows = []
    for mode in modes:
        if mode == "http-list":
            row = _http_list(nodes, pods, trace)
        else:
            row = _child([mode, str(nodes), str(pods), "1" if trace else "0"])
        row["target_mb"] = TARGET_MB
        row["within_target"] = row["state_rss_mb"] <= TARGET_MB
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        kind, rest = argv[1], argv[2:]
        if kind in ("state", "state-raw"):
            result = child_state(int(rest[0]), int(rest[1]), kind == "state", rest[2] == "1")
        elif kind == "list-server":
            child_list_server(int(rest[0]), int(rest[1]), rest[2])
            return 0
        else:
            result = child_http_list(rest[0], int(rest[1]), int(rest[2]))
        print(json.dumps(result))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--modes", default="state,state-raw,http-list")
    parser.add_argument("--trace", action="store_true", help="tracemalloc the in-process load (slow)")
    options = parser.parse_args(argv)
    for row in run(options.nodes, options.pods, tuple(options.modes.split(",")), options.trace):
        extra = row.pop("top_allocations", None)
        print(json.dumps(row))
        for line in extra or ():
            print("   ", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
