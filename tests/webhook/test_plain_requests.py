"""Plain requests read without gunicorn's general parser (extender.webhook.plain_requests).

The head kube-scheduler sends takes the short path; every other shape is left to
gunicorn, byte for byte, and answered as gunicorn answers it, on the same connection.
"""

from __future__ import annotations

import io
import json
import socket
import subprocess
import threading
from collections.abc import Iterator

import pytest
from gunicorn.config import Config
from gunicorn.http import wsgi
from gunicorn.http.unreader import Unreader

from extender.webhook import plain_requests
from extender.webhook.plain_requests import HeadRules
from tests.helpers import SNAPSHOT, free_port, start_server, stop_server, wire_body

# What Go's net/http writes for kube-scheduler's extender client (HTTPExtender.send).
GO_HEAD = (b"POST /scheduler/filter HTTP/1.1\r\nHost: 127.0.0.1:8888\r\nUser-Agent: Go-http-client/1.1\r\n"
           b"Content-Length: 12\r\nContent-Type: application/json\r\nAccept-Encoding: gzip")
RULES = HeadRules.from_config(Config())


class Chunks(Unreader):
    """An unreader over fixed chunks, as the socket would deliver them."""

    def __init__(self, *chunks: bytes) -> None:
        super().__init__()
        self.chunks = list(chunks)

    def chunk(self, size_hint: int | None = None) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""


def test_kube_schedulers_head_is_plain() -> None:
    method, uri, headers, length = plain_requests.parse_head(GO_HEAD, RULES)
    assert (method, uri, length) == ("POST", "/scheduler/filter", 12)
    assert headers[0] == ("HOST", "127.0.0.1:8888") and ("CONTENT-TYPE", "application/json") in headers


@pytest.mark.parametrize("head", [
    GO_HEAD.replace(b"HTTP/1.1", b"HTTP/1.0"),
    GO_HEAD.replace(b"POST", b"PUT"),
    GO_HEAD.replace(b"POST", b"post"),
    GO_HEAD + b"\r\nTransfer-Encoding: chunked",
    GO_HEAD + b"\r\nExpect: 100-continue",
    GO_HEAD + b"\r\nUpgrade: h2c",
    GO_HEAD + b"\r\nContent-Length: 12",  # repeated
    GO_HEAD + b"\r\nX_Forwarded_For: 10.0.0.1",  # underscore: gunicorn's header_map decides
    GO_HEAD + b"\r\nX-Forwarded-Proto: https",  # a secure scheme header
    GO_HEAD + b"\r\nForwarded: for=10.0.0.1",
    GO_HEAD + b"\r\nConnection: upgrade",
    GO_HEAD + b"\r\n folded continuation",
    GO_HEAD + b"\r\nX-Name: caf\xc3\xa9",
    GO_HEAD + b"\r\nX-Name: a\x00b",
    GO_HEAD + b"\r\nX-Name: a\nb",
    GO_HEAD + b"\r\nX Name: a",
    GO_HEAD + b"\r\nX-Name : a",
    GO_HEAD + b"\r\nno colon",
    GO_HEAD.replace(b"Content-Length: 12", b"Content-Length: +12"),
    GO_HEAD.replace(b"Content-Length: 12", b"Content-Length: 1" + b"0" * 19),
    GO_HEAD.replace(b"/scheduler/filter", b"//evil/filter"),
    GO_HEAD.replace(b"/scheduler/filter", b"/filter#fragment"),
    GO_HEAD.replace(b"/scheduler/filter", b"http://host/filter"),
    GO_HEAD.replace(b"/scheduler/filter", b"/fil ter"),
    GO_HEAD.replace(b"POST /scheduler/filter HTTP/1.1", b"POST  /filter HTTP/1.1"),
    b"",
    b"\r\n" + GO_HEAD,
])
def test_anything_else_is_left_to_gunicorn(head: bytes) -> None:
    assert plain_requests.parse_head(head, RULES) is None


def test_the_configured_limits_apply() -> None:
    config = Config()
    config.set("limit_request_fields", 3)
    assert plain_requests.parse_head(GO_HEAD, HeadRules.from_config(config)) is None
    config = Config()
    config.set("limit_request_line", 20)
    assert plain_requests.parse_head(GO_HEAD, HeadRules.from_config(config)) is None


def test_a_head_split_over_reads_is_joined_and_the_rest_kept_for_the_body() -> None:
    body = b'{"Pod": {}}\n'
    unreader = Chunks(GO_HEAD[:30], GO_HEAD[30:] + b"\r\n\r\n" + body[:4], body[4:])
    request = plain_requests.read_plain_request(unreader, RULES, ("127.0.0.1", 5), 1)
    assert request is not None and request.path == "/scheduler/filter" and request.query == ""
    assert request.body.read(100) == body
    assert request.unread_body() == 0 and not request.should_close()


