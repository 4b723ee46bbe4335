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
        pytest.skip(f"{shared} is missing: shared/ is beside the clone on CI and in the main checkout, "
                    "not in a worktree")
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


# ---- a full NodeList read as sent (wire.sent_args) ---------------------------------------


def _go_bytes(pod: object, nodes: object) -> bytes:
    """A body as Go's encoding/json writes ExtenderArgs: fields in order, compact."""
    return (b'{"Pod":' + orjson.dumps(pod) + b',"Nodes":' + orjson.dumps(nodes) + b',"NodeNames":null}')


def _decoded(piece: bytes) -> object:
    """`sent_args`'s item callback at its plainest: the item decoded, None unless one object."""
    return wire.decode_sent_item(piece)


def _as_decoded(raw: bytes) -> dict | None:
    """What sent_args made of `raw`, as the decoded body it must equal (None: not taken)."""
    args = wire.sent_args(raw, _decoded)
    if args is None:
        return None
    assert isinstance(args.nodes, wire.SentNodeList) and args.node_names is None
    nodes = orjson.loads(orjson.dumps(args.nodes.kept()))
    assert nodes["items"] == args.nodes.values
    return {"Pod": args.pod, "Nodes": nodes, "NodeNames": None}


def test_kube_schedulers_body_is_read_by_node_and_echoed_byte_for_byte() -> None:
    raw = (WIRE / "filter-request-nodecache-false.json").read_bytes()
    args = wire.sent_args(raw, _decoded)
    assert args is not None and isinstance(args.nodes, wire.SentNodeList)
    body = orjson.loads(raw)
    assert args.pod == body["Pod"]
    assert args.nodes.values == body["Nodes"]["items"] and len(args.nodes.items) == 3
    reply = orjson.dumps({"Nodes": args.nodes.kept()})
    start = raw.index(b',"Nodes":') + len(b',"Nodes":')
    assert raw[start:-len(b',"NodeNames":null}')] in reply  # the very bytes kube-scheduler sent
    assert wire.load_extender_args(args) is args


def test_kept_items_are_the_sent_bytes_of_those_nodes() -> None:
    raw = (WIRE / "filter-request-nodecache-false.json").read_bytes()
    args = wire.sent_args(raw, _decoded)
    assert args is not None and isinstance(args.nodes, wire.SentNodeList)
    kept = orjson.dumps(args.nodes.kept([True, False, True]))
    body = orjson.loads(raw)
    assert orjson.loads(kept) == {**body["Nodes"], "items": [body["Nodes"]["items"][0], body["Nodes"]["items"][2]]}
    assert args.nodes.items[2] in kept and args.nodes.items[1] not in kept
    assert orjson.loads(orjson.dumps(args.nodes.kept([False] * 3)))["items"] == []


@pytest.mark.parametrize("nodes", [
    {"metadata": {}, "items": []},
    {"metadata": {"resourceVersion": "7"}, "items": [{"metadata": {"name": "n1"}}]},
    {"kind": "NodeList", "apiVersion": "v1", "metadata": {},
     "items": [{"kind": "Node", "apiVersion": "v1", "metadata": {"name": f"n{i}"}} for i in range(3)]},
    # the separator inside a node: the cut pieces are not objects, so the body is decoded whole
    {"metadata": {}, "items": [{"metadata": {"name": "n1", "annotations": {"a": {"metadata": 1}}},
                                "x": [{"y": 1}, {"metadata": 2}]}, {"metadata": {"name": "n2"}}]},
])
def test_read_by_node_or_not_at_all_never_otherwise(nodes: dict) -> None:
    raw = _go_bytes({"metadata": {"name": "p"}}, nodes)
    read = _as_decoded(raw)
    assert read is None or read == orjson.loads(raw)


def test_a_separator_inside_a_node_falls_back() -> None:
    nodes = {"metadata": {}, "items": [{"metadata": {"name": "n1"}, "x": [{"y": 1}, {"metadata": 2}]}]}
    assert wire.sent_args(_go_bytes({"metadata": {"name": "p"}}, nodes), _decoded) is None


@pytest.mark.parametrize("pod", [
    {"metadata": {"name": "p", "annotations": {"Nodes": "x"}}},
    {"metadata": {"name": "p"}, "spec": {"x": {"Nodes": {"metadata": {}, "items": []}}}},
    {"metadata": {"name": "p"}, "Nodes": {"items": []}},  # a top-level key of the pod named Nodes
    {"metadata": {"name": "p", "annotations": {'a"items': "x", "b": '"items":['}}},
])
def test_a_pod_that_spells_nodes_or_items_never_moves_a_cut(pod: dict) -> None:
    nodes = {"metadata": {}, "items": [{"metadata": {"name": "node-1"}}, {"metadata": {"name": "node-2"}}]}
    raw = _go_bytes(pod, nodes)
    assert _as_decoded(raw) == orjson.loads(raw)


@pytest.mark.parametrize("nodes", [
    {"metadata": {'a"items': [{"metadata": {"name": "hidden"}}]}, "items": [{"metadata": {"name": "n1"}}]},
    {'a"items': [{"metadata": {"name": "hidden"}}], "items": [{"metadata": {"name": "n1"}}]},
    {"items": [], "other": [{"metadata": {"name": "hidden"}}]},
    {"metadata": {}, "items": [{"metadata": {"name": "n1"}}], "extra": 1},
])
def test_a_list_that_hides_items_elsewhere_is_decoded_whole(nodes: dict) -> None:
    raw = _go_bytes({"metadata": {"name": "p"}}, nodes)
    read = _as_decoded(raw)
    assert read is None or read == orjson.loads(raw)


