"""A real control plane with kube-scheduler: etcd, kube-apiserver, kube-scheduler and, for
dynamic resource allocation, kube-controller-manager processes.

For the end-to-end tests and for anything else that wants kube-scheduler on loopback
(a benchmark, a demo); nothing here imports pytest. The binaries come from
``KUBEBUILDER_ASSETS`` (``bash ../shared/tools/k8s-test-binaries.sh`` builds them and
prints the export line)::

    with ControlPlane() as cp:
        scheduler = cp.start_kube_scheduler(scheduler_configuration("default-scheduler"))
        ...  # cp.kubeconfig, cp.client (a KubeTestClient), scheduler.log()

kube-scheduler runs as the user ``system:kube-scheduler`` (a client certificate from the
control plane's CA), which kube-apiserver's bootstrap RBAC already binds to the
``system:kube-scheduler`` and ``system:volume-scheduler`` roles: exactly the permissions
of a kubeadm cluster's scheduler. Leader election is off; its serving endpoint listens on
a free loopback port with a certificate from the same CA, and ``start`` returns once its
``/readyz`` (informers synced) answers.

kube-controller-manager runs only the controllers a test asks for (by default the
``resourceclaim-controller``, which turns a pod's ResourceClaimTemplates into its
ResourceClaims, named ``<pod>-<claim>-<random>`` and owned by the pod: pkg/controller/resourceclaim;
on a kubelet-less control plane no other controller is needed for DRA), as the admin
with its own credentials (``--use-service-account-credentials=false``: no token
controller runs to mint them), leader election off; ``start`` returns once its
``/healthz?verbose`` lists every one of those controllers as started. The binary is
``TEST_ASSET_KUBE_CONTROLLER_MANAGER`` or ``$KUBEBUILDER_ASSETS/kube-controller-manager``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml

from tests.e2e.processes import terminate
from tests.fakeapi.client import KubeTestClient
from tests.fakeapi.envtest import EnvtestAssets, EnvtestControlPlane, find_assets
from tests.helpers import free_port

#: Its canonical name (cmd/kube-controller-manager/names/controller_names.go, v1.36.3);
#: ``resource-claim-controller`` is an alias of it (cmd/kube-controller-manager/app/resource.go).
RESOURCE_CLAIM_CONTROLLER = "resourceclaim-controller"

#: The user kube-apiserver's bootstrap policy gives the scheduler's roles to.
KUBE_SCHEDULER_USER = "system:kube-scheduler"
START_TIMEOUT = 60.0


def scheduler_configuration(
    scheduler_name: str = "default-scheduler",
    *,
    extenders: Sequence[Mapping[str, Any]] = (),
    kubeconfig: str | Path = "",
    profile: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A KubeSchedulerConfiguration with one profile and leader election off (one instance
    per test: waiting for a lease would only slow the start)."""
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": scheduler_name, **(profile or {})}],
    }
    if kubeconfig:
        config["clientConnection"] = {"kubeconfig": str(kubeconfig)}
    if extenders:
        config["extenders"] = [dict(e) for e in extenders]
    return config


