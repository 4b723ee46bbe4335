"""Fuzzing every verb with hostile bodies: never a 5xx, always {"Error": ...}, nothing stored changes.

The bulk runs in-process through Flask's test client (fast, and the cluster state is
right there to fingerprint); a smaller sample goes through a real gunicorn process,
plus a few malformed HTTP requests that only a real socket can send.

Reproducible: hypothesis runs derandomized, without an example database. A failure
lists the mutations that built the body (fixture name, then each step).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
import requests
from flask import Flask
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from extender.cluster.snapshot import read_snapshot
from extender.settings import Settings
from extender.webhook import create_app
from extender.webhook.runtime import Runtime, build_runtime
from tests.helpers import SNAPSHOT, snapshot_settings, wire_body
from tests.reliability.figures import FIGURES
from tests.reliability.mutations import FIXTURES, VERBS, hostile_request
from tests.reliability.servers import LiveServer
from tests.webhook.test_bad_input import state_fingerprint

# In-process bodies per verb: 10,000 in all, the floor for one run. Each verb runs under
# both built-in policies: the webhook default (what `serve` runs) and the standalone one, which
# runs every filter (resources, taints, affinity, gates...) and so reads much more of each body.
IN_PROCESS_EXAMPLES = {"filter": 3000, "prioritize": 2500, "bind": 2000, "preempt": 2500}
POLICY_SHARE = {"webhook": 0.5, "standalone": 0.5}
# Bodies sent through the live gunicorn server (all verbs mixed).
LIVE_EXAMPLES = 400
REPORTED_PROBLEMS = 8


def fuzz_settings(examples: int) -> Callable[[Any], Any]:
    return hsettings(
        max_examples=examples, deadline=None, derandomize=True, database=None,
        phases=[Phase.explicit, Phase.generate],  # problems are collected, not raised: nothing to shrink
        suppress_health_check=list(HealthCheck), print_blob=False,
    )


def fingerprint(runtime: Runtime, *, identities: bool = True) -> tuple:
    """Everything a request could corrupt: usage per node, every pod record, assumptions, node views.

    With `identities`, the stored views themselves (immutable, replaced whole) are compared by id.
    """
    state = runtime.state
    pods = tuple(sorted(
        (key, r.uid, r.node_name, r.assumed, r.phase, r.scheduler_name, r.deleting, r.gated,
         tuple(sorted(r.requests.items())), tuple(sorted(r.score_requests.items())),
         id(r.view) if identities else r.view is None)
        for key, r in state._pods.items()
    ))
    views = tuple(sorted((name, id(view)) for name, view in state._views.items()))
    return state_fingerprint(runtime), pods, views, tuple(sorted(state.assumed_keys())), state.ready


def reply_problem(status: int, data: bytes) -> str | None:
    """What is wrong with a reply to a hostile body, if anything."""
    if status >= 500:
        return f"status {status}"
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        return f"status {status} with a non-JSON body {data[:100]!r}"
    if 400 <= status < 500:
        if not isinstance(body, dict) or set(body) != {"Error"} or not isinstance(body["Error"], str) \
                or not body["Error"].strip():
            return f"status {status} without {{'Error': non-empty string}}: {data[:200]!r}"
    elif status != 200:
        return f"unexpected status {status}"
    return None


@dataclass
class Tally:
    """Problems found in one run, with the recipe of the body that caused each."""

    problems: list[str] = field(default_factory=list)

    def add(self, verb: str, notes: list[str], problem: str) -> None:
        self.problems.append(f"{verb}: {problem} <- {' | '.join(notes)[:600]}")

    def check(self) -> None:
        assert not self.problems, f"{len(self.problems)} problem(s):\n" + "\n".join(
            self.problems[:REPORTED_PROBLEMS])


def count(channel: str, verb: str, status: int, problem: str | None) -> None:
    fuzz = FIGURES.fuzz
    fuzz.bodies += 1
    fuzz.by_channel[channel] += 1
    fuzz.by_verb[verb] += 1
    fuzz.by_status[str(status)] += 1
    if status >= 500:
        fuzz.server_errors += 1
    elif problem:
        fuzz.bad_error_bodies += 1


def valid_replies(post: Callable[[str, bytes], tuple[int, bytes]]) -> dict[str, tuple[int, Any]]:
    """The reply to every captured body except bind (which changes state): the worker answers correctly."""
    replies = {}
    for verb, names in FIXTURES.items():
        if verb == "bind":
            continue
        for name in names:
            status, data = post(verb, orjson.dumps(wire_body(name)))
            replies[name] = (status, orjson.loads(data))
    return replies


def _poster(app: Flask) -> Callable[..., tuple[int, bytes]]:
    client = app.test_client()

    def post(v: str, data: bytes, content_type: str = "application/json") -> tuple[int, bytes]:
        resp = client.post(f"/{v}", data=data, content_type=content_type)
        return resp.status_code, resp.data

    return post


@pytest.fixture
def policy_runtime(request: pytest.FixtureRequest) -> Iterator[tuple[Settings, Runtime]]:
    settings = snapshot_settings(policy_mode=request.param)
    runtime = build_runtime(settings)
    runtime.start()
    yield settings, runtime
    runtime.stop()


@pytest.mark.slow
@pytest.mark.parametrize("policy_runtime", list(POLICY_SHARE), indirect=True)
@pytest.mark.parametrize("verb", VERBS)
def test_fuzz_in_process(verb: str, policy_runtime: tuple[Settings, Runtime]) -> None:
    settings, runtime = policy_runtime
    examples = round(IN_PROCESS_EXAMPLES[verb] * POLICY_SHARE[settings.policy_mode])
    app = create_app(settings, runtime=runtime)
    client = app.test_client()
    post = _poster(app)
    # The expected replies come from a second app on the same state: the fuzzed app must start
    # with an empty node-view cache, or the captured nodes' views, cached first, would hide every
    # mutation of a node's content (same name, uid and resourceVersion) and any cache poisoning.
    expected = valid_replies(_poster(create_app(settings, runtime=runtime)))
    assert all(status == 200 for status, _ in expected.values()), expected
    pending_pods = read_snapshot(SNAPSHOT).pods
    baseline = fingerprint(runtime)
    structure = fingerprint(runtime, identities=False)
    tally = Tally()
    sent = 0

    @fuzz_settings(examples)
    @given(hostile_request(verb))
    def run(request: tuple[bytes, str, list[str]]) -> None:
        nonlocal sent, baseline
        data, content_type, notes = request
        status, reply = post(verb, data, content_type)
        sent += 1
        problem = reply_problem(status, reply)
        count("in-process", verb, status, problem)
        if problem:
            tally.add(verb, notes, problem)
        if fingerprint(runtime) != baseline:
            if verb == "bind" and status == 200 and orjson.loads(reply) == {"Error": ""}:
                FIGURES.fuzz.legit_binds += 1  # a body that is still a valid bind of a pending pod
            else:
                FIGURES.fuzz.state_changes_on_invalid += 1
                tally.add(verb, notes, f"cluster state changed (status {status}, reply {reply[:200]!r})")
            runtime.state.replace_pods(pending_pods)  # back to the snapshot, node views untouched
            assert fingerprint(runtime, identities=False) == structure
            baseline = fingerprint(runtime)

    started = time.perf_counter()
    run()
    elapsed = time.perf_counter() - started
    print(f"\nfuzz {verb} ({settings.policy_mode} policy): {sent} bodies in {elapsed:.1f} s, "
          f"{len(tally.problems)} problem(s)")
    assert sent >= examples * 0.95, sent  # hypothesis did not stop early

    # The worker is alive and still right: the same captured bodies get the same replies.
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    after = valid_replies(post)
    for name, reply in expected.items():
        if after[name] != reply:
            tally.add(verb, [name], f"a valid body now gets {after[name]!r:.300} instead of {reply!r:.300}")
    status, reply = post("bind", orjson.dumps(wire_body("bind-request.json")))
    assert (status, orjson.loads(reply)) == (200, {"Error": ""}), reply
    assert runtime.state.pod("default/pod-cache-true").node_name == "node-2"
    tally.check()


def test_unreadable_node_does_not_poison_the_view_cache(app: Flask) -> None:
    """A body with an unreadable node must not make the real node unusable for the next requests.

    The node-view cache is keyed by (name, uid, resourceVersion); it once kept the view of an
    unreadable node, and every later valid request then got "node(s) could not be read".
    """
    post = _poster(app)
    good = wire_body("filter-request-nodecache-false.json")
    bad = wire_body("filter-request-nodecache-false.json")
    bad["Nodes"]["items"][0]["status"]["allocatable"]["cpu"] = "lots"
    status, reply = post("filter", orjson.dumps(bad))
    assert status == 200 and "node-1" in orjson.loads(reply)["FailedAndUnresolvableNodes"]
    status, reply = post("filter", orjson.dumps(good))
    body = orjson.loads(reply)
    assert status == 200 and body["FailedAndUnresolvableNodes"] == {} and body["FailedNodes"] == {}
    assert [n["metadata"]["name"] for n in body["Nodes"]["items"]] == ["node-1", "node-3", "node-2"]


def _raw_http(port: int, payload: bytes, timeout: float = 10.0) -> bytes:
    """Send raw bytes on a fresh connection and return whatever comes back before close or timeout."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(payload)
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        chunks = []
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except (TimeoutError, ConnectionResetError):
            pass
    return b"".join(chunks)


