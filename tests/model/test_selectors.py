"""Node selector terms and label selectors."""

from __future__ import annotations

import pytest

from extender.errors import InvalidObject
from extender.model.selectors import parse_label_selector, parse_node_selector_term

LABELS = {"zone": "a", "cpus": "16", "gpu": ""}


def term(*expressions, fields=()):
    return parse_node_selector_term(
        {"matchExpressions": list(expressions), "matchFields": list(fields)}, "term"
    )


def e(key, operator, *values):
    item = {"key": key, "operator": operator}
    if values:
        item["values"] = list(values)
    return item


@pytest.mark.parametrize(
    ("expression", "matches"),
    [
        (e("zone", "In", "a", "b"), True),
        (e("zone", "In", "b"), False),
        (e("missing", "In", "a"), False),
        (e("zone", "NotIn", "b"), True),
        (e("zone", "NotIn", "a"), False),
        (e("missing", "NotIn", "a"), True),  # absent label is "not in"
        (e("gpu", "Exists"), True),
        (e("missing", "Exists"), False),
        (e("missing", "DoesNotExist"), True),
        (e("zone", "DoesNotExist"), False),
        (e("cpus", "Gt", "8"), True),
        (e("cpus", "Gt", "16"), False),
        (e("cpus", "Lt", "17"), True),
        (e("cpus", "Lt", "16"), False),
        (e("zone", "Gt", "1"), False),  # not an integer label
        (e("missing", "Lt", "100"), False),
    ],
)
def test_operators(expression, matches):
    assert term(expression).matches(LABELS, "node-1") is matches


def test_expressions_are_anded_and_fields_match_the_name():
    assert term(e("zone", "In", "a"), e("gpu", "Exists")).matches(LABELS, "n")
    assert not term(e("zone", "In", "a"), e("missing", "Exists")).matches(LABELS, "n")
    assert term(fields=[e("metadata.name", "In", "n")]).matches({}, "n")
    assert not term(fields=[e("metadata.name", "NotIn", "n")]).matches({}, "n")
    assert not term().matches(LABELS, "n")  # an empty term matches nothing


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"matchExpressions": [e("a", "Like", "x")]}, "t.matchExpressions[0].operator: 'Like' is not one of"),
        ({"matchExpressions": [e("a", "In")]}, "t.matchExpressions[0].values: must be non-empty for operator In"),
        ({"matchExpressions": [e("a", "Exists", "x")]}, "t.matchExpressions[0].values: must be empty for operator Exists"),
        ({"matchExpressions": [e("a", "Gt", "1", "2")]}, "t.matchExpressions[0].values: operator Gt takes exactly one value"),
        ({"matchExpressions": [e("a", "Lt", "x")]}, "t.matchExpressions[0].values[0]: 'x' is not an integer"),
        ({"matchExpressions": [{"operator": "Exists"}]}, "t.matchExpressions[0].key: required"),
        ({"matchExpressions": [e("a", "In", 1)]}, "t.matchExpressions[0].values: expected a list of strings"),
        ({"matchFields": [e("metadata.uid", "In", "x")]}, "t.matchFields[0].key: only metadata.name is supported"),
        ({"matchExpressions": "a"}, "t: matchExpressions and matchFields must be lists"),
        ("term", "t: expected an object"),
    ],
)
def test_term_errors(raw, message):
    with pytest.raises(InvalidObject) as exc:
        parse_node_selector_term(raw, "t")
    assert str(exc.value).startswith(message)


def test_label_selector():
    selector = parse_label_selector(
        {"matchLabels": {"app": "web"}, "matchExpressions": [e("tier", "NotIn", "batch")]}, "s"
    )
    assert selector.matches({"app": "web"})
    assert not selector.matches({"app": "web", "tier": "batch"})
    assert not selector.matches({"app": "db"})
    assert parse_label_selector(None, "s").matches({}) and parse_label_selector({}, "s").matches({"x": "y"})
    with pytest.raises(InvalidObject, match=r"s.matchExpressions\[0\].operator: 'Gt' is not one of"):
        parse_label_selector({"matchExpressions": [e("a", "Gt", "1")]}, "s")
    with pytest.raises(InvalidObject, match="s.matchLabels: expected a map"):
        parse_label_selector({"matchLabels": ["a"]}, "s")


@pytest.mark.parametrize("label", ["1_0", " 10", "10 ", "\u0661\u0660", "1e1", "99999999999999999999"])
def test_gt_reads_labels_as_go_parses_integers(label: str) -> None:
    """kube-scheduler's Gt/Lt use strconv.ParseInt: no underscores, spaces, other digits or overflow."""
    from extender.model.selectors import Requirement

    assert not Requirement("n", "Gt", 5).matches({"n": label})
    assert Requirement("n", "Gt", 5).matches({"n": "+10"}) and Requirement("n", "Lt", 0).matches({"n": "-1"})
