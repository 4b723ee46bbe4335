"""Field and label selectors with kube-apiserver's parsing and matching rules.

Kept apart from extender.model.selectors, which reads metav1.LabelSelector objects: the
product never parses the query-string grammar (labels.Parse, fields.ParseSelector) served here.

The scheduler finds its work through ``spec.schedulerName=X,spec.nodeName=,status.phase!=Succeeded,...``;
a fake that ignored selectors (or accepted ones the real server refuses) would let a
wrong query pass the tests, so parsing errors and unsupported field labels are reported
with the real server's wording, and matching follows k8s.io/apimachinery/pkg/{fields,labels}.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .status import ApiError

# ---------------------------------------------------------------------------------------------
# Field selectors
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldTerm:
    field: str
    op: str  # "=" or "!="
    value: str

    def matches(self, fields: Mapping[str, str]) -> bool:
        actual = fields.get(self.field, "")
        return actual == self.value if self.op == "=" else actual != self.value


@dataclass(frozen=True)
class FieldSelector:
    """A conjunction of ``field=value`` / ``field!=value`` terms; empty matches everything."""

    terms: tuple[FieldTerm, ...] = ()

    def matches(self, fields: Mapping[str, str]) -> bool:
        return all(term.matches(fields) for term in self.terms)

    def __bool__(self) -> bool:
        return bool(self.terms)

    def __str__(self) -> str:
        return ",".join(f"{t.field}{t.op}{t.value}" for t in self.terms)


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, current, escaped = [], [], False
    for ch in text:
        if escaped:
            current.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if escaped:
        current.append("\\")
    parts.append("".join(current))
    return parts


def _unescape(value: str) -> str:
    out, escaped = [], False
    for ch in value:
        if escaped:
            if ch not in "\\,=":
                raise ValueError(f"invalid escape sequence: \\{ch}")
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        else:
            out.append(ch)
    if escaped:
        raise ValueError("unterminated escape sequence")
    return "".join(out)


def parse_field_selector(text: str | None, supported: frozenset[str]) -> FieldSelector:
    """Parse like fields.ParseSelector, then refuse labels the resource does not index.

    Raises a 400 BadRequest ``field label not supported: X`` for an unknown field, as
    the real server's field label conversion functions do.
    """
    if not text:
        return FieldSelector()
    terms: list[FieldTerm] = []
    for raw in _split_unescaped(text, ","):
        if raw == "":
            continue
        term = None
        for i in range(len(raw)):
            if raw[i] == "\\":
                continue
            if i > 0 and raw[i - 1] == "\\":
                continue
            for op in ("!=", "==", "="):
                if raw.startswith(op, i):
                    term = (raw[:i], "!=" if op == "!=" else "=", raw[i + len(op) :])
                    break
            if term:
                break
        if term is None:
            raise ApiError.bad_request(f"invalid selector: '{text}'; can't understand '{raw}'")
        try:
            name, op, value = _unescape(term[0]), term[1], _unescape(term[2])
        except ValueError as exc:
            raise ApiError.bad_request(f"invalid selector: '{text}'; {exc}") from None
        if name not in supported:
            raise ApiError.bad_request(f"field label not supported: {name}")
        terms.append(FieldTerm(name, op, value))
    return FieldSelector(tuple(terms))


def _dig(obj: Mapping[str, Any], dotted: str) -> Any:
    cur: Any = obj
    for part in dotted.split("."):
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    return cur


def _as_field(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _with_meta(obj: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, str]:
    """``meta_fields`` plus ``names``, as generic.AddObjectMetaFieldsSet adds name and namespace
    to a kind's own fields."""
    return {**meta_fields(obj), **{n: _as_field(_dig(obj, n)) for n in names}}


def pod_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    """pod.ToSelectableFields: the labels kube-apiserver indexes for pods."""
    names = (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    )
    fields = _with_meta(obj, names)
    fields["spec.hostNetwork"] = "true" if _dig(obj, "spec.hostNetwork") else "false"
    return fields


def node_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    return {
        "metadata.name": _as_field(_dig(obj, "metadata.name")),
        "spec.unschedulable": "true" if _dig(obj, "spec.unschedulable") else "false",
    }


def namespace_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    return {
        "metadata.name": _as_field(_dig(obj, "metadata.name")),
        "status.phase": _as_field(_dig(obj, "status.phase")),
    }


def event_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    """Fields of a core/v1 Event (the storage form of both event APIs)."""
    names = (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "type",
    )
    fields = _with_meta(obj, names)
    fields["source"] = _as_field(_dig(obj, "source.component"))
    return fields


def meta_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    """The default every resource supports: name and namespace."""
    return {
        "metadata.name": _as_field(_dig(obj, "metadata.name")),
        "metadata.namespace": _as_field(_dig(obj, "metadata.namespace")),
    }


FieldsFunc = Callable[[Mapping[str, Any]], dict[str, str]]

