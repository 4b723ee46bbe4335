"""The chaos cluster: a real control plane, the fault proxy, both schedulers, and a supervisor.

* etcd and kube-apiserver (tests.fakeapi.envtest), kube-apiserver with ``--watch-cache=false``
  so that an etcd compaction reaches the watches (the watch cache would answer old
  revisions from memory and hide it, docs/reliability.md), and with the gates that serve
  kube-scheduler v1.36's ``PodGroup`` (the standalone pool's gangs);
* :class:`~bench.chaos.proxy.FaultProxy` in front of kube-apiserver: every process below
  reaches the API server through it;
* two ``extender schedule`` replicas (schedulerName ``chaos-standalone``, config/policy-devices.yaml)
  with leader election on a short lease;
* ``extender serve`` with 2 gunicorn workers (config/policy-webhook-devices.yaml), called by
  kube-scheduler (config/kube-scheduler-http.yaml: every verb, ``bindVerb``; its profile
  ``chaos-webhook`` leaves the GPU resources to the extender, docs/devices.md). kube-scheduler
  runs without the gang gates, as a stock one; the webhook holds gang members at ``/bind``
  for ``GANG_HOLD`` seconds, so the extender's ``httpTimeout`` is raised to ``HTTP_TIMEOUT``
  (docs/gangs.md: at least the hold plus 2 s); its access log (every verb) tells when
  kube-scheduler first asked about a probe (bench/chaos/attribution.py);
* kube-controller-manager with its resourceclaim-controller only (straight to kube-apiserver,
  as a control-plane component beside it): it makes the claims of ResourceClaimTemplates,
  takes gone pods out of ``reservedFor``, deallocates claims nobody uses and removes their
  finalizer (docs/dra.md);
* the claim gate (claimgate.py), a validating admission webhook on ``resourceclaims/status``
  through which the claim faults refuse or hold a scheduler's writes;
* the supervisor: as the kubelet restarts a container whose process died, it restarts any
  of these processes that exits (one second later, without crash-loop back-off), and
  counts it. Whether each one is back and serving is :meth:`ChaosCluster.problems`.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml

from bench.chaos.claimgate import ClaimGate
from bench.chaos.proxy import FaultProxy
from bench.chaos.workload import (
    GANG_APISERVER_ARGS,
    NAMESPACE,
    POOLS,
    STANDALONE,
    SYSTEM_NAMESPACE,
    WEBHOOK,
)
from tests.e2e import configs, processes
from tests.e2e.controlplane import (
    KUBE_SCHEDULER_USER,
    KubeControllerManager,
    KubeScheduler,
    start_kube_controller_manager,
    start_kube_scheduler,
)
from tests.fakeapi.client import KubeTestClient
from tests.fakeapi.envtest import EnvtestAssets, EnvtestControlPlane
from tests.fakeapi.kubeconfig import write_kubeconfig
from tests.reliability.servers import alive, children

STANDALONE_POLICY = configs.CONFIG / "policy-devices.yaml"
WEBHOOK_POLICY = configs.CONFIG / "policy-webhook-devices.yaml"
LEASE_NAME = STANDALONE
WORKERS = 2
IDENTITY = re.compile(r"campaigning for lease \S+ as (\S+)")
RESTART_DELAY = 1.0
GANG_HOLD = 10.0  # extender serve --gang-hold: how long a held /bind waits for its group
HTTP_TIMEOUT = "12s"  # kube-scheduler's extender httpTimeout: the hold plus 2 s


@dataclass(frozen=True)
class Election:
    """The replicas' leader election timings (seconds)."""

    lease: float = 4.0
    renew: float = 3.0
    retry: float = 0.5

    def args(self) -> list[str]:
        return ["--leader-elect", "--lease-namespace", SYSTEM_NAMESPACE, "--lease-name", LEASE_NAME,
                "--lease-duration", str(self.lease), "--renew-deadline", str(self.renew),
                "--retry-period", str(self.retry)]


@dataclass
class Supervised:
    """One of our processes as the supervisor restarts it."""

    name: str
    process: processes.ExtenderProcess
    restarts: int = 0
    failed_starts: int = 0

    @property
    def pid(self) -> int | None:
        proc = self.process.process
        return proc.pid if proc is not None and proc.poll() is None else None

    def identity(self) -> str:
        """Its leader-election identity since its last start (from its log)."""
        found = IDENTITY.findall(self.process.log())
        return found[-1] if found else ""


