"""kube-scheduler's throughput with our webhook in its path, and the standalone scheduler's, on a
real control plane (python -m bench e2e).

One run starts etcd, kube-apiserver (tests/e2e/controlplane.py, the binaries of
KUBEBUILDER_ASSETS) and creates the nodes once (Ready, as the node lifecycle controller
leaves them). Then, for each setup in turn and on the same nodes (``--py-spy DIR`` also
samples each extender process, see ``_sampled``):

1. the pods are created in a namespace of the setup's own, naming a schedulerName nobody
   serves yet: that is the backlog, created "while the scheduler is paused";
2. the setup starts: an extender process when it has one (waited for until every worker
   answers ready), then kube-scheduler with a profile of that schedulerName (or our
   standalone scheduler under that name);
3. a watch of the namespace, opened before the start, stamps each pod with the time its
   ``spec.nodeName`` first arrives;
4. when every pod is bound (or nothing moved for a while), the setup is stopped and its pods
   deleted, so the next setup starts on the same empty nodes.

Between 1 and 2, the benchmark waits until etcd and kube-apiserver are idle (under a tenth
of a core over a second; ``settle_s`` in the round's line): the previous setup's deleted
pods leave them seconds of work that would land on whichever setup comes next.

Throughput is (bound - 1) / (last bind - first bind): the steady drain, without the start-up
of each process (kube-scheduler's informers, our lists) that differs between setups and is
not what a user waits for. The watch's stamps are taken in this process as events arrive,
which is robust where the alternatives are not: the PodScheduled condition's
lastTransitionTime has one-second resolution (a drain lasts a few seconds) and Events are
posted late and asynchronously. "algorithm ms" is kube-scheduler's own
``scheduler_scheduling_algorithm_duration_seconds`` (sum / count, read from its secure port,
which the benchmark opens to ``/metrics`` with ``--authorization-always-allow-paths``): it
includes the extender's filter and prioritize calls. For our standalone scheduler it is
``extender_scheduling_duration_seconds`` (from dequeue to bind handed off).

Pods/s depend on what else the 2 cores run; CPU per pod does much less, so the table also
has the CPU (user + system, from /proc) that the scheduler process and the extender process
tree (gunicorn's master and workers) used from the moment they were ready until the drain
ended, divided by the pods bound; and what etcd and kube-apiserver used over the drain (a
scheduler that costs the API server more per pod leaves less of the 2 cores to itself).
A slight overcount: it includes the extender's idle housekeeping while kube-scheduler
starts; a slight undercount for kube-scheduler, whose first binds may precede the sample.

kube-scheduler gets client qps/burst 1000 through its configuration's ``clientConnection``
(the ``--kube-api-qps`` flag is ignored when ``--config`` is given). The webhook setups use
``config/kube-scheduler-http.yaml`` rendered for loopback, without ``bindVerb`` (kube-scheduler
binds), with the default webhook policy and, to match, ``--disable-bind``: so the webhook
watches no pods (extender/kube/source.py). One setup keeps bind enabled, as
``extender serve`` starts without options, to show what the pod watch costs. The standalone scheduler runs ``extender schedule``
with the default standalone policy (whatever it contains: re-running this after a merge
measures the new plugins too). The "empty" extender is bench/empty_extender.py.

Everything shares 2 cores with etcd and kube-apiserver, so compare ratios within a run;
``--repeat N`` runs the setups N times round-robin and reports medians. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import requests

from bench.tables import print_table

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

KUBE_SCHEDULER = "kube-scheduler"
EMPTY = "empty"
WEBHOOK = "webhook"
STANDALONE = "standalone"
QPS = 1000
# The yardsticks' labels: ratios are taken against them.
ALONE = "kube-scheduler alone"
EMPTY_NAMES = "+ empty extender"
EMPTY_FULL = "+ empty extender, full NodeList"
DEFAULTS = "+ extender serve (defaults, --disable-bind)"
SETTLE_TIMEOUT = 180.0  # a setup that binds nothing new for this long is given up
STALL_TIMEOUT = 45.0


@dataclass(frozen=True)
class Setup:
    """One way of scheduling the backlog. ``serve_args`` are ``extender serve`` options, after
    ``--disable-bind`` unless ``bind``."""

    label: str
    kind: str
    node_cache: bool = True
    serve_args: tuple[str, ...] = ()
    bind: bool = False
    env: tuple[tuple[str, str], ...] = ()


def default_setups() -> list[Setup]:
    """Every setup of the table: the yardsticks, our webhook with each worker setting, standalone."""
    return [
        Setup(ALONE, KUBE_SCHEDULER),
        Setup(EMPTY_NAMES, EMPTY),
        Setup(DEFAULTS, WEBHOOK),
        Setup("+ extender serve (defaults, bind enabled: pods watched)", WEBHOOK, bind=True),
        Setup("+ extender serve --workers 1", WEBHOOK, serve_args=("--workers", "1")),
        Setup("+ extender serve --worker-class gthread --workers 2 --threads 4", WEBHOOK,
              serve_args=("--worker-class", "gthread", "--workers", "2", "--threads", "4")),
        Setup("+ extender serve --worker-class gthread --workers 1 --threads 1", WEBHOOK,
              serve_args=("--worker-class", "gthread", "--workers", "1", "--threads", "1")),
        Setup("+ extender serve --worker-class sync --workers 1", WEBHOOK,
              serve_args=("--worker-class", "sync", "--workers", "1")),
        Setup(EMPTY_FULL, EMPTY, node_cache=False),
        Setup(DEFAULTS + ", full NodeList", WEBHOOK, node_cache=False),
        Setup("extender schedule (standalone)", STANDALONE),
    ]


# ---- the workload ------------------------------------------------------------------------------


def node_shape(index: int) -> dict[str, Any]:
    return {"name": f"node-{index:04d}", "cpu": "8", "memory": "32Gi", "pods": "110",
            "labels": {"topology.kubernetes.io/zone": f"zone-{index % 3}", "pool": f"pool-{index % 7}"}}


def pod_shape(index: int) -> dict[str, Any]:
    cpu, memory = (("100m", "128Mi"), ("250m", "256Mi"), ("500m", "512Mi"))[index % 3]
    return {"name": f"pod-{index:05d}", "cpu": cpu, "memory": memory, "labels": {"app": f"app-{index % 10}"}}


def _parallel(fn: Callable[[int], Any], count: int, workers: int = 8) -> None:
    with ThreadPoolExecutor(workers) as pool:
        for _ in pool.map(fn, range(count)):
            pass


# ---- watching the binds -------------------------------------------------------------------------


@dataclass
class BindClock:
    """Stamps each pod of a namespace with the monotonic time its nodeName first appears (the
    time its watch event reached us), from one list and a resumed watch (watchstream.WatchLoop)."""

    kube: Any  # tests.fakeapi.client.KubeTestClient
    namespace: str
    expected: int
    bound: dict[str, float] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)
    _watch: Any = None  # bench.watchstream.WatchLoop

    def start(self) -> BindClock:
        # Imported here: run as a script, this file puts the project on sys.path below its imports.
        from bench.watchstream import WatchLoop

        self._watch = WatchLoop(self.kube, f"/api/v1/namespaces/{self.namespace}/pods", "bind clock",
                                self._event, self._list)
        self._watch.start(self._list())
        return self

    def _list(self) -> str:
        """The namespace's pods now (those bound already are stamped now): its resourceVersion."""
        listed = self.kube.call("GET", f"/api/v1/namespaces/{self.namespace}/pods")
        now = time.monotonic()
        for pod in listed.get("items") or []:
            self._stamp(pod, now)
        return str(listed["metadata"]["resourceVersion"])

    def _event(self, kind: str, obj: dict[str, Any]) -> None:
        assert self._watch is not None
        self._stamp(obj, self._watch.arrived)

    def _stamp(self, pod: dict[str, Any], now: float) -> None:
        name = (pod.get("metadata") or {}).get("name")
        if name and (pod.get("spec") or {}).get("nodeName") and name not in self.bound:
            self.bound[name] = now
            if len(self.bound) >= self.expected:
                self.done.set()

    def wait(self, timeout: float, stall: float) -> None:
        """Until every pod is bound, nothing was bound for `stall` s (after the first), or `timeout`."""
        deadline = time.monotonic() + timeout
        while not self.done.wait(0.5):
            now = time.monotonic()
            if now > deadline:
                return
            if self.bound and now - max(self.bound.values()) > stall:
                return

    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()


