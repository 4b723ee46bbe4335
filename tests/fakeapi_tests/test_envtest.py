"""The envtest switch: asset discovery, flags, keys, kubeconfig, and the process lifecycle.

The lifecycle is exercised with two small stand-ins written in Python that honour the
same flags, so these tests run without the real binaries: an "etcd" answering ``/health``
on ``--listen-client-urls`` and a "kube-apiserver" serving TLS on ``--secure-port`` with
the certificate given by ``--tls-cert-file`` and checking the bearer token from
``--token-auth-file``. The real binaries run the rest of the suite under envtest.
"""

from __future__ import annotations

import json
import os
import ssl
import stat
import sys
import textwrap
from pathlib import Path

import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID
from kubernetes import client, config

from tests.fakeapi.client import KubeTestClient
from tests.fakeapi.envtest import (
    EnvtestAssets,
    EnvtestControlPlane,
    apiserver_args,
    etcd_args,
    find_assets,
    generate_service_account_key,
    parse_duration,
    write_token_file,
)
from tests.fakeapi.kubeconfig import write_kubeconfig


def _executable(path: Path, body: str) -> Path:
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


STUB_ETCD = """
    import sys, http.server
    from urllib.parse import urlsplit
    if "--help" in sys.argv:
        print("--unsafe-no-fsync  Disables fsync"); sys.exit(0)
    url = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--listen-client-urls="))
    port = urlsplit(url).port
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b'{"health":"true"}'
            self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
            self.wfile.write(body)
        def log_message(self, *a): pass
    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""

STUB_APISERVER = """
    import sys, ssl, http.server, json
    from pathlib import Path
    flags = dict(a[2:].split("=", 1) for a in sys.argv[1:] if "=" in a)
    cert_dir = Path(flags["cert-dir"])
    token = Path(flags["token-auth-file"]).read_text().split(",")[0]
    (cert_dir / "args.json").write_text(json.dumps(sys.argv[1:]))
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            ok = self.headers.get("Authorization") == "Bearer " + token
            body = json.dumps({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "default"}}
                              if self.path.startswith("/api/") else "ok").encode()
            self.send_response(200 if ok else 401)
            self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
        def log_message(self, *a): pass
    server = http.server.HTTPServer(("127.0.0.1", int(flags["secure-port"])), H)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(flags["tls-cert-file"], flags["tls-private-key-file"])
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    server.serve_forever()
"""


def _bearer(cfg: client.Configuration) -> str | None:
    """The Authorization header the client will send (the settings' key name varies by version)."""
    return next(
        (s["value"] for s in cfg.auth_settings().values() if s.get("key") == "authorization"), None
    )


@pytest.fixture
def stub_assets(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _executable(bin_dir / "etcd", STUB_ETCD)
    _executable(bin_dir / "kube-apiserver", STUB_APISERVER)
    return bin_dir


def test_find_assets(stub_assets: Path, tmp_path: Path) -> None:
    assert find_assets({}) is None
    assert find_assets({"KUBEBUILDER_ASSETS": str(tmp_path / "missing")}) is None
    assets = find_assets({"KUBEBUILDER_ASSETS": str(stub_assets)})
    assert assets == EnvtestAssets(stub_assets / "etcd", stub_assets / "kube-apiserver")
    other = _executable(tmp_path / "my-etcd", "print('x')\n")
    assert (
        find_assets({"KUBEBUILDER_ASSETS": str(stub_assets), "TEST_ASSET_ETCD": str(other)}).etcd
        == other
    )
    (stub_assets / "kube-apiserver").chmod(0o644)
    assert find_assets({"KUBEBUILDER_ASSETS": str(stub_assets)}) is None  # not executable


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("20s", 20), ("1m30s", 90), ("500ms", 0.5), ("60", 60), ("1h", 3600), (None, 7.0), ("", 7.0)],
)
def test_parse_duration(text: str | None, seconds: float) -> None:
    assert parse_duration(text, 7.0) == pytest.approx(seconds)


def test_parse_duration_rejects_garbage() -> None:
    with pytest.raises(ValueError):
        parse_duration("ten seconds", 1)


def test_etcd_flags(tmp_path: Path) -> None:
    args = etcd_args(tmp_path, 2379, 2380)
    assert f"--data-dir={tmp_path}" in args
    assert "--listen-client-urls=http://127.0.0.1:2379" in args
    assert "--advertise-client-urls=http://127.0.0.1:2379" in args
    assert "--listen-peer-urls=http://127.0.0.1:2380" in args
    assert "--initial-cluster=default=http://127.0.0.1:2380" in args
    assert "--unsafe-no-fsync=true" in args
    assert "--unsafe-no-fsync=true" not in etcd_args(tmp_path, 1, 2, unsafe_no_fsync=False)


