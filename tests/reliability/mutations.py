"""Hypothesis strategies that turn the captured kube-scheduler bodies into hostile ones.

Two layers, both driven by hypothesis draws (so failures shrink and runs replay):

* structural: a copy of a real body (tests/fixtures/wire) with 1-4 mutations at random
  paths: a value of the wrong type, a deleted or renamed key, a huge or exotic string,
  an absurd resource quantity, NaN / infinities / 400-digit integers, deep nesting,
  duplicated list items;
* textual: the serialized bytes cut at a random offset, a number token replaced by the
  raw literal `NaN`, invalid UTF-8, a BOM, trailing garbage, 10k nested arrays, random
  JSON documents and empty bodies.

Bodies are serialized with the stdlib encoder (it writes NaN, Infinity and integers of
any size, which orjson refuses to produce), so the server's decoder sees them raw.
"""

from __future__ import annotations

import copy
import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import orjson
from hypothesis import strategies as st

from tests.helpers import wire_body

# The captured bodies each verb is fuzzed from.
FIXTURES: dict[str, tuple[str, ...]] = {
    "filter": ("filter-request.json", "filter-request-nodecache-false.json"),
    "prioritize": ("prioritize-request.json", "prioritize-request-nodecache-false.json"),
    "bind": ("bind-request.json",),
    "preempt": ("preempt-request.json", "preempt-request-nodecache-false.json"),
}
VERBS = tuple(FIXTURES)

Path = tuple[Any, ...]

QUANTITIES = (
    "-1", "-0", "0", "1e999", "1e-999", "0.0000000001m", "9" * 400, "9" * 64, "9" * 65, "1Ei", "8Ei", "9999999Ei",
    "NaN", "Inf", "-Inf", "Infinity", "0x10", "", " ", "1.5.5", "+1", "1m1", "1.", ".5", ".", "m", "Ki", "1ki",
    "1 Gi", "1Gi ", "\u0661", "１", "1e30", "1e31", "1E-30", "-1e30", "123456789012345678901234567890Ei",
    "100n", "1u", "2147483648", "-9223372036854775809", "18446744073709551616", "1e+1", "1e", "e1",
)
NUMBERS = (
    0, -1, 1, 2**31, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**400, -(10**400), 0.5, -0.0, 1e308, -1e308,
    5e-324, math.nan, math.inf, -math.inf, True, False,
)
STRINGS = (
    "", " ", "\x00", "\ud800", "\udfff\ud800", "\U0001f600" * 50, "é" * 1000, "\u202e\u200b\ufeff",
    "a" * 253, "a" * 254, "A" * 64, "node-1\x00", "../../etc/passwd", "%s%n", "${jndi:x}", "'; DROP TABLE",
    "Pending", "default-scheduler", "NoSchedule", "Exists", "In", "True", "null", "[]", "{}",
)
HUGE_LENGTHS = (10_000, 100_000, 1_000_000)
DEPTHS = (10, 100, 250, 254, 255, 256, 500, 900, 1000, 1023)


def leaf_paths(body: Any) -> list[Path]:
    """Every path into `body`: objects' keys and arrays' indexes, containers included."""
    paths: list[Path] = []

    def walk(node: Any, path: Path) -> None:
        paths.append(path)
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, (*path, key))
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, (*path, index))

    walk(body, ())
    return paths


def quantity_paths(paths: list[Path]) -> list[Path]:
    """Paths of resource quantities (requests, limits, allocatable, capacity, overhead)."""
    holders = {"requests", "limits", "allocatable", "capacity", "overhead"}
    return [p for p in paths if len(p) >= 2 and p[-2] in holders]


@dataclass(frozen=True)
class Source:
    verb: str
    name: str
    body: Any
    paths: tuple[Path, ...]
    quantity_paths: tuple[Path, ...]

    def fresh(self) -> Any:
        """A private copy of the body (orjson round trip: far faster than deepcopy)."""
        return orjson.loads(self.encoded)

    @property
    def encoded(self) -> bytes:
        return _ENCODED[self.name]


_ENCODED: dict[str, bytes] = {}


def _sources() -> dict[str, list[Source]]:
    result: dict[str, list[Source]] = {}
    for verb, names in FIXTURES.items():
        for name in names:
            body = wire_body(name)
            _ENCODED[name] = orjson.dumps(body)
            paths = leaf_paths(body)
            result.setdefault(verb, []).append(
                Source(verb, name, body, tuple(paths), tuple(quantity_paths(paths)))
            )
    return result


SOURCES = _sources()


def nested(depth: int, kind: str = "list") -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


# ---- values of the wrong kind ------------------------------------------------------------

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
)
random_json = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5), st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=25,
)


