"""The control plane of one run and the scheduler under test, with their CPU and memory.

The control plane is tests/e2e/controlplane.py's, with kube-apiserver's admission set as
scheduler_perf's util.go sets it (``ServiceAccount``, ``TaintNodesByCondition`` and
``Priority`` off: there is no node lifecycle controller to lift the not-ready taint, and
the templates give ``spec.priority`` directly). ``kube`` is kube-scheduler v1.36.3 with
its default profile and client qps/burst 5000 (util.go's ``cfg.QPS``/``cfg.Burst``);
``ours`` is ``extender schedule`` with its built-in standalone policy (plus the filters a
workload's gates add to kube-scheduler's profile: ``filters``), taking the pods that name
:data:`OURS`. DRA workloads also get kube-controller-manager's resource-claim
controller (:func:`claim_controller`), started before either scheduler.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.bench_e2e import process_tree_cpu
from bench.scheduler_perf import profiles

KUBE = "kube"
OURS = "ours"
OUR_SCHEDULER_NAME = "extender-scheduler"
QPS = 5000
ADMISSION = "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition,Priority"


def _status_mb(pid: int, field: str) -> float | None:
    """A memory figure of /proc/<pid>/status (kB there), in MiB; None once the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def peak_rss_mb(pid: int) -> float | None:
    """The process's peak resident set (VmHWM), in MiB; None once it is gone."""
    return _status_mb(pid, "VmHWM:")


def rss_mb(pid: int) -> float | None:
    """The process's current resident set (VmRSS), in MiB."""
    return _status_mb(pid, "VmRSS:")


def trees_cpu(pids: list[int]) -> float:
    return sum(process_tree_cpu(pid) for pid in pids)


@dataclass
class Running:
    """A started scheduler: its pid, the schedulerName its pods must name (None: the
    templates' default-scheduler), and CPU at the start."""

    kind: str
    pid: int
    scheduler_name: str | None
    cpu_at_start: float = 0.0
    figures: dict[str, Any] = field(default_factory=dict)
    metrics_url: str | None = None  # /metrics, read for the attempts per pod
    ca_file: str | None = None  # kube-scheduler's /metrics is HTTPS, served under the plane's CA

    def cpu_s(self) -> float:
        return process_tree_cpu(self.pid) - self.cpu_at_start

    def read(self) -> None:
        """CPU seconds since the start and peak RSS, read while the process still runs."""
        self.figures = {"cpu_s": round(self.cpu_s(), 2), "rss_mb": round(peak_rss_mb(self.pid) or 0.0, 1)}
        if self.metrics_url is not None:
            try:
                self.figures["attempts"] = scheduling_attempts(self.metrics_url, self.ca_file)
            except OSError as exc:  # the row keeps its other figures
                self.figures["attempts"] = {"unread": str(exc)[:100]}


# Each scheduler's families of scheduling cycles and preemption attempts, and the prefix of
# their counts. kube-scheduler counts preemption attempts without a result ("preemption").
_ATTEMPT_FAMILIES = {"extender_schedule_attempts": "", "extender_preemption_attempts": "preemption ",
                     "scheduler_schedule_attempts": "", "scheduler_preemption_attempts": "preemption "}


def scheduling_attempts(url: str, ca_file: str | None = None) -> dict[str, int]:
    """Scheduling cycles by result, and preemption's by result: how many cycles the pods
    took (a preemptor retried before its victims are gone costs a whole filter pass again),
    read alike from ours and from kube-scheduler, to compare the two."""
    import ssl
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    context = ssl.create_default_context(cafile=ca_file) if ca_file else None
    with urllib.request.urlopen(url, timeout=10, context=context) as reply:  # noqa: S310 (loopback)
        text = reply.read().decode()
    counts: dict[str, int] = {}
    for family in text_string_to_metric_families(text):
        prefix = _ATTEMPT_FAMILIES.get(family.name)
        if prefix is None:
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                key = (prefix + sample.labels.get("result", "")).strip()
                counts[key] = counts.get(key, 0) + int(sample.value)
    return counts