def test_apiserver_flags_follow_envtest(tmp_path: Path) -> None:
    args = apiserver_args(
        etcd_url="http://127.0.0.1:2379",
        cert_dir=tmp_path,
        secure_port=6443,
        sa_key=tmp_path / "k",
        sa_pub=tmp_path / "p",
        token_file=tmp_path / "t",
        extra=["--v=2"],
    )
    flags = dict(a[2:].split("=", 1) for a in args)
    assert len(flags) == len(args)  # no flag given twice
    assert flags["disable-admission-plugins"] == "ServiceAccount"
    assert flags["authorization-mode"] == "RBAC"
    assert flags["bind-address"] == flags["advertise-address"] == "127.0.0.1"
    assert flags["secure-port"] == "6443" and flags["etcd-servers"] == "http://127.0.0.1:2379"
    assert flags["service-account-issuer"] == "https://127.0.0.1:6443/"
    assert flags["service-account-signing-key-file"] == str(tmp_path / "k")
    assert flags["service-account-key-file"] == str(tmp_path / "p")
    assert flags["token-auth-file"] == str(tmp_path / "t") and flags["v"] == "2"
    assert "insecure-port" not in flags and "cert-dir" in flags
    assert flags["tls-cert-file"] == str(tmp_path / "apiserver.crt")
    assert flags["tls-private-key-file"] == str(tmp_path / "apiserver.key")
    assert "client-ca-file" not in flags


def test_service_account_key_pair(tmp_path: Path) -> None:
    key_path, pub_path = generate_service_account_key(tmp_path)
    key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    pub = serialization.load_pem_public_key(pub_path.read_bytes())
    assert key.public_key().public_numbers() == pub.public_numbers()
    assert stat.S_IMODE(os.stat(key_path).st_mode) == 0o600


def test_token_file_format(tmp_path: Path) -> None:
    path = write_token_file(tmp_path / "tokens.csv", "s3cret", "admin", ("system:masters", "extra"))
    assert path.read_text() == 's3cret,admin,admin,"system:masters,extra"\n'


def test_kubeconfig_loads_with_the_official_client(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "kc", "https://127.0.0.1:6443", token="tok", insecure=True)
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=cfg)
    assert cfg.host == "https://127.0.0.1:6443" and cfg.verify_ssl is False
    assert _bearer(cfg) == "Bearer tok"


def test_control_plane_lifecycle_with_stub_binaries(
    stub_assets: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The machine's CA bundle in the environment must not replace the control plane's CA
    # (requests lets $REQUESTS_CA_BUNDLE override a session's verify setting).
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", requests.certs.where())
    monkeypatch.setenv("CURL_CA_BUNDLE", requests.certs.where())
    plane = EnvtestControlPlane(
        EnvtestAssets(stub_assets / "etcd", stub_assets / "kube-apiserver"),
        start_timeout=20,
        stop_timeout=5,
    ).start()
    workdir = plane.workdir
    try:
        assert plane.url.startswith("https://127.0.0.1:")
        served = ssl.get_server_certificate(("127.0.0.1", plane.secure_port))
        assert served.strip() == (plane.cert_dir / "apiserver.crt").read_text().strip()
        resp = requests.get(
            plane.url + "/readyz",
            headers={"Authorization": f"Bearer {plane.token}"},
            verify=str(plane.ca_file),
            timeout=5,
        )
        assert resp.status_code == 200
        with pytest.raises(requests.exceptions.SSLError):  # verification is really on
            requests.get(plane.url + "/readyz", verify=requests.certs.where(), timeout=5)
        kube = KubeTestClient(plane.url, token=plane.token, verify=str(plane.ca_file))
        assert kube.call("GET", "/api/v1/namespaces/default")["metadata"]["name"] == "default"
        kube.close()
        cfg = client.Configuration()
        config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=cfg)
        assert cfg.host == plane.url and cfg.verify_ssl is True
        assert Path(cfg.ssl_ca_cert).read_bytes() == plane.ca_file.read_bytes()
        assert _bearer(cfg) == f"Bearer {plane.token}"
        flags = dict(a[2:].split("=", 1) for a in json.loads((plane.cert_dir / "args.json").read_text()))
        assert flags["client-ca-file"] == str(plane.ca_file)
        procs = list(plane._processes)
        assert len(procs) == 2 and all(p.poll() is None for p in procs)
    finally:
        plane.stop()
    assert all(p.poll() is not None for p in procs)
    assert workdir is not None and not workdir.exists()


def test_user_kubeconfig_carries_a_client_certificate(stub_assets: Path) -> None:
    plane = EnvtestControlPlane(
        EnvtestAssets(stub_assets / "etcd", stub_assets / "kube-apiserver"), start_timeout=20
    ).start()
    try:
        path = plane.user_kubeconfig("system:kube-scheduler", groups=["sched", "other"])
        cfg = client.Configuration()
        config.load_kube_config(config_file=str(path), client_configuration=cfg)
        assert cfg.verify_ssl is True and _bearer(cfg) is None
        cert = x509.load_pem_x509_certificate(Path(cfg.cert_file).read_bytes())
        subject = {a.oid: a.value for a in cert.subject}
        assert subject[NameOID.COMMON_NAME] == "system:kube-scheduler"
        orgs = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
        assert orgs == ["sched", "other"]
        ca = x509.load_pem_x509_certificate(plane.ca_file.read_bytes())
        cert.verify_directly_issued_by(ca)
    finally:
        plane.stop()


def test_control_plane_reports_a_binary_that_dies(tmp_path: Path, stub_assets: Path) -> None:
    broken = _executable(tmp_path / "etcd-broken", "import sys; sys.exit(3)\n")
    plane = EnvtestControlPlane(
        EnvtestAssets(broken, stub_assets / "kube-apiserver"), start_timeout=10
    )
    with pytest.raises(RuntimeError, match="etcd exited with 3"):
        plane.start()
    assert plane._processes == []
