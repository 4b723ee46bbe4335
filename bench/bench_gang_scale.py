"""python -m bench gang-scale: one gang of 1,000 members on 5,000 nodes, kube-scheduler v1.36.3 against ours.

Issue 25's target: from the last member's creation to all members bound, `extender schedule`
at least as fast as kube-scheduler v1.36.3 with `GenericWorkload` and `GangScheduling` on,
on the same control plane in the same run; and pods of no group pay nothing measurable for
the feature.

**Cluster part** (needs KUBEBUILDER_ASSETS): one etcd + kube-apiserver with the gates and
`scheduling.k8s.io/v1alpha2` served, scheduler_perf's admission flags and its base nodes
(bench/scheduler_perf: `createNodes`, 4 CPU / 32 Gi / 110 pods each), created once. Then,
for each mode and scheduler in turn, on the same cluster: the scheduler starts (and is
ready), a `PodGroup` (`gang.minCount` = members) is created in a namespace of the run's
own, then the members (scheduler_perf's base pod, 100m / 500Mi, naming the group in
`spec.schedulingGroup.podGroupName` and the scheduler in `schedulerName`) by 16 client
threads; the clock stops when the harness's pod watch has seen every member bound. The
scheduler is stopped and the pods deleted before the next run, so every run starts from the
same empty 5,000 nodes. Mode `no-group` is the control: the same pods naming no group.

Columns: `create_s` the creation of all members (first POST sent to last answered),
`last_to_bound_s` from the last member's creation (its POST answered) to all bound (the
target), `first_to_bound_s` from the first member's creation, `bind_span_s` from the first
member seen bound to the last; `sched_cpu_s` the scheduler process's CPU seconds over the
window (first POST to all bound), `sched_rss_mb` its peak resident memory (VmHWM, start-up
on 5,000 nodes included), `apiserver_cpu_s` / `etcd_cpu_s` over the same window; `group`
the `PodGroupScheduled` condition at the end (waited for up to 15 s: both schedulers write it
off their binding path). Member POSTs are retried when the loaded API server is slow.

**Engine part** (in this process, no API server): `Scheduler` with a `MemoryBinder` on
5,000 nodes, every node filtered and scored (percentageOfNodesToScore 100), places pods of
no group, with the pod-group feature off and on (on: a gang of 1,000 members short of its
quorum waits in the queue meanwhile, so the group code has something to do). CPU µs per
node per pod, the median of alternating runs, and on ÷ off.

The machine's cores are shared with the harness and whatever else runs: compare the rows of
one run, not runs of different days.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.bench_e2e import _sampled, process_tree_cpu
from bench.tables import print_table

GATES = "GenericWorkload=true,GangScheduling=true"
APISERVER_ARGS = (f"--feature-gates={GATES}", "--runtime-config=scheduling.k8s.io/v1alpha2=true")
GANG = "gang"
NO_GROUP = "no-group"
GROUP_NAME = "gang"
WORKERS = 16


@dataclass
class BindClock:
    """Subscribed to the harness's PodCache: when the first and the last of `want` pods of
    `namespace` were seen bound (time.monotonic)."""

    namespace: str
    want: int
    bound: int = 0
    first_at: float | None = None
    all_at: float | None = None
    last_change: float = field(default_factory=time.monotonic)
    done: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def observe(self, state: Any) -> None:
        """PodCache calls this once per pod that gets a nodeName (and replays bound ones)."""
        if state.namespace != self.namespace:
            return
        now = time.monotonic()
        with self._lock:
            self.bound += 1
            self.last_change = now
            if self.first_at is None:
                self.first_at = now
            if self.bound >= self.want and self.all_at is None:
                self.all_at = now
                self.done.set()

    def wait(self, timeout: float, stall: float) -> None:
        """Until all are bound; raises TimeoutError after `timeout`, or `stall` s without a bind
        once the first was seen (before it: a gang binds nothing until its cycle is done)."""
        started = time.monotonic()
        while not self.done.wait(0.2):
            now = time.monotonic()
            if now - started > timeout or (self.first_at is not None and now - self.last_change > stall):
                raise TimeoutError(f"{self.bound} of {self.want} bound after {now - started:.0f} s")


def member(index: int, scheduler_name: str | None, group: str | None) -> dict[str, Any]:
    """scheduler_perf's base pod, named, under `scheduler_name`, in `group` (None: no group)."""
    from bench.scheduler_perf.executor import base_pod

    pod = base_pod()
    pod["metadata"] = {"name": f"member-{index:05d}"}
    spec = pod["spec"]
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    return pod