@st.composite
def weird_values(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(
        ["scalar", "number", "string", "quantity", "huge", "unicode", "nested", "empty", "json", "many-keys"]
    ))
    if kind == "scalar":
        return draw(st.sampled_from([None, True, False, 0, "", [], {}]))
    if kind == "number":
        return draw(st.sampled_from(NUMBERS))
    if kind == "string":
        return draw(st.sampled_from(STRINGS))
    if kind == "quantity":
        return draw(st.sampled_from(QUANTITIES))
    if kind == "huge":
        return draw(st.sampled_from("xé\U0001f600")) * draw(st.sampled_from(HUGE_LENGTHS))
    if kind == "unicode":
        return draw(st.text(min_size=1, max_size=30))
    if kind == "nested":
        return nested(draw(st.sampled_from(DEPTHS)), draw(st.sampled_from(["list", "dict"])))
    if kind == "empty":
        return draw(st.sampled_from([[], {}, [[]], [{}], {"": ""}, [None]]))
    if kind == "many-keys":
        return {f"k{i}": i for i in range(draw(st.sampled_from([100, 10_000])))}
    return draw(random_json)


# ---- structural mutations ---------------------------------------------------------------------


def _parent(body: Any, path: Path) -> tuple[Any, Any]:
    node = body
    for step in path[:-1]:
        node = node[step]
    return node, path[-1]


def _set(body: Any, path: Path, value: Any) -> Any:
    if not path:
        return value
    parent, last = _parent(body, path)
    parent[last] = value
    return body


def _exists(body: Any, path: Path) -> bool:
    node = body
    for step in path:
        if isinstance(node, dict) and step in node:
            node = node[step]
        elif isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            node = node[step]
        else:
            return False
    return True


@st.composite
def mutated_body(draw: st.DrawFn, verb: str) -> tuple[Any, list[str]]:
    """A captured body of `verb` with 1-4 structural mutations; returns (body, what was done)."""
    source = draw(st.sampled_from(SOURCES[verb]))
    body = source.fresh()
    notes = [source.name]
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["set", "set", "quantity", "delete", "rename", "duplicate", "wrap"]))
        if op == "quantity" and source.quantity_paths:
            path = draw(st.sampled_from(source.quantity_paths))
            if _exists(body, path):
                body = _set(body, path, draw(st.sampled_from(QUANTITIES + (1, -1, 1e999, math.nan))))
                notes.append(f"quantity {path}")
            continue
        # A path of the original body; an earlier mutation may have removed it (then: the root).
        path = source.paths[draw(st.integers(0, len(source.paths) - 1))]
        if not _exists(body, path):
            path = ()
        if op in ("set", "quantity"):
            body = _set(body, path, draw(weird_values()))
            notes.append(f"set {path}")
        elif op == "delete" and path:
            parent, last = _parent(body, path)
            del parent[last]
            notes.append(f"delete {path}")
        elif op == "rename" and path and isinstance(path[-1], str):
            parent, last = _parent(body, path)
            new = draw(st.sampled_from([last.lower(), last.upper(), last.swapcase(), last + "_", "", " " + last]))
            parent[new] = parent.pop(last)
            notes.append(f"rename {path} -> {new!r}")
        elif op == "duplicate" and path and isinstance(path[-1], int):
            parent, last = _parent(body, path)
            with deep_recursion():
                parent.insert(last, copy.deepcopy(parent[last]))
            notes.append(f"duplicate {path}")
        elif op == "wrap":
            parent_path = path
            value = body if not parent_path else _parent(body, parent_path)[0][parent_path[-1]]
            wrapped = draw(st.sampled_from(["list", "dict", "string"]))
            new_value = [value] if wrapped == "list" else {"value": value} if wrapped == "dict" else \
                encode(value).decode("utf-8", "surrogatepass")[:200]
            body = _set(body, parent_path, new_value)
            notes.append(f"wrap {path} in {wrapped}")
    if draw(st.booleans()):
        # The webhook caches node views by (name, uid, resourceVersion): with the captured versions,
        # the first body seen would decide every later one and mutated nodes would never be parsed.
        version = draw(st.integers(10**6, 10**12))
        for item in _node_items(body):
            item["metadata"]["resourceVersion"] = str(version)
        notes.append(f"node resourceVersions -> {version}")
    return body, notes


def _node_items(body: Any) -> list[dict[str, Any]]:
    """The node objects of a (mutated) ExtenderArgs body that still have a metadata object."""
    nodes = body.get("Nodes") if isinstance(body, dict) else None
    items = nodes.get("items") if isinstance(nodes, dict) else None
    if not isinstance(items, list):
        return []
    return [i for i in items if isinstance(i, dict) and isinstance(i.get("metadata"), dict)]


