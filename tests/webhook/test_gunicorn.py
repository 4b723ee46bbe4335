"""The same replays through a real gunicorn process on 127.0.0.1, as kube-scheduler would call it."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.helpers import SNAPSHOT, free_port, settled, start_server, stop_server, wire_body


def call(base: str, path: str, body: object, content_type: str = "application/json") -> tuple[int, object]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method="POST", headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    port = free_port()
    process = start_server(
        ["serve", "--bind", f"127.0.0.1:{port}", "--workers", "2", "--source", "snapshot",
         "--snapshot", str(SNAPSHOT)], port,
    )
    yield f"http://127.0.0.1:{port}"
    output = stop_server(process)
    assert "Traceback" not in output, output


def test_replay_every_captured_body(server: str) -> None:
    status, reply = call(server, "/filter", wire_body("filter-request.json"))
    assert status == 200 and reply["NodeNames"] == ["node-1", "node-2", "node-3"] and reply["Error"] == ""
    status, reply = call(server, "/filter", wire_body("filter-request-nodecache-false.json"))
    assert status == 200 and [n["metadata"]["name"] for n in reply["Nodes"]["items"]] == ["node-1", "node-3", "node-2"]
    status, reply = call(server, "/prioritize", wire_body("prioritize-request.json"))
    assert status == 200 and [e["Host"] for e in reply] == ["node-1", "node-2", "node-3"]
    status, reply = call(server, "/prioritize", wire_body("prioritize-request-nodecache-false.json"))
    assert status == 200 and len(reply) == 3
    status, reply = call(server, "/preempt", wire_body("preempt-request.json"))
    assert status == 200 and set(reply) == {"NodeNameToMetaVictims"}
    status, reply = call(server, "/preempt", wire_body("preempt-request-nodecache-false.json"))
    assert status == 200 and set(reply["NodeNameToMetaVictims"]) == {"small-1"}


def test_bad_input_never_kills_the_worker(server: str) -> None:
    for body, content_type in [(b"{", "application/json"), (b"{}", "text/plain"), (b"[]", "application/json"),
                               (b'{"Pod": 1}', "application/json")]:
        status, reply = call(server, "/filter", body, content_type)
        assert 400 <= status < 500 and reply["Error"]
    status, reply = call(server, "/filter", wire_body("filter-request.json"))
    assert status == 200 and reply["Error"] == ""


def test_url_prefix_and_custom_verb_names() -> None:
    port = free_port()
    process = start_server(
        ["serve", "--bind", f"127.0.0.1:{port}", "--workers", "1", "--source", "snapshot",
         "--url-prefix", "/scheduler", "--filter-verb", "predicates", "--prioritize-verb", "priorities"], port,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        status, reply = call(base, "/scheduler/predicates", wire_body("filter-request.json"))
        assert status == 200 and reply["NodeNames"]
        status, reply = call(base, "/scheduler/priorities", wire_body("prioritize-request.json"))
        assert status == 200 and len(reply) == 3
        status, reply = call(base, "/filter", wire_body("filter-request.json"))
        assert status == 404 and "unknown path" in reply["Error"]
    finally:
        stop_server(process)


def _counter(base: str, verb: str) -> float:
    with urllib.request.urlopen(base + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if line.startswith(f'extender_requests_total{{result="ok",verb="{verb}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_counts_add_up_across_workers_without_a_preset_metrics_dir(server: str) -> None:
    """`extender serve` itself must set up multiprocess mode before prometheus_client loads."""
    before = _counter(server, "prioritize")
    for _ in range(30):  # new connections each time, so both workers serve some
        assert call(server, "/prioritize", wire_body("prioritize-request.json"))[0] == 200
    assert settled(lambda: _counter(server, "prioritize"), before + 30) == before + 30
    assert all(_counter(server, "prioritize") == before + 30 for _ in range(6))
