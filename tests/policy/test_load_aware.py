"""NodeLoad, TargetLoadPacking and LoadVariationRiskBalancing: pinned to their sources' formulas.

The scorers' expected numbers are the test vectors of sigs.k8s.io/scheduler-plugins
v0.33 (pkg/trimaran/targetloadpacking/targetloadpacking_test.go, pkg/trimaran/
loadvariationriskbalancing/{analysis,loadvariationriskbalancing}_test.go), restated as
our samples: a utilisation percentage becomes that share of the node's capacity.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from extender.errors import PolicyError
from extender.model.usage_samples import STDEV_WINDOW, UsageSample, UsageTable
from extender.policy.builtin.load_aware import (
    CPU_OVER,
    MEMORY_OVER,
    LoadVariationRiskBalancing,
    NodeLoad,
    TargetLoadPacking,
    go_round,
    predicted_cpu,
    risk_score,
    target_load_score,
)
from extender.policy.cluster_view import EMPTY_CLUSTER
from extender.policy.engine import Engine, Policy, WeightedScorer
from extender.policy.loading import load_policy
from extender.policy.status import Code

from .builders import make_node, make_pod

NOW = 1_700_000_000.0
MI = 1024 * 1024


class UsageCluster:
    """A ClusterView with nothing but usage samples (what the load plugins read)."""

    def __init__(self, samples: Mapping[str, UsageSample], now: float = NOW) -> None:
        self.table = UsageTable(dict(samples), now, "test", "up")

    def node_usage(self) -> UsageTable:
        return self.table

    def nominations(self) -> dict[str, Any]:
        return {}


def sample(node: str = "n", *, cpu: float | None = None, memory: float | None = None, cpu_capacity: int = 1000,
           memory_capacity: int = 1024 * MI, age: float = 5.0, max_age: float = 90.0, **extra: Any) -> UsageSample:
    return UsageSample(node, "test", NOW - age, NOW - age + max_age, cpu, memory, cpu_capacity, memory_capacity,
                       **extra)


def pod_with_cpu(*containers: dict[str, Any], overhead: str | None = None) -> Any:
    spec_containers = [{"name": f"c{i}", "resources": c} for i, c in enumerate(containers)]
    return make_pod(containers=spec_containers, overhead={"cpu": overhead} if overhead else None)


# ---- TargetLoadPacking ----------------------------------------------------------------


def tlp_score(plugin: TargetLoadPacking, pod: Any, samples: Mapping[str, UsageSample], node: str = "n",
              **node_args: Any) -> float:
    info = make_node(node, **node_args)
    fn = plugin.prescore(pod, UsageCluster(samples), [info])
    return fn(info)


def test_tlp_trimaran_vectors():
    plugin = TargetLoadPacking()
    empty = make_pod(containers=[])  # st.MakePod(): no containers, so no predicted cpu
    # "new node": 0% used -> the target itself
    assert tlp_score(plugin, empty, {"n": sample(cpu=0)}, cpu="1") == 40
    # "hot node": 50% used, target 40 -> round(40 * 50 / 60) = 33
    assert tlp_score(plugin, empty, {"n": sample(cpu=500)}, cpu="1") == 33
    # "excess utilization": 30% used + a 1000m container on a 1-core node -> over 100%: minimum
    excess = pod_with_cpu({"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}, overhead="0")
    assert tlp_score(plugin, excess, {"n": sample(cpu=300)}, cpu="1") == 0
    # "404 resp from watcher": no metrics at all -> minimum
    assert tlp_score(plugin, empty, {}, cpu="1") == 0


@pytest.mark.parametrize(("predicted", "target", "expected"), [
    (0, 40, 40), (20, 40, 70), (40, 40, 100), (70, 40, 20), (100, 40, 0), (100.5, 40, 0),
    (10, 70, 74),  # round((30 * 10 / 70) + 70) = round(74.28)
    (85, 70, 35),  # round(70 * 15 / 30)
    (25, 50, 75), (75, 50, 25),
])
def test_tlp_piecewise_formula(predicted, target, expected):
    assert target_load_score(predicted, target) == expected


def test_go_round_is_half_away_from_zero():
    assert [go_round(x) for x in (0.5, 1.5, 2.5, 32.5, -0.5, 2.49)] == [1, 2, 3, 33, -1, 2]


def test_tlp_predicts_pod_cpu_as_trimaran():
    # per container: limit, else request x multiplier, else the default; plus overhead; no init containers
    pod = pod_with_cpu({"limits": {"cpu": "500m"}, "requests": {"cpu": "100m"}},
                       {"requests": {"cpu": "300m"}}, {}, overhead="50m")
    assert predicted_cpu(pod) == 500 + 450 + 1000 + 50
    assert predicted_cpu(pod, default=2000, multiplier=2.0) == 500 + 600 + 2000 + 50
    plugin = TargetLoadPacking.from_args({"defaultRequests": {"cpu": "2"}, "defaultRequestsMultiplier": "2"})
    assert (plugin.default_cpu, plugin.multiplier) == (2000, 2.0)


def test_tlp_uses_capacity_and_recent_placements():
    plugin = TargetLoadPacking()
    pod = pod_with_cpu({"requests": {"cpu": "100m"}, "limits": {"cpu": "100m"}})
    # 4 cores: (1000 measured + 100 pod) / 4000 = 27.5% -> round(60 * 27.5 / 40 + 40) = 81
    assert tlp_score(plugin, pod, {"n": sample(cpu=1000, cpu_capacity=4000)}) == 81
    # 1000m placed since the sample: 52.5% -> round(40 * 47.5 / 60) = 32
    busy = sample(cpu=1000, cpu_capacity=4000, recent_cpu=1000, recent_pods=2)
    assert tlp_score(plugin, pod, {"n": busy}) == 32


def test_tlp_stale_or_cpu_less_samples_score_minimum():
    plugin = TargetLoadPacking()
    pod = make_pod(containers=[])
    assert tlp_score(plugin, pod, {"n": sample(cpu=0, age=100)}) == 0  # older than maxAge 90s
    assert tlp_score(plugin, pod, {"n": sample(memory=10 * MI)}) == 0  # no cpu figure


def test_tlp_engine_path_keeps_scores_and_explains():
    plugin = TargetLoadPacking()
    engine = Engine(Policy(scorers=(WeightedScorer(plugin, 1),)))
    nodes = [make_node("a", cpu="1"), make_node("b", cpu="1")]
    cluster = UsageCluster({"a": sample("a", cpu=0), "b": sample("b", cpu=500)})
    decision = engine.score(make_pod(containers=[]), nodes, cluster=cluster)
    assert decision.raw_scores["TargetLoadPacking"] == [40, 33]
    assert decision.normalized_scores["TargetLoadPacking"] == [40, 33]  # no rescaling, as Trimaran
    fn = plugin.prescore(make_pod(containers=[]), cluster, nodes)
    assert "50.0%, above target 40% -> 33" in fn.explain(nodes[1])
    assert plugin.score(make_pod(containers=[]), nodes[0]) == 0  # no cluster: no data


@pytest.mark.parametrize(("args", "message"), [
    ({"targetUtilization": 0}, "targetUtilization: must be an integer from 1 to 100"),
    ({"targetUtilization": 50.5}, "targetUtilization: must be an integer from 1 to 100"),
    ({"defaultRequests": {"cpu": "lots"}}, "defaultRequests.cpu: quantity"),
    ({"defaultRequests": {"memory": "1Gi"}}, "defaultRequests.memory: unknown argument"),
    ({"defaultRequestsMultiplier": "x"}, "defaultRequestsMultiplier: not a number"),
    ({"defaultRequestsMultiplier": -1}, "defaultRequestsMultiplier: must be at least 0"),
    ({"target": 40}, "target: unknown argument"),
])
def test_tlp_args(args, message):
    with pytest.raises(PolicyError, match=message):
        TargetLoadPacking.from_args(args)


# ---- LoadVariationRiskBalancing --------------------------------------------------------


@pytest.mark.parametrize(("margin", "sensitivity", "capacity", "req", "used", "stdev", "expected"), [
    (1, 1, 100, 10, 40, 36, 57),  # valid data
    (1, 2, 0, 10, 40, 36, 0),  # zero capacity
    (1, 2, 100, 10, -40, 36, 65),  # negative usedAvg
    (1, 2, 100, 10, 200, 36, 20),  # large usedAvg
    (1, 2, 100, 10, 40, -36, 75),  # negative usedStdev
    (1, 2, 100, 10, 40, 120, 25),  # large usedStdev
    (-1, 1, 100, 10, 40, 36, 75),  # negative margin
    (1, -1, 100, 10, 40, 36, 57),  # negative sensitivity
    (1, 0, 100, 10, 40, 36, 75),  # zero sensitivity
])
def test_risk_score_trimaran_vectors(margin, sensitivity, capacity, req, used, stdev, expected):
    score, _mu, _sigma = risk_score(capacity, req, used, stdev, margin, sensitivity)
    assert go_round(score) == expected


def lvrb_score(plugin: LoadVariationRiskBalancing, pod: Any, node_sample: UsageSample | None) -> float:
    info = make_node("n", cpu="1000m", memory="1Gi")
    fn = plugin.prescore(pod, UsageCluster({"n": node_sample} if node_sample else {}), [info])
    return fn(info)


def test_lvrb_trimaran_vectors():
    plugin = LoadVariationRiskBalancing()
    empty = make_pod(containers=[])
    window = {"stdev_kind": STDEV_WINDOW}
    assert lvrb_score(plugin, empty, sample(cpu=500)) == 75  # "new node": cpu avg 50%
    assert lvrb_score(plugin, empty, sample(cpu=1000)) == 50  # "hot node": cpu avg 100%
    small = make_pod(requests={"cpu": "200m", "memory": "256Mi"})
    assert lvrb_score(plugin, small, sample(cpu=300, cpu_stdev=160, **window)) == 67  # "average and stDev"
    both = make_pod(requests={"cpu": "100m", "memory": "512Mi"})
    # "CPU and Memory metrics": cpu 40% +-16, memory 50% +-10 -> the worse of the two
    assert lvrb_score(plugin, both, sample(cpu=400, cpu_stdev=160, memory=512 * MI, memory_stdev=102.4 * MI,
                                           **window)) == 45
    # "pick worst case: CPU or Memory": cpu 80% +-20, memory 25% +-15
    assert lvrb_score(plugin, both, sample(cpu=800, cpu_stdev=200, memory=256 * MI, memory_stdev=153.6 * MI,
                                           **window)) == 45
    assert lvrb_score(plugin, empty, None) == 0  # "404 resp from watcher"


def test_lvrb_applies_the_capacity_percentage_to_allocatable_and_adds_recent():
    plugin = LoadVariationRiskBalancing()
    pod = make_pod(requests={"cpu": "100m"})
    info = make_node("n", cpu="800m", memory="1Gi")  # allocatable 800m, capacity (sample) 1000m
    # 50% of capacity measured -> used = 400m of 800m allocatable; + 100m pod: mu = 0.625 -> 68.75 -> 69
    fn = plugin.prescore(pod, UsageCluster({"n": sample(cpu=500)}), [info])
    assert fn(info) == 69
    # 160m placed since the sample: mu = (400 + 160 + 100) / 800 = 0.825 -> 58.75 -> 59
    fn = plugin.prescore(pod, UsageCluster({"n": sample(cpu=500, recent_cpu=160, recent_pods=1)}), [info])
    assert fn(info) == 59
    assert "cpu: mu 0.825 sigma 0.000" in fn.explain(info)


def test_lvrb_args():
    assert LoadVariationRiskBalancing.from_args({"safeVarianceMargin": 2, "safeVarianceSensitivity": 0.5}) == \
        LoadVariationRiskBalancing(2.0, 0.5)
    with pytest.raises(PolicyError, match="safeVarianceMargin: must be at least 0"):
        LoadVariationRiskBalancing.from_args({"safeVarianceMargin": -1})
    with pytest.raises(PolicyError, match="safeVarianceSensitivity: not a number"):
        LoadVariationRiskBalancing.from_args({"safeVarianceSensitivity": "two"})


# ---- NodeLoad ----------------------------------------------------------------------------


def run_node_load(plugin: NodeLoad, samples: Mapping[str, UsageSample], node: str = "n") -> Any:
    info = make_node(node)
    check = plugin.prefilter(make_pod(), UsageCluster(samples))
    fast = None if check is None else check(info)
    assert fast == plugin.filter(make_pod(), info, UsageCluster(samples))
    return fast


def test_node_load_refuses_above_the_threshold_with_the_figure():
    plugin = NodeLoad.from_args({"cpu": 80, "memory": 90})
    assert run_node_load(plugin, {"n": sample(cpu=790, cpu_capacity=1000)}) is None
    status = run_node_load(plugin, {"n": sample(cpu=3720, cpu_capacity=4000, age=20)})
    assert status.code == Code.UNRESOLVABLE and status.reasons == (CPU_OVER,)
    assert status.detail == "cpu usage 93% of 4.00 cores (3.72 measured 20s ago), threshold 80%"
    status = run_node_load(plugin, {"n": sample(memory=950 * MI, memory_capacity=1000 * MI)})
    assert status.reasons == (MEMORY_OVER,)
    assert status.detail.startswith("memory usage 95% of 1000Mi (950Mi measured 5s ago)")


def test_node_load_counts_recent_placements():
    plugin = NodeLoad.from_args({"cpu": 80})
    busy = sample(cpu=700, cpu_capacity=1000, recent_cpu=200, recent_pods=2)
    status = run_node_load(plugin, {"n": busy})
    assert status.reasons == (CPU_OVER,)
    assert "0.70 measured 5s ago + 0.20 requested by 2 pod(s) placed since" in status.detail


def test_node_load_lets_missing_and_stale_nodes_through():
    plugin = NodeLoad.from_args({"cpu": 50})
    assert plugin.prefilter(make_pod(), UsageCluster({})) is None  # no data at all: skipped
    assert run_node_load(plugin, {"other": sample("other", cpu=900)}) is None
    assert run_node_load(plugin, {"n": sample(cpu=990, age=91)}) is None  # stale: not refused
    assert plugin.filter(make_pod(), make_node("n"), EMPTY_CLUSTER) is None
    assert run_node_load(plugin, {"n": sample(memory=990 * MI)}) is None  # no cpu figure, no memory limit


@pytest.mark.parametrize(("args", "message"), [
    ({}, "args: give a cpu or a memory threshold"),
    ({"cpu": 0}, "cpu: must be a percentage above 0 and at most 100"),
    ({"memory": 101}, "memory: must be a percentage above 0 and at most 100"),
    ({"cpu": "80%"}, "cpu: not a number"),
    ({"disk": 80}, "disk: unknown argument"),
])
def test_node_load_args(args, message):
    with pytest.raises(PolicyError, match=message):
        NodeLoad.from_args(args)


def test_policy_file_names_the_load_plugins():
    policy = load_policy("""
apiVersion: extender/v1alpha1
kind: Policy
filters: [{name: NodeLoad, args: {cpu: 85}}]
scores:
  - {name: TargetLoadPacking, weight: 2, args: {targetUtilization: 60}}
  - {name: LoadVariationRiskBalancing, args: {safeVarianceSensitivity: 2}}
""")
    assert policy.filters == (NodeLoad(85.0, None),)
    assert [s.plugin for s in policy.scorers] == [TargetLoadPacking(60), LoadVariationRiskBalancing(1.0, 2.0)]
    with pytest.raises(PolicyError, match=r"filters\[0\].args: give a cpu or a memory threshold"):
        load_policy("apiVersion: extender/v1alpha1\nkind: Policy\nfilters: [{name: NodeLoad}]\n")