def encode(body: Any, ascii_only: bool = False) -> bytes:
    """Serialize like a sloppy client would: NaN/Infinity literals and big integers pass through."""
    with deep_recursion():
        text = json.dumps(body, allow_nan=True, ensure_ascii=ascii_only, separators=(",", ":"))
    return text.encode("utf-8", "surrogatepass")


@contextmanager
def deep_recursion(limit: int = 20_000) -> Iterator[None]:
    """Raise the recursion limit while the test itself copies or encodes deep values.

    Only around test-side work: the app under test must run with the default limit,
    as it does under gunicorn.
    """
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


# ---- textual mutations ---------------------------------------------------------------------------


def _number_spans(data: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of number tokens outside strings, roughly (good enough to plant NaN)."""
    in_string = escaped = False
    start = -1
    for index, byte in enumerate(data):
        char = chr(byte)
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "-0123456789" and start < 0:
            start = index
        elif start >= 0 and char not in "0123456789.eE+-":
            yield start, index
            start = -1


@st.composite
def raw_bytes(draw: st.DrawFn, verb: str) -> tuple[bytes, list[str]]:
    """Bytes that are not (quite) JSON, or JSON of the wrong shape altogether."""
    source = draw(st.sampled_from(SOURCES[verb]))
    data = source.encoded
    op = draw(st.sampled_from([
        "truncate", "truncate", "nan", "nan", "garbage", "utf8", "bom", "deep", "random-json", "empty",
        "scalar", "duplicate-keys", "flip",
    ]))
    if op == "truncate":
        cut = draw(st.integers(0, len(data) - 1))
        return data[:cut], [source.name, f"truncate at {cut}/{len(data)}"]
    if op == "nan":
        spans = list(_number_spans(data))
        literal = draw(st.sampled_from([b"NaN", b"Infinity", b"-Infinity", b"nan", b"1e999", b"-1e999",
                                        b"1" * 400, b"0x1F", b"01", b"1.", b".5", b"+1"]))
        if not spans:
            return data.replace(b'"', literal, 1), [source.name, f"{literal!r} instead of a quote"]
        start, end = spans[draw(st.integers(0, len(spans) - 1))]
        return data[:start] + literal + data[end:], [source.name, f"{literal!r} at {start}"]
    if op == "garbage":
        tail = draw(st.sampled_from([b"x", b"}", b"]]", b"\x00", b",", b" {}", b"\n{\"Pod\":{}}"]))
        return data + tail, [source.name, f"trailing {tail!r}"]
    if op == "utf8":
        bad = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf"]))
        at = draw(st.integers(0, len(data)))
        return data[:at] + bad + data[at:], [source.name, f"invalid UTF-8 {bad!r} at {at}"]
    if op == "bom":
        return b"\xef\xbb\xbf" + data, [source.name, "BOM"]
    if op == "deep":
        depth = draw(st.sampled_from([1000, 1024, 1025, 10_000, 100_000]))
        opener, closer = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}")]))
        return opener * depth + b"1" + closer * depth, [f"{depth} nested {opener!r}"]
    if op == "random-json":
        return encode(draw(random_json)), ["random JSON"]
    if op == "empty":
        return draw(st.sampled_from([b"", b" ", b"\n", b"\t\r\n "])), ["empty"]
    if op == "scalar":
        return draw(st.sampled_from([b"null", b"true", b"0", b'"x"', b"[]", b"[{}]", b"{}", b"NaN"])), ["scalar"]
    if op == "duplicate-keys":
        return data[:-1] + b',' + data[1:], [source.name, "every key twice"]
    at = draw(st.integers(0, len(data) - 1))
    flipped = bytes([data[at] ^ draw(st.integers(1, 255))])
    return data[:at] + flipped + data[at + 1:], [source.name, f"byte {at} flipped"]


@st.composite
def hostile_request(draw: st.DrawFn, verb: str) -> tuple[bytes, str, list[str]]:
    """(body bytes, content type, notes): mostly structural mutations, some raw bytes."""
    if draw(st.integers(0, 99)) < 70:
        body, notes = draw(mutated_body(verb))
        data = encode(body, ascii_only=draw(st.booleans()))
    else:
        data, notes = draw(raw_bytes(verb))
    content_type = "application/json"
    if draw(st.integers(0, 99)) < 3:
        content_type = draw(st.sampled_from(["application/json; charset=utf-8", "text/plain", "application/JSON",
                                             "application/json-patch+json", ""]))
        notes.append(f"content-type {content_type!r}")
    return data, content_type, notes