@dataclass
class ChaosCluster:
    assets: EnvtestAssets
    workdir: Path
    election: Election = field(default_factory=Election)
    log: Callable[[str], None] = print
    plane: EnvtestControlPlane | None = None
    proxy: FaultProxy | None = None
    replicas: list[Supervised] = field(default_factory=list)
    webhook: Supervised | None = None
    scheduler: KubeScheduler | None = None
    scheduler_exits: int = 0
    controller_manager: KubeControllerManager | None = None
    controller_manager_paused: bool = False  # stopped on purpose (claim-controller-restart)
    controller_manager_exits: int = 0
    gate: ClaimGate | None = None
    _kube: KubeTestClient | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _supervisor: threading.Thread | None = None

    # ---- start and stop -----------------------------------------------------------------------

    def start_control_plane(self) -> ChaosCluster:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.plane = EnvtestControlPlane(self.assets, extra_apiserver_args=["--watch-cache=false", *GANG_APISERVER_ARGS],
                                         workdir=self.workdir / "controlplane").start()
        self.proxy = FaultProxy(("127.0.0.1", self.plane.secure_port)).start()
        serving = self.plane.ca.serving(common_name="chaos-claim-gate").write(
            self.workdir / "claim-gate.crt", self.workdir / "claim-gate.key")
        self.gate = ClaimGate(serving, self.plane.ca_file, NAMESPACE, f"{POOLS[STANDALONE]}-").start()
        return self

    def register_claim_gate(self) -> None:
        """Point kube-apiserver at the claim gate (the chaos namespace must exist: its label selects)."""
        assert self.gate is not None
        self.kube.call("POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                       self.gate.configuration())

    def start_controller_manager(self) -> KubeControllerManager:
        assert self.plane is not None
        self.controller_manager = start_kube_controller_manager(self.plane, workdir=self.workdir / "logs")
        return self.controller_manager

    @property
    def kube(self) -> KubeTestClient:
        """The harness's own client, straight to kube-apiserver (not through the proxy)."""
        if self._kube is None:
            self._kube = self.client()
        return self._kube

    def client(self) -> KubeTestClient:
        """A new admin client straight to kube-apiserver, for a thread of its own."""
        assert self.plane is not None
        return KubeTestClient(self.plane.url, token=self.plane.token, verify=str(self.plane.ca_file))

    def _proxied(self, kubeconfig: Path, name: str) -> Path:
        """A copy of `kubeconfig` that reaches kube-apiserver through the proxy."""
        assert self.proxy is not None
        config = yaml.safe_load(kubeconfig.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = self.proxy.url
        path = self.workdir / f"{name}.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        return path

    def start_schedulers(self) -> None:
        """Both replicas, the webhook, then kube-scheduler; the supervisor from then on."""
        assert self.plane is not None and self.proxy is not None
        admin = write_kubeconfig(self.workdir / "admin-direct.kubeconfig", self.plane.url, token=self.plane.token,
                                 ca_file=str(self.plane.ca_file), context="chaos")
        admin = self._proxied(admin, "admin-proxied")
        logs = self.workdir / "logs"
        for i in range(2):
            replica = processes.schedule(admin, logs, scheduler_name=STANDALONE, policy=STANDALONE_POLICY,
                                         extra=self.election.args(), name=f"replica-{i}")
            self.replicas.append(Supervised(f"replica-{i}", replica.start(timeout=120)))
        serve = processes.serve(admin, logs, policy=WEBHOOK_POLICY, scheduler_names=(WEBHOOK,),
                                extra=["--workers", str(WORKERS), "--lease-namespace", SYSTEM_NAMESPACE,
                                       "--gang-hold", str(GANG_HOLD), "--access-log"],
                                name="webhook")
        self.webhook = Supervised("webhook", serve.start(timeout=120))
        self.scheduler = self._start_kube_scheduler()
        self.start_controller_manager()
        self._supervisor = threading.Thread(target=self._supervise, name="chaos-supervisor", daemon=True)
        self._supervisor.start()

    def _kube_scheduler_config(self) -> dict[str, Any]:
        assert self.plane is not None and self.webhook is not None
        kubeconfig = self._proxied(self.plane.user_kubeconfig(KUBE_SCHEDULER_USER), "kube-scheduler")
        config = configs.kube_scheduler_config(configs.HTTP_EXAMPLE, kubeconfig=kubeconfig,
                                               scheduler_name=WEBHOOK, port=self.webhook.process.port)
        (profile,) = config["profiles"]
        for extender in config["extenders"]:
            extender["httpTimeout"] = HTTP_TIMEOUT
        profile["pluginConfig"] = [{"name": "NodeResourcesFit", "args": {
            "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "NodeResourcesFitArgs",
            "ignoredResourceGroups": ["extender.example"]}}]
        return config

    def _start_kube_scheduler(self) -> KubeScheduler:
        assert self.plane is not None
        return start_kube_scheduler(self.plane, self._kube_scheduler_config(), name="kube-scheduler",
                                    workdir=self.workdir / "logs")

    def stop(self) -> None:
        self._stop.set()
        if self._supervisor is not None:
            self._supervisor.join(150)
        for pid in self.paused_pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)
        if self.scheduler is not None:
            self.scheduler.stop()
        if self.controller_manager is not None:
            self.controller_manager.stop()
        for supervised in [*self.replicas, *([self.webhook] if self.webhook else [])]:
            supervised.process.stop()
        if self.proxy is not None:
            self.proxy.stop()
        if self.gate is not None:
            self.gate.stop()
        if self._kube is not None:
            self._kube.close()
        if self.plane is not None:
            self.plane.stop()

    # ---- the supervisor ---------------------------------------------------------------------------

    def _supervise(self) -> None:
        while not self._stop.wait(0.3):
            for supervised in [*self.replicas, *([self.webhook] if self.webhook else [])]:
                proc = supervised.process.process
                if proc is not None and proc.poll() is not None and not self._stop.is_set():
                    self._restart(supervised, proc.returncode)
            if self.scheduler is not None and self.scheduler.process is not None \
                    and self.scheduler.process.poll() is not None and not self._stop.is_set():
                self.scheduler_exits += 1
                self.log(f"# kube-scheduler exited with {self.scheduler.process.returncode}: restarting it")
                with contextlib.suppress(Exception):
                    self.scheduler = self._start_kube_scheduler()
            manager = self.controller_manager
            if manager is not None and not self.controller_manager_paused and manager.process is not None \
                    and manager.process.poll() is not None and not self._stop.is_set():
                self.controller_manager_exits += 1
                self.log(f"# kube-controller-manager exited with {manager.process.returncode}: restarting it")
                with contextlib.suppress(Exception):
                    manager.start()

    def _restart(self, supervised: Supervised, code: int | None) -> None:
        time.sleep(RESTART_DELAY)
        with self._lock:
            supervised.restarts += 1
        try:
            supervised.process.start(timeout=120)
        except (RuntimeError, TimeoutError) as exc:  # tried again at the next round
            supervised.failed_starts += 1
            self.log(f"# {supervised.name} (exit code {code}) did not start again: {str(exc).splitlines()[0]}")

    # ---- what faults aim at -------------------------------------------------------------------------

    def leader(self) -> Supervised | None:
        """The replica holding the lease (by its identity), if it is alive."""
        try:
            lease = self.kube.get_lease(LEASE_NAME, SYSTEM_NAMESPACE)
        except Exception:  # noqa: BLE001 - the API server is down
            return None
        holder = ((lease or {}).get("spec") or {}).get("holderIdentity") or ""
        for replica in self.replicas:
            if holder and replica.pid is not None and replica.identity() == holder:
                return replica
        return None

    def webhook_master(self) -> int | None:
        return self.webhook.pid if self.webhook is not None else None

    def webhook_workers(self) -> list[int]:
        master = self.webhook_master()
        return [pid for pid in children(master) if alive(pid)] if master else []

    def paused_pids(self) -> list[int]:
        found = []
        pids = [r.pid for r in self.replicas] + [self.webhook_master(), *self.webhook_workers()]
        for pid in pids:
            with contextlib.suppress(OSError, IndexError):
                if pid and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T":
                    found.append(pid)
        return found

    # ---- health -------------------------------------------------------------------------------------

    def problems(self) -> list[str]:
        """What is not back yet: each entry names a process and why (empty: all serving)."""
        assert self.plane is not None
        found = []
        if not self.plane.running or not _ok(f"{self.plane.url}/readyz", self.plane):
            found.append("kube-apiserver: not ready")
        for replica in self.replicas:
            if replica.pid is None or replica.process.get("/readyz")[0] != 200:
                found.append(f"{replica.name}: not ready")
        if self.leader() is None:
            found.append("replicas: no live replica holds the lease")
        if self.webhook is None or self.webhook.pid is None:
            found.append("webhook: master not running")
        else:
            workers = self.webhook_workers()
            if len(workers) != WORKERS:
                found.append(f"webhook: {len(workers)} of {WORKERS} workers")
            if self.webhook.process.get("/readyz")[0] != 200:
                found.append("webhook: not ready")
        scheduler = self.scheduler
        if scheduler is None or scheduler.process is None or scheduler.process.poll() is not None:
            found.append("kube-scheduler: not running")
        else:
            try:
                ready = requests.get(f"{scheduler.url}/readyz", verify=str(scheduler.ca_file), timeout=5).ok
            except requests.RequestException:
                ready = False
            if not ready:
                found.append("kube-scheduler: not ready")
        manager = self.controller_manager
        if manager is None or manager.process is None or manager.process.poll() is not None:
            found.append("kube-controller-manager: not running")
        found += [f"paused process {pid}" for pid in self.paused_pids()]
        return found

    def restarts(self) -> dict[str, int]:
        counts = {s.name: s.restarts for s in [*self.replicas, *([self.webhook] if self.webhook else [])]}
        counts["kube-scheduler"] = self.scheduler_exits
        counts["kube-controller-manager"] = self.controller_manager_exits
        return counts


def _ok(url: str, plane: EnvtestControlPlane) -> bool:
    try:
        reply = requests.get(url, headers={"Authorization": f"Bearer {plane.token}"}, verify=str(plane.ca_file),
                             timeout=5)
    except requests.RequestException:
        return False
    return reply.status_code == 200
