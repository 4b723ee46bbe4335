"""Cold start on a big cluster (python -m bench scheduler-perf --startup).

Fills a fresh control plane with ``nodes`` nodes (util.go's base node: 4 CPU, 32Gi, 110
pods) and ``pods`` pods already bound to them (spread evenly, 50m/100Mi each, a few
labels, as a running cluster's pods), then:

1. starts ``extender schedule`` and times it to ``/readyz`` (nodes and pods listed,
   indexes built), then creates one pending pod of its schedulerName and times it to
   bound; resident memory (VmRSS, and the peak VmHWM) read right after;
2. starts ``extender serve --disable-bind`` with a policy that reads pods
   (NodeReady, ResourceFit, InterPodAffinity, so it lists and watches every pod) and
   times it to ``/readyz``; memory of gunicorn's master and worker together;
3. for comparison, kube-scheduler itself: to ``/readyz`` (its informers synced), then one
   pending pod of default-scheduler to bound, and its memory.

Each row also gives the CPU seconds the process and kube-apiserver (with etcd) spent from
the start to ready: on a shared machine the wall-clock time is mostly waiting for a core,
and these say whose work it waited on.

Targets (issue 26): ready within 15 s, resident memory at most 400 MB. Creating the
cluster takes minutes and is not timed.
"""

from __future__ import annotations

import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from bench.scheduler_perf import schedulers
from bench.scheduler_perf.executor import base_node, base_pod

WORKERS = 16
PROCESSES = 3
POLICY = {"apiVersion": "extender/v1alpha1", "kind": "Policy",
          "filters": [{"name": "NodeReady"}, {"name": "ResourceFit"}, {"name": "InterPodAffinity"}], "scores": []}


def _node(i: int) -> dict[str, Any]:
    body = base_node("")
    body["metadata"] = {"name": f"node-{i:05d}", "labels": {
        "kubernetes.io/hostname": f"node-{i:05d}", "topology.kubernetes.io/zone": f"zone-{i % 3}"}}
    return body


def _pod(i: int, nodes: int) -> dict[str, Any]:
    body = base_pod()
    body["metadata"] = {"name": f"pod-{i:06d}", "labels": {"app": f"app-{i % 50}", "tier": ("web", "db", "batch")[i % 3]}}
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "50m", "memory": "100Mi"}}
    body["spec"]["nodeName"] = f"node-{i % nodes:05d}"
    return body


def _create_range(url: str, token: str, ca: str, kind: str, start: int, stop: int, nodes: int) -> int:
    """Create objects start..stop-1 from a process of its own (one Python process cannot
    send 150,000 requests fast enough; the API server can take them)."""
    from requests.adapters import HTTPAdapter

    from tests.fakeapi.client import KubeTestClient

    kube = KubeTestClient(url, token=token, verify=ca)
    kube.session.mount("https://", HTTPAdapter(pool_maxsize=WORKERS))
    path = "/api/v1/nodes" if kind == "node" else "/api/v1/namespaces/startup/pods"
    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(lambda i: kube.call("POST", path, _node(i) if kind == "node" else _pod(i, nodes)),
                      range(start, stop)))
    kube.close()
    return stop - start


