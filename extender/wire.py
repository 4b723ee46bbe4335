"""marshmallow schemas for kube-scheduler's extender/v1 types (k8s.io/kube-scheduler/extender/v1).

The Go types carry no json tags, so the wire names are the Go field names, and
Go's decoder matches keys case-insensitively: `load_*` accepts any case, every
reply uses the exact Go spelling. Only the envelope is validated here; Pod and
Node objects stay plain dicts (a deep schema over 5000 nodes would cost more than
all the policy work), and `model` reads them field by field with its own errors.

The reply builders at the bottom produce exactly what the `*Result` schemas
dump, without marshmallow's per-item cost on the hot path; tests hold them equal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from marshmallow import EXCLUDE, Schema, ValidationError, fields, pre_load, validates_schema

from extender.errors import WireError

MAX_EXTENDER_PRIORITY = 10  # extenderv1.MaxExtenderPriority


class GoSchema(Schema):
    """Reads keys case-insensitively (exact match first, as encoding/json does); ignores unknown keys."""

    class Meta:
        unknown = EXCLUDE

    @pre_load
    def _fold_case(self, data: Any, **_: Any) -> Any:
        if not isinstance(data, Mapping):
            raise ValidationError(f"expected a JSON object, got {_json_type(data)}")
        canonical = {name.lower(): name for name in self.fields}
        folded: dict[str, Any] = {}
        for key, value in data.items():
            name = key if key in self.fields else canonical.get(str(key).lower())
            if name is not None and (name not in folded or key == name):
                folded[name] = value
        return folded


def _json_type(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


class JsonObject(fields.Field):
    """Any JSON object, kept as the dict it is (a v1.Pod, a v1.Node)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        if not isinstance(value, dict):
            raise ValidationError(f"expected an object, got {_json_type(value)}")
        return value

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        return value


class NodeListField(fields.Field):
    """A v1.NodeList object, `{"metadata": {}, "items": [...]}`: never a bare array."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        if not isinstance(value, dict):
            raise ValidationError(f"expected a NodeList object with items, got {_json_type(value)}")
        items = value.get("items")
        if items is None:
            items = []
        if not isinstance(items, list):
            raise ValidationError({"items": [f"expected an array, got {_json_type(items)}"]})
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                raise ValidationError({"items": {index: [f"expected a Node object, got {_json_type(item)}"]}})
        return {**value, "items": items}

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        return value


class NameList(fields.Field):
    """A JSON array of strings, checked in one pass: fields.List(String) costs ~7 us per name,
    which is 35 ms for the 5000 names of a large node-cache request."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        if not isinstance(value, list):
            raise ValidationError(f"expected an array of node names, got {_json_type(value)}")
        for index, name in enumerate(value):
            if type(name) is not str:
                raise ValidationError({index: [f"expected a string, got {_json_type(name)}"]})
        return value

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        return value


class MetaPodSchema(GoSchema):
    UID = fields.String(required=True)


class VictimsSchema(GoSchema):
    Pods = fields.List(JsonObject(), load_default=list, allow_none=True)
    NumPDBViolations = fields.Integer(load_default=0, strict=True)


class MetaVictimsSchema(GoSchema):
    Pods = fields.List(fields.Nested(MetaPodSchema), load_default=list, allow_none=True)
    NumPDBViolations = fields.Integer(load_default=0, strict=True)


class ExtenderArgsSchema(GoSchema):
    Pod = JsonObject(required=True)
    Nodes = NodeListField(allow_none=True, load_default=None)
    NodeNames = NameList(allow_none=True, load_default=None, metadata={"items": {"type": "string"}})

    @validates_schema
    def _one_node_source(self, data: Mapping[str, Any], **_: Any) -> None:
        has_nodes = data.get("Nodes") is not None
        has_names = data.get("NodeNames") is not None
        if has_nodes == has_names:
            which = "both" if has_nodes else "neither"
            raise ValidationError(f"exactly one of Nodes and NodeNames must be set, got {which}")


