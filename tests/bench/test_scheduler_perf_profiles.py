"""The scheduler configurations of scheduler_perf's workloads, translated for both schedulers."""

from __future__ import annotations

import pytest

from bench.scheduler_perf import profiles
from extender.policy.builtin.allocation import LeastAllocated, MostAllocated
from extender.policy.loading import load_policy

SCORING = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [{"name": "NodeResourcesFit", "args": {
               "scoringStrategy": {"type": "LeastAllocated", "resources": [
                   {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
                   {"name": "example.com/gpu", "weight": 1}]}}}]}]}


def scorers(policy: dict) -> dict[str, object]:
    return {type(s.plugin).__name__: s.plugin for s in load_policy(policy).scorers}


def test_extended_resource_scoring_becomes_our_least_allocated_with_the_same_weights() -> None:
    plugin_config, policy = profiles.translate(SCORING)
    assert plugin_config == SCORING["profiles"][0]["pluginConfig"]
    found = scorers(policy)
    assert found["LeastAllocated"] == LeastAllocated((("cpu", 1), ("memory", 1), ("example.com/gpu", 1)))
    assert "BalancedAllocation" in found  # the rest of the default policy stays


def test_most_allocated_replaces_least_allocated() -> None:
    config = {"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit",
                                              "args": {"scoringStrategy": {"type": "MostAllocated"}}}]}]}
    found = scorers(profiles.translate(config)[1])
    assert found["MostAllocated"] == MostAllocated((("cpu", 1), ("memory", 1)))
    assert "LeastAllocated" not in found


@pytest.mark.parametrize(("config", "why"), [
    ({"profiles": []}, "0 profiles"),
    ({"profiles": [{"plugins": {"score": {"disabled": [{"name": "*"}]}}}]}, "profile fields plugins"),
    ({"profiles": [{"pluginConfig": [{"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 2}}]}]},
     "pluginConfig of InterPodAffinity"),
    ({"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": {
        "scoringStrategy": {"type": "RequestedToCapacityRatio"}}}]}]}, "RequestedToCapacityRatio"),
])
def test_what_has_no_translation_is_refused_with_the_reason(config: dict, why: str) -> None:
    with pytest.raises(profiles.Untranslatable, match=why):
        profiles.translate(config)


def test_a_gated_filter_is_added_to_the_standalone_policy_after_dynamic_resources() -> None:
    """kube-scheduler's applyFeatureGates appends NodeDeclaredFeatures to the default plugins,
    after DynamicResources; ours gets it at the same place, the rest unchanged."""
    full = profiles.standalone()
    standalone = {**full, "filters": [f for f in full["filters"] if f["name"] != "NodeDeclaredFeatures"]}
    policy = profiles.with_filters(standalone, ["NodeDeclaredFeatures"])
    names = [f["name"] for f in policy["filters"]]
    assert names[names.index("DynamicResources") + 1] == "NodeDeclaredFeatures"
    assert [n for n in names if n != "NodeDeclaredFeatures"] == [f["name"] for f in standalone["filters"]]
    assert policy["scores"] == standalone["scores"]
    assert "NodeDeclaredFeatures" in load_policy(policy).filter_names
    assert profiles.with_filters(policy, ["NodeDeclaredFeatures"]) == policy  # never twice


def test_gated_filters_combine_with_a_translated_configuration() -> None:
    _, translated = profiles.translate(SCORING)
    policy = profiles.with_filters(translated, ["NodeDeclaredFeatures"])
    assert "NodeDeclaredFeatures" in load_policy(policy).filter_names
    assert scorers(policy)["LeastAllocated"] == scorers(translated)["LeastAllocated"]
