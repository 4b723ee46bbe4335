"""Fault injection: dropped and torn watch streams, injected errors, latency, outages, restarts."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import requests
from kubernetes import watch

from .streams import RawWatch, types_and_names

pytestmark = pytest.mark.requires_fake(
    "tests the fake's own fault injection (cut streams, injected replies, delays, request log, "
    "compaction); the faults a real server produces run in tests/reliability/test_real_faults.py"
)


def _raw_get(port: int, path: str, stop_after: float = 5.0) -> bytes:
    """Read a whole HTTP response off the socket, to see exactly how the server ended it."""
    with socket.create_connection(("127.0.0.1", port), timeout=stop_after) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        data = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            data += chunk
    return data


def _chunks(raw: bytes) -> tuple[list[bytes], bool]:
    """Decode a chunked body; returns the chunks and whether the terminating chunk arrived."""
    body = raw.split(b"\r\n\r\n", 1)[1]
    chunks = []
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return chunks, True
        chunks.append(rest[:size])
        body = rest[size + 2 :]
    return chunks, False


def test_drop_watches_cuts_streams_abruptly(fake, apiserver, kube) -> None:
    rv = kube.create_pod("a")["metadata"]["resourceVersion"]
    w = RawWatch(apiserver.url, "/api/v1/pods", {"resourceVersion": rv}, apiserver.token)
    try:
        kube.create_pod("b")
        w.wait_for(lambda ev: len(ev) == 1)
        assert fake.drop_watches() == 1
        w.wait_closed()
        assert w.error is not None  # no terminating chunk: the client sees a broken stream
        assert types_and_names(w.events) == [("ADDED", "b")]
    finally:
        w.close()


def test_drop_in_the_middle_of_an_event(fake, kube) -> None:
    rv = kube.create_pod("a")["metadata"]["resourceVersion"]
    result: dict[str, bytes] = {}
    reader = threading.Thread(
        target=lambda: result.setdefault(
            "raw", _raw_get(fake.port, f"/api/v1/pods?watch=true&resourceVersion={rv}")
        )
    )
    reader.start()
    assert fake.wait_for_watches(1)
    fake.drop_watches(mid_event=True)
    reader.join(5)
    chunks, terminated = _chunks(result["raw"])
    assert not terminated and len(chunks) == 1
    assert chunks[0].startswith(b'{"type":') and not chunks[0].endswith(b"\n")


def test_python_client_sees_a_torn_stream_as_an_error(fake, kube, core_v1) -> None:
    rv = kube.create_pod("a")["metadata"]["resourceVersion"]
    errors: list[BaseException] = []

    def consume() -> None:
        try:
            for _ in watch.Watch().stream(
                core_v1.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=5
            ):
                pass
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            errors.append(exc)

    t = threading.Thread(target=consume)
    t.start()
    assert fake.wait_for_watches(1)
    fake.drop_watches(mid_event=True)
    t.join(5)
    assert errors and "ProtocolError" in type(errors[0]).__name__ + repr(errors[0])


def test_fail_next_500_then_recover(fake, kube) -> None:
    fake.fail_next(2, status=500, path_regex=r"^/api/v1/nodes", method="GET")
    for _ in range(2):
        resp = kube.request("GET", "/api/v1/nodes")
        assert resp.status_code == 500
        body = resp.json()
        assert (
            body["kind"] == "Status" and body["reason"] == "InternalError" and body["code"] == 500
        )
    assert (
        kube.request("POST", "/api/v1/nodes", {"metadata": {"name": "n1"}}).status_code == 201
    )  # other method
    assert kube.request("GET", "/api/v1/nodes").status_code == 200


def test_fail_next_429_carries_retry_after(fake, kube) -> None:
    fake.fail_next(1, status=429, path_regex="/binding$", retry_after=2)
    kube.create_pod("p")
    resp = kube.bind_pod("p", "n1")
    assert resp.status_code == 429 and resp.headers["Retry-After"] == "2"
    assert resp.json()["reason"] == "TooManyRequests" and resp.json()["details"] == {
        "retryAfterSeconds": 2
    }
    assert (
        kube.get_pod("p")["spec"].get("nodeName") is None
    )  # the request never reached the registry
    assert kube.bind_pod("p", "n1").status_code == 201


def test_faults_apply_to_watch_requests(fake, apiserver) -> None:
    fake.fail_next(1, status=503, path_regex=r"watch=true")
    resp = requests.get(apiserver.url + "/api/v1/pods", params={"watch": "true"}, timeout=5)
    assert resp.status_code == 503 and resp.headers["Retry-After"] == "1"


def test_delay(fake, kube) -> None:
    fake.delay(0.3, path_regex=r"^/api/v1/nodes")
    start = time.monotonic()
    kube.request("GET", "/api/v1/namespaces")
    assert time.monotonic() - start < 0.25
    start = time.monotonic()
    kube.request("GET", "/api/v1/nodes")
    assert time.monotonic() - start >= 0.3
    fake.clear_faults()
    start = time.monotonic()
    kube.request("GET", "/api/v1/nodes")
    assert time.monotonic() - start < 0.25


def test_request_log(fake, kube) -> None:
    fake.clear_requests()
    kube.create_pod("p", labels={"a": "b"})
    kube.list_pods(field_selector="spec.nodeName=")
    post, get = fake.requests
    assert (post.method, post.path, post.status) == ("POST", "/api/v1/namespaces/default/pods", 201)
    assert post.body["metadata"]["labels"] == {"a": "b"} and post.content_type == "application/json"
    assert (get.method, get.path, get.query) == (
        "GET",
        "/api/v1/pods",
        {"fieldSelector": "spec.nodeName="},
    )
    assert fake.requests_matching("GET", r"^/api/v1/pods$") == [get]


def test_compact_returns_the_new_floor(fake, kube) -> None:
    rv = int(kube.create_pod("a")["metadata"]["resourceVersion"])
    assert fake.compact() == rv
    resp = requests.get(
        f"{fake.url}/api/v1/pods", params={"watch": "true", "resourceVersion": rv - 1}, timeout=5
    )
    assert resp.json()["object"]["code"] == 410


def test_stop_and_start_on_the_same_port(fake_apiserver) -> None:
    fake, kube = fake_apiserver.fake, fake_apiserver.client
    rv = kube.create_pod("a")["metadata"]["resourceVersion"]
    port = fake.port
    fake.stop()
    with pytest.raises(requests.ConnectionError):
        requests.get(fake.url + "/healthz", timeout=2)
    fake.store.delete("pods", "default", "a")  # a change made while clients could not watch
    fake.start()
    assert fake.port == port and kube.request("GET", "/healthz").text == "ok"
    resp = requests.get(
        f"{fake.url}/api/v1/pods",
        params={"watch": "true", "resourceVersion": rv, "timeoutSeconds": "1"},
        timeout=5,
    )
    assert [
        line for line in resp.text.splitlines() if '"DELETED"' in line
    ]  # history survived the outage


def test_stop_ends_open_watches(fake_apiserver) -> None:
    fake = fake_apiserver.fake
    w = RawWatch(fake.url, "/api/v1/pods", {}, fake_apiserver.token)
    try:
        assert fake.wait_for_watches(1)
        fake.stop()
        w.wait_closed()
        assert w.error is not None
    finally:
        w.close()
        fake.start()


def test_restart_keeps_objects_and_invalidates_history(fake_apiserver) -> None:
    fake, kube = fake_apiserver.fake, fake_apiserver.client
    rv = int(kube.create_pod("a")["metadata"]["resourceVersion"])
    kube.create_pod("b")
    fake.restart(reset_resource_version=False)
    resp = requests.get(
        f"{fake.url}/api/v1/pods", params={"watch": "true", "resourceVersion": rv}, timeout=5
    )
    assert resp.json()["object"]["reason"] == "Expired"
    assert [p["metadata"]["name"] for p in kube.list_pods("default")] == ["a", "b"]


def test_restart_with_reset_resource_versions(fake_apiserver) -> None:
    fake, kube = fake_apiserver.fake, fake_apiserver.client
    fake.configure(too_large_rv_wait=0.1)
    for i in range(3):
        kube.create_pod(f"p{i}")
        kube.patch_pod(f"p{i}", {"metadata": {"labels": {"v": "2"}}})
    old_rv = kube.call("GET", "/api/v1/pods")["metadata"]["resourceVersion"]
    fake.restart(reset_resource_version=True)
    listing = kube.call("GET", "/api/v1/pods")
    assert int(listing["metadata"]["resourceVersion"]) < int(old_rv)
    assert sorted(int(p["metadata"]["resourceVersion"]) for p in listing["items"]) == [5, 6, 7]
    resp = requests.get(
        f"{fake.url}/api/v1/pods",
        params={"watch": "true", "resourceVersion": old_rv, "timeoutSeconds": "1"},
        timeout=5,
    )
    # Our version is from the future: the watch waits for it, silently, until its timeout.
    assert resp.status_code == 200 and resp.text == ""
    resp = requests.get(
        f"{fake.url}/api/v1/pods", params={"resourceVersion": old_rv}, timeout=5
    )
    assert resp.status_code == 504  # a list says "too large"
    fresh = RawWatch(
        fake.url,
        "/api/v1/pods",
        {"resourceVersion": listing["metadata"]["resourceVersion"]},
        fake_apiserver.token,
    )
    try:
        kube.create_pod("after")
        assert types_and_names(fresh.wait_for(lambda ev: len(ev) == 1)) == [("ADDED", "after")]
    finally:
        fresh.close()


def test_reset_clears_everything(fake_apiserver) -> None:
    fake, kube = fake_apiserver.fake, fake_apiserver.client
    kube.create_pod("a")
    fake.deny(verb="list")
    fake.fail_next(5, status=500, path_regex="nodes")
    fake.configure(graceful_delete=False)
    fake.stop()
    fake.reset()
    assert fake.running and fake.settings.graceful_delete
    assert kube.list_pods() == [] and kube.list_nodes() == []
    assert [n["metadata"]["name"] for n in kube.call("GET", "/api/v1/namespaces")["items"]] == [
        "default",
        "kube-node-lease",
        "kube-public",
        "kube-system",
    ]
