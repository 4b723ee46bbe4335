"""The policy file: shape, plugin names, args, and error messages that point at the path."""

from __future__ import annotations

import textwrap

import pytest

from extender.errors import PolicyError
from extender.policy.builtin import LabelPreference, NodeReady, ResourceFit
from extender.policy.loading import load_policy, load_policy_file

HEAD = "apiVersion: extender/v1alpha1\nkind: Policy\n"


def load(body: str, **kwargs):
    return load_policy(HEAD + textwrap.dedent(body), source="test.yaml", **kwargs)


def error(body: str, *, head: str = HEAD) -> str:
    with pytest.raises(PolicyError) as exc:
        load_policy(head + textwrap.dedent(body), source="test.yaml")
    return str(exc.value)


def test_a_full_policy_loads():
    policy = load(
        """
        filters:
          - name: NodeReady
            args: {pressureConditions: [MemoryPressure, DiskPressure, PIDPressure]}
          - name: ResourceFit
        scores:
          - name: LeastAllocated
            weight: 1
          - name: LabelPreference
            weight: 2
            args: {label: node.kubernetes.io/capacity-type, values: {spot: 10, on-demand: 0}}
        """
    )
    assert policy.filters == (NodeReady(("MemoryPressure", "DiskPressure", "PIDPressure")), ResourceFit())
    assert [(s.name, s.weight) for s in policy.scorers] == [("LeastAllocated", 1), ("LabelPreference", 2)]
    assert policy.scorers[1].plugin == LabelPreference(
        "node.kubernetes.io/capacity-type", (("on-demand", 0.0), ("spot", 10.0))
    )
    assert policy.source == "test.yaml"
    assert len(policy.digest) == 64


def test_weight_defaults_to_one_and_sections_may_be_empty():
    policy = load("scores: [{name: LeastAllocated}]\nfilters:\n")
    assert policy.filters == () and policy.scorers[0].weight == 1


def test_digest_follows_the_text():
    a = load("filters: [{name: NodeReady}]")
    b = load("filters: [{name: NodeReady}]  # a comment")
    assert a.digest != b.digest and a.filters == b.filters


def test_a_mapping_loads_too():
    policy = load_policy({"apiVersion": "extender/v1alpha1", "kind": "Policy", "filters": [{"name": "NodeReady"}]})
    assert policy.filter_names == ["NodeReady"] and policy.source == "<string>" and policy.digest


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("scores: [{name: LabelPreference, weight: 2, args: {label: x, values: {spot: ten}}}]",
         "test.yaml: scores[0].args.values.spot: not a number"),
        ("filters: [{name: NodeReady}, {name: ResourceFit}, {name: NodeLabels}, {name: Foo}]",
         "test.yaml: filters[3].name: unknown filter plugin 'Foo' (known: "),
        ("scores: [{name: LeastAllocated, weight: 0}]", "scores[0].weight: must be an integer from 1 to 100"),
        ("scores: [{name: LeastAllocated, weight: 101}]", "scores[0].weight: must be an integer from 1 to 100"),
        ("scores: [{name: LeastAllocated, weight: 1.5}]", "scores[0].weight: must be an integer from 1 to 100"),
        ("scores: [{name: LeastAllocated, weight: true}]", "scores[0].weight: must be an integer from 1 to 100"),
        ("scores: [{name: NodeReady}]",
         "scores[0].name: unknown scorer plugin 'NodeReady' (known: BalancedAllocation, "),
        ("scores: [{name: NodeReady}]", "; NodeReady is a filter, list it under filters"),
        ("filters: [{name: NodeReady, arsg: {}}]", "filters[0].arsg: unknown key (allowed: name, args)"),
        ("scores: [{name: LeastAllocated, wieght: 1}]", "scores[0].wieght: unknown key (allowed: name, weight, args)"),
        ("filter: []", "filter: unknown key (allowed: apiVersion, kind, filters, scores, settings)"),
        ("filters: [{args: {}}]", "filters[0].name: required"),
        ("filters: [{name: ''}]", "filters[0].name: must not be empty"),
        ("filters: {name: NodeReady}", "filters: expected a list"),
        ("filters: [NodeReady]", "filters[0]: expected a mapping"),
        ("filters: [{name: NodeReady, args: [1]}]", "filters[0].args: expected a mapping"),
        ("filters: [{name: NodeReady, args: {pressureConditions: [Ready]}}]",
         "filters[0].args.pressureConditions[0]: Ready is always checked"),
        ("filters: [{name: NodeReady, args: {bogus: 1}}]",
         "filters[0].args.bogus: unknown argument (allowed: pressureConditions)"),
        ("filters: [{name: NodeReady}, {name: NodeReady}]", "filters[1].name: NodeReady is already listed at filters[0]"),
    ],
)
def test_errors_name_the_path(body, message):
    assert message in error(body)


def test_all_problems_are_reported_at_once():
    text = error("filters: [{name: Foo}, {name: NodeReady, args: {x: 1}}]\nscores: [{name: LeastAllocated, weight: 0}]")
    assert "scores[0].weight" in text  # schema errors come first and stop there
    text = error("filters: [{name: Foo}, {name: NodeReady, args: {x: 1}}]")
    assert "filters[0].name: unknown filter plugin 'Foo'" in text and "filters[1].args.x: unknown argument" in text


@pytest.mark.parametrize(
    ("head", "message"),
    [
        ("", "test.yaml: the policy is empty"),
        ("- a\n", "test.yaml: expected a mapping with apiVersion"),
        ("kind: Policy\n", "apiVersion: required"),
        ("apiVersion: v1\nkind: Policy\n", "apiVersion: must be extender/v1alpha1"),
        ("apiVersion: extender/v1alpha1\nkind: KubeSchedulerConfiguration\n", "kind: must be Policy"),
        ("apiVersion: extender/v1alpha1\nkind: Policy\nfilters: [\n", "test.yaml: line 4, column 1: invalid YAML"),
    ],
)
def test_envelope_errors(head, message):
    assert message in error("", head=head)


def test_policy_file(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(HEAD + "filters: [{name: NodeReady}]\n")
    assert load_policy_file(path).source == str(path)
    with pytest.raises(PolicyError, match="cannot read the policy file"):
        load_policy_file(tmp_path / "missing.yaml")
    path.write_text(HEAD + "filters: [{name: Nope}]\n")
    with pytest.raises(PolicyError, match=rf"^{path}: filters\[0\].name: unknown filter plugin 'Nope'"):
        load_policy_file(path)


def test_a_broken_third_party_factory_is_reported_with_its_entry(registry):
    def factory(args):
        raise ZeroDivisionError("oops")

    registry.add_filter("Fragile", factory)
    with pytest.raises(PolicyError, match=r"filters\[0\]: plugin Fragile could not be built: ZeroDivisionError: oops"):
        load("filters: [{name: Fragile}]", registry=registry)


def test_a_plugin_without_the_method_is_refused(registry):
    class NotAFilter:
        name = "Odd"

    registry.add_filter("Odd", lambda args: NotAFilter())
    with pytest.raises(PolicyError, match=r"filters\[0\]: plugin Odd has no filter\(\) method"):
        load("filters: [{name: Odd}]", registry=registry)
