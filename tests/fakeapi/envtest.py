"""Run a real etcd + kube-apiserver for the same tests, following controller-runtime's envtest.

When ``KUBEBUILDER_ASSETS`` names a directory with ``etcd`` and ``kube-apiserver`` (as
``setup-envtest use -p path`` prints), the ``apiserver`` fixture starts them instead of
the fake, so the fake's fidelity can be checked against the real thing. The flags are
envtest's defaults (pkg/internal/testing/controlplane): loopback only, random free ports,
a temporary data/cert directory, ``--disable-admission-plugins=ServiceAccount`` (no
controller creates the default ServiceAccount), RBAC, a generated service-account signing
key. Authentication is a static token for a ``system:masters`` user, and the kubeconfig
skips TLS verification of the self-signed serving certificate the apiserver writes into
its ``--cert-dir``. ``TEST_ASSET_ETCD`` / ``TEST_ASSET_KUBE_APISERVER`` override single
binaries and ``KUBEBUILDER_CONTROLPLANE_START_TIMEOUT`` / ``..._STOP_TIMEOUT`` the
timeouts, as in envtest.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .kubeconfig import write_kubeconfig

ADMIN_USER = "envtest-admin"
ADMIN_GROUPS = ("system:masters",)


@dataclass(frozen=True)
class EnvtestAssets:
    etcd: Path
    kube_apiserver: Path


def find_assets(env: Mapping[str, str] | None = None) -> EnvtestAssets | None:
    """The binaries to use, or None when envtest is not configured (then the fake is used)."""
    env = os.environ if env is None else env
    base = env.get("KUBEBUILDER_ASSETS")
    etcd = env.get("TEST_ASSET_ETCD") or (str(Path(base) / "etcd") if base else None)
    apiserver = env.get("TEST_ASSET_KUBE_APISERVER") or (
        str(Path(base) / "kube-apiserver") if base else None
    )
    if not etcd or not apiserver:
        return None
    etcd_path, apiserver_path = Path(etcd), Path(apiserver)
    if not (etcd_path.is_file() and os.access(etcd_path, os.X_OK)):
        return None
    if not (apiserver_path.is_file() and os.access(apiserver_path, os.X_OK)):
        return None
    return EnvtestAssets(etcd_path, apiserver_path)


def parse_duration(text: str | None, default: float) -> float:
    """Go duration strings as envtest reads them (``20s``, ``1m30s``, ``500ms``); plain numbers are seconds."""
    if not text:
        return default
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
    total, pos = 0.0, 0
    for m in re.finditer(r"(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)", text):
        if m.start() != pos:
            raise ValueError(f"invalid duration {text!r}")
        total += float(m.group(1)) * units[m.group(2)]
        pos = m.end()
    if pos != len(text):
        raise ValueError(f"invalid duration {text!r}")
    return total


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (racy by nature, as envtest's addr.Suggest)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def etcd_args(
    data_dir: Path, client_port: int, peer_port: int, unsafe_no_fsync: bool = True
) -> list[str]:
    """envtest's etcd flags: client and peer URLs on loopback, a private data dir."""
    client = f"http://127.0.0.1:{client_port}"
    peer = f"http://127.0.0.1:{peer_port}"
    args = [
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=default={peer}",
        "--name=default",
    ]
    if unsafe_no_fsync:
        args.append("--unsafe-no-fsync=true")
    return args


def apiserver_args(
    *,
    etcd_url: str,
    cert_dir: Path,
    secure_port: int,
    sa_key: Path,
    sa_pub: Path,
    token_file: Path,
    authorization_mode: str = "RBAC",
    extra: Sequence[str] = (),
) -> list[str]:
    """envtest's kube-apiserver defaults, with static-token authentication."""
    return [
        "--advertise-address=127.0.0.1",
        "--bind-address=127.0.0.1",
        f"--secure-port={secure_port}",
        f"--etcd-servers={etcd_url}",
        f"--cert-dir={cert_dir}",
        "--service-cluster-ip-range=10.0.0.0/24",
        "--allow-privileged=true",
        "--disable-admission-plugins=ServiceAccount",
        f"--authorization-mode={authorization_mode}",
        f"--token-auth-file={token_file}",
        f"--service-account-issuer=https://127.0.0.1:{secure_port}/",
        f"--service-account-key-file={sa_pub}",
        f"--service-account-signing-key-file={sa_key}",
        *extra,
    ]


