"""POST /explain: the filter verb's body in, the explanation out, off unless enabled."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from flask.testing import FlaskClient

from extender.settings import Settings
from extender.webhook import create_app
from extender.webhook.runtime import build_runtime
from tests.helpers import SNAPSHOT, wire_body


def _client(**settings: object) -> Iterator[FlaskClient]:
    config = Settings(source="snapshot", snapshot=str(SNAPSHOT), **settings)  # type: ignore[arg-type]
    runtime = build_runtime(config)
    try:
        yield create_app(config, runtime=runtime).test_client()
    finally:
        runtime.stop()


@pytest.fixture
def client() -> Iterator[FlaskClient]:
    yield from _client(enable_explain=True, policy_mode="standalone")


def test_names_come_from_the_cluster_state(client: FlaskClient) -> None:
    # The captured kube-scheduler body for default/pod-cache-true, nodeCacheCapable: NodeNames only.
    reply = client.post("/explain", json=wire_body("filter-request.json"))
    assert reply.status_code == 200, reply.json
    body = reply.json
    assert body["pod"] == "default/pod-cache-true" and body["policy"] == "<built-in standalone>"
    # Same ranking as explain on the snapshot (tests/explain/test_explaining.py works out the numbers).
    assert [(n["node"], n["rank"], n["wireScore"]) for n in body["nodes"]] == [
        ("node-3", 1, 10), ("node-2", 2, 9), ("node-1", 3, 9),
    ]
    assert body["summary"] == "3/3 nodes are available."


def test_full_node_objects_are_used_with_the_state_usage(client: FlaskClient) -> None:
    reply = client.post("/explain", json=wire_body("filter-request-nodecache-false.json"))
    assert reply.status_code == 200, reply.json
    nodes = {n["node"]: n for n in reply.json["nodes"]}
    assert set(nodes) == {"node-1", "node-2", "node-3"}
    assert reply.json["best"] == ["node-3"]


def test_unknown_names_are_refused_as_filter_would(client: FlaskClient) -> None:
    body = wire_body("filter-request.json")
    body["NodeNames"] = ["node-1", "ghost", "node-5"]
    nodes = client.post("/explain", json=body).json["nodes"]
    assert [(n["node"], n["verdict"]) for n in nodes] == [
        ("node-1", "feasible"), ("node-5", "unresolvable"), ("ghost", "unresolvable"),
    ]
    assert nodes[2]["reason"] == "node(s) were unknown to the extender"


def test_bad_bodies_get_a_400_naming_the_problem(client: FlaskClient) -> None:
    reply = client.post("/explain", json={"Pod": {"metadata": {}}, "NodeNames": ["node-1"]})
    assert reply.status_code == 400 and "metadata.name" in reply.json["Error"]
    reply = client.post("/explain", json={"Pod": {"metadata": {"name": "p"}}})
    assert reply.status_code == 400 and "exactly one of Nodes and NodeNames" in reply.json["Error"]
    reply = client.post("/explain", json={"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [{"x": 1}]}})
    assert reply.status_code == 400 and "Nodes.items.0" in reply.json["Error"]


def test_off_by_default() -> None:
    for client in _client():
        reply = client.post("/explain", json=wire_body("filter-request.json"))
        assert reply.status_code == 404
