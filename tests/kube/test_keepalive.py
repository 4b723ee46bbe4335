"""The kept-alive HTTP/1.1 client of short API requests: framing, reuse, stale connections, TLS.

A raw socket server on loopback answers with exactly the bytes each test scripts, so the
client meets the replies kube-apiserver sends (Content-Length, chunked) and the ones a proxy,
a restart or a bug can produce (closed connections, interim replies, garbage).
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client

from extender import metrics
from extender.errors import ClusterError, ConflictError
from extender.kube import client as kube_client
from extender.kube import keepalive
from extender.kube.keepalive import KeepAlivePool, TransportError
from tests.fakeapi.pki import CertificateAuthority


@dataclass
class Request:
    connection: int  # the how-manieth accepted connection carried it
    line: str
    headers: dict[str, str]
    body: bytes


class Closing(bytes):
    """Reply bytes after which the server closes the connection."""


# A script gets the request and returns the reply bytes (Closing: then hang up); None closes
# the connection unanswered.
Script = Callable[[Request], bytes | None]


def reply(status: str = "200 OK", body: bytes = b"{}", headers: tuple[str, ...] = ()) -> bytes:
    head = [f"HTTP/1.1 {status}", "Content-Type: application/json", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def chunked(*parts: bytes, trailer: bytes = b"") -> bytes:
    body = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n" + trailer + b"\r\n"
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body


@dataclass
class RawServer:
    script: Script
    tls: ssl.SSLContext | None = None
    requests: list[Request] = field(default_factory=list)
    accepted: int = 0
    hung_up: threading.Event = field(default_factory=threading.Event)  # after a Closing reply

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self.accepted += 1
            self._sockets.append(sock)
            threading.Thread(target=self._serve, args=(sock, self.accepted), daemon=True).start()

    def _serve(self, sock: socket.socket, number: int) -> None:
        try:
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_side=True)
                self._sockets.append(sock)
            buffer = b""
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = sock.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                line, *fields = head.decode("latin-1").split("\r\n")
                headers = {k.lower(): v.strip() for k, _, v in (f.partition(":") for f in fields)}
                size = int(headers.get("content-length", "0"))
                while len(buffer) < size:
                    buffer += sock.recv(65536)
                body, buffer = buffer[:size], buffer[size:]
                request = Request(number, line, headers, body)
                self.requests.append(request)
                answer = self.script(request)
                if answer is None:
                    return
                sock.sendall(answer)
                if isinstance(answer, Closing):
                    sock.shutdown(socket.SHUT_RDWR)
                    self.hung_up.set()
                    return
        except OSError:
            return
        finally:
            sock.close()

    def close(self) -> None:
        self._listener.close()
        for sock in self._sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., RawServer]]:
    servers: list[RawServer] = []

    def start(script: Script, **options: Any) -> RawServer:
        servers.append(RawServer(script, **options))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def pool(server: RawServer, **options: Any) -> KeepAlivePool:
    return KeepAlivePool("http", "127.0.0.1", server.port, **options)


def test_content_length_and_chunked_replies_on_one_kept_connection(serve) -> None:
    answers = iter([reply(body=b'{"a": 1}'), chunked(b'{"b"', b': 2}', trailer=b"X-Trailer: 1\r\n"),
                    reply("204 No Content", b""), reply(body=b"[]")])
    server = serve(lambda request: next(answers))
    client = pool(server)
    assert client.request("GET", "/x").body == b'{"a": 1}'
    assert client.request("POST", "/y", body=b"{}").body == b'{"b": 2}'
    third = client.request("DELETE", "/z")
    assert (third.status, third.body) == (204, b"")
    assert client.request("GET", "/w").body == b"[]"
    assert server.accepted == 1 and client.opened == 1
    assert [r.line for r in server.requests] == ["GET /x HTTP/1.1", "POST /y HTTP/1.1", "DELETE /z HTTP/1.1",
                                                 "GET /w HTTP/1.1"]


def test_request_head_carries_host_headers_length_and_body(serve) -> None:
    server = serve(lambda request: reply())
    client = KeepAlivePool("http", "127.0.0.1", server.port, default_headers=[("User-Agent", "me")],
                           path_prefix="/k8s/clusters/c-1/")
    client.request("PATCH", "/api/v1/nodes/n1?dryRun=All", [("Content-Type", "application/merge-patch+json")],
                   b'{"x":1}')
    client.request("POST", "/empty")
    first, second = server.requests
    assert first.line == "PATCH /k8s/clusters/c-1/api/v1/nodes/n1?dryRun=All HTTP/1.1"
    assert first.headers["host"] == f"127.0.0.1:{server.port}"
    assert first.headers["user-agent"] == "me"
    assert first.headers["content-type"] == "application/merge-patch+json"
    assert (first.headers["content-length"], first.body) == ("7", b'{"x":1}')
    assert second.headers["content-length"] == "0"  # a POST always says how long its body is


def test_repeated_header_fields_are_joined_and_names_lowered(serve) -> None:
    server = serve(lambda request: reply(headers=("Warning: 299 - \"a\"", "warning: 299 - \"b\"", "Retry-After: 3")))
    answer = pool(server).request("GET", "/")
    assert answer.headers["warning"] == '299 - "a", 299 - "b"'
    assert answer.headers["retry-after"] == "3"


def test_interim_replies_are_skipped(serve) -> None:
    server = serve(lambda request: b"HTTP/1.1 100 Continue\r\n\r\n" + reply(body=b'{"ok": true}'))
    assert pool(server).request("POST", "/", body=b"{}").body == b'{"ok": true}'


def test_a_reply_without_length_is_read_to_the_close_and_the_connection_not_kept(serve) -> None:
    server = serve(lambda request: Closing(b'HTTP/1.1 200 OK\r\n\r\n{"all": "of it"}'))
    client = pool(server)
    assert client.request("GET", "/").body == b'{"all": "of it"}'
    assert client.request("GET", "/").body == b'{"all": "of it"}'
    assert server.accepted == 2


def test_connection_close_is_honoured(serve) -> None:
    server = serve(lambda request: reply(headers=("Connection: close",)))
    client = pool(server)
    client.request("GET", "/")
    client.request("GET", "/")
    assert server.accepted == 2 and client.opened == 2


def test_a_connection_the_server_closed_while_idle_is_replaced_even_for_a_post(serve) -> None:
    """kube-apiserver closes idle connections after a while (and on restart): the next
    request, a POST that must not be sent twice, goes out on a new connection instead of failing."""
    server = serve(lambda request: Closing(reply()) if request.connection == 1 else reply())
    client = pool(server)
    client.request("GET", "/")
    assert server.hung_up.wait(5)
    time.sleep(0.1)  # the FIN crosses loopback
    assert client.request("POST", "/bind", body=b"{}").status == 200
    assert server.accepted == 2
    assert [r.connection for r in server.requests] == [1, 2]


def test_a_kept_connection_dying_under_a_request_retries_only_idempotent_methods(serve) -> None:
    """Closed after the request arrived: the server may have acted on it, so a POST is not
    sent again (the caller decides), while a GET is."""
    server = serve(lambda request: None if request.line.endswith("/drop HTTP/1.1") and request.connection == 1
                   else reply())
    client = pool(server)
    client.request("GET", "/warm")
    assert client.request("GET", "/drop").status == 200  # sent again on connection 2
    client.request("GET", "/warm")
    server.script = lambda request: None if request.line.startswith("POST") else reply()
    with pytest.raises(TransportError, match="closed the connection"):
        client.request("POST", "/bind", body=b"{}")
    assert sum(r.line.startswith("POST") for r in server.requests) == 1


@pytest.mark.parametrize(("answer", "message"), [
    (b"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP/1.x reply"),
    (b"HTTP/1.1 2x0 OK\r\n\r\n", "not an HTTP/1.x reply"),
    (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "malformed reply header"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "malformed Content-Length"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "malformed chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXX0\r\n\r\n", "chunk not followed by CRLF"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "closed the connection"),
    (b"HTTP/1.1 200 OK\r\nX: " + b"a" * (keepalive.MAX_HEAD + 10), "longer than"),
])
def test_replies_that_are_not_http_fail_with_a_transport_error(serve, answer: bytes, message: str) -> None:
    server = serve(lambda request: Closing(answer))
    client = pool(server)
    with pytest.raises(TransportError, match=message):
        client.request("GET", "/")
    server.script = lambda request: reply(body=b'{"next": "fine"}')
    assert client.request("GET", "/").body == b'{"next": "fine"}'  # the broken connection was not kept


def test_a_silent_server_times_out(serve) -> None:
    hold = threading.Event()
    server = serve(lambda request: None if hold.wait(5) else None)
    try:
        with pytest.raises(TransportError, match="timed out"):
            pool(server).request("GET", "/", timeout=(1.0, 0.2))
    finally:
        hold.set()


def test_a_refused_connection_is_a_transport_error() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    with pytest.raises(TransportError, match="ConnectionRefused"):
        KeepAlivePool("http", "127.0.0.1", port).request("GET", "/", timeout=(1.0, 1.0))


def test_headers_and_targets_that_would_split_the_request_are_refused(serve) -> None:
    server = serve(lambda request: reply())
    client = pool(server)
    with pytest.raises(ValueError, match="invalid header"):
        client.request("GET", "/", [("X-Evil", "a\r\nInjected: 1")])
    with pytest.raises(ValueError, match="invalid request target"):
        client.request("GET", "/a b HTTP/1.1\r\nX: y")
    assert server.requests == []


def test_more_threads_than_the_pool_keeps_are_served_and_the_surplus_reported(
        serve, caplog: pytest.LogCaptureFixture) -> None:
    gate = threading.Barrier(4)
    server = serve(lambda request: (gate.wait(5), reply())[1])
    client = pool(server, maxsize=2)
    caplog.set_level(logging.WARNING, logger=keepalive.__name__)
    threads = [threading.Thread(target=client.request, args=("GET", f"/{i}")) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(server.requests) == 4 and client.opened == 4
    assert client.discarded == 2
    assert sum("Connection pool is full" in r.getMessage() for r in caplog.records) == 2
    gate = threading.Barrier(1)
    for i in range(3):
        client.request("GET", f"/again-{i}")
    assert client.opened == 4  # the two kept connections serve what follows


def test_closed_pool_keeps_nothing(serve) -> None:
    server = serve(lambda request: reply())
    client = pool(server)
    client.request("GET", "/")
    client.close()
    client.request("GET", "/")
    assert client.opened == 2 and client.discarded == 0


# ---- TLS and kubernetes client configurations -------------------------------------

@pytest.fixture
def tls_server(serve, tmp_path: Path) -> tuple[RawServer, CertificateAuthority, Path]:
    """A server asking for a client certificate from the same CA, as kube-apiserver does."""
    ca = CertificateAuthority()
    cert, key = ca.serving().write(tmp_path / "server.crt", tmp_path / "server.key")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(ca.write_cert(tmp_path / "ca.crt")))
    context.load_cert_chain(cert, key)
    context.verify_mode = ssl.CERT_REQUIRED
    return serve(lambda request: reply(body=b'{"kind": "Status"}'), tls=context), ca, tmp_path


def configuration(host: str, **settings: Any) -> k8s_client.Configuration:
    config = k8s_client.Configuration()
    config.host = host
    for name, value in settings.items():
        setattr(config, name, value)
    return config


def test_tls_with_the_configurations_ca_and_client_certificate(tls_server) -> None:
    server, ca, directory = tls_server
    cert, key = ca.client("system:kube-scheduler").write(directory / "client.crt", directory / "client.key")
    client = keepalive.pool_for(configuration(f"https://127.0.0.1:{server.port}", ssl_ca_cert=str(directory / "ca.crt"),
                                              cert_file=str(cert), key_file=str(key)))
    assert client is not None
    assert client.request("GET", "/api").body == b'{"kind": "Status"}'
    assert client.request("GET", "/api").status == 200
    assert server.accepted == 1


def test_tls_refuses_a_server_of_another_ca(tls_server, tmp_path: Path) -> None:
    server, ca, directory = tls_server
    other = CertificateAuthority("someone-else").write_cert(tmp_path / "other.crt")
    cert, key = ca.client("u").write(directory / "client.crt", directory / "client.key")
    client = keepalive.pool_for(configuration(f"https://127.0.0.1:{server.port}", ssl_ca_cert=str(other),
                                              cert_file=str(cert), key_file=str(key)))
    assert client is not None
    with pytest.raises(TransportError, match="CERTIFICATE_VERIFY_FAILED"):
        client.request("GET", "/api")


def test_configurations_only_urllib3_can_serve_get_no_pool() -> None:
    assert keepalive.pool_for(configuration("https://10.0.0.1:6443", proxy="http://proxy:3128")) is None
    assert keepalive.pool_for(configuration("https://10.0.0.1:6443", proxy="http://proxy:3128",
                                            no_proxy="10.0.0.0/8")) is not None
    assert keepalive.pool_for(configuration("https://10.0.0.1:6443",
                                            socket_options=[(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)])) is None
    plain = keepalive.pool_for(configuration("http://127.0.0.1:8080/prefix", connection_pool_maxsize=7))
    assert plain is not None
    assert (plain.port, plain.path_prefix, plain.maxsize) == (8080, "/prefix", 7)


# ---- request_json over the pool -----------------------------------------------------

def test_request_json_goes_over_one_kept_connection_and_maps_errors(serve) -> None:
    answers = iter([
        reply("201 Created", b'{"kind": "Binding"}'),
        reply("409 Conflict", b'{"kind": "Status", "reason": "Conflict", '
                              b'"message": "pod p is already assigned to node \\"n1\\""}', ("Retry-After: 2",)),
        reply("200 OK", b"[1, 2]"),
    ])
    server = serve(lambda request: next(answers))
    api_client = k8s_client.ApiClient(configuration(f"http://127.0.0.1:{server.port}"))
    api_client.user_agent = kube_client.USER_AGENT
    assert kube_client.request_json(api_client, "POST", "/bind", body={"a": 1}) == {"kind": "Binding"}
    with pytest.raises(ConflictError) as caught:
        kube_client.request_json(api_client, "POST", "/bind", body={"a": 1}, query={"dryRun": "All", "x": None})
    assert caught.value.server_message == 'pod p is already assigned to node "n1"'  # type: ignore[attr-defined]
    assert caught.value.retry_after == 2.0  # type: ignore[attr-defined]
    with pytest.raises(ClusterError, match="not a JSON object"):
        kube_client.request_json(api_client, "GET", "/list")
    assert server.accepted == 1
    first, second, _ = server.requests
    assert first.headers["user-agent"] == kube_client.USER_AGENT
    assert first.headers["content-type"] == "application/json" and first.body == b'{"a":1}'
    assert second.line == "POST /bind?dryRun=All HTTP/1.1"


def test_request_json_names_an_unreachable_server() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    api_client = k8s_client.ApiClient(configuration(f"http://127.0.0.1:{port}"))
    with pytest.raises(ClusterError, match="GET /api/v1/nodes: cannot reach the API server") as caught:
        kube_client.request_json(api_client, "GET", "/api/v1/nodes", timeout=1.0)
    assert caught.value.status is None and caught.value.retryable


def _api_requests(method: str, code: str) -> float:
    return metrics.API_REQUESTS.labels(method=method, code=code)._value.get()  # type: ignore[no-any-return]


def test_request_json_counts_every_request_by_method_and_status(serve) -> None:
    answers = iter([reply("201 Created"), reply("404 Not Found", b'{"kind": "Status", "reason": "NotFound"}')])
    server = serve(lambda request: next(answers))
    api_client = k8s_client.ApiClient(configuration(f"http://127.0.0.1:{server.port}"))
    before = (_api_requests("POST", "201"), _api_requests("GET", "404"), _api_requests("GET", "error"))
    latency_before = metrics.API_REQUEST_LATENCY.labels(method="POST")._sum.get()
    kube_client.request_json(api_client, "POST", "/a", body={})
    with pytest.raises(ClusterError):
        kube_client.request_json(api_client, "GET", "/b")
    listener = socket.create_server(("127.0.0.1", 0))
    nobody = k8s_client.ApiClient(configuration(f"http://127.0.0.1:{listener.getsockname()[1]}"))
    listener.close()
    with pytest.raises(ClusterError, match="cannot reach"):
        kube_client.request_json(nobody, "GET", "/c", timeout=1.0)
    after = (_api_requests("POST", "201"), _api_requests("GET", "404"), _api_requests("GET", "error"))
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 1, 1]
    assert metrics.API_REQUEST_LATENCY.labels(method="POST")._sum.get() > latency_before
