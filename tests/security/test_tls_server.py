"""Real TLS handshakes against `extender serve` (gunicorn in a subprocess) on 127.0.0.1."""

from __future__ import annotations

import http.client
import json
import re
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import SNAPSHOT, free_port, start_server, stop_server, wire_body
from tests.security.certs import PKI, SecretVolume, issue, served_serial


@dataclass
class Server:
    port: int
    process: subprocess.Popen[bytes]
    volume: SecretVolume
    output: str = ""

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"


def serve_tls(pki: PKI, directory: Path, *, workers: int = 1, client_ca: bool = True) -> Server:
    volume = SecretVolume(directory)
    volume.put(pki.server, pki.ca)
    port = free_port()
    args = ["serve", "--bind", f"127.0.0.1:{port}", "--workers", str(workers), "--source", "snapshot",
            "--snapshot", str(SNAPSHOT), "--tls-cert", str(volume.path("tls.crt")),
            "--tls-key", str(volume.path("tls.key"))]
    if client_ca:
        args += ["--client-ca", str(volume.path("ca.crt"))]
    process = start_server(args, port, scheme="https", context=pki.client_context(pki.client))
    return Server(port, process, volume)


def finish(server: Server) -> str:
    server.output = stop_server(server.process)
    assert "Traceback" not in server.output, server.output
    return server.output