# ---------------------------------------------------------------------------------------------
# Label selectors
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LabelRequirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        has = self.key in labels
        value = labels.get(self.key)
        if self.op in ("=", "in"):
            return has and value in self.values
        if self.op in ("!=", "notin"):
            return not has or value not in self.values
        if self.op == "exists":
            return has
        if self.op == "!":
            return not has
        actual, bound = _parse_int64(value or ""), _parse_int64(self.values[0])
        if not has or actual is None or bound is None:
            return False
        return actual > bound if self.op == "gt" else actual < bound


_INT64 = re.compile(r"[+-]?[0-9]+", re.ASCII)


def _parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64), or None where it fails: ASCII digits only (Python's
    int() also reads "1_0", " 5" and other scripts' digits), within int64."""
    if not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def __bool__(self) -> bool:
        return bool(self.requirements)


_TOKEN = re.compile(r"\s*(==|!=|=|\(|\)|,|!|>|<|[^\s=!(),<>]+)")
_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _tokens(text: str) -> list[str]:
    tokens, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m:
            raise ApiError.bad_request(
                f"unable to parse requirement: unexpected character at {pos} in {text!r}"
            )
        tokens.append(m.group(1))
        pos = m.end()
    return tokens


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse the labels.Parse grammar: ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x)``,
    ``a``, ``!a``, ``a>1``, ``a<1``, comma meaning AND."""
    if not text or not text.strip():
        return LabelSelector()
    toks = _tokens(text)
    reqs: list[LabelRequirement] = []
    i = 0

    def fail(msg: str) -> ApiError:
        return ApiError.bad_request(f"unable to parse requirement: {msg}")

    def check_key(key: str) -> str:
        if not _LABEL_KEY.match(key) or len(key.split("/")[-1]) > 63:
            raise fail(
                f"key: Invalid value: {key!r}: name part must consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character"
            )
        return key

    def check_value(value: str) -> str:
        if len(value) > 63 or not _LABEL_VALUE.match(value):
            raise fail(
                f"values[0]: Invalid value: {value!r}: a valid label must be an empty string or "
                "consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                "with an alphanumeric character"
            )
        return value

    while i < len(toks):
        tok = toks[i]
        if tok == "!":
            if i + 1 >= len(toks):
                raise fail("found '', expected: identifier")
            reqs.append(LabelRequirement(check_key(toks[i + 1]), "!"))
            i += 2
        else:
            key = check_key(tok)
            i += 1
            if i >= len(toks) or toks[i] == ",":
                reqs.append(LabelRequirement(key, "exists"))
            else:
                op = toks[i]
                i += 1
                if op in ("=", "==", "!="):
                    value = ""
                    if i < len(toks) and toks[i] != ",":
                        value = toks[i]
                        i += 1
                    reqs.append(
                        LabelRequirement(key, "!=" if op == "!=" else "=", (check_value(value),))
                    )
                elif op in (">", "<"):
                    if i >= len(toks):
                        raise fail("found '', expected: integer")
                    value = toks[i]
                    i += 1
                    if _parse_int64(value) is None:
                        raise fail(
                            f"for 'Gt', 'Lt' operators, the value must be an integer: {value!r}"
                        )
                    # NewRequirement validates every value as a label value, bounds too ("-1").
                    reqs.append(LabelRequirement(key, "gt" if op == ">" else "lt", (check_value(value),)))
                elif op in ("in", "notin"):
                    if i >= len(toks) or toks[i] != "(":
                        raise fail(
                            "found '" + (toks[i] if i < len(toks) else "") + "', expected: '('"
                        )
                    i += 1
                    values: list[str] = []
                    while i < len(toks) and toks[i] != ")":
                        if toks[i] != ",":
                            values.append(check_value(toks[i]))
                        i += 1
                    if i >= len(toks):
                        raise fail("found '', expected: ')'")
                    i += 1
                    if op == "in" and not values:
                        raise fail("for 'in', 'notin' operators, values set can't be empty")
                    reqs.append(LabelRequirement(key, op, tuple(values)))
                else:
                    raise fail(f"found '{op}', expected: in, notin, =, ==, !=, gt, lt")
        if i < len(toks):
            if toks[i] != ",":
                raise fail(f"found '{toks[i]}', expected: ',' or 'end of string'")
            i += 1
    return LabelSelector(tuple(reqs))


@dataclass(frozen=True)
class Selection:
    """The selectors of one list or watch request, evaluated together."""

    fields: FieldSelector
    labels: LabelSelector
    fields_of: FieldsFunc

    def matches(self, obj: Mapping[str, Any] | None) -> bool:
        if obj is None:
            return False
        meta = obj.get("metadata") or {}
        if self.labels and not self.labels.matches(meta.get("labels")):
            return False
        return not self.fields or self.fields.matches(self.fields_of(obj))