def _fill(cp: Any, nodes: int, pods: int) -> None:
    for namespace in ("startup", "pending"):
        cp.client.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    started = time.monotonic()
    target = (cp.plane.url, cp.plane.token, str(cp.plane.ca_file))
    with ProcessPoolExecutor(PROCESSES) as pool:
        for kind, count in (("node", nodes), ("pod", pods)):
            chunk = max(1, count // (PROCESSES * 8))
            futures = [pool.submit(_create_range, *target, kind, i, min(i + chunk, count), nodes)
                       for i in range(0, count, chunk)]
            done = 0
            for future in futures:
                done += future.result()
                if kind == "pod" and done % 10_000 < chunk:
                    print(f"# startup: {done} pods, {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
            print(f"# startup: {count} {kind}s created, {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)


def _tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and its children (gunicorn's master and workers)."""
    total = schedulers.rss_mb(pid) or 0.0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if parent == pid:
                total += schedulers.rss_mb(int(entry.name)) or 0.0
    return total


def _first_bind(cp: Any, name: str, scheduler_name: str | None) -> float | None:
    """Create one pending pod for `scheduler_name` (None: default-scheduler); seconds until it is bound."""
    body = base_pod()
    body["metadata"] = {"name": name}
    if scheduler_name:
        body["spec"]["schedulerName"] = scheduler_name
    created = time.monotonic()
    cp.client.call("POST", "/api/v1/namespaces/pending/pods", body)
    while time.monotonic() - created < 120:
        if (cp.client.call("GET", f"/api/v1/namespaces/pending/pods/{name}").get("spec") or {}).get("nodeName"):
            return time.monotonic() - created
        time.sleep(0.02)
    return None


def _bind_result(cp: Any, label: str, pid: int, ready: float, plane_cpu: float, first_pod: str,
                 scheduler_name: str | None) -> dict[str, Any]:
    """The row of a scheduler (process ``pid``) ready ``ready`` s after its start: its first bind
    of ``first_pod``, its memory and CPU, and the control plane's CPU since ``plane_cpu``."""
    cpu = schedulers.trees_cpu([pid])
    plane_cpu = schedulers.trees_cpu(cp.plane.pids) - plane_cpu
    first = _first_bind(cp, first_pod, scheduler_name)
    return {"process": label, "ready_s": round(ready, 2), "first_pod_s": round(first, 2) if first is not None else None,
            "start_to_first_bind_s": round(ready + first, 2) if first is not None else None,
            "rss_mb": round(schedulers.rss_mb(pid) or 0, 1), "peak_rss_mb": round(schedulers.peak_rss_mb(pid) or 0, 1),
            "cpu_s": round(cpu, 2), "apiserver_cpu_s": round(plane_cpu, 2)}


def _start(cp: Any, process: Any, **options: Any) -> tuple[float, float]:
    """Start ``process`` (``options`` as its start's): (seconds until it was ready, the control
    plane's CPU seconds just before it started)."""
    plane_cpu = schedulers.trees_cpu(cp.plane.pids)
    started = time.monotonic()
    process.start(**options)
    assert process.process is not None
    return time.monotonic() - started, plane_cpu


def _schedule(cp: Any, workdir: Path) -> dict[str, Any]:
    from tests.e2e import processes

    process = processes.schedule(cp.kubeconfig, workdir, scheduler_name=schedulers.OUR_SCHEDULER_NAME,
                                 extra=["--no-leader-elect", "--skip-preflight"], name="startup-schedule")
    ready, plane_cpu = _start(cp, process, timeout=600)
    try:
        return _bind_result(cp, "extender schedule", process.process.pid, ready, plane_cpu, "first",
                            schedulers.OUR_SCHEDULER_NAME)
    finally:
        process.stop()
        for line in process.log().splitlines():  # when each list finished: where the start-up goes
            if "listed" in line or "ready" in line.lower():
                print(f"#   {line}", file=sys.stderr)


def _serve(cp: Any, workdir: Path) -> dict[str, Any]:
    from tests.e2e import processes

    policy = workdir / "policy-reads-pods.yaml"
    policy.write_text(yaml.safe_dump(POLICY))
    process = processes.serve(cp.kubeconfig, workdir, policy=policy, extra=["--disable-bind"], name="startup-serve")
    ready, plane_cpu = _start(cp, process, timeout=600)
    try:
        return {"process": "extender serve (policy reads pods)", "ready_s": round(ready, 2),
                "rss_mb": round(_tree_rss_mb(process.process.pid), 1),
                "apiserver_cpu_s": round(schedulers.trees_cpu(cp.plane.pids) - plane_cpu, 2)}
    finally:
        process.stop()


def _kube_scheduler(cp: Any, workdir: Path) -> dict[str, Any]:
    """kube-scheduler v1.36 on the same cluster: its informers list (WatchList streams) and
    its own first bind, for comparison."""
    from tests.e2e.controlplane import KUBE_SCHEDULER_USER, KubeScheduler, scheduler_configuration

    config = scheduler_configuration("default-scheduler", kubeconfig=cp.plane.user_kubeconfig(KUBE_SCHEDULER_USER))
    serving = cp.plane.ca.serving(common_name="startup-kube-scheduler").write(
        workdir / "startup-kube-scheduler.crt", workdir / "startup-kube-scheduler.key")
    process = KubeScheduler(cp.plane.assets.kube_scheduler, config, workdir, cp.plane.ca_file, serving,
                            name="startup-kube-scheduler", start_timeout=600)
    ready, plane_cpu = _start(cp, process)
    try:
        return _bind_result(cp, "kube-scheduler", process.process.pid, ready, plane_cpu, "first-kube", None)
    finally:
        process.stop()


def run(nodes: int, pods: int) -> list[dict[str, Any]]:
    """The three rows: schedule's, serve's and kube-scheduler's start on the filled cluster."""
    with schedulers.control_plane() as cp, tempfile.TemporaryDirectory(prefix="startup-") as tmp:
        _fill(cp, nodes, pods)
        rows = []
        for measure in (_schedule, _serve, _kube_scheduler):
            row = {"nodes": nodes, "pods": pods, **measure(cp, Path(tmp))}
            print(f"# startup: {row}", file=sys.stderr, flush=True)
            rows.append(row)
        return rows


def keep(nodes: int, pods: int) -> None:
    """Fill a control plane once and keep it up until interrupted, printing how to reach it:
    start `extender schedule` (under py-spy, old and new code in turn) against it as often as
    needed, a minute each instead of the fill's 13-20 minutes."""
    with schedulers.control_plane() as cp:
        _fill(cp, nodes, pods)
        print(f"kubeconfig {cp.kubeconfig}\nkube-apiserver {cp.plane.url}, pids (etcd, kube-apiserver) "
              f"{list(cp.plane.pids)}; Ctrl-C stops it", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":  # python -m bench.scheduler_perf.startup NODES PODS
    keep(int(sys.argv[1]), int(sys.argv[2]))
