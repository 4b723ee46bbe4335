"""The wire schemas: Go's names out, any case in, and the fast reply builders equal to the schema dumps."""

from __future__ import annotations

import json

import orjson
import pytest

from extender import wire
from extender.errors import WireError
from tests.helpers import ROOT, WIRE, wire_body


def test_fixtures_are_the_shared_captures() -> None:
    shared = ROOT.parent / "shared" / "wire"
    if not shared.is_dir():
        pytest.skip("shared/wire is not beside this checkout")
    for path in WIRE.glob("*.json"):
        assert json.loads(path.read_text()) == json.loads((shared / path.name).read_text()), path.name


def test_filter_result_builder_matches_schema_dump() -> None:
    names = wire.filter_result(node_names=["a", "b"], failed={"c": "Insufficient cpu"}, unresolvable={"d": "x"})
    assert names == wire.ExtenderFilterResultSchema().dump(names)
    assert list(names) == ["NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"]
    nodelist = {"metadata": {}, "items": [{"metadata": {"name": "a"}}]}
    full = wire.filter_result(nodes=nodelist, failed={}, unresolvable={})
    assert full == wire.ExtenderFilterResultSchema().dump(full)


def test_host_priorities_builder_matches_schema_dump() -> None:
    reply = wire.host_priorities([("a", 100.0), ("b", 44.9), ("c", 0.0)])
    assert reply == wire.HostPriorityListSchema.dump(reply)
    assert reply == [{"Host": "a", "Score": 10}, {"Host": "b", "Score": 4}, {"Host": "c", "Score": 0}]


def test_preemption_result_builder_matches_schema_dump() -> None:
    reply = wire.preemption_result({"n": {"Pods": [{"UID": "u1"}], "NumPDBViolations": 2}})
    assert reply == wire.ExtenderPreemptionResultSchema().dump(reply)


@pytest.mark.parametrize("name", ["filter-request.json", "prioritize-request.json",
                                  "filter-request-nodecache-false.json"])
def test_extender_args_load_from_captures(name: str) -> None:
    args = wire.load_extender_args(wire_body(name))
    assert args.pod["metadata"]["name"].startswith("pod-cache")
    assert (args.nodes is None) != (args.node_names is None)


@pytest.mark.parametrize("body", [
    wire_body("filter-request.json"),
    {"Pod": {}, "Nodes": None, "NodeNames": []},
    # Not in kube-scheduler's exact shape: the schema reads them, to the same result.
    {"Pod": {}, "NodeNames": ["a"]},
    {"pod": {}, "nodes": None, "nodenames": ["a"]},
    {"Pod": {}, "Nodes": None, "NodeNames": ["a"], "Extra": 1},
])
def test_kube_schedulers_bodies_load_as_the_schema_loads_them(body: dict) -> None:
    data = wire.ExtenderArgsSchema().load(body)
    assert wire.load_extender_args(body) == wire.ExtenderArgs(data["Pod"], data.get("Nodes"), data.get("NodeNames"))


@pytest.mark.parametrize(("body", "message"), [
    ({"Pod": {}, "Nodes": None, "NodeNames": ["a", 1]}, "NodeNames.1: expected a string, got number"),
    ({"Pod": [], "Nodes": None, "NodeNames": []}, "Pod: expected an object, got array"),
    ({"Pod": {}, "Nodes": None, "NodeNames": None}, "exactly one of Nodes and NodeNames must be set, got neither"),
    ({"Pod": {}, "Nodes": None, "NodeNames": "a"}, "NodeNames: expected an array of node names, got string"),
])
def test_bodies_in_kube_schedulers_shape_still_get_the_schemas_errors(body: dict, message: str) -> None:
    with pytest.raises(WireError) as exc:
        wire.load_extender_args(body)
    assert message in str(exc.value)


def test_exact_key_wins_over_case_folded_duplicate() -> None:
    body = {"Pod": {}, "nodenames": ["x"], "NodeNames": ["y"]}
    assert wire.load_extender_args(body).node_names == ["y"]