@contextlib.contextmanager
def control_plane(extra_args: Sequence[str] = ()) -> Iterator[Any]:
    """A fresh etcd + kube-apiserver (tests.e2e.controlplane.ControlPlane), stopped after;
    ``extra_args`` go to kube-apiserver (feature gates, runtime-config)."""
    from tests.e2e.controlplane import ControlPlane
    from tests.fakeapi.envtest import find_assets

    with ControlPlane(find_assets(), apiserver_args=[ADMISSION, *extra_args]) as cp:
        from requests.adapters import HTTPAdapter

        cp.client.session.mount("https://", HTTPAdapter(pool_connections=4, pool_maxsize=64))
        yield cp


@contextlib.contextmanager
def scheduler(cp: Any, kind: str, workdir: Path, log_level: str = "INFO",
              feature_gates: str = "", config: dict[str, Any] | None = None,
              filters: Sequence[str] = ()) -> Iterator[Running]:
    """Start the scheduler ``kind`` on ``cp``; on exit read its figures, then stop it.
    ``feature_gates``: kube-scheduler's ``--feature-gates`` (ours reads the API server's
    discovery instead). ``config``: the workload's KubeSchedulerConfiguration, given to
    kube-scheduler as its profile's pluginConfig and to ours as a policy (profiles.py).
    ``filters``: plugins those gates add to kube-scheduler's default profile, added to our
    policy (profiles.with_filters)."""
    workdir.mkdir(parents=True, exist_ok=True)
    plugin_config, policy = profiles.translate(config) if config else (None, None)
    if filters:
        policy = profiles.with_filters(policy or profiles.standalone(), filters)
    if kind == KUBE:
        from tests.e2e.controlplane import KUBE_SCHEDULER_USER, scheduler_configuration

        config = scheduler_configuration("default-scheduler",
                                         kubeconfig=cp.plane.user_kubeconfig(KUBE_SCHEDULER_USER),
                                         profile={"pluginConfig": plugin_config} if plugin_config else None)
        config["clientConnection"] = {**config["clientConnection"], "qps": QPS, "burst": QPS}
        # /metrics without a token, as kube-scheduler serves its probes: for the attempts.
        extra = ["--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics"]
        process = cp.start_kube_scheduler(config, name="kube-scheduler",
                                          extra_args=extra + ([f"--feature-gates={feature_gates}"] if feature_gates else []))
        assert process.process is not None
        running = Running(kind, process.process.pid, None, metrics_url=f"{process.url}/metrics",
                          ca_file=str(cp.plane.ca_file))

        def stop() -> None:
            process.stop()
            cp.schedulers.remove(process)

        yield from _measured(running, stop)
        return
    if kind != OURS:
        raise ValueError(f"unknown scheduler {kind!r}")
    from tests.e2e import processes

    policy_path = None
    if policy is not None:
        policy_path = workdir / "policy.yaml"
        policy_path.write_text(yaml.safe_dump(policy, sort_keys=False))
    ours = processes.schedule(cp.kubeconfig, workdir, scheduler_name=OUR_SCHEDULER_NAME, policy=policy_path,
                              extra=["--no-leader-elect", "--skip-preflight", "--log-level", log_level],
                              name="extender-schedule")
    ours.start(timeout=120)
    assert ours.process is not None
    running = Running(kind, ours.process.pid, OUR_SCHEDULER_NAME, metrics_url=f"{ours.url}/metrics")
    yield from _measured(running, ours.stop)


def _measured(running: Running, stop: Callable[[], None]) -> Iterator[Running]:
    """Yield ``running``, its CPU counted from now; then read its figures, and ``stop`` it
    however the run ends."""
    running.cpu_at_start = process_tree_cpu(running.pid)
    try:
        yield running
        running.read()
    finally:
        stop()


@contextlib.contextmanager
def claim_controller(cp: Any, workdir: Path) -> Iterator[Any]:
    """kube-controller-manager running only the resource-claim controller, which turns
    pods' ResourceClaimTemplates into ResourceClaims (and deletes them with their pods),
    for both schedulers alike. scheduler_perf runs that controller in process on the
    scheduler's client (util.go mustSetupCluster: QPS and burst 5000); the same limits
    are passed here, so that creating claims does not throttle the workload."""
    from tests.e2e.controlplane import start_kube_controller_manager

    manager = start_kube_controller_manager(cp.plane, workdir=workdir,
                                            extra_args=[f"--kube-api-qps={QPS}", f"--kube-api-burst={QPS}"])
    try:
        yield manager
    finally:
        manager.stop()
