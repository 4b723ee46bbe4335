"""Replays of the bodies kube-scheduler v1.36 really sent, checked with Go's decoding rules."""

from __future__ import annotations

import copy

import orjson
from flask.testing import FlaskClient
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.webhook import verbs
from extender.webhook.runtime import Runtime
from tests.helpers import wire_body


def post(client: FlaskClient, path: str, body: object):
    return client.post(path, json=body)


def assert_filter_result_shape(reply: dict, *, names: bool) -> None:
    assert set(reply) == {"NodeNames" if names else "Nodes", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
    assert isinstance(reply["FailedNodes"], dict)
    assert isinstance(reply["FailedAndUnresolvableNodes"], dict)
    assert reply["Error"] == ""


def test_filter_node_names_keeps_input_order_and_subset(client: FlaskClient) -> None:
    body = wire_body("filter-request.json")
    body["NodeNames"] = ["node-3", "node-1", "node-2"]
    reply = post(client, "/filter", body).get_json()
    assert_filter_result_shape(reply, names=True)
    assert reply["NodeNames"] == ["node-3", "node-1", "node-2"]
    assert reply["FailedNodes"] == {}


def test_filter_full_nodelist_returns_nodelist_object_with_unchanged_items(client: FlaskClient) -> None:
    body = wire_body("filter-request-nodecache-false.json")
    sent = copy.deepcopy(body["Nodes"])
    reply = post(client, "/filter", body).get_json()
    assert_filter_result_shape(reply, names=False)
    assert isinstance(reply["Nodes"], dict) and isinstance(reply["Nodes"]["items"], list)
    assert reply["Nodes"]["items"] == sent["items"]  # byte-for-byte the objects kube-scheduler sent
    assert reply["Nodes"]["metadata"] == sent["metadata"]


def test_filter_refuses_cordoned_and_not_ready_nodes_with_reasons(client: FlaskClient) -> None:
    body = wire_body("filter-request.json")
    body["NodeNames"] = ["node-1", "node-4", "node-5"]
    reply = post(client, "/filter", body).get_json()
    refused = {**reply["FailedNodes"], **reply["FailedAndUnresolvableNodes"]}
    assert reply["NodeNames"] == ["node-1"]
    assert set(refused) == {"node-4", "node-5"}
    assert all(isinstance(reason, str) and reason for reason in refused.values())


def test_filter_unknown_node_name_is_a_failed_node_not_an_error(client: FlaskClient) -> None:
    body = wire_body("filter-request.json")
    body["NodeNames"] = ["node-1", "no-such-node"]
    resp = post(client, "/filter", body)
    reply = resp.get_json()
    assert resp.status_code == 200
    assert reply["NodeNames"] == ["node-1"]
    assert "unknown to the extender" in {**reply["FailedNodes"], **reply["FailedAndUnresolvableNodes"]}["no-such-node"]
    assert reply["Error"] == ""


def test_prioritize_returns_bare_host_priority_list_for_every_input_node(client: FlaskClient) -> None:
    body = wire_body("prioritize-request.json")
    resp = post(client, "/prioritize", body)
    reply = resp.get_json()
    assert resp.status_code == 200
    assert isinstance(reply, list)
    assert [entry["Host"] for entry in reply] == body["NodeNames"]
    for entry in reply:
        assert set(entry) == {"Host", "Score"}
        assert isinstance(entry["Score"], int) and 0 <= entry["Score"] <= 10


def test_prioritize_full_nodelist(client: FlaskClient) -> None:
    body = wire_body("prioritize-request-nodecache-false.json")
    reply = post(client, "/prioritize", body).get_json()
    assert [e["Host"] for e in reply] == [n["metadata"]["name"] for n in body["Nodes"]["items"]]


def test_keys_are_read_case_insensitively(client: FlaskClient) -> None:
    body = wire_body("filter-request.json")
    lowered = {"pod": body["Pod"], "nodes": None, "nodenames": body["NodeNames"]}
    reply = post(client, "/filter", lowered).get_json()
    assert reply["NodeNames"] == body["NodeNames"]


def test_bind_changes_the_in_memory_cluster(client: FlaskClient, runtime: Runtime) -> None:
    body = wire_body("bind-request.json")
    assert runtime.state.pod("default/pod-cache-true").node_name == ""
    before = runtime.state.node_info("node-2").pod_count
    resp = post(client, "/bind", body)
    assert resp.status_code == 200
    assert resp.get_json() == {"Error": ""}
    assert runtime.state.pod("default/pod-cache-true").node_name == "node-2"
    assert runtime.state.node_info("node-2").pod_count == before + 1
    again = post(client, "/bind", body).get_json()
    assert "already assigned to node node-2" in again["Error"]


def test_preempt_meta_victims_pass_through(client: FlaskClient) -> None:
    body = wire_body("preempt-request.json")
    reply = post(client, "/preempt", body).get_json()
    assert reply == {"NodeNameToMetaVictims": body["NodeNameToMetaVictims"]}


def test_preempt_full_victims_are_returned_as_uids(client: FlaskClient) -> None:
    body = wire_body("preempt-request-nodecache-false.json")
    reply = post(client, "/preempt", body).get_json()
    victims = body["NodeNameToVictims"]["small-1"]["Pods"]
    assert reply == {"NodeNameToMetaVictims": {"small-1": {
        "Pods": [{"UID": v["metadata"]["uid"]} for v in victims], "NumPDBViolations": 0}}}


def test_preempt_drops_nodes_where_eviction_cannot_help(client: FlaskClient) -> None:
    body = wire_body("preempt-request.json")
    victims = body["NodeNameToMetaVictims"]["small-1"]
    body["NodeNameToMetaVictims"] = {"node-1": victims, "node-5": victims}
    reply = post(client, "/preempt", body).get_json()
    assert set(reply["NodeNameToMetaVictims"]) == {"node-1"}  # node-5 is NotReady: unresolvable


def test_status_routes(client: FlaskClient) -> None:
    assert client.get("/healthz").status_code == 200
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.get_json()["nodes"] == 6
    assert b"extender_requests_total" in client.get("/metrics").data
    assert client.get("/version").get_json()["version"]


def test_a_full_nodelist_is_echoed_as_sent_and_filtered_when_a_node_is_refused(client: FlaskClient) -> None:
    import orjson

    from tests.helpers import WIRE

    raw = (WIRE / "filter-request-nodecache-false.json").read_bytes()
    reply = client.post("/filter", data=raw, content_type="application/json")
    sent = orjson.loads(raw)["Nodes"]
    assert reply.status_code == 200 and reply.get_json()["Nodes"] == sent
    assert raw[raw.index(b',"Nodes":') + 9:-len(b',"NodeNames":null}')] in reply.data  # not re-encoded
    body = orjson.loads(raw)
    body["Nodes"]["items"][1]["metadata"]["resourceVersion"] = "999999"  # a new version of the node
    conditions = body["Nodes"]["items"][1]["status"]["conditions"]
    for condition in conditions:
        if condition["type"] == "Ready":
            condition["status"] = "False"
    refused = client.post("/filter", data=orjson.dumps(body), content_type="application/json").get_json()
    kept = [item["metadata"]["name"] for item in refused["Nodes"]["items"]]
    assert kept == [sent["items"][0]["metadata"]["name"], sent["items"][2]["metadata"]["name"]]
    assert list(refused["FailedAndUnresolvableNodes"]) == [sent["items"][1]["metadata"]["name"]]


@settings(max_examples=300, deadline=None)
@given(names=st.lists(st.text(max_size=6) | st.sampled_from(['","', '\\', '"', 'a",', ',"b', 'node-1']),
                      max_size=8))
def test_a_scoreless_prioritize_reply_is_one_entry_per_name_whatever_the_names(names: list[str]) -> None:
    """The zero-score reply is spliced from the encoded names (verbs._zero_scores): quotes,
    commas and backslashes in a name must not move the seams."""
    reply = orjson.loads(orjson.dumps(verbs._zero_scores(names)))
    assert reply == [{"Host": name, "Score": 0} for name in names]