class ExtenderFilterResultSchema(Schema):
    Nodes = NodeListField(allow_none=True)
    NodeNames = NameList(allow_none=True, metadata={"items": {"type": "string"}})
    FailedNodes = fields.Dict(keys=fields.String(), values=fields.String())
    FailedAndUnresolvableNodes = fields.Dict(keys=fields.String(), values=fields.String())
    Error = fields.String()


class HostPrioritySchema(GoSchema):
    Host = fields.String(required=True)
    Score = fields.Integer(required=True, strict=True)


HostPriorityListSchema = HostPrioritySchema(many=True)


class ExtenderBindingArgsSchema(GoSchema):
    PodName = fields.String(required=True)
    PodNamespace = fields.String(required=True)
    PodUID = fields.String(required=True)
    Node = fields.String(required=True)

    @validates_schema
    def _not_empty(self, data: Mapping[str, Any], **_: Any) -> None:
        empty = [name for name in ("PodName", "PodNamespace", "Node") if not data.get(name)]
        if empty:
            raise ValidationError({name: ["must not be empty"] for name in empty})


class ExtenderBindingResultSchema(Schema):
    Error = fields.String()


class ExtenderPreemptionArgsSchema(GoSchema):
    Pod = JsonObject(required=True)
    NodeNameToVictims = fields.Dict(keys=fields.String(), values=fields.Nested(VictimsSchema), allow_none=True,
                                    load_default=None)
    NodeNameToMetaVictims = fields.Dict(keys=fields.String(), values=fields.Nested(MetaVictimsSchema),
                                        allow_none=True, load_default=None)


class ExtenderPreemptionResultSchema(Schema):
    NodeNameToMetaVictims = fields.Dict(keys=fields.String(), values=fields.Nested(MetaVictimsSchema))


def _describe(messages: Any, path: str = "") -> list[str]:
    """Flatten marshmallow's nested error dict into `path: message` lines."""
    if isinstance(messages, Mapping):
        lines = []
        for key, value in messages.items():
            sub = path if key == "_schema" else (f"{path}.{key}" if path else str(key))
            lines += _describe(value, sub)
        return lines
    if isinstance(messages, list) and all(isinstance(m, str) for m in messages):
        return [f"{path}: {m}" if path else m for m in messages]
    if isinstance(messages, list):
        return [line for m in messages for line in _describe(m, path)]
    return [f"{path}: {messages}" if path else str(messages)]


def _load(schema: Schema, body: Any, what: str) -> Any:
    try:
        return schema.load(body)
    except ValidationError as exc:
        detail = "; ".join(sorted(_describe(exc.messages)))
        raise WireError(f"invalid {what}: {detail}") from None


_ARGS = ExtenderArgsSchema()
_BINDING = ExtenderBindingArgsSchema()
_PREEMPTION = ExtenderPreemptionArgsSchema()


@dataclass(frozen=True, slots=True)
class ExtenderArgs:
    pod: dict[str, Any]
    nodes: dict[str, Any] | None  # the NodeList object, when nodeCacheCapable is false
    node_names: list[str] | None  # when nodeCacheCapable is true


@dataclass(frozen=True, slots=True)
class BindingArgs:
    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str


@dataclass(frozen=True, slots=True)
class PreemptionArgs:
    pod: dict[str, Any]
    victims: dict[str, dict[str, Any]] | None
    meta_victims: dict[str, dict[str, Any]] | None


_WIRE_KEYS = frozenset({"Pod", "Nodes", "NodeNames"})
_STR = {str}


def _as_sent(body: Any) -> ExtenderArgs | None:
    """kube-scheduler's own node-cache body, checked as the schema would accept it, else None.

    Go writes every field, with its exact name: a Pod object, Nodes null and NodeNames an
    array of strings. That is every filter and prioritize call in node-cache mode, and for
    them marshmallow's per-field machinery costs as much as the verb's policy; any other
    body goes through the schema, which also words the errors.
    """
    if type(body) is not dict or body.keys() != _WIRE_KEYS:
        return None
    pod, nodes, names = body["Pod"], body["Nodes"], body["NodeNames"]
    if type(pod) is not dict or nodes is not None or type(names) is not list:
        return None
    if not set(map(type, names)) <= _STR:
        return None
    return ExtenderArgs(pod, None, names)