@pytest.mark.parametrize("raw", [
    b'{"Nodes":{"items":[]},"Pod":{"metadata":{"name":"p"}},"NodeNames":null}',  # another order
    b'{"Pod": {"metadata":{"name":"p"}}, "Nodes": {"items":[]}, "NodeNames": null}',  # not compact
    b'{"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":[]},"Error":"x","NodeNames":null}',  # another key
    b'{"Pod":[],"Nodes":{"items":[]},"NodeNames":null}',  # a pod that is no object
    b'{"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":[1,2]},"NodeNames":null}',  # items no objects
    b'{"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":[{"metadata":{}}}]},"NodeNames":null}',  # not JSON
])
def test_bodies_not_in_gos_exact_shape_are_decoded_whole(raw: bytes) -> None:
    assert wire.sent_args(raw, _decoded) is None


@pytest.mark.parametrize("raw", [
    b'{"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":[{"metadata":{"name":"a"}}]},'
    b'"Nodes":{"items":[]},"NodeNames":null}',
    b'{"Pod":{"metadata":{"name":"q"}},"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":[]},"NodeNames":null}',
])
def test_a_repeated_key_reads_as_it_decodes(raw: bytes) -> None:
    read = _as_decoded(raw)  # the last of a repeated key wins, in orjson as in Go
    assert read is None or read == orjson.loads(raw)


@pytest.mark.parametrize("where", ["item", "list"])
def test_what_is_too_deep_for_the_whole_body_is_too_deep_by_node(where: str) -> None:
    """orjson refuses nesting beyond its limit: a node or list field close to it decodes on
    its own but not inside the body, and must not be read by node (the reply would nest it as
    deep again, and kube-scheduler's decoder may refuse it too)."""
    outcomes = set()
    for depth in range(1010, 1030):
        if where == "item":
            nodes = {"metadata": {}, "items": [{"metadata": {"name": "n1"}, "spec": {"x": "DEEP"}}]}
        else:
            nodes = {"metadata": {"x": "DEEP"}, "items": [{"metadata": {"name": "n1"}}]}
        raw = _go_bytes({"metadata": {"name": "p"}}, nodes).replace(b'"DEEP"', b"[" * depth + b"1" + b"]" * depth)
        try:
            orjson.loads(raw)
            decodes = True
        except orjson.JSONDecodeError:
            decodes = False
        read = wire.sent_args(raw, _decoded)  # (too deep to compare with ==: Python's own recursion limit)
        assert decodes or read is None, depth
        if read is not None:
            assert orjson.loads(orjson.dumps({"Nodes": read.nodes.kept()}))  # the reply decodes too
        outcomes.add(decodes)
    assert outcomes == {True, False}  # the range spans the limit


def test_an_item_the_callback_refuses_means_no_reading() -> None:
    raw = _go_bytes({"metadata": {"name": "p"}}, {"metadata": {}, "items": [{"metadata": {"name": "n1"}}]})
    assert wire.sent_args(raw, lambda piece: None) is None
    seen: list[bytes] = []
    args = wire.sent_args(raw, lambda piece: seen.append(piece) or "view")
    assert args is not None and args.nodes.values == ["view"] and seen == [b'{"metadata":{"name":"n1"}}']


# Each error as kube-scheduler's pod event shows it, word for word: marshmallow's own phrases and
# its `.value.` for dict values included, so that moving the formatting does not reword them.
MESSAGES = [
    ('load_extender_args', [],
     'invalid ExtenderArgs: expected a JSON object, got array'),
    ('load_extender_args', {'Pod': {}, 'Nodes': {'items': [{}, 3]}},
     'invalid ExtenderArgs: Nodes.items.1: expected a Node object, got number'),
    ('load_extender_args', {'Pod': {}, 'Nodes': {'items': 3}},
     'invalid ExtenderArgs: Nodes.items: expected an array, got number'),
    ('load_extender_args', {'Pod': {}, 'Nodes': [], 'NodeNames': ['a']},
     'invalid ExtenderArgs: Nodes: expected a NodeList object with items, got array'),
    ('load_extender_args', {'Nodes': None, 'NodeNames': ['a', 1]},
     'invalid ExtenderArgs: NodeNames.1: expected a string, got number; Pod: Missing data for required field.'),
    ('load_binding_args', {'PodName': '', 'PodNamespace': '', 'PodUID': 3},
     'invalid ExtenderBindingArgs: Node: Missing data for required field.; PodUID: Not a valid string.'),
    ('load_preemption_args', {'Pod': {}, 'NodeNameToMetaVictims': {'n': {'Pods': [{'uid': 3}], 'NumPDBViolations': 'x'}}},
     'invalid ExtenderPreemptionArgs: NodeNameToMetaVictims.n.value.NumPDBViolations: Not a valid integer.; NodeNameToMetaVictims.n.value.Pods.0.UID: Not a valid string.'),
    ('load_preemption_args', {'Pod': {}, 'NodeNameToVictims': {'n': {'Pods': [3]}}},
     'invalid ExtenderPreemptionArgs: NodeNameToVictims.n.value.Pods.0: expected an object, got number'),
    ('load_preemption_args', {'Pod': {}, 'NodeNameToVictims': []},
     'invalid ExtenderPreemptionArgs: NodeNameToVictims: Not a valid mapping type.'),
]


@pytest.mark.parametrize(("load", "body", "message"), MESSAGES, ids=[str(i) for i in range(len(MESSAGES))])
def test_each_bad_body_reads_as_before(load: str, body: object, message: str) -> None:
    with pytest.raises(WireError) as exc:
        getattr(wire, load)(body)
    assert str(exc.value) == message