def test_a_small_body_is_read_with_the_head_and_what_follows_is_kept() -> None:
    head = GO_HEAD.replace(b"Content-Length: 12", b"Content-Length: 10")
    unreader = Chunks(head + b"\r\n\r\n01234", b"56789GET /next")
    request = plain_requests.read_plain_request(unreader, RULES, ("127.0.0.1", 5), 1)
    assert request is not None and request.unread_body() == 0
    assert request.body.read() == b"0123456789"
    assert unreader.read() == b"GET /next"


def test_a_body_cut_short_by_the_client_reaches_the_app_short() -> None:
    unreader = Chunks(GO_HEAD + b"\r\n\r\n0123")
    request = plain_requests.read_plain_request(unreader, RULES, ("127.0.0.1", 5), 1)
    assert request is not None and request.body.read(12) == b"0123"


def test_a_large_body_is_left_to_the_app_to_read() -> None:
    length = plain_requests.PRELOAD_LIMIT + 1
    head = GO_HEAD.replace(b"Content-Length: 12", f"Content-Length: {length}".encode())
    unreader = Chunks(head + b"\r\n\r\n" + b"x" * 100, b"x" * (length - 100), b"GET /next")
    request = plain_requests.read_plain_request(unreader, RULES, ("127.0.0.1", 5), 1)
    assert request is not None and request.unread_body() == length
    assert request.body.read(50) == b"x" * 50 and request.unread_body() == length - 50
    assert len(request.body.read(length)) == length - 50 and request.unread_body() == 0
    assert unreader.read() == b"GET /next"


def test_a_request_that_is_not_plain_is_pushed_back_whole() -> None:
    raw = GO_HEAD + b"\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    unreader = Chunks(raw[:40], raw[40:])
    assert plain_requests.read_plain_request(unreader, RULES, ("127.0.0.1", 5), 1) is None
    assert unreader.read(len(raw)) == raw


def test_the_end_of_the_stream_is_left_to_gunicorn() -> None:
    unreader = Chunks(b"POST /filter HT")
    assert plain_requests.read_plain_request(unreader, RULES, ("127.0.0.1", 5), 1) is None
    assert unreader.read() == b"POST /filter HT"


def test_connection_close_is_honoured() -> None:
    unreader = Chunks(b"GET /healthz?x=1 HTTP/1.1\r\nConnection: close\r\n\r\n")
    request = plain_requests.read_plain_request(unreader, RULES, ("127.0.0.1", 5), 1)
    assert request is not None and (request.path, request.query) == ("/healthz", "x=1")
    assert request.should_close() and request.unread_body() == 0