@pytest.fixture(scope="module")
def mtls(pki: PKI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = serve_tls(pki, tmp_path_factory.mktemp("mtls") / "secret", workers=2)
    yield server
    finish(server)


def get(url: str, context: ssl.SSLContext) -> int:
    with urllib.request.urlopen(url, context=context, timeout=10) as resp:
        return resp.status


def refused(url: str, context: ssl.SSLContext) -> str:
    """The error a client gets; fails the test if the request was served."""
    try:
        status = get(url, context)
    except (ssl.SSLError, urllib.error.URLError, ConnectionError) as exc:
        return str(exc)
    pytest.fail(f"served with status {status}")


# ---- who gets in ------------------------------------------------------------------------------


def test_the_right_client_certificate_is_served(mtls: Server, pki: PKI) -> None:
    assert get(mtls.url + "/readyz", pki.client_context(pki.client)) == 200
    body = json.dumps(wire_body("filter-request.json")).encode()
    request = urllib.request.Request(mtls.url + "/filter", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, context=pki.client_context(pki.client), timeout=10) as resp:
        assert json.loads(resp.read())["NodeNames"] == ["node-1", "node-2", "node-3"]


def test_no_client_certificate_is_refused(mtls: Server, pki: PKI) -> None:
    error = refused(mtls.url + "/healthz", pki.client_context(None))
    assert "CERTIFICATE_REQUIRED" in error or "certificate required" in error or "handshake" in error, error


def test_certificate_from_another_ca_is_refused(mtls: Server, pki: PKI) -> None:
    error = refused(mtls.url + "/healthz", pki.client_context(pki.stranger))
    assert "UNKNOWN_CA" in error or "unknown ca" in error, error


def test_server_certificate_is_not_a_client_certificate(mtls: Server, pki: PKI) -> None:
    """Signed by the right CA but without the clientAuth usage: OpenSSL's purpose check refuses it."""
    error = refused(mtls.url + "/healthz", pki.client_context(pki.server))
    assert "UNSUPPORTED_CERTIFICATE" in error or "unsupported certificate" in error or "alert" in error, error


def test_client_certificate_of_the_wrong_ca_cannot_even_see_the_policy(mtls: Server, pki: PKI) -> None:
    for verb in ("filter", "prioritize", "bind", "preempt"):
        body = json.dumps(wire_body("filter-request.json")).encode()
        request = urllib.request.Request(f"{mtls.url}/{verb}", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(request, context=pki.client_context(pki.stranger), timeout=10)


def test_plain_http_to_the_tls_port_is_not_served(mtls: Server) -> None:
    with pytest.raises((http.client.HTTPException, ConnectionError, urllib.error.URLError)):
        urllib.request.urlopen(f"http://127.0.0.1:{mtls.port}/readyz", timeout=10).read()


def test_tls_1_1_is_refused(mtls: Server, pki: PKI) -> None:
    context = pki.client_context(pki.client)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            context.minimum_version = ssl.TLSVersion.TLSv1_1
            context.maximum_version = ssl.TLSVersion.TLSv1_1
        context.set_ciphers("DEFAULT:@SECLEVEL=0")
    except (ValueError, ssl.SSLError) as exc:  # this OpenSSL cannot even build a TLS 1.1 client
        pytest.skip(f"cannot build a TLS 1.1 client here: {exc}; test_tls_context checks minimum_version")
    error = refused(mtls.url + "/healthz", context)
    assert re.search(r"PROTOCOL_VERSION|UNSUPPORTED_PROTOCOL|NO_PROTOCOLS_AVAILABLE|protocol version", error), error
    # TLS 1.2 alone is fine.
    context = pki.client_context(pki.client)
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    assert get(mtls.url + "/healthz", context) == 200


def test_server_without_client_ca_serves_anyone_over_tls(pki: PKI, tmp_path: Path) -> None:
    server = serve_tls(pki, tmp_path / "secret", client_ca=False)
    try:
        assert get(server.url + "/healthz", pki.client_context(None)) == 200
    finally:
        finish(server)


def test_bad_key_stops_the_server_at_start(pki: PKI, tmp_path: Path) -> None:
    cert, _ = pki.server.write(tmp_path, "server")
    _, key = pki.client.write(tmp_path, "client")
    port = free_port()
    result = subprocess.run(
        [sys.executable, "-m", "extender", "serve", "--bind",
         f"127.0.0.1:{port}", "--source", "snapshot", "--tls-cert", str(cert), "--tls-key", str(key)],
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=60,
    )
    assert result.returncode != 0
    assert "cannot load TLS files" in result.stderr and str(cert) in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


# ---- keep-alive: one handshake per connection, not per request ---------------------------------------


def tls_connections(connection: http.client.HTTPSConnection) -> float:
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    match = re.search(r"^extender_tls_connections_total (\S+)$", text, re.M)
    assert match, text
    return float(match.group(1))


def test_keep_alive_connections_are_not_rehandshaken(mtls: Server, pki: PKI) -> None:
    connection = http.client.HTTPSConnection("127.0.0.1", mtls.port, context=pki.client_context(pki.client),
                                             timeout=10)
    body = json.dumps(wire_body("filter-request.json"))
    before = tls_connections(connection)
    sock = connection.sock
    for _ in range(50):
        connection.request("POST", "/filter", body=body, headers={"Content-Type": "application/json"})
        resp = connection.getresponse()
        assert resp.status == 200 and not resp.will_close
        resp.read()
    assert connection.sock is sock  # the same TLS socket all along
    assert tls_connections(connection) == before  # the server accepted no new connection either
    connection.close()


# ---- rotation: new files are served to new connections, without a restart --------------------


def test_rotated_certificate_is_served_without_restart(pki: PKI, tmp_path: Path) -> None:
    # One worker: which worker accepts a connection is up to the kernel, and each worker checks
    # the files on its own next connection, so with two a test could not tell which one it reached.
    server = serve_tls(pki, tmp_path / "secret", workers=1)
    client = pki.client_context(pki.client)
    try:
        assert served_serial(server.port, client) == pki.server.serial
        # A kube-scheduler keep-alive connection open across the rotation keeps working.
        old = http.client.HTTPSConnection("127.0.0.1", server.port, context=client, timeout=10)
        old.request("GET", "/healthz")
        assert old.getresponse().read()

        renewed = issue(pki.ca, "extender-webhook", server=True)  # new key and serial, as rotationPolicy: Always
        server.volume.put(renewed, pki.ca)
        deadline = time.monotonic() + 15
        seen: set[int] = set()
        while time.monotonic() < deadline:
            seen = {served_serial(server.port, client)}
            if seen == {renewed.serial}:
                break
            time.sleep(0.2)
        assert seen == {renewed.serial}, f"still served: {seen}"
        assert server.process.poll() is None

        old.request("GET", "/healthz")
        assert old.getresponse().status == 200
        assert x509_serial(old.sock) == pki.server.serial  # not re-handshaken with the new one
        old.close()

        # A broken update (key of another certificate) is logged and ignored; the renewed one stays.
        broken = issue(pki.ca, "extender-webhook", server=True)
        server.volume.put(broken, pki.ca, key=pki.client)
        time.sleep(1.5)
        assert served_serial(server.port, client) == renewed.serial
    finally:
        output = finish(server)
    assert output.count("Booting worker with pid") == 1, output  # the worker was never restarted
    assert "still serving the previous certificate" in output


def x509_serial(sock: socket.socket) -> int:
    from cryptography import x509

    der = sock.getpeercert(binary_form=True)  # type: ignore[attr-defined]
    return x509.load_der_x509_certificate(der).serial_number
