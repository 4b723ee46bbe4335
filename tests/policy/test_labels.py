"""NodeLabels (tenancy rules) and LabelPreference."""

from __future__ import annotations

import pytest

from extender.errors import PolicyError
from extender.policy.builtin import LabelPreference, NodeLabels
from extender.policy.cluster_view import EMPTY_CLUSTER
from extender.policy.status import Code

from .builders import make_node, make_pod, reasons, run_filter, run_scores

TENANCY = NodeLabels.from_args(
    {
        "rules": [
            {"namespaces": ["team-a"], "require": [{"label": "tenant", "values": ["team-a"]}]},
            {"excludedNamespaces": ["team-a"], "forbid": [{"label": "tenant", "values": ["team-a"]}]},
            {"podSelector": {"matchLabels": {"tier": "batch"}}, "forbid": [{"label": "latency-critical"}]},
            {"namespaces": ["gpu"], "require": [{"label": "accelerator"}]},
        ]
    }
)
TEAM_A_NODE = {"tenant": "team-a"}


@pytest.mark.parametrize(
    ("pod", "labels", "expected"),
    [
        ({"namespace": "team-a"}, TEAM_A_NODE, ()),
        ({"namespace": "team-a"}, {}, ("node(s) didn't have required label tenant=team-a",)),
        ({"namespace": "team-a"}, {"tenant": "team-b"}, ("node(s) didn't have required label tenant=team-a",)),
        ({"namespace": "team-b"}, TEAM_A_NODE, ("node(s) had forbidden label tenant=team-a",)),
        ({"namespace": "team-b"}, {"tenant": "team-b"}, ()),
        ({"namespace": "team-b"}, {}, ()),
        ({"labels": {"tier": "batch"}}, {"latency-critical": ""}, ("node(s) had forbidden label latency-critical",)),
        ({"labels": {"tier": "web"}}, {"latency-critical": ""}, ()),
        ({"namespace": "gpu"}, {"accelerator": "a100"}, ()),
        ({"namespace": "gpu"}, {}, ("node(s) didn't have required label accelerator",)),
    ],
)
def test_node_labels(pod, labels, expected):
    result = run_filter(TENANCY, make_pod(**pod), make_node(labels=labels))
    assert reasons(result) == expected
    if expected:
        assert result.code == Code.UNRESOLVABLE
        assert result.plugin == "NodeLabels"
        assert result.detail.startswith("rules[")


def test_rules_that_select_nothing_skip_the_plugin():
    only_team_a = NodeLabels.from_args({"rules": [{"namespaces": ["team-a"], "require": [{"label": "x"}]}]})
    assert only_team_a.prefilter(make_pod(namespace="other"), EMPTY_CLUSTER) is None
    assert NodeLabels().prefilter(make_pod(), EMPTY_CLUSTER) is None


def test_multiple_values_are_described_sorted():
    plugin = NodeLabels.from_args({"rules": [{"require": [{"label": "pool", "values": ["b", "a"]}]}]})
    assert reasons(run_filter(plugin, make_pod(), make_node())) == ("node(s) didn't have required label pool in (a, b)",)
    assert run_filter(plugin, make_pod(), make_node(labels={"pool": "b"})) is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"rules": {}}, "rules: expected a list of rules"),
        ({"rules": [{}]}, "rules[0]: a rule needs at least one require or forbid entry"),
        ({"rules": [{"require": [{"values": ["a"]}]}]}, "rules[0].require[0].label: expected a non-empty string"),
        ({"rules": [{"require": [{"label": "a", "values": []}]}]}, "rules[0].require[0].values: must not be empty"),
        ({"rules": [{"forbid": [{"label": "a", "value": "x"}]}]}, "rules[0].forbid[0].value: unknown argument"),
        ({"rules": [{"namespace": ["a"], "forbid": [{"label": "a"}]}]}, "rules[0].namespace: unknown argument"),
        (
            {"rules": [{"podSelector": {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
                        "forbid": [{"label": "a"}]}]},
            "rules[0].podSelector.matchExpressions[0].operator: 'Gt' is not one of",
        ),
    ],
)
def test_node_labels_bad_args(args, message):
    with pytest.raises(PolicyError) as exc:
        NodeLabels.from_args(args)
    assert str(exc.value).startswith(message)


COST = {"label": "node.kubernetes.io/capacity-type", "values": {"spot": 10, "on-demand": 0}}


def test_label_preference():
    plugin = LabelPreference.from_args({**COST, "default": 2})
    nodes = [
        make_node("a", labels={"node.kubernetes.io/capacity-type": "spot"}),
        make_node("b", labels={"node.kubernetes.io/capacity-type": "on-demand"}),
        make_node("c"),
        make_node("d", labels={"node.kubernetes.io/capacity-type": "reserved"}),
    ]
    assert run_scores(plugin, make_pod(), nodes) == [10, 0, 2, 2]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"values": {"a": 1}}, "label: required"),
        ({"label": "x"}, "values: required"),
        ({"label": "x", "values": {}}, "values: must name at least one label value"),
        ({"label": "x", "values": {"spot": "ten"}}, "values.spot: not a number"),
        ({"label": "x", "values": {"spot": True}}, "values.spot: not a number"),
        ({"label": "x", "values": {"spot": -1}}, "values.spot: must be at least 0"),
        ({"label": "x", "values": {True: 1}}, "values: key True is not a string (quote it in YAML)"),
        ({"label": "x", "values": {"a": 1}, "default": "x"}, "default: not a number"),
        ({"label": "x", "values": {"a": 1}, "weight": 1}, "weight: unknown argument (allowed: default, label, values)"),
    ],
)
def test_label_preference_bad_args(args, message):
    with pytest.raises(PolicyError) as exc:
        LabelPreference.from_args(args)
    assert str(exc.value) == message