def create_members(kube: Any, namespace: str, count: int, scheduler_name: str | None,
                   group: str | None, workers: int = WORKERS) -> tuple[float, float, float]:
    """POST `count` members from `workers` threads: (first sent, first answered, last answered),
    time.monotonic."""
    path = f"/api/v1/namespaces/{namespace}/pods"

    def create(index: int) -> float:
        post(kube, path, member(index, scheduler_name, group))
        return time.monotonic()

    sent = time.monotonic()
    with ThreadPoolExecutor(workers) as pool:
        answered = list(pool.map(create, range(count)))
    return sent, min(answered), max(answered)


def post(kube: Any, path: str, body: dict[str, Any], attempts: int = 6) -> None:
    """POST, retried when the API server is slow to answer (a loaded machine: its 10 s read
    timeout), throttles or fails; an object already there after a retry was created by the
    attempt that seemed to fail."""
    import requests

    from tests.fakeapi.client import KubeApiError

    for attempt in range(attempts):
        try:
            kube.call("POST", path, body)
            return
        except KubeApiError as exc:
            if exc.code == 409 and attempt > 0:
                return
            if exc.code not in (429, 500, 502, 503, 504) or attempt == attempts - 1:
                raise
        except requests.RequestException:
            if attempt == attempts - 1:
                raise
        time.sleep(0.2 * (attempt + 1))


