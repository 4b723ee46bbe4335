"""NodeAffinity and PreferredNodeAffinity."""

from __future__ import annotations

import pytest

from extender.errors import PolicyError
from extender.policy.builtin import NodeAffinity, PreferredNodeAffinity
from extender.policy.cluster_view import EMPTY_CLUSTER
from extender.policy.status import Code

from .builders import make_node, make_pod, reasons, run_filter, run_scores

MISMATCH = ("node(s) didn't match Pod's node affinity/selector",)
REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"


def expr(key, operator, *values):
    item = {"key": key, "operator": operator}
    if values:
        item["values"] = list(values)
    return item


def required(*terms):
    return {REQ: {"nodeSelectorTerms": list(terms)}}


ZONE_A = {"topology.kubernetes.io/zone": "a", "cpus": "16"}


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        ({}, ()),
        ({"node_selector": {"topology.kubernetes.io/zone": "a"}}, ()),
        ({"node_selector": {"topology.kubernetes.io/zone": "b"}}, MISMATCH),
        ({"node_selector": {"topology.kubernetes.io/zone": "a", "missing": "x"}}, MISMATCH),
        ({"affinity": required({"matchExpressions": [expr("topology.kubernetes.io/zone", "In", "a", "b")]})}, ()),
        ({"affinity": required({"matchExpressions": [expr("topology.kubernetes.io/zone", "NotIn", "a")]})}, MISMATCH),
        ({"affinity": required({"matchExpressions": [expr("cpus", "Exists")]})}, ()),
        ({"affinity": required({"matchExpressions": [expr("gpu", "DoesNotExist")]})}, ()),
        ({"affinity": required({"matchExpressions": [expr("cpus", "Gt", "8")]})}, ()),
        ({"affinity": required({"matchExpressions": [expr("cpus", "Gt", "16")]})}, MISMATCH),
        ({"affinity": required({"matchExpressions": [expr("cpus", "Lt", "32")]})}, ()),
        ({"affinity": required({"matchExpressions": [expr("topology.kubernetes.io/zone", "Gt", "1")]})}, MISMATCH),
        # Terms are ORed, expressions within a term ANDed.
        (
            {"affinity": required(
                {"matchExpressions": [expr("cpus", "Exists"), expr("gpu", "Exists")]},
                {"matchExpressions": [expr("topology.kubernetes.io/zone", "In", "a")]},
            )},
            (),
        ),
        (
            {"affinity": required({"matchExpressions": [expr("cpus", "Exists"), expr("gpu", "Exists")]})},
            MISMATCH,
        ),
        ({"affinity": required({"matchFields": [expr("metadata.name", "In", "n")]})}, ()),
        ({"affinity": required({"matchFields": [expr("metadata.name", "In", "other")]})}, MISMATCH),
        ({"affinity": required({})}, MISMATCH),  # an empty term matches nothing
        # nodeSelector AND affinity.
        (
            {"node_selector": {"topology.kubernetes.io/zone": "b"},
             "affinity": required({"matchExpressions": [expr("cpus", "Exists")]})},
            MISMATCH,
        ),
    ],
)
def test_node_affinity(pod, expected):
    result = run_filter(NodeAffinity(), make_pod(**pod), make_node("n", labels=ZONE_A))
    assert reasons(result) == expected
    if expected:
        assert result.code == Code.UNRESOLVABLE


def test_nothing_to_check_skips_the_plugin():
    assert NodeAffinity().prefilter(make_pod(), EMPTY_CLUSTER) is None


def test_added_affinity_applies_to_every_pod():
    plugin = NodeAffinity.from_args(
        {"addedAffinity": required({"matchExpressions": [expr("pool", "In", "batch")]})}
    )
    assert plugin.prefilter(make_pod(), EMPTY_CLUSTER) is not None
    result = run_filter(plugin, make_pod(), make_node(labels={"pool": "web"}))
    assert reasons(result) == ("node(s) didn't match scheduler-enforced node affinity",)
    assert run_filter(plugin, make_pod(), make_node(labels={"pool": "batch"})) is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"addedAffinity": {PREF: []}}, f"addedAffinity.{PREF}: unknown argument (allowed: {REQ})"),
        ({"addedAffinity": {REQ: {"nodeSelectorTerms": []}}}, "nodeSelectorTerms: expected a non-empty list"),
        (
            {"addedAffinity": required({"matchExpressions": [expr("a", "Gt", "x")]})},
            f"addedAffinity.{REQ}.nodeSelectorTerms[0].matchExpressions[0].values[0]: 'x' is not an integer",
        ),
    ],
)
def test_node_affinity_bad_args(args, message):
    with pytest.raises(PolicyError) as exc:
        NodeAffinity.from_args(args)
    assert message in str(exc.value)


def preferred(weight, *expressions):
    return {"weight": weight, "preference": {"matchExpressions": list(expressions)}}


def test_preferred_affinity_sums_weights_and_normalizes_like_kube_scheduler():
    pod = make_pod(affinity={PREF: [preferred(10, expr("zone", "In", "a")), preferred(30, expr("ssd", "Exists"))]})
    nodes = [
        make_node("n0"),
        make_node("n1", labels={"zone": "a"}),
        make_node("n2", labels={"ssd": "1"}),
        make_node("n3", labels={"zone": "a", "ssd": "1"}),
    ]
    plugin = PreferredNodeAffinity()
    raw = run_scores(plugin, pod, nodes)
    assert raw == [0, 10, 30, 40]
    assert plugin.normalize_scores(raw) == [0, 25, 75, 100]
    assert plugin.normalize_scores([0, 0]) == [0, 0]
    assert plugin.normalize_scores([1, 3]) == [33, 100]


def test_preferred_affinity_skips_pods_without_preferences():
    assert PreferredNodeAffinity().prescore(make_pod(), EMPTY_CLUSTER, []) is None


def test_preferred_added_affinity():
    plugin = PreferredNodeAffinity.from_args({"addedAffinity": {PREF: [preferred(5, expr("spot", "Exists"))]}})
    assert run_scores(plugin, make_pod(), [make_node("a"), make_node("b", labels={"spot": "true"})]) == [0, 5]
    with pytest.raises(PolicyError, match=r"addedAffinity\.preferredDuringSchedulingIgnoredDuringExecution\[0\]\.weight: must be an integer from 1 to 100"):
        PreferredNodeAffinity.from_args({"addedAffinity": {PREF: [preferred(0, expr("spot", "Exists"))]}})