# ---- metrics of the schedulers ------------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()  # fields after the command name: state is [0]


def process_tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) used so far by `pid` and its descendants (gunicorn's workers)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    ticks = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        fields = _stat(current)
        if fields is not None:
            total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
        todo += children.get(current, [])
    return total


def _histogram_mean(text: str, name: str) -> float | None:
    """sum / count of a Prometheus histogram in exposition text (all label sets added)."""
    total = count = 0.0
    for line in text.splitlines():
        if line.startswith(name + "_sum"):
            total += float(line.rsplit(" ", 1)[1])
        elif line.startswith(name + "_count"):
            count += float(line.rsplit(" ", 1)[1])
    return total / count if count else None


def _kube_scheduler_algorithm_ms(scheduler: Any) -> float | None:
    try:
        reply = requests.get(f"{scheduler.url}/metrics", verify=str(scheduler.ca_file), timeout=5)
    except requests.RequestException:
        return None
    if reply.status_code != 200:
        return None
    mean = _histogram_mean(reply.text, "scheduler_scheduling_algorithm_duration_seconds")
    return None if mean is None else mean * 1000


def _extender_algorithm_ms(process: Any) -> float | None:
    status, text = process.get("/metrics")
    if status != 200:
        return None
    mean = _histogram_mean(text, "extender_scheduling_duration_seconds")
    return None if mean is None else mean * 1000


# ---- the setups ----------------------------------------------------------------------------------


def _wait_http_ready(url: str, timeout: float = 120.0, in_a_row: int = 20) -> None:
    """Every gunicorn worker ready: many fresh connections in a row must all answer 200
    (one answer says nothing of another worker still listing)."""
    deadline = time.monotonic() + timeout
    streak = 0
    while streak < in_a_row:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} not ready after {timeout:.0f} s")
        try:
            ok = requests.get(url, timeout=5, headers={"Connection": "close"}).status_code == 200
        except requests.RequestException:
            ok = False
        streak = streak + 1 if ok else 0
        time.sleep(0.02 if ok else 0.3)


