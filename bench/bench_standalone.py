"""Standalone scheduler throughput: pods/s for 1000 pods on 500 nodes.

Two figures:

* **end to end**: a fake API server in another process (so its CPU does not compete
  with the scheduler's GIL) holds 500 nodes and 1000 pending pods; the clock runs from
  `Scheduler.start()` (initial lists included) until the last bind has returned, and a
  second figure from the first bind to the last (the steady rate). Every bind, the
  watches, Events and PodScheduled patches go over HTTP as in a cluster.
* **cycle only**: `schedule_one` + `state.assume` in a loop, no API calls: what the
  policy engine alone allows.

kube-scheduler reaches roughly 400-500 pods/s against a local control plane.

Usage: python bench/bench_standalone.py [--nodes 500] [--pods 1000] [--profile]
`run()` returns the result rows for `make bench`.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.children import serve_fake_until_closed, serving_child  # noqa: E402 (needs the path above)

SCHEDULER_NAME = "bench-scheduler"
NAMESPACE = "bench"


def node_shape(index: int) -> dict[str, Any]:
    return {"name": f"node-{index:04d}", "cpu": "8", "memory": "32Gi", "pods": "110",
            "labels": {"topology.kubernetes.io/zone": f"zone-{index % 3}", "pool": f"pool-{index % 7}"}}


def pod_shape(index: int) -> dict[str, Any]:
    cpu, memory = (("100m", "128Mi"), ("250m", "256Mi"), ("500m", "512Mi"))[index % 3]
    return {"name": f"pod-{index:05d}", "cpu": cpu, "memory": memory}


# ---- the fake API server, in a child process ------------------------------------------------


def serve_fake(nodes: int, pods: int, ready_file: str) -> None:
    """Populate a fake API server and serve it until stdin closes."""
    from tests.fakeapi.client import KubeTestClient
    from tests.fakeapi.server import FAKE_TOKEN, FakeApiServer

    fake = FakeApiServer(history_size=20_000).start()
    kube = KubeTestClient(fake.url, token=FAKE_TOKEN)
    kube.ensure_namespace(NAMESPACE)
    for i in range(nodes):
        shape = node_shape(i)
        kube.create_node(shape.pop("name"), **shape)
    for i in range(pods):
        shape = pod_shape(i)
        kube.create_pod(shape.pop("name"), NAMESPACE, scheduler_name=SCHEDULER_NAME, **shape)
    serve_fake_until_closed(fake, ready_file)


class _CountingBinder:
    """Wraps the real binder; sets `done` when `target` binds have returned successfully."""

    def __init__(self, inner: Any, target: int) -> None:
        self.inner = inner
        self.target = target
        self.count = 0
        self.first = 0.0
        self.last = 0.0
        self.done = threading.Event()
        self._lock = threading.Lock()

    def bind(self, *args: Any, **kwargs: Any) -> None:
        self.inner.bind(*args, **kwargs)
        now = time.perf_counter()
        with self._lock:
            self.count += 1
            if self.count == 1:
                self.first = now
            self.last = now
            if self.count >= self.target:
                self.done.set()


def end_to_end(kubeconfig: str, pods: int, *, parallel_binds: int = 16, profile: bool = False,
               timeout: float = 300.0) -> dict[str, Any]:
    from extender.cluster.state import ClusterState
    from extender.kube.binder import KubeBinder
    from extender.kube.client import build_api_client
    from extender.policy.defaults import default_policy
    from extender.policy.engine import Engine
    from extender.scheduler.profiles import Profile
    from extender.scheduler.standalone import Scheduler

    api_client = build_api_client(kubeconfig, pool_size=parallel_binds + 8)
    state = ClusterState()
    binder = _CountingBinder(KubeBinder(api_client, state), pods)
    scheduler = Scheduler(api_client, [Profile.from_engine(SCHEDULER_NAME, Engine(default_policy("standalone")))],
                          state=state, binder=binder, parallel_binds=parallel_binds, rng=random.Random(7))
    profilers = _profile_threads() if profile else None
    cpu_started = time.process_time()
    started = time.perf_counter()
    scheduler.start()
    finished = binder.done.wait(timeout)
    ended = time.perf_counter()
    cpu = time.process_time() - cpu_started
    scheduler.stop()
    api_client.close()
    if profilers is not None:
        _print_profile(profilers)
    total = ended - started
    steady = binder.last - binder.first
    return {
        "bench": "standalone end to end", "pods": pods, "bound": binder.count, "finished": finished,
        "parallel_binds": parallel_binds, "seconds": round(total, 3),
        "first_bind_s": round(binder.first - started, 3) if binder.count else None,
        "pods_per_s": round(binder.count / total, 1) if total else 0.0,
        "steady_pods_per_s": round((binder.count - 1) / steady, 1) if steady > 0 else 0.0,
        # Load-independent: CPU of every scheduler thread (the GIL is the limit), per pod.
        "cpu_ms_per_pod": round(cpu * 1000 / max(binder.count, 1), 2),
    }


def _profile_threads() -> list[Any]:
    """cProfile every thread started from now on (cProfile alone sees only its own thread).

    Timed by each thread's CPU time, so the figures say where the GIL is spent.
    """
    import cProfile

    profilers: list[Any] = []
    original = threading.Thread.run

    def run(self: threading.Thread) -> None:
        profiler = cProfile.Profile(time.thread_time)  # CPU time: waits and GIL queues left out
        profilers.append(profiler)
        profiler.enable()
        try:
            original(self)
        finally:
            profiler.disable()

    threading.Thread.run = run  # type: ignore[method-assign]
    return profilers


def _print_profile(profilers: list[Any]) -> None:
    import pstats

    stats = pstats.Stats(profilers[0])
    for profiler in profilers[1:]:
        stats.add(profiler)
    stats.sort_stats("tottime").print_stats(35)
    stats.sort_stats("cumulative").print_stats(35)


def with_fake_server(nodes: int, pods: int, fn: Any) -> Any:
    with serving_child(__file__, ["--child-server", str(nodes), str(pods)], timeout=300) as kubeconfig:
        return fn(kubeconfig)


# ---- the cycle alone ---------------------------------------------------------------------------


def cycle_only(nodes: int, pods: int, percentage: int = 0) -> dict[str, Any]:
    from extender.cluster.state import ClusterState
    from extender.cycle.pod import schedule_one
    from extender.model.pods import PodView
    from extender.policy.defaults import default_policy
    from extender.policy.engine import Engine

    state = ClusterState()
    node_objects = []
    for i in range(nodes):
        shape = node_shape(i)
        node_objects.append({
            "metadata": {"name": shape["name"], "labels": shape["labels"]},
            "spec": {},
            "status": {"allocatable": {"cpu": shape["cpu"], "memory": shape["memory"], "pods": shape["pods"]},
                       "conditions": [{"type": t, "status": "False"} for t in
                                      ("MemoryPressure", "DiskPressure", "PIDPressure")]
                       + [{"type": "Ready", "status": "True"}]},
        })
    state.replace_nodes(node_objects)
    state.replace_pods([])
    views = []
    for i in range(pods):
        shape = pod_shape(i)
        views.append(PodView.from_dict({
            "metadata": {"name": shape["name"], "namespace": NAMESPACE, "uid": f"uid-{i}"},
            "spec": {"schedulerName": SCHEDULER_NAME, "containers": [{"name": "c", "resources": {
                "requests": {"cpu": shape["cpu"], "memory": shape["memory"]}}}]},
        }))
    engine = Engine(default_policy("standalone"))
    rng = random.Random(7)
    start_index = 0
    evaluated = 0
    cpu_started = time.process_time()
    started = time.perf_counter()
    for pod in views:
        result = schedule_one(engine, state, pod, rng=rng, percentage_of_nodes_to_score=percentage,
                              start_index=start_index)
        start_index = result.next_start_index
        evaluated += result.evaluated
        assert result.node is not None
        state.assume(pod.key, result.node, uid=pod.uid, view=pod)
    total = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    return {
        "bench": "standalone cycle only", "pods": pods, "nodes": nodes,
        "percentage_of_nodes_to_score": percentage or "adaptive",
        "nodes_per_cycle": round(evaluated / pods, 1), "seconds": round(total, 3),
        "pods_per_s": round(pods / total, 1),
        "cpu_ms_per_pod": round(cpu * 1000 / pods, 2),
    }


def run(nodes: int = 500, pods: int = 1000, parallel_binds: int = 16) -> list[dict[str, Any]]:
    """Cycle-only (adaptive and all nodes) and end-to-end rows, for `make bench`."""
    rows = [cycle_only(nodes, pods), cycle_only(nodes, pods, percentage=100)]
    rows.append(with_fake_server(nodes, pods, lambda kc: end_to_end(kc, pods, parallel_binds=parallel_binds)))
    for row in rows:
        row["nodes"] = nodes
        row["target_pods_per_s"] = 400
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child-server":
        serve_fake(int(argv[1]), int(argv[2]), argv[3])
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--parallel-binds", type=int, default=16)
    parser.add_argument("--profile", action="store_true", help="cProfile the end-to-end run")
    parser.add_argument("--only", choices=("cycle", "e2e"), default=None)
    args = parser.parse_args(argv)
    import logging

    logging.basicConfig(level=logging.WARNING)
    rows = []
    if args.only in (None, "cycle"):
        rows += [cycle_only(args.nodes, args.pods), cycle_only(args.nodes, args.pods, percentage=100)]
    if args.only in (None, "e2e"):
        rows.append(with_fake_server(args.nodes, args.pods, lambda kc: end_to_end(
            kc, args.pods, parallel_binds=args.parallel_binds, profile=args.profile)))
    for row in rows:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