def create_group(kube: Any, namespace: str, min_count: int) -> None:
    from extender.model.podgroups import API_V1ALPHA2

    kube.call("POST", f"/apis/{API_V1ALPHA2}/namespaces/{namespace}/podgroups",
              {"apiVersion": API_V1ALPHA2, "kind": "PodGroup", "metadata": {"name": GROUP_NAME},
               "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}})


def group_condition(kube: Any, namespace: str, timeout: float = 15.0) -> str:
    """The group's PodGroupScheduled as status/reason, waiting up to `timeout` for it ("" when
    none was written): both schedulers write it off their binding path, so it may come after
    the last bind."""
    from extender.model.podgroups import API_V1ALPHA2, SCHEDULED_CONDITION

    deadline = time.monotonic() + timeout
    while True:
        raw = kube.call("GET", f"/apis/{API_V1ALPHA2}/namespaces/{namespace}/podgroups/{GROUP_NAME}")
        for condition in (raw.get("status") or {}).get("conditions") or []:
            if condition.get("type") == SCHEDULED_CONDITION and condition.get("status") == "True":
                return f"{condition.get('status')}/{condition.get('reason')}"
        if time.monotonic() > deadline:
            found = [c for c in (raw.get("status") or {}).get("conditions") or []
                     if c.get("type") == SCHEDULED_CONDITION]
            return f"{found[0].get('status')}/{found[0].get('reason')}" if found else ""
        time.sleep(0.2)


def _control_plane_cpu(pids: Sequence[int]) -> dict[str, float]:
    """CPU seconds so far of kube-apiserver and etcd, told apart by their command name."""
    figures = {"apiserver": 0.0, "etcd": 0.0}
    for pid in pids:
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        figures["apiserver" if "apiserver" in name else "etcd"] += process_tree_cpu(pid)
    return figures


def _delete_members(kube: Any, cache: Any, namespace: str, timeout: float = 120.0) -> None:
    """Delete the run's pods and wait until the pod watch saw them go (so that every run starts
    from the same empty nodes); a failure is reported, not raised (the next runs still count)."""
    try:
        kube.call("DELETE", f"/api/v1/namespaces/{namespace}/pods",
                  {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
    except Exception as exc:  # noqa: BLE001
        print(f"# deleting the pods of {namespace} failed: {exc!r}", file=sys.stderr)
    deadline = time.monotonic() + timeout
    while sum(cache.counts(namespace, None)) and time.monotonic() < deadline:
        time.sleep(0.2)


def run_one(cp: Any, cache: Any, kind: str, mode: str, members: int, nodes: int, workdir: Path,
            label: str, timeout: float = 600.0, stall: float = 120.0,
            profile: Path | None = None) -> dict[str, Any]:
    """One scheduler placing the members once on the running cluster: the table's row."""
    from bench.scheduler_perf import schedulers

    namespace = f"{mode}-{kind}-{label}"
    row: dict[str, Any] = {"mode": mode, "scheduler": kind, "nodes": nodes, "pods": members, "run": label}
    cp.client.ensure_namespace(namespace)
    try:
        with schedulers.scheduler(cp, kind, workdir / namespace, feature_gates=GATES) as running:
            if mode == GANG:
                create_group(cp.client, namespace, members)
            clock = BindClock(namespace, members)
            cache.subscribe(clock)
            try:
                sched_cpu = process_tree_cpu(running.pid)
                plane_cpu = _control_plane_cpu(cp.plane.pids)
                with _sampled(running.pid if kind == schedulers.OURS else None, profile):
                    sent, first, last = create_members(cp.client, namespace, members, running.scheduler_name,
                                                       GROUP_NAME if mode == GANG else None)
                    error = None
                    try:
                        clock.wait(timeout, stall)
                    except TimeoutError as exc:
                        error = str(exc)
                ended = clock.all_at or time.monotonic()
                row["sched_cpu_s"] = round(process_tree_cpu(running.pid) - sched_cpu, 2)
                row["sched_rss_mb"] = round(schedulers.peak_rss_mb(running.pid) or 0.0, 1)
                plane_after = _control_plane_cpu(cp.plane.pids)
            finally:
                cache.unsubscribe(clock)
            row.update({
                "create_s": round(last - sent, 2),
                "create_per_s": round(members / max(last - sent, 1e-9), 1),
                "last_to_bound_s": round(ended - last, 2) if error is None else None,
                "first_to_bound_s": round(ended - first, 2) if error is None else None,
                "bind_span_s": round(ended - clock.first_at, 2) if error is None and clock.first_at else None,
                "bound": clock.bound,
                "apiserver_cpu_s": round(plane_after["apiserver"] - plane_cpu["apiserver"], 1),
                "etcd_cpu_s": round(plane_after["etcd"] - plane_cpu["etcd"], 1),
                "group": group_condition(cp.client, namespace) if mode == GANG else "",
                "error": error,
            })
    finally:
        _delete_members(cp.client, cache, namespace)
    return row


def run_cluster(nodes: int, members: int, *, kinds: Sequence[str] = ("kube", "ours"),
                modes: Sequence[str] = (GANG, NO_GROUP), repeat: int = 1, timeout: float = 600.0,
                stall: float = 120.0, py_spy: Path | None = None, progress: bool = True) -> list[dict[str, Any]]:
    """Every (repeat, mode, scheduler) on one control plane with `nodes` nodes. Each repeat after
    the first runs the schedulers in the other order, so neither always goes first."""
    from bench.scheduler_perf import corpus, schedulers
    from bench.scheduler_perf.executor import Executor
    from bench.scheduler_perf.informer import PodCache

    rows = []
    with tempfile.TemporaryDirectory(prefix="gang-scale-") as tmp, \
            schedulers.control_plane(APISERVER_ARGS) as cp:
        cache = PodCache(cp.client).start()
        try:
            started = time.monotonic()
            nodes_op = corpus.Workload("gangs", "GangScale", f"{nodes}Nodes", {},
                                       [{"opcode": "createNodes", "count": nodes}], None)
            Executor(cp.client, cache, nodes_op).run()
            if progress:
                print(f"# {nodes} nodes created in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
            for r in range(repeat):
                order = list(kinds) if r % 2 == 0 else list(reversed(kinds))
                for mode in modes:
                    for kind in order:
                        profile = None
                        if py_spy is not None and kind == schedulers.OURS:
                            py_spy.mkdir(parents=True, exist_ok=True)
                            profile = py_spy / f"gang-scale-{mode}-{r + 1}.txt"
                        try:
                            row = run_one(cp, cache, kind, mode, members, nodes, Path(tmp), str(r + 1),
                                          timeout, stall, profile)
                        except Exception as exc:  # noqa: BLE001 (one failed run must not end the table)
                            row = {"mode": mode, "scheduler": kind, "nodes": nodes, "pods": members,
                                   "run": str(r + 1), "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
                        rows.append(row)
                        if progress:
                            print(f"#   {json.dumps(row)}", file=sys.stderr, flush=True)
        finally:
            cache.close()
    return rows


def ratios(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ours ÷ kube-scheduler per (run, mode), for the timed figures and the scheduler's CPU:
    below 1.0, ours is faster (or cheaper)."""
    out = []
    pairs: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for row in rows:
        pairs.setdefault((row["run"], row["mode"]), {})[row["scheduler"]] = row
    for (run, mode), pair in pairs.items():
        kube, ours = pair.get("kube"), pair.get("ours")
        if kube is None or ours is None:
            continue
        entry: dict[str, Any] = {"mode": mode, "run": run, "scheduler": "ours / kube"}
        for column in ("last_to_bound_s", "first_to_bound_s", "sched_cpu_s", "sched_rss_mb", "apiserver_cpu_s"):
            a, b = ours.get(column), kube.get(column)
            entry[column] = round(a / b, 2) if a is not None and b else None
        if mode == GANG:
            entry["target_met"] = entry["last_to_bound_s"] is not None and entry["last_to_bound_s"] <= 1.0
        out.append(entry)
    return out


# ---- the engine: pods of no group with the feature off and on -------------------------------------


def _engine_nodes(count: int) -> list[dict[str, Any]]:
    """scheduler_perf's base node (4 CPU, 32 Gi, 110 pods, Ready), with a zone label."""
    return [{"metadata": {"name": f"node-{i:05d}", "labels": {"kubernetes.io/hostname": f"node-{i:05d}",
                                                              "topology.kubernetes.io/zone": f"zone-{i % 3}"}},
             "spec": {},
             "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
                        "conditions": [{"type": "Ready", "status": "True"}]}} for i in range(count)]


def _engine_pod(name: str, group: str | None) -> Any:
    from extender.model.pods import PodView

    spec: dict[str, Any] = {"schedulerName": "bench", "containers": [
        {"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    return PodView.from_dict({"metadata": {"name": name, "namespace": "bench", "uid": f"uid-{name}"}, "spec": spec})


def engine_once(nodes: int, pods: int, gangs: bool, waiting: int = 1000) -> dict[str, Any]:
    """Place `pods` pods of no group with the in-process Scheduler; CPU and wall µs per node per pod.
    `gangs`: the pod-group feature on, with a gang of `waiting` members one short of its quorum
    (so gated) in the queue all along."""
    from extender.cluster.memory_binder import MemoryBinder
    from extender.cluster.state import ClusterState
    from extender.model import podgroups as pg
    from extender.policy.defaults import default_policy
    from extender.policy.engine import Engine
    from extender.scheduler import queueing
    from extender.scheduler.profiles import Profile
    from extender.scheduler.standalone import Scheduler

    state = ClusterState()
    state.replace_nodes(_engine_nodes(nodes))
    state.replace_pods([])
    binder = MemoryBinder(state)
    # With no API client, watch_options reach only GangScheduling: `apis` turns it on as
    # discovery would.
    options: dict[str, Any] = {"watch_options": {"apis": (pg.API_V1ALPHA2,)}} if gangs else {}
    scheduler = Scheduler(None, [Profile.from_engine("bench", Engine(default_policy("standalone")))],
                          state=state, binder=binder, percentage_of_nodes_to_score=100, **options)
    incoming = [_engine_pod(f"p{i}", None) for i in range(pods)]
    scheduler.start()
    try:
        if not scheduler.wait_ready(30):
            raise RuntimeError("the in-process scheduler did not get ready")
        gated = 0
        if gangs:
            key = pg.GroupKey(pg.API_V1ALPHA2, "bench", "waiting")
            scheduler.gangs.coordinator.upsert_group(pg.PodGroup(key, "uid-waiting", 0, pg.GANG, waiting + 1,
                                                                 pg.V1ALPHA2_TIMEOUT_SECONDS, {}, ()))
            for i in range(waiting):
                scheduler.queue.add(_engine_pod(f"m{i}", "waiting"), "bench")
            gated = sum(1 for i in range(waiting) if scheduler.queue.where(f"bench/m{i}") == queueing.GATED)
        cpu, wall = time.process_time(), time.perf_counter()
        for pod in incoming:
            scheduler.queue.add(pod, "bench")
        deadline = time.monotonic() + 600
        while len(binder.bindings) < pods:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(binder.bindings)} of {pods} bound in-process")
            time.sleep(0.001)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finally:
        scheduler.stop(timeout=5)
    per = 1e6 / (pods * nodes)
    return {"gangs": gangs, "cpu_us": cpu * per, "wall_us": wall * per, "gated": gated,
            "enabled": scheduler.gangs.enabled}


def engine_overhead(nodes: int = 5000, pods: int = 100, runs: int = 5) -> list[dict[str, Any]]:
    """Off and on, alternating `runs` times each; the medians and on ÷ off."""
    samples: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
    for r in range(runs):
        for gangs in ((False, True) if r % 2 == 0 else (True, False)):
            samples[gangs].append(engine_once(nodes, pods, gangs))
    rows = []
    for gangs, runs_of in samples.items():
        rows.append({"part": "engine, pods of no group", "gang_feature": "on" if gangs else "off",
                     "enabled": runs_of[0]["enabled"], "gated_members": runs_of[0]["gated"],
                     "nodes": nodes, "pods": pods, "runs": len(runs_of),
                     "cpu_us_per_node": round(statistics.median(s["cpu_us"] for s in runs_of), 3),
                     "wall_us_per_node": round(statistics.median(s["wall_us"] for s in runs_of), 3)})
    off, on = rows
    rows.append({"part": "engine, pods of no group", "gang_feature": "on / off", "nodes": nodes, "pods": pods,
                 "cpu_us_per_node": round(on["cpu_us_per_node"] / off["cpu_us_per_node"], 3),
                 "wall_us_per_node": round(on["wall_us_per_node"] / off["wall_us_per_node"], 3)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench gang-scale", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--members", type=int, default=1000, help="the gang's members (and its minCount)")
    parser.add_argument("--scheduler", choices=("kube", "ours", "both"), default="both")
    parser.add_argument("--no-control", action="store_true", help="skip the no-group control runs")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each (mode, scheduler), alternating the order")
    parser.add_argument("--timeout", type=float, default=600.0, help="give a run up after this many seconds")
    parser.add_argument("--stall", type=float, default=120.0, help="... or this many seconds without a bind")
    parser.add_argument("--engine-only", action="store_true", help="only the in-process engine part")
    parser.add_argument("--no-engine", action="store_true", help="skip the in-process engine part")
    parser.add_argument("--engine-nodes", type=int, default=5000)
    parser.add_argument("--engine-pods", type=int, default=100)
    parser.add_argument("--engine-runs", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="one JSON object per line instead of the tables")
    parser.add_argument("--py-spy", type=Path, default=None, metavar="DIR",
                        help="sample `extender schedule` with py-spy into DIR (slows it)")
    options = parser.parse_args(argv)
    if options.engine_only and options.no_engine:
        parser.error("--engine-only and --no-engine exclude each other")
    cluster: list[dict[str, Any]] = []
    if not options.engine_only:
        from tests.fakeapi.envtest import find_assets

        assets = find_assets()
        if assets is None or assets.kube_scheduler is None:
            parser.exit(2, "gang-scale: set KUBEBUILDER_ASSETS to a folder with etcd, kube-apiserver and "
                           "kube-scheduler v1.36 (bash ../shared/tools/k8s-test-binaries.sh prints the export "
                           "line), or pass --engine-only\n")
        kinds = ("kube", "ours") if options.scheduler == "both" else (options.scheduler,)
        modes = (GANG,) if options.no_control else (GANG, NO_GROUP)
        cluster = run_cluster(options.nodes, options.members, kinds=kinds, modes=modes, repeat=options.repeat,
                              timeout=options.timeout, stall=options.stall, py_spy=options.py_spy)
    compared = ratios(cluster)
    engine = [] if options.no_engine else engine_overhead(options.engine_nodes, options.engine_pods,
                                                          options.engine_runs)
    if options.json:
        for row in [*cluster, *compared, *engine]:
            print(json.dumps(row))
        return 0
    print_table(f"gang-scale: {options.members} members on {options.nodes} nodes", cluster)
    print_table("gang-scale: ours / kube-scheduler (below 1: ours faster or smaller)", compared)
    print_table("gang-scale: engine cost for pods of no group, pod-group feature off and on", engine)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