@pytest.mark.parametrize("head", [
    GO_HEAD,
    b"GET /healthz?verbose=1&x=%2F HTTP/1.1\r\nHost: example:80\r\nX-Trace: a b\r\nAccept: */*",
    b"POST /f%C3%A9ilter HTTP/1.1\r\nContent-Length: 0\r\nConnection: keep-alive",
])
@pytest.mark.parametrize("tls", [False, True])
def test_the_environ_is_gunicorns(head: bytes, tls: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the app sees of a plain request is what gunicorn's wsgi.create gives it."""
    monkeypatch.delenv("SCRIPT_NAME", raising=False)
    config = Config()
    if tls:
        config.set("certfile", "cert.pem")
        config.set("keyfile", "key.pem")
    request = plain_requests.read_plain_request(Chunks(head + b"\r\n\r\n"), HeadRules.from_config(config),
                                                ("10.1.2.3", 4567), 1)
    assert request is not None
    server, client, sock = ("127.0.0.1", 8888), ("10.1.2.3", 4567), object()
    assert plain_requests.PlainEnviron.usable(server)
    ours = plain_requests.PlainEnviron(config, client, server).build(request, sock)
    _, theirs = wsgi.create(request, sock, client, server, config)
    theirs["wsgi.multithread"] = True  # as the worker sets it
    for environ in (ours, theirs):  # objects made per call, compared by kind
        assert type(environ.pop("wsgi.errors")) is wsgi.WSGIErrorsWrapper
    del theirs["wsgi.early_hints"]
    assert ours == theirs


def test_the_environ_is_built_by_gunicorn_where_it_depends_on_more(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not plain_requests.PlainEnviron.usable("/run/extender.sock")
    monkeypatch.setenv("SCRIPT_NAME", "/scheduler")
    assert not plain_requests.PlainEnviron.usable(("127.0.0.1", 8888))


# ---- on a real server: plain and other requests share a connection -------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    port = free_port()
    process: subprocess.Popen[bytes] = start_server(
        ["serve", "--bind", f"127.0.0.1:{port}", "--source", "snapshot", "--snapshot", str(SNAPSHOT),
         "--worker-class", "connection", "--workers", "1"], port)
    yield port
    output = stop_server(process)
    assert "Traceback" not in output, output


def _exchange(port: int, data: bytes, replies: int) -> list[tuple[int, dict[str, str], bytes]]:
    """Send `data` on one connection and read `replies` replies from it."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.sendall(data)
        stream = raw.makefile("rb")
        answers = []
        for _ in range(replies):
            status = int(stream.readline().split()[1])
            headers = {}
            while (line := stream.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            answers.append((status, headers, stream.read(int(headers.get("content-length", 0)))))
        return answers


def _post(path: str, body: bytes, extra: bytes = b"") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n").encode() + extra + b"\r\n" + body


def test_pipelined_plain_and_chunked_requests_are_answered_in_order(server: int) -> None:
    body = json.dumps(wire_body("filter-request.json")).encode()
    chunked = (b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n" + f"{len(body):x}".encode() + b"\r\n" + body + b"\r\n0\r\n\r\n")
    answers = _exchange(server, _post("/filter", body) + chunked + _post("/filter", body), 3)
    assert [status for status, _, _ in answers] == [200, 200, 200]
    assert all(json.loads(data)["NodeNames"] == ["node-1", "node-2", "node-3"] for _, _, data in answers)


def test_a_body_the_app_does_not_read_is_skipped(server: int) -> None:
    body = json.dumps(wire_body("filter-request.json")).encode()
    answers = _exchange(server, _post("/nowhere", b'{"a": 1}') + _post("/filter", body), 2)
    assert [status for status, _, _ in answers] == [404, 200]


def test_expect_100_continue_still_gets_its_interim_reply(server: int) -> None:
    body = json.dumps(wire_body("filter-request.json")).encode()
    with socket.create_connection(("127.0.0.1", server), timeout=10) as raw:
        raw.sendall(_post("/filter", b"", b"Expect: 100-continue\r\n").replace(b"Content-Length: 0",
                                                                              f"Content-Length: {len(body)}".encode()))
        assert raw.recv(100).startswith(b"HTTP/1.1 100 Continue")
        raw.sendall(body)
        stream = io.BytesIO()
        while b"\r\n\r\n" not in stream.getvalue():
            stream.write(raw.recv(65536))
        assert stream.getvalue().startswith(b"HTTP/1.1 200")


def test_a_malformed_header_still_gets_gunicorns_400(server: int) -> None:
    (status, _, _), = _exchange(server, b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n", 1)
    assert status == 400


def test_connection_close_closes(server: int) -> None:
    with socket.create_connection(("127.0.0.1", server), timeout=10) as raw:
        raw.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := raw.recv(4096):
            data += chunk
    assert data.startswith(b"HTTP/1.1 200") and b"connection: close" in data.lower()


def _large_request(length: int) -> tuple[bytes, bytes]:
    head = GO_HEAD.replace(b"Content-Length: 12", f"Content-Length: {length}".encode())
    return head + b"\r\n\r\n", bytes(range(256)) * (length // 256) + b"z" * (length % 256)


def test_a_large_body_read_whole_lands_in_one_buffer_and_the_next_request_stays() -> None:
    from gunicorn.http.unreader import SocketUnreader

    head, body = _large_request(plain_requests.PRELOAD_LIMIT + 12345)
    ours, theirs = socket.socketpair()
    ours.settimeout(10)
    with ours, theirs:
        theirs.sendall(head + body[:1000])
        unreader = SocketUnreader(ours)
        request = plain_requests.read_plain_request(unreader, RULES, ("127.0.0.1", 5), 1)
        assert request is not None and request.unread_body() == len(body)
        sender = threading.Thread(target=theirs.sendall, args=(body[1000:] + b"GET /next HTTP/1.1\r\n\r\n",))
        sender.start()  # more than the socket buffers: sent while it is read
        plain_requests.read_whole(request)
        sender.join(10)
        assert request.unread_body() == 0
        whole = request.body.read(len(body))
        assert whole == body and request.body.read() == b""
        assert unreader.read().startswith(b"GET /next")


def test_a_large_body_cut_short_is_read_whole_short() -> None:
    from gunicorn.http.unreader import SocketUnreader

    head, body = _large_request(plain_requests.PRELOAD_LIMIT + 1)
    ours, theirs = socket.socketpair()
    with ours:
        with theirs:
            theirs.sendall(head + body[:5000])
        request = plain_requests.read_plain_request(SocketUnreader(ours), RULES, ("127.0.0.1", 5), 1)
        assert request is not None
        plain_requests.read_whole(request)
        assert request.body.read(len(body)) == body[:5000] and request.unread_body() == 0


def test_a_large_verb_call_and_a_small_one_pipelined_are_both_answered(server: int) -> None:
    large = wire_body("filter-request-nodecache-false.json")
    template = large["Nodes"]["items"][0]
    large["Nodes"]["items"] = [{**template, "metadata": {**template["metadata"], "name": f"node-{i}"}}
                               for i in range(1, 4)] * 60  # over PRELOAD_LIMIT
    data = json.dumps(large).encode()
    assert len(data) > plain_requests.PRELOAD_LIMIT
    small = json.dumps(wire_body("filter-request.json")).encode()
    answers = _exchange(server, _post("/filter", data) + _post("/filter", small), 2)
    assert [status for status, _, _ in answers] == [200, 200]
    assert len(json.loads(answers[0][2])["Nodes"]["items"]) == 180
    assert json.loads(answers[1][2])["NodeNames"] == ["node-1", "node-2", "node-3"]