_POD_KEY = b'{"Pod":'
_NODES_KEY = b',"Nodes":'
_NO_NAMES = b',"NodeNames":null}'


def nodes_as_sent(raw: bytes | bytearray, body: Mapping[str, Any]) -> orjson.Fragment | None:
    """The `Nodes` of a full-NodeList ExtenderArgs body (`body`, decoded from `raw`) as the
    bytes kube-scheduler sent, for a filter reply that keeps every node to echo without
    encoding megabytes again; None unless the bytes are provably that value.

    Go writes the fields in order: `{"Pod":...,"Nodes":...,"NodeNames":null}`. The split is
    taken at the first `,"Nodes":` and proven by the part before it decoding to exactly
    `{"Pod": <the decoded pod>}` (a JSON object ends where its braces close, so that part
    holds the whole pod and nothing more). A body that repeats a key still echoes as what
    was decoded: the reply repeats it too, and JSON decoders keep the last one.
    """
    if body.keys() != _WIRE_KEYS or not raw.startswith(_POD_KEY) or not raw.endswith(_NO_NAMES):
        return None
    start = raw.find(_NODES_KEY)
    if start < 0:
        return None
    try:
        head = orjson.loads(raw[:start] + b"}")
    except orjson.JSONDecodeError:
        return None
    if head != {"Pod": body["Pod"]}:
        return None
    return orjson.Fragment(bytes(memoryview(raw)[start + len(_NODES_KEY):-len(_NO_NAMES)]))


def load_extender_args(body: Any) -> ExtenderArgs:
    args = _as_sent(body)
    if args is not None:
        return args
    data = _load(_ARGS, body, "ExtenderArgs")
    return ExtenderArgs(data["Pod"], data.get("Nodes"), data.get("NodeNames"))


def load_binding_args(body: Any) -> BindingArgs:
    data = _load(_BINDING, body, "ExtenderBindingArgs")
    return BindingArgs(data["PodName"], data["PodNamespace"], data["PodUID"], data["Node"])


def load_preemption_args(body: Any) -> PreemptionArgs:
    data = _load(_PREEMPTION, body, "ExtenderPreemptionArgs")
    victims, meta = data.get("NodeNameToVictims"), data.get("NodeNameToMetaVictims")
    if victims is None and meta is None:
        raise WireError("invalid ExtenderPreemptionArgs: one of NodeNameToVictims and NodeNameToMetaVictims "
                        "must be set")
    return PreemptionArgs(data["Pod"], victims, meta)


# ---- replies: plain dicts in exactly the shape the result schemas dump --------------


def filter_result(*, nodes: dict[str, Any] | orjson.Fragment | None = None, node_names: Sequence[str] | None = None,
                  failed: Mapping[str, str], unresolvable: Mapping[str, str], error: str = "") -> dict[str, Any]:
    reply: dict[str, Any] = {}
    if nodes is not None:
        reply["Nodes"] = nodes
    if node_names is not None:
        reply["NodeNames"] = list(node_names)
    reply["FailedNodes"] = dict(failed)
    reply["FailedAndUnresolvableNodes"] = dict(unresolvable)
    reply["Error"] = error
    return reply


def error_result(message: str) -> dict[str, Any]:
    """The reply for a call that failed as a whole (filter, bind, preempt all accept `Error`)."""
    return {"Error": message}


def to_extender_score(total: float) -> int:
    """The engine's 0..100 total as kube-scheduler's 0..MaxExtenderPriority integer."""
    score = int(total * MAX_EXTENDER_PRIORITY / 100 + 0.5)
    return min(MAX_EXTENDER_PRIORITY, max(0, score))


def host_priorities(pairs: Sequence[tuple[str, float]]) -> list[dict[str, Any]]:
    return [{"Host": host, "Score": to_extender_score(total)} for host, total in pairs]


def preemption_result(meta_victims: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    return {
        "NodeNameToMetaVictims": {
            node: {"Pods": [{"UID": p["UID"]} for p in v.get("Pods") or []],
                   "NumPDBViolations": int(v.get("NumPDBViolations") or 0)}
            for node, v in meta_victims.items()
        }
    }
