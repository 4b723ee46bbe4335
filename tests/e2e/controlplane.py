"""A real control plane with kube-scheduler: etcd, kube-apiserver and kube-scheduler processes.

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
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml

from tests.e2e.processes import terminate
from tests.fakeapi.client import KubeTestClient
from tests.fakeapi.envtest import EnvtestAssets, EnvtestControlPlane, find_assets
from tests.helpers import free_port

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


@dataclass
class KubeScheduler:
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

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.name}.log"

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

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
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.process.returncode}:\n{self.log()[-3000:]}"
                )
            with contextlib.suppress(requests.RequestException):
                reply = requests.get(f"{self.url}/readyz", verify=str(self.ca_file), timeout=2)
                if reply.status_code == 200:
                    return
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"{self.name} not ready after {self.start_timeout}s:\n{self.log()[-3000:]}")

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM (SIGKILL after ``timeout``); returns the exit code."""
        return terminate(self.process, timeout)


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


@dataclass
class ControlPlane:
    """etcd, kube-apiserver and the kube-schedulers started through it; a context manager."""

    assets: EnvtestAssets | None = None
    apiserver_args: Sequence[str] = ()
    plane: EnvtestControlPlane | None = None
    schedulers: list[KubeScheduler] = field(default_factory=list)
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
            assets, extra_apiserver_args=self.apiserver_args, workdir=workdir
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

    def stop(self) -> None:
        for scheduler in reversed(self.schedulers):
            scheduler.stop()
        self.schedulers.clear()
        if self._client is not None:
            self._client.close()
            self._client = None
        if self.plane is not None:
            self.plane.stop()

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
