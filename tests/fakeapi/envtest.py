"""Run a real etcd + kube-apiserver for the same tests, following controller-runtime's envtest.

When ``KUBEBUILDER_ASSETS`` names a directory with ``etcd`` and ``kube-apiserver`` (as
``setup-envtest use -p path`` prints), the ``apiserver`` fixture starts them instead of
the fake, so the fake's fidelity can be checked against the real thing. The flags are
envtest's defaults (pkg/internal/testing/controlplane): loopback only, random free ports,
a temporary data/cert directory, ``--disable-admission-plugins=ServiceAccount`` (no
controller creates the default ServiceAccount), RBAC, a generated service-account signing
key. As envtest does, the serving certificate comes from a CA of our own (``pki``),
written into the ``--cert-dir`` as ``apiserver.crt``/``apiserver.key`` with the CA beside it
as ``ca.crt``; the kubeconfig and the test client trust that CA, so TLS is verified end to
end (nothing skips verification). The same CA is the ``--client-ca-file``, so tests can
add users with client certificates (:meth:`EnvtestControlPlane.user_kubeconfig`).
Authentication of the admin is a static token for a ``system:masters`` user.
``TEST_ASSET_ETCD`` / ``TEST_ASSET_KUBE_APISERVER`` / ``TEST_ASSET_KUBE_SCHEDULER``
override single binaries and ``KUBEBUILDER_CONTROLPLANE_START_TIMEOUT`` / ``..._STOP_TIMEOUT``
the timeouts, as in envtest.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers import free_port

from .kubeconfig import write_kubeconfig
from .pki import LOOPBACK_HOSTS, CertificateAuthority

ADMIN_USER = "envtest-admin"
ADMIN_GROUPS = ("system:masters",)


@dataclass(frozen=True)
class EnvtestAssets:
    etcd: Path
    kube_apiserver: Path
    #: Optional: only the end-to-end tests need it (envtest itself never runs a scheduler).
    kube_scheduler: Path | None = None


def _executable(path: str | None) -> Path | None:
    if not path:
        return None
    candidate = Path(path)
    return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None


def find_assets(env: Mapping[str, str] | None = None) -> EnvtestAssets | None:
    """The binaries to use, or None when envtest is not configured (then the fake is used)."""
    env = os.environ if env is None else env
    base = env.get("KUBEBUILDER_ASSETS")

    def asset(name: str) -> Path | None:
        override = env.get("TEST_ASSET_" + name.upper().replace("-", "_"))
        return _executable(override or (str(Path(base) / name) if base else None))

    etcd, apiserver = asset("etcd"), asset("kube-apiserver")
    if etcd is None or apiserver is None:
        return None
    return EnvtestAssets(etcd, apiserver, asset("kube-scheduler"))


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


def _b64(text: str) -> str:
    """etcd's JSON gateway takes keys and values as base64 strings."""
    return base64.b64encode(text.encode()).decode()


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
    client_ca: Path | None = None,
    service_account_admission: bool = False,
    extra: Sequence[str] = (),
) -> list[str]:
    """envtest's kube-apiserver defaults, with static-token authentication.

    The serving certificate is ``cert_dir/apiserver.crt`` (envtest's names; the caller writes
    it, see :mod:`.pki`); ``client_ca`` turns on client-certificate authentication.
    ``service_account_admission`` keeps the ServiceAccount admission plugin on (pods that a
    kubelet runs get their projected token volume from it); envtest turns it off, since no
    controller creates the ``default`` ServiceAccount there. It cannot be turned back on with
    ``extra``: the plugin lists are string slices, so a second flag appends."""
    args = [
        "--advertise-address=127.0.0.1",
        "--bind-address=127.0.0.1",
        f"--secure-port={secure_port}",
        f"--etcd-servers={etcd_url}",
        f"--cert-dir={cert_dir}",
        f"--tls-cert-file={cert_dir / 'apiserver.crt'}",
        f"--tls-private-key-file={cert_dir / 'apiserver.key'}",
        "--service-cluster-ip-range=10.0.0.0/24",
        "--allow-privileged=true",
        *([] if service_account_admission else ["--disable-admission-plugins=ServiceAccount"]),
        f"--authorization-mode={authorization_mode}",
        f"--token-auth-file={token_file}",
        f"--service-account-issuer=https://127.0.0.1:{secure_port}/",
        f"--service-account-key-file={sa_pub}",
        f"--service-account-signing-key-file={sa_key}",
    ]
    if client_ca is not None:
        args.append(f"--client-ca-file={client_ca}")
    return [*args, *extra]


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
    """etcd + kube-apiserver as child processes; ``start`` waits for ``/readyz``.

    Beyond envtest: :meth:`restart_apiserver` (etcd keeps running, so every watch is cut
    and the objects stay), :meth:`restart_etcd` (kube-apiserver keeps running without its
    storage for a while) and :meth:`compact_etcd` (history compacted, so a watch resumed
    from an older resourceVersion gets 410 Gone when it reaches etcd) are the faults a real
    control plane can produce for the reliability and chaos tests.
    """

    assets: EnvtestAssets
    authorization_mode: str = "RBAC"
    extra_apiserver_args: Sequence[str] = ()
    #: More names and addresses in the serving certificate: a node's pods reach the API
    #: server through the ``kubernetes`` Service (10.0.0.1) or the node's address.
    extra_serving_hosts: Sequence[str] = ()
    service_account_admission: bool = False
    #: Give kube-apiserver a client certificate (system:masters) for kubelets' HTTPS
    #: endpoints: ``kubectl logs`` and ``exec`` on a node's pods.
    kubelet_client: bool = False
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
    etcd_port: int = 0
    _processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _owns_workdir: bool = False
    _ca: CertificateAuthority | None = None
    _apiserver: subprocess.Popen[bytes] | None = None
    _apiserver_args: list[str] = field(default_factory=list)
    _etcd_args: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.secure_port}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    @property
    def kubeconfig(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "kubeconfig"

    @property
    def cert_dir(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "certs"

    @property
    def ca_file(self) -> Path:
        """The CA that signed the serving certificate (and signs client certificates)."""
        return self.cert_dir / "ca.crt"

    @property
    def ca(self) -> CertificateAuthority:
        """The control plane's CA, to issue more certificates (a kube-scheduler's serving one)."""
        assert self._ca is not None, "start() first"
        return self._ca

    @property
    def pids(self) -> list[int]:
        """The process ids of etcd and kube-apiserver (a benchmark reads their CPU)."""
        return [process.pid for process in self._processes]

    @property
    def running(self) -> bool:
        return self._apiserver is not None and self._apiserver.poll() is None

    def _spawn(self, args: list[str], log_name: str) -> subprocess.Popen[bytes]:
        assert self.workdir is not None
        log = open(self.workdir / log_name, "ab")  # noqa: SIM115 - closed with the process
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
        data_dir, cert_dir = self.workdir / "etcd", self.cert_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        cert_dir.mkdir(parents=True, exist_ok=True)
        self.etcd_port, peer_port = free_port(), free_port()
        self.secure_port = free_port()
        self._ca = CertificateAuthority()
        self._ca.write_cert(self.ca_file)
        hosts = [*LOOPBACK_HOSTS, *(h for h in self.extra_serving_hosts if h not in LOOPBACK_HOSTS)]
        self._ca.serving(hosts, common_name="kube-apiserver").write(
            cert_dir / "apiserver.crt", cert_dir / "apiserver.key"
        )
        self._etcd_args = [
            str(self.assets.etcd),
            *etcd_args(data_dir, self.etcd_port, peer_port, self._etcd_supports_no_fsync()),
        ]
        etcd = self._spawn(self._etcd_args, "etcd.log")
        self._wait_http(f"{self.etcd_url}/health", etcd, "etcd")
        kubelet_args: list[str] = []
        if self.kubelet_client:
            cert, key = self._ca.client("kube-apiserver-kubelet-client", ["system:masters"]).write(
                cert_dir / "kubelet-client.crt", cert_dir / "kubelet-client.key")
            kubelet_args = [f"--kubelet-client-certificate={cert}", f"--kubelet-client-key={key}"]
        sa_key, sa_pub = generate_service_account_key(cert_dir)
        token_file = write_token_file(self.workdir / "tokens.csv", self.token)
        self._apiserver_args = [
            str(self.assets.kube_apiserver),
            *apiserver_args(
                etcd_url=self.etcd_url,
                cert_dir=cert_dir,
                secure_port=self.secure_port,
                sa_key=sa_key,
                sa_pub=sa_pub,
                token_file=token_file,
                authorization_mode=self.authorization_mode,
                client_ca=self.ca_file,
                service_account_admission=self.service_account_admission,
                extra=[*kubelet_args, *self.extra_apiserver_args],
            ),
        ]
        self._start_apiserver()
        write_kubeconfig(
            self.kubeconfig, self.url, token=self.token, ca_file=str(self.ca_file),
            context="envtest",
        )  # fmt: skip
        return self

    def _start_apiserver(self) -> None:
        self._apiserver = self._spawn(self._apiserver_args, "kube-apiserver.log")
        self._wait_http(f"{self.url}/readyz", self._apiserver, "kube-apiserver")
        self._wait_http(
            f"{self.url}/api/v1/namespaces/default", self._apiserver, "the default namespace"
        )

    def stop_apiserver(self) -> None:
        """Stop kube-apiserver only (etcd keeps the data): every client connection is cut."""
        proc = self._apiserver
        if proc is None:
            return
        self._terminate(proc)
        self._processes.remove(proc)
        self._apiserver = None

    def restart_apiserver(self, downtime: float = 0.0) -> None:
        """Stop kube-apiserver, stay down ``downtime`` seconds, start it again on the same port
        with the same flags and wait until it is ready."""
        self.stop_apiserver()
        if downtime > 0:
            time.sleep(downtime)
        self._start_apiserver()

    def restart_etcd(self, downtime: float = 0.0) -> None:
        """Stop etcd (SIGTERM: its data stays on disk), stay down ``downtime`` seconds, start it
        again with the same flags and wait until it is healthy. kube-apiserver keeps running:
        its requests fail meanwhile and its etcd watches end."""
        etcd = self._processes[0]
        self._terminate(etcd)
        self._processes.remove(etcd)
        if downtime > 0:
            time.sleep(downtime)
        restarted = self._spawn(self._etcd_args, "etcd.log")
        self._processes.remove(restarted)
        self._processes.insert(0, restarted)  # stopped last, as at the start
        self._wait_http(f"{self.etcd_url}/health", restarted, "etcd")

    def etcd_revision(self) -> int:
        """etcd's current revision (the newest resourceVersion), through its JSON gateway."""
        return int(self._etcd("/v3/kv/range", {"key": "AA=="})["header"]["revision"])

    def compact_etcd(self, revision: int | None = None) -> int:
        """Compact etcd's history up to ``revision`` (default: the current one) and return it,
        as kube-apiserver's periodic compaction does; older watches then end with 410 Gone."""
        target = self.etcd_revision() if revision is None else revision
        self._etcd("/v3/kv/compaction", {"revision": str(target), "physical": True})
        return target

    def etcd_put(self, key: str, value: str) -> int:
        """Write a key outside the Kubernetes prefix (moves etcd's revision without the API
        server); returns the new revision."""
        reply = self._etcd("/v3/kv/put", {"key": _b64(key), "value": _b64(value)})
        return int(reply["header"]["revision"])

    def _etcd(self, path: str, body: dict[str, object]) -> dict[str, object]:
        import requests

        resp = requests.post(self.etcd_url + path, json=body, timeout=10)
        resp.raise_for_status()
        return resp.json()

    def user_kubeconfig(self, user: str, groups: Sequence[str] = (), name: str = "") -> Path:
        """A kubeconfig authenticating as ``user`` in ``groups`` with a client certificate
        signed by the control plane's CA (no token file entry, no restart needed)."""
        assert self._ca is not None and self.workdir is not None
        stem = name or user.replace(":", "-")
        directory = self.workdir / "users"
        directory.mkdir(exist_ok=True)
        cert, key = self._ca.client(user, groups).write(
            directory / f"{stem}.crt", directory / f"{stem}.key"
        )
        return write_kubeconfig(
            directory / f"{stem}.kubeconfig", self.url, ca_file=str(self.ca_file),
            client_cert=str(cert), client_key=str(key), context=stem,
        )  # fmt: skip

    def token_kubeconfig(self, token: str, name: str) -> Path:
        """A kubeconfig with a bearer token (a ServiceAccount's, from the TokenRequest API)."""
        assert self.workdir is not None
        directory = self.workdir / "users"
        directory.mkdir(exist_ok=True)
        return write_kubeconfig(
            directory / f"{name}.kubeconfig", self.url, token=token, ca_file=str(self.ca_file),
            context=name,
        )  # fmt: skip

    def _etcd_supports_no_fsync(self) -> bool:
        try:
            out = subprocess.run([str(self.assets.etcd), "--help"], capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return b"unsafe-no-fsync" in out.stdout + out.stderr

    def _wait_http(self, url: str, proc: subprocess.Popen[bytes], what: str) -> None:
        import requests

        deadline = time.monotonic() + self.start_timeout
        headers = {"Authorization": f"Bearer {self.token}"}
        # verify= is given per request: requests lets $REQUESTS_CA_BUNDLE override a
        # session-level setting, never a per-request one.
        verify = str(self.ca_file) if url.startswith("https:") else True
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.stop()
                raise RuntimeError(
                    f"{what} exited with {proc.returncode}; see logs in {self.workdir}"
                )
            with contextlib.suppress(requests.RequestException):
                if requests.get(url, headers=headers, verify=verify, timeout=2).status_code == 200:
                    return
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(
            f"{what} not ready after {self.start_timeout}s; see logs in {self.workdir}"
        )

    def _terminate(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)

    def stop(self) -> None:
        """Terminate the processes we started (apiserver first), then remove the temp dir."""
        for proc in reversed(self._processes):
            self._terminate(proc)
        self._processes.clear()
        self._apiserver = None
        if self._owns_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
