"""The ConnectionWorker (extender.webhook.worker) in a real `extender serve` process on 127.0.0.1."""

from __future__ import annotations

import email.utils
import http.client
import json
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import SNAPSHOT, free_port, start_server, stop_server, wire_body
from tests.security.certs import make_pki

CONNECTION_WORKER = ["--worker-class", "connection", "--workers", "1"]


def _serve(port: int, extra: list[str], env: dict[str, str] | None = None, **options: object) -> subprocess.Popen[bytes]:
    return start_server(["serve", "--bind", f"127.0.0.1:{port}", "--source", "snapshot", "--snapshot",
                         str(SNAPSHOT), *CONNECTION_WORKER, *extra], port, env=env, **options)  # type: ignore[arg-type]


def test_one_kept_alive_connection_serves_every_call() -> None:
    """kube-scheduler's pattern: filter, prioritize, again, on one connection; then a status route."""
    port = free_port()
    process = _serve(port, [])
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        replies = []
        first_socket = None
        for name, path in [("filter-request.json", "/filter"), ("prioritize-request.json", "/prioritize")] * 3:
            connection.request("POST", path, json.dumps(wire_body(name)), {"Content-Type": "application/json"})
            response = connection.getresponse()
            replies.append((response.status, json.loads(response.read()), response.getheader("Connection")))
            first_socket = first_socket or connection.sock
            assert connection.sock is first_socket, "the server closed the kept-alive connection"
        connection.request("GET", "/healthz")
        health = connection.getresponse()
        assert (health.status, json.loads(health.read())) == (200, {"status": "ok"})
        connection.close()
    finally:
        output = stop_server(process)
    assert all(status == 200 and close != "close" for status, _, close in replies), replies
    filters = [reply for index, (_, reply, _) in enumerate(replies) if index % 2 == 0]
    assert all(reply["NodeNames"] == ["node-1", "node-2", "node-3"] for reply in filters)
    assert [entry["Host"] for entry in replies[1][1]] == ["node-1", "node-2", "node-3"]
    assert "Traceback" not in output, output


def test_garbage_on_the_wire_gets_a_400_and_the_worker_lives_on() -> None:
    port = free_port()
    process = _serve(port, [])
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            raw.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            answer = raw.recv(4096)
        assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("POST", "/filter", json.dumps(wire_body("filter-request.json")),
                           {"Content-Type": "application/json"})
        assert connection.getresponse().status == 200
        connection.close()
    finally:
        output = stop_server(process)
    assert "Traceback" not in output, output


def test_a_request_stalled_half_way_is_closed_after_the_timeout() -> None:
    """A client that stops sending in the middle of its body cannot hold a thread forever."""
    port = free_port()
    process = _serve(port, ["--timeout", "2"])
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
            raw.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Content-Length: 100\r\n\r\n{\"Pod\":")
            try:
                answer = raw.recv(4096)  # the server gives up on the body and closes
            except ConnectionResetError:
                answer = b""
        assert not answer.startswith(b"HTTP/1.1 200"), answer[:200]
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)  # and still serves
        connection.request("GET", "/healthz")
        assert connection.getresponse().status == 200
        connection.close()
    finally:
        output = stop_server(process)
    assert "Traceback" not in output, output


def test_sigterm_does_not_wait_for_an_idle_tls_connection(tmp_path: Path) -> None:
    """A client holding a TLS connection it sends nothing on (kube-scheduler's spare one) does not
    hold the stop for the graceful timeout, here made far longer than the wait below."""
    pki = make_pki(tmp_path)
    cert, key = pki.server.write(tmp_path, "tls")
    port = free_port()
    client_context = pki.client_context()
    process = _serve(port, ["--tls-cert", str(cert), "--tls-key", str(key)],
                     env={"EXTENDER_GRACEFUL_TIMEOUT": "300"}, scheme="https", context=client_context)
    idle = None
    try:
        idle = client_context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=30),
                                          server_hostname="127.0.0.1")  # handshake done, no request
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(60)  # far below the 300 s graceful timeout
        except subprocess.TimeoutExpired:
            pytest.fail("extender serve waited for the idle TLS connection instead of closing it")
        assert code == 0
        try:
            assert idle.recv(1) == b""  # the server closed it
        except (ssl.SSLError, ConnectionError):
            pass  # or reset it: either way the connection is gone
    finally:
        if idle is not None:
            idle.close()
        output = stop_server(process)
    assert "Traceback" not in output, output


class _Request:
    """What gunicorn's Response reads of a request."""

    def __init__(self, version: tuple[int, int], close: bool, method: str = "GET") -> None:
        self.version, self.method, self._close = version, method, close

    def should_close(self) -> bool:
        return self._close


@pytest.mark.parametrize(("version", "close", "headers", "upgrade"), [
    ((1, 1), False, [("Content-Length", "2")], False),
    ((1, 1), True, [("Content-Length", "2")], False),
    ((1, 1), False, [], False),  # chunked
    ((1, 0), False, [], False),
    ((1, 1), False, [("Content-Length", "0")], True),
])
def test_the_response_headers_are_gunicorns(version: tuple[int, int], close: bool,
                                            headers: list[tuple[str, str]], upgrade: bool) -> None:
    from gunicorn.config import Config
    from gunicorn.http import wsgi

    from extender.webhook.worker import _Response

    replies = []
    for kind in (wsgi.Response, _Response):
        response = kind(_Request(version, close), None, Config())
        response.start_response("200 OK", list(headers))
        response.upgrade = upgrade
        replies.append(response.default_headers())
    ours, theirs = replies
    date = [line for line in ours if line.startswith("Date: ")]
    assert len(date) == 1
    assert [line for line in ours if line not in date] == [line for line in theirs if not line.startswith("Date: ")]
    assert len(ours) == len(theirs)
    sent = email.utils.parsedate_to_datetime(date[0].removeprefix("Date: ").strip())
    assert sent.tzinfo is not None and abs(time.time() - sent.timestamp()) < 2


def _raw_reply(raw: socket.socket) -> tuple[list[bytes], bytes]:
    """One reply read off the socket: its head lines (Date left out) and its body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = raw.recv(65536)
        assert chunk, f"the server closed the connection after {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = int(next(line for line in lines if line.lower().startswith(b"content-length:")).split(b":")[1])
    while len(body) < length:
        body += raw.recv(65536)
    return [line for line in lines if not line.startswith(b"Date: ")], body


def test_a_verb_answered_without_wsgi_is_byte_for_byte_the_wsgi_reply() -> None:
    """A plain verb call skips WSGI (VerbRoutes.answer_plain); the same call with a query string
    goes through gunicorn's WSGI Response. The two replies must not differ (the Date aside)."""
    port = free_port()
    process = _serve(port, [])
    body = json.dumps(wire_body("filter-request.json")).encode()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            replies = []
            for target, connection in (("/filter", ""), ("/filter?via=wsgi", ""),
                                       ("/filter", "Connection: close\r\n"), ):
                raw.sendall(f"POST {target} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            f"Content-Length: {len(body)}\r\n{connection}\r\n".encode() + body)
                replies.append(_raw_reply(raw))
            assert raw.recv(1) == b""  # closed after the reply that said so
    finally:
        output = stop_server(process)
    (direct, direct_body), (wsgi_head, wsgi_body), (closing, _) = replies
    assert direct == wsgi_head and direct_body == wsgi_body
    assert direct[0] == b"HTTP/1.1 200 OK" and b"Connection: keep-alive" in direct
    assert b"Connection: close" in closing
    assert json.loads(direct_body)["NodeNames"] == ["node-1", "node-2", "node-3"]
    assert "Traceback" not in output, output
