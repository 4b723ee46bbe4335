"""`extender serve` and `extender schedule` as subprocesses, the way they run in a cluster.

Started with ``python -m extender`` from the repository, output to a log file (a pipe
would fill up and stall the process), ready once ``/readyz`` answers 200, stopped with
SIGTERM. Nothing here imports pytest, so a benchmark can start the same processes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[2]


def terminate(proc: subprocess.Popen[bytes] | None, timeout: float = 20.0) -> int | None:
    """SIGTERM, then SIGKILL after `timeout`; the exit code (None if never started)."""
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return proc.returncode


@dataclass
class ExtenderProcess:
    """One ``extender <command>`` process with a health endpoint on ``port``."""

    args: Sequence[str]
    port: int
    log_path: Path
    scheme: str = "http"
    tls: ssl.SSLContext | None = None  # how to reach /readyz over HTTPS (client certificate)
    env: Mapping[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self, timeout: float = 30.0) -> ExtenderProcess:
        env = {**os.environ, **self.env}
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)  # serve sets up its own
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "extender", *self.args],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"extender {self.args[0]} exited with {self.process.returncode}:\n{self.log()[-4000:]}"
                )
            if self.get("/readyz")[0] == 200:
                return self
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"extender {self.args[0]} not ready after {timeout}s:\n{self.log()[-4000:]}")

    def get(self, path: str) -> tuple[int, str]:
        """GET a path of the health/metrics endpoint: (status, body); (0, error) if unreachable."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=5, context=self.tls) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")
        except (OSError, ValueError) as exc:
            return 0, str(exc)

    def metric(self, name: str, **labels: str) -> float:
        """The sum of the samples of ``name`` on /metrics whose labels include ``labels``."""
        status, text = self.get("/metrics")
        assert status == 200, text
        total = 0.0
        for line in text.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            sample, _, value = line.rpartition(" ")
            metric, _, label_text = sample.partition("{")
            have = dict(
                pair.split("=", 1) for pair in label_text.rstrip("}").split(",") if "=" in pair
            )
            if metric == name and all(have.get(k) == f'"{v}"' for k, v in labels.items()):
                total += float(value)
        return total

    def stop(self, timeout: float = 20.0) -> int | None:
        return terminate(self.process, timeout)

    def __enter__(self) -> ExtenderProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(
    kubeconfig: Path,
    workdir: Path,
    *,
    policy: Path | None = None,
    scheduler_names: Sequence[str] = ("default-scheduler",),
    tls: tuple[Path, Path, Path] | None = None,
    client_context: ssl.SSLContext | None = None,
    extra: Sequence[str] = (),
    name: str = "serve",
) -> ExtenderProcess:
    """``extender serve`` on a free loopback port, its cluster state from the API server.
    ``tls`` is (certificate, key, client CA): HTTPS with mutual TLS; ``client_context`` is
    then how the test itself reaches /readyz and /metrics."""
    port = free_port()
    args = ["serve", "--bind", f"127.0.0.1:{port}", "--source", "kube", "--kubeconfig", str(kubeconfig),
            "--workers", "1", "--log-level", "INFO"]  # fmt: skip
    if policy is not None:
        args += ["--policy", str(policy)]
    for scheduler_name in scheduler_names:
        args += ["--scheduler-name", scheduler_name]
    if tls is not None:
        cert, key, client_ca = tls
        args += ["--tls-cert", str(cert), "--tls-key", str(key), "--client-ca", str(client_ca)]
    args += list(extra)
    return ExtenderProcess(
        args, port, workdir / f"{name}.log",
        scheme="https" if tls else "http", tls=client_context,
    )  # fmt: skip


def schedule(
    kubeconfig: Path,
    workdir: Path,
    *,
    scheduler_name: str = "extender-scheduler",
    policy: Path | None = None,
    extra: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    name: str = "schedule",
) -> ExtenderProcess:
    """``extender schedule`` with its health/metrics endpoint on a free loopback port."""
    port = free_port()
    args = ["schedule", "--kubeconfig", str(kubeconfig), "--scheduler-name", scheduler_name,
            "--metrics-bind", f"127.0.0.1:{port}"]  # fmt: skip
    if policy is not None:
        args += ["--policy", str(policy)]
    args += list(extra)
    return ExtenderProcess(args, port, workdir / f"{name}.log", env=dict(env or {}))


def stop_all(processes: Sequence[ExtenderProcess]) -> None:
    for process in processes:
        with contextlib.suppress(Exception):
            process.stop()