class _ServedProcess:
    """What a control-plane process started here shares: its log file and its HTTPS endpoint."""

    name: str
    workdir: Path
    port: int

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.name}.log"

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@dataclass
class KubeScheduler(_ServedProcess):
    """One kube-scheduler process. ``config`` is a KubeSchedulerConfiguration (a dict); its
    ``clientConnection.kubeconfig`` must name a kubeconfig file."""

    binary: Path
    config: Mapping[str, Any]
    workdir: Path
    ca_file: Path
    serving: tuple[Path, Path]  # certificate and key for its HTTPS endpoint
    name: str = "kube-scheduler"
    extra_args: Sequence[str] = ()
    start_timeout: float = START_TIMEOUT
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> KubeScheduler:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config_path = self.workdir / f"{self.name}.yaml"
        config_path.write_text(yaml.safe_dump(dict(self.config), sort_keys=False))
        self.port = free_port()
        args = [
            str(self.binary),
            f"--config={config_path}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--tls-cert-file={self.serving[0]}",
            f"--tls-private-key-file={self.serving[1]}",
            *self.extra_args,
        ]
        self.process = _launch(args, self.log_path)
        try:
            _wait_ready(self.process, f"{self.url}/readyz", self.ca_file, self.start_timeout, self.name,
                        self.log, lambda body: True)
        except TimeoutError:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM (SIGKILL after ``timeout``); returns the exit code."""
        return terminate(self.process, timeout)


def _launch(args: Sequence[str], log_path: Path) -> subprocess.Popen[bytes]:
    """Start a binary with its output appended to ``log_path`` (a pipe would fill up)."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(list(args), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def _wait_ready(process: subprocess.Popen[bytes], url: str, ca_file: Path, timeout: float, name: str,
                log: Callable[[], str], ready: Callable[[str], bool]) -> None:
    """Poll ``url`` until it answers 200 with a body ``ready`` accepts; RuntimeError (with the
    log's tail) if the process exits first, TimeoutError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode}:\n{log()[-3000:]}")
        with contextlib.suppress(requests.RequestException):
            reply = requests.get(url, verify=str(ca_file), timeout=2)
            if reply.status_code == 200 and ready(reply.text):
                return
        time.sleep(0.2)
    raise TimeoutError(f"{name} not ready after {timeout}s:\n{log()[-3000:]}")


def start_kube_scheduler(
    plane: EnvtestControlPlane,
    config: Mapping[str, Any],
    *,
    binary: Path | None = None,
    name: str = "kube-scheduler",
    workdir: Path | None = None,
    extra_args: Sequence[str] = (),
) -> KubeScheduler:
    """Start kube-scheduler against a running control plane, as ``system:kube-scheduler``
    unless ``config`` already names a kubeconfig."""
    binary = binary or plane.assets.kube_scheduler
    if binary is None:
        raise FileNotFoundError("no kube-scheduler binary (KUBEBUILDER_ASSETS/kube-scheduler)")
    assert plane.workdir is not None
    workdir = workdir or plane.workdir / "schedulers"
    config = dict(config)
    client = dict(config.get("clientConnection") or {})
    if not client.get("kubeconfig"):
        client["kubeconfig"] = str(plane.user_kubeconfig(KUBE_SCHEDULER_USER))
        config["clientConnection"] = client
    workdir.mkdir(parents=True, exist_ok=True)
    serving = plane.ca.serving(common_name=name).write(
        workdir / f"{name}-serving.crt", workdir / f"{name}-serving.key"
    )
    scheduler = KubeScheduler(
        binary, config, workdir, plane.ca_file, serving, name=name, extra_args=extra_args
    )
    return scheduler.start()


def find_kube_controller_manager(env: Mapping[str, str] | None = None) -> Path | None:
    """The kube-controller-manager binary, named as envtest names its assets
    (``TEST_ASSET_KUBE_CONTROLLER_MANAGER``, else ``$KUBEBUILDER_ASSETS/kube-controller-manager``);
    None when there is none (bash ../shared/tools/k8s-test-binaries.sh builds it last)."""
    env = os.environ if env is None else env
    base = env.get("KUBEBUILDER_ASSETS")
    path = env.get("TEST_ASSET_KUBE_CONTROLLER_MANAGER") or (str(Path(base) / "kube-controller-manager") if base else "")
    candidate = Path(path) if path else None
    return candidate if candidate and candidate.is_file() and os.access(candidate, os.X_OK) else None


@dataclass
class KubeControllerManager(_ServedProcess):
    """One kube-controller-manager process running only ``controllers``, as the user of
    ``kubeconfig``. Its HTTPS endpoint is only there to tell when the controllers have
    started: ``/healthz`` is always allowed (--authorization-always-allow-paths' default), so
    no delegated authentication is set up for it (as for kube-scheduler here)."""

    binary: Path
    kubeconfig: Path
    workdir: Path
    ca_file: Path
    serving: tuple[Path, Path]  # certificate and key for its HTTPS endpoint
    controllers: Sequence[str] = (RESOURCE_CLAIM_CONTROLLER,)
    name: str = "kube-controller-manager"
    extra_args: Sequence[str] = ()
    start_timeout: float = START_TIMEOUT
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> KubeControllerManager:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        args = [
            str(self.binary),
            f"--kubeconfig={self.kubeconfig}",
            f"--controllers={','.join(self.controllers)}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--tls-cert-file={self.serving[0]}",
            f"--tls-private-key-file={self.serving[1]}",
            "--leader-elect=false",
            "--use-service-account-credentials=false",
            *self.extra_args,
        ]
        self.process = _launch(args, self.log_path)
        # A controller's health check is added once it has been started
        # (cmd/kube-controller-manager/app/controllermanager.go, BuildControllers).
        wanted = [f"[+]{controller} ok" for controller in self.controllers]
        try:
            _wait_ready(self.process, f"{self.url}/healthz?verbose", self.ca_file, self.start_timeout, self.name,
                        self.log, lambda body: all(line in body for line in wanted))
        except TimeoutError:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM (SIGKILL after ``timeout``); returns the exit code."""
        return terminate(self.process, timeout)


def start_kube_controller_manager(
    plane: EnvtestControlPlane,
    *,
    binary: Path | None = None,
    controllers: Sequence[str] = (RESOURCE_CLAIM_CONTROLLER,),
    name: str = "kube-controller-manager",
    workdir: Path | None = None,
    extra_args: Sequence[str] = (),
) -> KubeControllerManager:
    """Start kube-controller-manager against a running control plane, as its admin."""
    binary = binary or find_kube_controller_manager()
    if binary is None:
        raise FileNotFoundError("no kube-controller-manager binary (KUBEBUILDER_ASSETS/kube-controller-manager)")
    assert plane.workdir is not None
    workdir = workdir or plane.workdir / "controller-managers"
    workdir.mkdir(parents=True, exist_ok=True)
    serving = plane.ca.serving(common_name=name).write(workdir / f"{name}-serving.crt", workdir / f"{name}-serving.key")
    manager = KubeControllerManager(binary, plane.kubeconfig, workdir, plane.ca_file, serving,
                                    controllers=tuple(controllers), name=name, extra_args=extra_args)
    return manager.start()


@dataclass
class ControlPlane:
    """etcd, kube-apiserver and the kube-schedulers and kube-controller-managers started
    through it; a context manager."""

    assets: EnvtestAssets | None = None
    apiserver_args: Sequence[str] = ()
    #: Passed to EnvtestControlPlane: for a node (tests.e2e.node), whose pods reach kube-apiserver
    #: through the ``kubernetes`` Service with projected ServiceAccount tokens.
    serving_hosts: Sequence[str] = ()
    service_account_admission: bool = False
    kubelet_client: bool = False
    plane: EnvtestControlPlane | None = None
    schedulers: list[KubeScheduler] = field(default_factory=list)
    controller_managers: list[KubeControllerManager] = field(default_factory=list)
    _client: KubeTestClient | None = None

    def start(self) -> ControlPlane:
        assets = self.assets or find_assets()
        if assets is None or assets.kube_scheduler is None:
            raise FileNotFoundError(
                "KUBEBUILDER_ASSETS must hold etcd, kube-apiserver and kube-scheduler "
                "(bash ../shared/tools/k8s-test-binaries.sh prints the export line)"
            )
        self.assets = assets
        workdir = Path(tempfile.mkdtemp(prefix="controlplane-"))
        self.plane = EnvtestControlPlane(
            assets, extra_apiserver_args=self.apiserver_args, workdir=workdir,
            extra_serving_hosts=self.serving_hosts, service_account_admission=self.service_account_admission,
            kubelet_client=self.kubelet_client,
        )
        self.plane._owns_workdir = True  # removed on stop, as a workdir it created itself
        self.plane.start()
        return self

    @property
    def kubeconfig(self) -> Path:
        """The admin's kubeconfig (system:masters)."""
        assert self.plane is not None
        return self.plane.kubeconfig

    @property
    def client(self) -> KubeTestClient:
        """A test client as the admin, trusting the control plane's CA."""
        assert self.plane is not None
        if self._client is None:
            self._client = KubeTestClient(
                self.plane.url, token=self.plane.token, verify=str(self.plane.ca_file)
            )
        return self._client

    def start_kube_scheduler(
        self, config: Mapping[str, Any] | None = None, *, name: str = "", extra_args: Sequence[str] = ()
    ) -> KubeScheduler:
        assert self.plane is not None, "start() first"
        scheduler = start_kube_scheduler(
            self.plane,
            config or scheduler_configuration(),
            name=name or f"kube-scheduler-{len(self.schedulers) + 1}",
            extra_args=extra_args,
        )
        self.schedulers.append(scheduler)
        return scheduler

    def start_kube_controller_manager(
        self, controllers: Sequence[str] = (RESOURCE_CLAIM_CONTROLLER,), *, name: str = "",
        extra_args: Sequence[str] = (),
    ) -> KubeControllerManager:
        assert self.plane is not None, "start() first"
        manager = start_kube_controller_manager(
            self.plane, controllers=controllers,
            name=name or f"kube-controller-manager-{len(self.controller_managers) + 1}",
            extra_args=extra_args,
        )  # fmt: skip
        self.controller_managers.append(manager)
        return manager

    def stop(self) -> None:
        for scheduler in reversed(self.schedulers):
            scheduler.stop()
        self.schedulers.clear()
        for manager in reversed(self.controller_managers):
            manager.stop()
        self.controller_managers.clear()
        if self._client is not None:
            self._client.close()
            self._client = None
        if self.plane is not None:
            self.plane.stop()

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
