"""Node selector terms and label selectors, parsed once and matched many times.

Parsing validates operators and values up front (an `InvalidObject` naming the
field), so matching on the hot path is plain tuple and dict work.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extender.errors import InvalidObject
from extender.model.fields import as_str

_INT64 = re.compile(r"[+-]?[0-9]+")


def parse_int64(text: str) -> int:
    """An integer as Go's strconv.ParseInt(text, 10, 64) reads it, which kube-scheduler uses for
    Gt/Lt: ASCII digits and an optional sign only (Python's int() also takes "1_0", spaces and
    other scripts' digits), within int64; ValueError otherwise."""
    if not isinstance(text, str) or not _INT64.fullmatch(text):
        raise ValueError(f"{text!r} is not an integer")
    number = int(text)
    if not -(1 << 63) <= number < (1 << 63):
        raise ValueError(f"{text!r} is out of the int64 range")
    return number

NODE_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
LABEL_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


@dataclass(frozen=True, slots=True)
class Requirement:
    """One `key operator values` expression; `values` is a frozenset, or an int for Gt/Lt."""

    key: str
    operator: str
    values: frozenset[str] | int

    # `values` is a frozenset for In and NotIn and an int for Gt and Lt (_requirement builds them so);
    # a type cannot tie it to `operator`, and an isinstance check costs in this hot path: hence the
    # ignores here and in LabelSelector.anchors.
    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            return labels.get(self.key) in self.values  # type: ignore[operator]  # a frozenset for In (see above)
        if op == "NotIn":
            return labels.get(self.key) not in self.values  # type: ignore[operator]  # a frozenset for NotIn (see above)
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        value = labels.get(self.key)
        if value is None:
            return False
        try:
            number = parse_int64(value)
        except ValueError:
            return False
        return number > self.values if op == "Gt" else number < self.values  # type: ignore[operator]  # an int for Gt and Lt (see above)


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Expressions (on labels) and fields (on metadata.name), all of which must match."""

    expressions: tuple[Requirement, ...]
    fields: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        if not self.expressions and not self.fields:
            return False  # an empty term matches no objects (k8s NodeSelectorTerm semantics)
        for requirement in self.expressions:
            if not requirement.matches(labels):
                return False
        if self.fields:
            fields = {"metadata.name": name}
            for requirement in self.fields:
                if not requirement.matches(fields):
                    return False
        return True


def _requirement(raw: Any, where: str, operators: frozenset[str]) -> Requirement:
    if not isinstance(raw, Mapping):
        raise InvalidObject(f"{where}: expected an object")
    key = raw.get("key")
    op = raw.get("operator")
    values = raw.get("values") or []
    if not isinstance(key, str) or not key:
        raise InvalidObject(f"{where}.key: required")
    if not isinstance(op, str) or op not in operators:
        shown = repr(op) if isinstance(op, str | int | float | None) else type(op).__name__
        raise InvalidObject(f"{where}.operator: {shown} is not one of {sorted(operators)}")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise InvalidObject(f"{where}.values: expected a list of strings")
    if op in ("In", "NotIn") and not values:
        raise InvalidObject(f"{where}.values: must be non-empty for operator {op}")
    if op in ("Exists", "DoesNotExist") and values:
        raise InvalidObject(f"{where}.values: must be empty for operator {op}")
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            raise InvalidObject(f"{where}.values: operator {op} takes exactly one value")
        try:
            return Requirement(key, op, parse_int64(values[0]))
        except ValueError:
            raise InvalidObject(f"{where}.values[0]: {values[0]!r} is not an integer") from None
    return Requirement(key, op, frozenset(values))


def parse_node_selector_term(raw: Any, where: str) -> NodeSelectorTerm:
    if not isinstance(raw, Mapping):
        raise InvalidObject(f"{where}: expected an object")
    expressions = raw.get("matchExpressions") or []
    fields = raw.get("matchFields") or []
    if not isinstance(expressions, list) or not isinstance(fields, list):
        raise InvalidObject(f"{where}: matchExpressions and matchFields must be lists")
    parsed_fields = tuple(
        _requirement(f, f"{where}.matchFields[{i}]", NODE_OPERATORS) for i, f in enumerate(fields)
    )
    for i, requirement in enumerate(parsed_fields):
        if requirement.key != "metadata.name":
            raise InvalidObject(f"{where}.matchFields[{i}].key: only metadata.name is supported")
    return NodeSelectorTerm(
        tuple(
            _requirement(e, f"{where}.matchExpressions[{i}]", NODE_OPERATORS)
            for i, e in enumerate(expressions)
        ),
        parsed_fields,
    )


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelector: matchLabels and matchExpressions, ANDed; empty matches everything.

    `nothing` is apimachinery's `labels.Nothing()`: what a *nil* selector converts to in
    the places where nil means "select no objects" (pod affinity terms, spread constraints),
    as opposed to an empty `{}` selector, which selects everything.
    """

    requirements: tuple[Requirement, ...]
    nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        for requirement in self.requirements:
            if not requirement.matches(labels):
                return False
        return True

    @property
    def empty(self) -> bool:
        """apimachinery's `Selector.Empty()`: no requirements (true of `{}`, false of Nothing)."""
        return not self.nothing and not self.requirements

    def anchors(self) -> list[tuple[str, frozenset[str] | None]]:
        """Requirements an index can answer: (key, values) for In and (key, None) for Exists.

        Every pod the selector matches carries one of the `values` of each anchor's key
        (or the key at all, for Exists), so an index lookup on any anchor gives a superset
        of the matches. NotIn and DoesNotExist give no anchor.
        """
        found: list[tuple[str, frozenset[str] | None]] = []
        for requirement in self.requirements:
            if requirement.operator == "In":
                found.append((requirement.key, requirement.values))  # type: ignore[arg-type]  # In: a frozenset
            elif requirement.operator == "Exists":
                found.append((requirement.key, None))
        return found

    def with_requirements(self, extra: tuple[Requirement, ...]) -> LabelSelector:
        """This selector ANDed with `extra` (Nothing stays Nothing)."""
        if self.nothing or not extra:
            return self
        return LabelSelector(extra + self.requirements)


NOTHING = LabelSelector((), nothing=True)
EVERYTHING = LabelSelector(())


def parse_label_selector(raw: Any, where: str, *, nil_matches_nothing: bool = False) -> LabelSelector:
    """Parse a metav1.LabelSelector. A missing (None) selector matches everything unless
    `nil_matches_nothing`, which is what `metav1.LabelSelectorAsSelector(nil)` gives."""
    if raw is None:
        return NOTHING if nil_matches_nothing else EVERYTHING
    if not isinstance(raw, Mapping):
        raise InvalidObject(f"{where}: expected an object")
    match_labels = raw.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        raise InvalidObject(f"{where}.matchLabels: expected a map")
    requirements = [
        Requirement(str(key), "In", frozenset({as_str(value, f"{where}.matchLabels.{key}")}))
        for key, value in match_labels.items()
    ]
    expressions = raw.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise InvalidObject(f"{where}.matchExpressions: expected a list")
    requirements += [
        _requirement(e, f"{where}.matchExpressions[{i}]", LABEL_OPERATORS)
        for i, e in enumerate(expressions)
    ]
    return LabelSelector(tuple(requirements))