def generate_service_account_key(directory: Path) -> tuple[Path, Path]:
    """An RSA key pair for signing service-account tokens (sa-signer.key / sa-signer.pub)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key_path, pub_path = directory / "sa-signer.key", directory / "sa-signer.pub"
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    pub_path.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    key_path.chmod(0o600)
    return key_path, pub_path


def write_token_file(
    path: Path, token: str, user: str = ADMIN_USER, groups: Sequence[str] = ADMIN_GROUPS
) -> Path:
    """The --token-auth-file CSV: ``token,user,uid,"group1,group2"``."""
    path.write_text(f'{token},{user},{user},"{",".join(groups)}"\n')
    path.chmod(0o600)
    return path


@dataclass
class EnvtestControlPlane:
    """etcd + kube-apiserver as child processes; ``start`` waits for ``/readyz``."""

    assets: EnvtestAssets
    authorization_mode: str = "RBAC"
    extra_apiserver_args: Sequence[str] = ()
    start_timeout: float = field(
        default_factory=lambda: parse_duration(
            os.environ.get("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT"), 60.0
        )
    )
    stop_timeout: float = field(
        default_factory=lambda: parse_duration(
            os.environ.get("KUBEBUILDER_CONTROLPLANE_STOP_TIMEOUT"), 20.0
        )
    )
    workdir: Path | None = None
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    secure_port: int = 0
    _processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _owns_workdir: bool = False

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.secure_port}"

    @property
    def kubeconfig(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "kubeconfig"

    def _spawn(self, args: list[str], log_name: str) -> subprocess.Popen[bytes]:
        assert self.workdir is not None
        log = open(self.workdir / log_name, "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        log.close()
        self._processes.append(proc)
        return proc

    def start(self) -> EnvtestControlPlane:
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="envtest-"))
            self._owns_workdir = True
        data_dir, cert_dir = self.workdir / "etcd", self.workdir / "certs"
        data_dir.mkdir(parents=True, exist_ok=True)
        cert_dir.mkdir(parents=True, exist_ok=True)
        client_port, peer_port = free_port(), free_port()
        self.secure_port = free_port()
        etcd = self._spawn(
            [
                str(self.assets.etcd),
                *etcd_args(data_dir, client_port, peer_port, self._etcd_supports_no_fsync()),
            ],
            "etcd.log",
        )
        self._wait_http(f"http://127.0.0.1:{client_port}/health", etcd, "etcd")
        sa_key, sa_pub = generate_service_account_key(cert_dir)
        token_file = write_token_file(self.workdir / "tokens.csv", self.token)
        args = apiserver_args(
            etcd_url=f"http://127.0.0.1:{client_port}",
            cert_dir=cert_dir,
            secure_port=self.secure_port,
            sa_key=sa_key,
            sa_pub=sa_pub,
            token_file=token_file,
            authorization_mode=self.authorization_mode,
            extra=self.extra_apiserver_args,
        )
        apiserver = self._spawn([str(self.assets.kube_apiserver), *args], "kube-apiserver.log")
        self._wait_http(f"{self.url}/readyz", apiserver, "kube-apiserver")
        self._wait_http(f"{self.url}/api/v1/namespaces/default", apiserver, "the default namespace")
        write_kubeconfig(
            self.kubeconfig, self.url, token=self.token, insecure=True, context="envtest"
        )
        return self

    def _etcd_supports_no_fsync(self) -> bool:
        try:
            out = subprocess.run([str(self.assets.etcd), "--help"], capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return b"unsafe-no-fsync" in out.stdout + out.stderr

    def _wait_http(self, url: str, proc: subprocess.Popen[bytes], what: str) -> None:
        import requests
        import urllib3

        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        deadline = time.monotonic() + self.start_timeout
        headers = {"Authorization": f"Bearer {self.token}"}
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.stop()
                raise RuntimeError(
                    f"{what} exited with {proc.returncode}; see logs in {self.workdir}"
                )
            with contextlib.suppress(requests.RequestException):
                if requests.get(url, headers=headers, verify=False, timeout=2).status_code == 200:
                    return
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(
            f"{what} not ready after {self.start_timeout}s; see logs in {self.workdir}"
        )

    def stop(self) -> None:
        """Terminate the processes we started (apiserver first), then remove the temp dir."""
        for proc in reversed(self._processes):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=self.stop_timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
        self._processes.clear()
        if self._owns_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
