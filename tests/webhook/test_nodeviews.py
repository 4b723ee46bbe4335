"""NodeViewCache: the request's node views with the state's pods, copied once per change; full
NodeList bodies read by node, each node decoded once."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from flask.testing import FlaskClient

from extender import wire
from extender.cluster.state import ClusterState, infos_from_views
from extender.model.nodes import NodeView
from extender.webhook.nodeviews import NodeViewCache
from tests.helpers import wire_body


def _state_and_request() -> tuple[ClusterState, list[dict[str, Any]]]:
    items = wire_body("filter-request-nodecache-false.json")["Nodes"]["items"]
    state = ClusterState()
    state.replace_nodes(items)
    state.replace_pods([])
    return state, items


def test_infos_are_what_the_state_builds_and_reused_until_something_changes() -> None:
    state, items = _state_and_request()
    cache = NodeViewCache()
    views = [cache.view(item) for item in items]
    first = cache.infos(views, state)
    expected = infos_from_views(views, state)
    assert [(i.node, i.requested, i.pod_count) for i in first] == [(i.node, i.requested, i.pod_count) for i in expected]
    assert all(a is b for a, b in zip(cache.infos(views, state), first, strict=True))
    name = views[0].name
    state.assume("default/newcomer", name, uid="u-1")  # the state's info of that node changes
    again = cache.infos(views, state)
    assert again[0] is not first[0] and again[0].pod_count == first[0].pod_count + 1
    assert again[0].node is views[0]  # still the request's view of the node
    assert all(a is b for a, b in zip(again[1:], first[1:], strict=True))


# ---- full NodeList bodies read by node (NodeViewCache.args, wire.sent_args) ----------------

def _go_raw(body: dict[str, Any]) -> bytes:
    """The body as Go writes it: compact, fields in ExtenderArgs order (orjson keeps dict order)."""
    return orjson.dumps({"Pod": body["Pod"], "Nodes": body["Nodes"], "NodeNames": None})


def _refusing_body() -> dict[str, Any]:
    """The captured full-NodeList body with its second node NotReady (a new version of it)."""
    body = wire_body("filter-request-nodecache-false.json")
    node = body["Nodes"]["items"][1]
    node["metadata"]["resourceVersion"] = "999999"
    for condition in node["status"]["conditions"]:
        if condition["type"] == "Ready":
            condition["status"] = "False"
    return body


@pytest.mark.parametrize("path", ["/filter", "/prioritize"])
@pytest.mark.parametrize("make_body", [lambda: wire_body("filter-request-nodecache-false.json"), _refusing_body])
def test_a_body_read_by_node_is_answered_as_the_same_body_decoded_whole(client: FlaskClient, path: str,
                                                                         make_body: Any) -> None:
    body = make_body()
    by_node = client.post(path, data=_go_raw(body), content_type="application/json")
    whole = client.post(path, data=json.dumps(body, indent=1), content_type="application/json")  # not Go's shape
    assert by_node.status_code == whole.status_code == 200
    assert by_node.get_json() == whole.get_json()


def test_nodes_seen_before_are_not_decoded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = NodeViewCache()
    raw = _go_raw(wire_body("filter-request-nodecache-false.json"))
    parsed: list[str] = []
    from_dict = NodeView.from_dict
    monkeypatch.setattr(NodeView, "from_dict", staticmethod(lambda node: parsed.append("x") or from_dict(node)))
    first = cache.args(raw)
    assert isinstance(first.nodes, wire.SentNodeList) and len(parsed) == 3
    again = cache.args(bytearray(raw))  # a new request: new bytes, same nodes
    assert len(parsed) == 3
    assert [a is b for a, b in zip(again.nodes.values, first.nodes.values, strict=True)] == [True] * 3
    changed = _go_raw(_refusing_body())
    third = cache.args(changed)
    assert len(parsed) == 4  # only the node whose object changed
    assert not third.nodes.values[1].ready and third.nodes.values[0] is first.nodes.values[0]


def test_the_node_bytes_kept_are_bounded() -> None:
    raw = _go_raw(wire_body("filter-request-nodecache-false.json"))
    args = NodeViewCache().args(raw)
    biggest = max(len(item) for item in args.nodes.items)
    cache = NodeViewCache(piece_bytes_limit=biggest * 2)
    cache.args(raw)
    assert 1 <= len(cache._pieces) <= 2
    assert cache._piece_bytes <= biggest * 2
    assert isinstance(cache.args(raw).nodes, wire.SentNodeList)  # still answered, by node


def test_an_unreadable_node_in_gos_shape_gets_the_same_400(client: FlaskClient) -> None:
    body = wire_body("filter-request-nodecache-false.json")
    del body["Nodes"]["items"][2]["metadata"]["name"]
    by_node = client.post("/filter", data=_go_raw(body), content_type="application/json")
    whole = client.post("/filter", json=body)
    assert by_node.status_code == whole.status_code == 400
    assert by_node.get_json() == whole.get_json()
    assert "Nodes.items.2" in by_node.get_json()["Error"]


def test_a_node_nested_too_deep_for_the_whole_body_is_refused_as_the_whole_body_is(client: FlaskClient) -> None:
    """Found by the fuzzer: a node decoded on its own passed orjson's depth limit that the whole
    body (and the reply echoing it) does not, and the reply was not JSON."""
    body = wire_body("filter-request-nodecache-false.json")
    body["Nodes"]["items"][0]["spec"] = "DEEP"
    raw = _go_raw(body).replace(b'"DEEP"', b"[" * 1023 + b"1" + b"]" * 1023)
    reply = client.post("/filter", data=raw, content_type="application/json")
    assert reply.status_code == 400 and "malformed JSON" in reply.get_json()["Error"]