@contextlib.contextmanager
def _empty_extender(workdir: Path) -> Iterator[tuple[int, int]]:
    from tests.helpers import free_port

    port = free_port()
    log = open(workdir / "empty-extender.log", "ab")  # noqa: SIM115 (closed below)
    process = subprocess.Popen([sys.executable, str(ROOT / "bench" / "empty_extender.py"), str(port)],
                               stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT)
    try:
        _wait_http_ready(f"http://127.0.0.1:{port}/healthz", in_a_row=1)
        yield port, process.pid
    finally:
        process.terminate()
        process.wait(10)
        log.close()


@contextlib.contextmanager
def _webhook(plane: Any, workdir: Path, setup: Setup, name: str) -> Iterator[tuple[int, int]]:
    from tests.e2e import processes

    bind = () if setup.bind else ("--disable-bind",)
    process = processes.serve(plane.kubeconfig, workdir, extra=[*bind, *setup.serve_args],
                              name=name)
    process.env = dict(setup.env)
    process.start(timeout=120)
    try:
        _wait_http_ready(f"{process.url}/readyz")
        assert process.process is not None
        yield process.port, process.process.pid
    finally:
        process.stop()


def _kube_scheduler_config(plane: Any, scheduler_name: str, setup: Setup, port: int | None) -> dict[str, Any]:
    from tests.e2e import configs
    from tests.e2e.controlplane import KUBE_SCHEDULER_USER, scheduler_configuration

    kubeconfig = plane.plane.user_kubeconfig(KUBE_SCHEDULER_USER)
    if port is None:
        config = scheduler_configuration(scheduler_name, kubeconfig=kubeconfig)
    else:
        config = configs.kube_scheduler_config(configs.HTTP_EXAMPLE, kubeconfig=kubeconfig,
                                               scheduler_name=scheduler_name, port=port,
                                               node_cache=setup.node_cache, bind=False)
    config["clientConnection"] = {**config["clientConnection"], "qps": QPS, "burst": QPS}
    return config


