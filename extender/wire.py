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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from marshmallow import EXCLUDE, Schema, ValidationError, fields, pre_load, validates_schema

from extender.errors import WireError
from extender.policy import schemas

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


if TYPE_CHECKING:  # marshmallow 4 makes Field generic; 3 (still allowed) does not subscript at run time
    _Field = fields.Field[Any]
else:
    _Field = fields.Field


class JsonObject(_Field):
    """Any JSON object, kept as the dict it is (a v1.Pod, a v1.Node)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        if not isinstance(value, dict):
            raise ValidationError(f"expected an object, got {_json_type(value)}")
        return value

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        return value


class NodeListField(_Field):
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


class NameList(_Field):
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


def _load(schema: Schema, body: Any, what: str) -> Any:
    try:
        return schema.load(body)
    except ValidationError as exc:
        raise WireError(f"invalid {what}: " + "; ".join(schemas.problems(exc, spell=schemas.dotted))) from None


_ARGS = ExtenderArgsSchema()
_BINDING = ExtenderBindingArgsSchema()
_PREEMPTION = ExtenderPreemptionArgsSchema()


@dataclass(frozen=True, slots=True)
class ExtenderArgs:
    pod: dict[str, Any]
    # The NodeList object when nodeCacheCapable is false: decoded, or as sent (SentNodeList).
    nodes: dict[str, Any] | SentNodeList | None
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
    try:
        "".join(names)  # every name a str, checked in one C loop (a TypeError names no index, the schema does)
    except TypeError:
        return None
    return ExtenderArgs(pod, None, names)


_POD_KEY = b'{"Pod":'
_NODES_KEY = b',"Nodes":'
_NO_NAMES = b',"NodeNames":null}'
_ITEMS_KEY = b'"items":['
_LIST_END = b"]}"
_META_KEY = b'"metadata":'
_LIST_KEYS = frozenset({"kind", "apiVersion", "metadata", "items"})
_KEY_OPENERS = frozenset(b"{,")


class SentNodeList:
    """The Nodes of a full-NodeList body as kube-scheduler sent them: each item's bytes and the
    value the caller made of them, and the list's own bytes for a reply to echo."""

    __slots__ = ("_raw", "_span", "head", "items", "values")

    def __init__(self, raw: bytes | bytearray, span: tuple[int, int], head: bytes, items: list[bytes],
                 values: list[Any]) -> None:
        self._raw = raw
        self._span = span  # the NodeList's bytes within raw
        self.head = head  # the list up to its items: `{"metadata":{},"items":[`
        self.items = items
        self.values = values

    def kept(self, keep: Sequence[bool] | None = None) -> orjson.Fragment:
        """The NodeList with only the items whose `keep` is true (all when None), as sent."""
        if keep is None:
            start, end = self._span
            return orjson.Fragment(bytes(memoryview(self._raw)[start:end]))
        kept = [item for item, wanted in zip(self.items, keep, strict=True) if wanted]
        return orjson.Fragment(self.head + b",".join(kept) + _LIST_END)


def sent_args(raw: bytes | bytearray, item: Callable[[bytes], Any]) -> ExtenderArgs | None:
    """A full-NodeList ExtenderArgs body read without decoding its nodes, else None (then it is
    decoded whole). `item(bytes)` makes the value of one Node's bytes (a cached view, or
    made from `decode_sent_item`), None when they are not one JSON object.

    Go writes `{"Pod":P,"Nodes":{"metadata":{},"items":[N1,...,Nn]},"NodeNames":null}`,
    compact and in field order; only that shape is taken, and every cut is proven before
    use: `{"Pod":P}` decodes (a cut inside P would leave a brace open: the next is tried) to one object; the
    list decodes with its items emptied to an object of NodeList keys; each Ni, cut where
    `},` and the first item's opening up to `"metadata":` repeat, is one JSON object
    (`item` says so, having decoded those bytes once). A separator inside a node makes a
    piece that is not one object, and the body is decoded whole. Every byte of the body
    is in one of those decoded parts, each decoded at its depth in the body, so a body is
    read this way only if it decodes whole, to the same value.
    """
    if not raw.startswith(_POD_KEY) or not raw.endswith(_NO_NAMES):
        return None
    pod, cut = _pod_before_nodes(raw)
    if pod is None:
        return None
    start, end = cut + len(_NODES_KEY), len(raw) - len(_NO_NAMES)
    opened = raw.find(_ITEMS_KEY, start, end)
    # A key opens after `{` or `,`; after a backslash the match began inside a string.
    if opened < 0 or raw[opened - 1] not in _KEY_OPENERS or raw[end - len(_LIST_END):end] != _LIST_END:
        return None
    list_head = bytes(raw[start:opened + len(_ITEMS_KEY)])
    try:  # nested as in the body: a decoder's depth limit must refuse what it refuses there
        fields_ = orjson.loads(b'{"Nodes":' + list_head + _LIST_END + b"}")["Nodes"]
    except orjson.JSONDecodeError:
        return None
    if type(fields_) is not dict or fields_.get("items") != [] or not fields_.keys() <= _LIST_KEYS:
        return None
    items = _cut_items(raw, start=opened + len(_ITEMS_KEY), end=end - len(_LIST_END))
    if items is None:
        return None
    values = []
    for piece in items:
        value = item(piece)
        if value is None:
            return None
        values.append(value)
    return ExtenderArgs(pod, SentNodeList(raw, (start, end), list_head, items, values), None)


def _pod_before_nodes(raw: bytes | bytearray, tries: int = 4) -> tuple[dict[str, Any] | None, int]:
    """The pod and where `,"Nodes":` follows it; the pod may spell that key itself (an
    annotation named Nodes), so the next few places are tried."""
    cut = raw.find(_NODES_KEY)
    for _ in range(tries):
        if cut < 0:
            break
        try:
            head = orjson.loads(raw[:cut] + b"}")
        except orjson.JSONDecodeError:
            cut = raw.find(_NODES_KEY, cut + 1)
            continue
        if type(head) is dict and len(head) == 1 and type(head.get("Pod")) is dict:
            return head["Pod"], cut
        break
    return None, -1


def decode_sent_item(piece: bytes) -> dict[str, Any] | None:
    """One item cut by `sent_args`, decoded as it sits in the body (three levels deep, where
    the decoder's depth limit applies as it would to the whole body); None unless it is
    exactly one JSON object."""
    try:
        decoded = orjson.loads(_ITEM_OPEN + piece + _ITEM_CLOSE)
    except orjson.JSONDecodeError:
        return None
    items = decoded["Nodes"]["items"]
    return items[0] if len(items) == 1 and type(items[0]) is dict else None


_ITEM_OPEN = b'{"Nodes":{"items":['
_ITEM_CLOSE = b"]}}"


def _cut_items(raw: bytes | bytearray, *, start: int, end: int) -> list[bytes] | None:
    """raw[start:end] cut into items where `},` and the first item's opening repeat."""
    if start == end:
        return []
    meta = raw.find(_META_KEY, start, end)
    if raw[start] != ord("{") or meta < 0:
        return None
    separator = b"}," + bytes(raw[start:meta + len(_META_KEY)])
    view = memoryview(raw)
    items = []
    begin = start
    found = raw.find(separator, begin, end)
    while found >= 0:
        items.append(bytes(view[begin:found + 1]))
        begin = found + 2
        found = raw.find(separator, begin, end)
    items.append(bytes(view[begin:end]))
    return items


def load_extender_args(body: Any) -> ExtenderArgs:
    """`body` decoded, or already an ExtenderArgs (`sent_args`)."""
    if type(body) is ExtenderArgs:
        return body
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