def test_binding_args_any_case() -> None:
    args = wire.load_binding_args({"podname": "p", "PODNAMESPACE": "ns", "PodUid": "u", "node": "n"})
    assert args == wire.BindingArgs("p", "ns", "u", "n")


def test_binding_args_refuse_empty_names() -> None:
    with pytest.raises(WireError, match="PodName: must not be empty"):
        wire.load_binding_args({"PodName": "", "PodNamespace": "ns", "PodUID": "u", "Node": "n"})


def test_preemption_args_need_victims() -> None:
    with pytest.raises(WireError, match="NodeNameToVictims"):
        wire.load_preemption_args({"Pod": {}})


@pytest.mark.parametrize(("total", "score"), [(0, 0), (4.9, 0), (5, 1), (55, 6), (99.9, 10), (100, 10)])
def test_engine_total_to_extender_score(total: float, score: int) -> None:
    assert wire.to_extender_score(total) == score


# ---- echoing a full NodeList as sent (wire.nodes_as_sent) ----------------------------------


def _go_bytes(pod: object, nodes: object) -> bytes:
    """A body as Go's encoding/json writes ExtenderArgs: fields in order, compact."""
    return (b'{"Pod":' + orjson.dumps(pod) + b',"Nodes":' + orjson.dumps(nodes) + b',"NodeNames":null}')


def test_the_sent_nodelist_is_echoed_byte_for_byte() -> None:
    raw = (WIRE / "filter-request-nodecache-false.json").read_bytes()
    body = orjson.loads(raw)
    sent = wire.nodes_as_sent(raw, body)
    assert sent is not None
    reply = orjson.dumps({"Nodes": sent})
    assert orjson.loads(reply)["Nodes"] == body["Nodes"]
    start = raw.index(b',"Nodes":') + len(b',"Nodes":')
    assert raw[start:-len(b',"NodeNames":null}')] in reply  # the very bytes kube-scheduler sent


@pytest.mark.parametrize("pod", [
    {"metadata": {"name": "p", "annotations": {"Nodes": "x"}}},
    {"metadata": {"name": "p"}, "spec": {"x": {"Nodes": {"metadata": {}, "items": []}}}},
    {"metadata": {"name": "p"}, "Nodes": {"items": []}},  # a top-level key of the pod named Nodes
])
def test_a_pod_that_spells_nodes_never_moves_the_split(pod: dict) -> None:
    nodes = {"metadata": {}, "items": [{"metadata": {"name": "node-1"}}]}
    raw = _go_bytes(pod, nodes)
    sent = wire.nodes_as_sent(raw, orjson.loads(raw))
    assert sent is None or orjson.loads(orjson.dumps(sent)) == nodes


@pytest.mark.parametrize("raw", [
    b'{"Nodes":{"items":[]},"Pod":{"metadata":{"name":"p"}},"NodeNames":null}',  # another order
    b'{"Pod": {"metadata":{"name":"p"}}, "Nodes": {"items":[]}, "NodeNames": null}',  # not compact
    b'{"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":[]},"Error":"x","NodeNames":null}',  # another key
])
def test_bodies_not_in_gos_exact_shape_are_encoded_again(raw: bytes) -> None:
    assert wire.nodes_as_sent(raw, orjson.loads(raw)) is None


@pytest.mark.parametrize("raw", [
    b'{"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":[1]},"Nodes":{"items":[]},"NodeNames":null}',
    b'{"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":[]},"Pod":{"metadata":{"name":"p"}},"NodeNames":null}',
])
def test_a_repeated_key_is_echoed_as_it_was_decoded(raw: bytes) -> None:
    body = orjson.loads(raw)  # the last of a repeated key wins, in orjson as in Go
    sent = wire.nodes_as_sent(raw, body)
    assert sent is not None
    echoed = orjson.loads(orjson.dumps({"Nodes": sent, "Error": ""}))
    assert echoed["Nodes"] == body["Nodes"] and echoed["Error"] == ""  # the reply's own keys come last