@contextlib.contextmanager
def _sampled(pid: int | None, output: Path | None) -> Iterator[None]:
    """py-spy sampling `pid` and its children while the block runs, as collapsed stacks in
    `output` (nothing when either is None). Only the thread holding the GIL is sampled: the
    stacks say where the process's Python time goes, which is what a caller waits for."""
    if pid is None or output is None:
        yield
        return
    beside = Path(sys.executable).with_name("py-spy")  # the virtualenv's, when it is not on PATH
    binary = str(beside) if beside.exists() else "py-spy"
    spy = subprocess.Popen([binary, "record", "--pid", str(pid), "--subprocesses", "--gil", "--nonblocking",
                            "--rate", "250", "--format", "raw", "--output", str(output)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)  # py-spy attaches
        yield
    finally:
        spy.send_signal(2)  # SIGINT: write the profile and exit
        try:
            spy.wait(30)
        except subprocess.TimeoutExpired:
            spy.kill()
        print(f"# py-spy profile: {output}", file=sys.stderr)


@contextlib.contextmanager
def _running(plane: Any, workdir: Path, setup: Setup, scheduler_name: str,
             result: dict[str, Any], profile: Path | None = None) -> Iterator[None]:
    """Start the setup; on exit read its metrics into `result` and stop it."""
    if setup.kind == STANDALONE:
        from tests.e2e import processes

        process = processes.schedule(plane.kubeconfig, workdir, scheduler_name=scheduler_name,
                                     extra=["--no-leader-elect", "--skip-preflight"],
                                     name=scheduler_name)
        process.start(timeout=120)
        assert process.process is not None
        cpu = process_tree_cpu(process.process.pid)
        try:
            with _sampled(process.process.pid, profile):
                yield
            result["scheduler_cpu_s"] = process_tree_cpu(process.process.pid) - cpu
            result["algorithm_ms"] = _extender_algorithm_ms(process)
            result["log_warnings"] = sum("Connection pool is full" in line for line in process.log().splitlines())
        finally:
            process.stop()
        return
    with contextlib.ExitStack() as stack:
        port = None
        if setup.kind == EMPTY:
            port, pid = stack.enter_context(_empty_extender(workdir))
        elif setup.kind == WEBHOOK:
            port, pid = stack.enter_context(_webhook(plane, workdir, setup, scheduler_name))
        if port is not None:
            cpu = process_tree_cpu(pid)
            stack.enter_context(_sampled(pid, profile))
        config = _kube_scheduler_config(plane, scheduler_name, setup, port)
        scheduler = plane.start_kube_scheduler(
            config, name=scheduler_name, extra_args=["--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics"])
        assert scheduler.process is not None
        scheduler_cpu = process_tree_cpu(scheduler.process.pid)
        try:
            yield
            result["scheduler_cpu_s"] = process_tree_cpu(scheduler.process.pid) - scheduler_cpu
            if port is not None:
                result["extender_cpu_s"] = process_tree_cpu(pid) - cpu
            result["algorithm_ms"] = _kube_scheduler_algorithm_ms(scheduler)
        finally:
            scheduler.stop()
            plane.schedulers.remove(scheduler)


def run_setup(plane: Any, workdir: Path, setup: Setup, index: int, pods: int,
              profile_dir: Path | None = None) -> dict[str, Any]:
    kube = plane.client
    scheduler_name = f"bench-{index}"
    namespace = scheduler_name
    kube.ensure_namespace(namespace)

    def create(i: int) -> None:
        shape = pod_shape(i)
        kube.create_pod(shape.pop("name"), namespace, scheduler_name=scheduler_name, **shape)

    _parallel(create, pods)
    control_plane = plane.plane.pids  # etcd and kube-apiserver
    result: dict[str, Any] = {"setup": setup.label, "settle_s": _settle(control_plane)}
    load_before = os.getloadavg()[0]
    clock = BindClock(kube, namespace, pods).start()
    try:
        profile = profile_dir / f"{scheduler_name}.txt" if profile_dir is not None else None
        with _running(plane, workdir, setup, scheduler_name, result, profile):
            control_plane_cpu = _trees_cpu(control_plane)
            clock.wait(SETTLE_TIMEOUT, STALL_TIMEOUT)
            result["control_plane_cpu_s"] = _trees_cpu(control_plane) - control_plane_cpu
    finally:
        clock.close()
        kube.call("DELETE", f"/api/v1/namespaces/{namespace}/pods",
                  {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
    times = sorted(clock.bound.values())
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    result.update({
        "bound": len(times),
        "pods_per_s": round((len(times) - 1) / span, 1) if span > 0 else 0.0,
        "drain_s": round(span, 2),
        "load1": round(load_before, 2),
    })
    if result.get("algorithm_ms") is not None:
        result["algorithm_ms"] = round(result["algorithm_ms"], 2)
    for name in ("scheduler_cpu", "extender_cpu", "control_plane_cpu"):
        cpu = result.pop(f"{name}_s", None)
        if cpu is not None and times:
            result[f"{name}_ms_per_pod"] = round(cpu * 1000 / len(times), 2)
    _wait_deleted(kube, namespace)
    return result


def _trees_cpu(pids: Sequence[int]) -> float:
    return sum(map(process_tree_cpu, pids))


def _settle(control_plane: Sequence[int], idle: float = 0.1, timeout: float = 60.0) -> float:
    """Wait until etcd and kube-apiserver use less than `idle` of a core over a second;
    returns the seconds waited. The previous setup's pods, deleted, and this one's, just
    created, leave them work (watch fan-out, compaction) that would otherwise land on
    whichever setup comes next: the standalone scheduler follows the full-NodeList setups."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        before = _trees_cpu(control_plane)
        time.sleep(1.0)
        if _trees_cpu(control_plane) - before < idle:
            break
    return round(time.monotonic() - started, 1)


def _wait_deleted(kube: Any, namespace: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while kube.list_pods(namespace) and time.monotonic() < deadline:
        time.sleep(0.5)


def _ratio(runs: list[dict[str, Any]], base: list[dict[str, Any]] | None) -> float | None:
    """The median over rounds of this setup's pods/s over `base`'s in the same round: a round
    runs the setups minutes apart, so it compares them under the same load."""
    if not base:
        return None
    ratios = [r["pods_per_s"] / b["pods_per_s"] for r, b in zip(runs, base, strict=False) if b["pods_per_s"]]
    return round(statistics.median(ratios), 2) if ratios else None


def table(samples: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per setup: medians over the rounds, and the ratios to kube-scheduler alone and to
    the empty extender of the same payload mode (webhook setups only)."""
    rows = []
    for label, runs in samples.items():
        if not runs:
            continue
        empty = samples.get(EMPTY_FULL if "full NodeList" in label else EMPTY_NAMES)
        row: dict[str, Any] = {
            "setup": label,
            "pods_per_s": round(statistics.median(r["pods_per_s"] for r in runs), 1),
            "x_alone": _ratio(runs, samples.get(ALONE)),
            "x_empty": _ratio(runs, empty) if label.startswith("+ ") else None,
        }
        for name in ("algorithm_ms", "scheduler_cpu_ms_per_pod", "extender_cpu_ms_per_pod",
                     "control_plane_cpu_ms_per_pod"):
            values = [r[name] for r in runs if r.get(name) is not None]
            row[name] = round(statistics.median(values), 2) if values else None
        row["runs"] = " ".join(str(r["pods_per_s"]) for r in runs)
        row["bound"] = min(r["bound"] for r in runs)
        if "log_warnings" in runs[0]:
            row["pool_full_warnings"] = max(r.get("log_warnings", 0) for r in runs)
        rows.append(row)
    return rows


def chosen_setups(setups: Sequence[Setup], only: Sequence[str]) -> list[Setup]:
    """The setups `--only` names: a setup's whole label selects that setup alone (so "+ empty
    extender" leaves out its full-NodeList twin, which takes minutes at 5,000 nodes); any
    other text, every setup whose label contains it."""
    if not only:
        return list(setups)
    labels = {s.label for s in setups}
    return [s for s in setups if any(o == s.label if o in labels else o in s.label for o in only)]


def run(nodes: int = 500, pods: int = 1000, repeat: int = 1, setups: Sequence[Setup] | None = None,
        only: Sequence[str] = (), profile_dir: Path | None = None) -> list[dict[str, Any]]:
    """The table's rows (medians over `repeat` rounds). `profile_dir`: a py-spy profile of
    each extender (webhook or standalone) per setup and round, which slows those setups."""
    from tests.e2e.controlplane import ControlPlane
    from tests.fakeapi.envtest import find_assets

    assets = find_assets()
    if assets is None or assets.kube_scheduler is None:
        print("bench e2e skipped: set KUBEBUILDER_ASSETS to a folder with etcd, kube-apiserver and "
              "kube-scheduler (bash ../shared/tools/k8s-test-binaries.sh prints the export line)")
        return []
    chosen = chosen_setups(setups or default_setups(), only)
    samples: dict[str, list[dict[str, Any]]] = {s.label: [] for s in chosen}
    with ControlPlane(assets) as cp:
        workdir = Path(cp.plane.workdir) / "bench"  # type: ignore[union-attr]
        workdir.mkdir(parents=True, exist_ok=True)

        def create_node(i: int) -> None:
            shape = node_shape(i)
            cp.client.create_node(shape.pop("name"), **shape)

        started = time.monotonic()
        _parallel(create_node, nodes)
        print(f"# {nodes} nodes created in {time.monotonic() - started:.0f} s; "
              f"{pods} pods per setup, {repeat} round(s)", flush=True)
        index = 0
        for round_ in range(repeat):
            for setup in chosen:
                index += 1
                row = run_setup(cp, workdir, setup, index, pods, profile_dir)
                samples[setup.label].append(row)
                print(f"# round {round_ + 1}: {orjson.dumps(row).decode()}", flush=True)
    return table(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench e2e", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--only", action="append", default=[], help="a setup's label (that setup alone), or text of labels (every setup containing it)")
    parser.add_argument("--py-spy", type=Path, default=None, metavar="DIR",
                        help="sample each extender with py-spy (GIL holder) into DIR/<setup>.txt")
    options = parser.parse_args(argv)
    if options.py_spy is not None:
        options.py_spy.mkdir(parents=True, exist_ok=True)
    print_table("e2e", run(options.nodes, options.pods, options.repeat, only=options.only,
                           profile_dir=options.py_spy))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
