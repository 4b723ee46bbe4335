"""What any caller can send: only POST + application/json + a bounded body, and no reply leaks internals."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest

from extender.policy.engine import Engine, Policy
from extender.webhook import verbs
from tests.helpers import SNAPSHOT, free_port, start_server, stop_server, wire_body
from tests.security.conftest import Webhook
from tests.security.test_bind_guard import bind_args

SECRET_PATH = "/etc/extender/secret/very-internal.py"
VERBS = ["filter", "prioritize", "bind", "preempt"]


def assert_generic_500(resp: Any) -> None:
    assert resp.status_code == 500, resp.data
    body = resp.get_json()
    assert set(body) == {"Error"} and body["Error"], body
    text = resp.get_data(as_text=True)
    for leak in ("Traceback", "File \"", SECRET_PATH, "very-internal", ".py", "/etc/", "RuntimeError", "OSError"):
        assert leak not in text, f"{leak!r} leaked into the reply: {text}"


# ---- methods, content types, sizes ------------------------------------------------------


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE"])
def test_verbs_take_only_post(webhook: Webhook, verb: str, method: str) -> None:
    resp = webhook.client.open(f"/{verb}", method=method, json={})
    assert resp.status_code == 405 and "verbs take POST" in resp.get_json()["Error"]


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", "application/yaml"])
def test_verbs_take_only_json(webhook: Webhook, verb: str, content_type: str) -> None:
    resp = webhook.client.post(f"/{verb}", data=json.dumps(bind_args()), content_type=content_type)
    assert resp.status_code == 415 and "application/json" in resp.get_json()["Error"]
    assert webhook.binder.calls == []


@pytest.mark.parametrize("verb", VERBS)
def test_body_size_is_bounded(webhook_factory: Any, verb: str) -> None:
    hook = webhook_factory(max_body_bytes=4096)
    resp = hook.client.post(f"/{verb}", data=b'{"Pod": "' + b"x" * 8192 + b'"}', content_type="application/json")
    assert resp.status_code == 413 and "4096 bytes" in resp.get_json()["Error"]


def test_explain_is_off_by_default(webhook: Webhook) -> None:
    resp = webhook.client.post("/explain", json=wire_body("filter-request.json"))
    assert resp.status_code == 404 and set(resp.get_json()) == {"Error"}


# ---- internal errors: a generic reply, the details only in the log ------------------------


@pytest.mark.parametrize("verb", VERBS)
def test_unexpected_exception_gives_a_generic_500(webhook: Webhook, monkeypatch: pytest.MonkeyPatch,
                                                  caplog: pytest.LogCaptureFixture, verb: str) -> None:
    def explode(*_: Any, **__: Any) -> Any:
        raise RuntimeError(f"cannot open {SECRET_PATH}")

    monkeypatch.setattr(verbs, f"{verb}_verb", explode)
    body = bind_args() if verb == "bind" else wire_body("filter-request.json")
    resp = webhook.client.post(f"/{verb}", json=body)
    assert_generic_500(resp)
    assert SECRET_PATH in caplog.text  # the operator still gets the details
    assert "Traceback" in caplog.text


class Exploding:
    """A policy plugin that fails the way real code does: an OSError naming an internal file."""

    name = "Exploding"

    def filter(self, pod: Any, node: Any) -> None:
        raise OSError(2, "No such file or directory", SECRET_PATH)


class FixedPolicy:
    def __init__(self, policy: Policy) -> None:
        self.engine = Engine(policy)
        self.policy = policy

    def start_watching(self, interval: float = 2.0) -> None:
        return None

    def stop_watching(self, timeout: float | None = 5.0) -> None:
        return None


@pytest.fixture
def exploding_webhook(webhook: Webhook) -> Iterator[Webhook]:
    original = webhook.runtime.policy
    webhook.runtime.policy = FixedPolicy(Policy(filters=(Exploding(),), source="<test>", digest="x"))
    yield webhook
    webhook.runtime.policy = original


@pytest.mark.parametrize("body_name", ["filter-request.json", "filter-request-nodecache-false.json"])
def test_plugin_failure_in_filter_gives_a_generic_500(exploding_webhook: Webhook, caplog: pytest.LogCaptureFixture,
                                                      body_name: str) -> None:
    resp = exploding_webhook.client.post("/filter", json=wire_body(body_name))
    assert_generic_500(resp)
    assert "policy plugin" in resp.get_json()["Error"]
    assert SECRET_PATH in caplog.text


def test_plugin_failure_in_bind_gives_a_generic_500_and_binds_nothing(exploding_webhook: Webhook) -> None:
    resp = exploding_webhook.client.post("/bind", json=bind_args())
    assert_generic_500(resp)
    assert exploding_webhook.binder.calls == []
    assert exploding_webhook.runtime.state.pod("default/pod-cache-true").node_name == ""


# ---- the same through gunicorn ------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_server() -> Iterator[tuple[int, list[str]]]:
    port = free_port()
    process = start_server(["serve", "--bind", f"127.0.0.1:{port}", "--workers", "1", "--source", "snapshot",
                            "--snapshot", str(SNAPSHOT), "--max-body-bytes", "4096"], port)
    output: list[str] = []
    yield port, output
    output.append(stop_server(process))


def test_chunked_body_over_the_limit_is_refused(small_server: tuple[int, list[str]]) -> None:
    """No Content-Length to check up front: the limit must still hold while reading."""
    port, _ = small_server
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    chunks = (b'{"Pod": "' if i == 0 else b"x" * 1024 for i in range(64))
    connection.request("POST", "/filter", body=chunks, headers={"Content-Type": "application/json"},
                       encode_chunked=True)
    resp = connection.getresponse()
    body = json.loads(resp.read())
    assert resp.status == 413 and "4096" in body["Error"]
    connection.close()


def test_garbage_on_the_wire_gets_no_traceback(small_server: tuple[int, list[str]]) -> None:
    port, _ = small_server
    import socket

    for garbage in (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64,  # a TLS ClientHello
                    b"POST /filter HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
                    b"BREW /filter HTCPCP/1.0\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(garbage)
            sock.shutdown(socket.SHUT_WR)
            reply = b""
            while chunk := sock.recv(65536):
                reply += chunk
        assert b"Traceback" not in reply and b".py" not in reply, reply
    # And the worker is still fine.
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("POST", "/filter", body=json.dumps(wire_body("filter-request.json")),
                       headers={"Content-Type": "application/json"})
    assert connection.getresponse().status == 200