# Malformed HTTP that the test client cannot express: each must get a 4xx (or a closed
# connection for what is not HTTP at all), never a 5xx, and must not take the worker down.
RAW_REQUESTS = {
    "content-length larger than the body": (
        b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{}"),
    "content-length over the size limit": (
        b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 999999999999\r\n\r\n{}"),
    "negative content-length": (
        b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: -5\r\n\r\n{}"),
    "chunked body": (
        b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3\r\n{\"P\r\n0\r\n\r\n"),
    "bad chunk size": (
        b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"zz\r\n{}\r\n0\r\n\r\n"),
    "no content-length": b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\r\n",
    "http/1.0 no host": b"POST /filter HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
    "header flood": b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-A: b\r\n" * 200 + b"\r\n",
    "huge header": b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 100_000 + b"\r\n\r\n",
    "not http": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64,
    "bad request line": b"POST\r\n\r\n",
    "unicode path": "POST /fïlter HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n".encode(),
}


@pytest.mark.slow
def test_fuzz_through_gunicorn(gunicorn_server: LiveServer) -> None:
    session = requests.Session()
    base = gunicorn_server.url

    def post(verb: str, data: bytes, content_type: str = "application/json") -> tuple[int, bytes]:
        resp = session.post(f"{base}/{verb}", data=data, headers={"Content-Type": content_type}, timeout=30)
        return resp.status_code, resp.content

    expected = valid_replies(post)
    tally = Tally()

    @fuzz_settings(LIVE_EXAMPLES)
    @given(st.sampled_from(VERBS).flatmap(lambda v: st.tuples(st.just(v), hostile_request(v))))
    def run(case: tuple[str, tuple[bytes, str, list[str]]]) -> None:
        verb, (data, content_type, notes) = case
        try:
            status, reply = post(verb, data, content_type)
        except requests.RequestException as exc:
            tally.add(verb, notes, f"connection error {exc!r}")
            FIGURES.fuzz.server_errors += 1
            return
        problem = reply_problem(status, reply)
        count("gunicorn", verb, status, problem)
        if problem:
            tally.add(verb, notes, problem)

    run()

    for name, payload in RAW_REQUESTS.items():
        reply = _raw_http(gunicorn_server.port, payload)
        status_line = reply.split(b"\r\n", 1)[0]
        parts = status_line.split()
        status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        FIGURES.fuzz.bodies += 1
        FIGURES.fuzz.by_channel["gunicorn-raw"] += 1
        FIGURES.fuzz.by_status[str(status or "closed")] += 1
        if status >= 500:
            FIGURES.fuzz.server_errors += 1
            tally.add("raw", [name], f"status line {status_line!r}")
        assert gunicorn_server.process.poll() is None, f"{name} killed the server"

    # Both workers still answer, correctly (several calls so both get some).
    fresh = requests.Session()
    for _ in range(4):
        assert valid_replies(lambda v, d: (lambda r: (r.status_code, r.content))(
            fresh.post(f"{base}/{v}", data=d, headers={"Content-Type": "application/json"}, timeout=30))) == expected
    assert len(gunicorn_server.workers()) == 2
    tally.check()
