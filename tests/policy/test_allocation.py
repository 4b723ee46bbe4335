"""LeastAllocated, MostAllocated, BalancedAllocation: pinned to kube-scheduler's formulas."""

from __future__ import annotations

import pytest

from extender.errors import PolicyError
from extender.policy.builtin import BalancedAllocation, LeastAllocated, MostAllocated
from extender.policy.cluster_view import EMPTY_CLUSTER

from .builders import make_node, make_pod, run_scores


def node_with(cpu_used: str, mem_used: str, **kwargs):
    return make_node(running=[make_pod("used", requests={"cpu": cpu_used, "memory": mem_used})], **kwargs)


def test_least_allocated():
    pod = make_pod(requests={"cpu": "1", "memory": "2Gi"})
    nodes = [node_with("1", "2Gi"), node_with("0", "0")]
    # node 0: cpu (4000-2000)*100/4000 = 50, memory (8-4)*100/8 = 50 -> 50
    # node 1: cpu 75, memory 75 -> 75
    assert run_scores(LeastAllocated(), pod, nodes) == [50, 75]
    assert LeastAllocated().normalize_scores([50, 75]) == [50, 75]


def test_least_allocated_uses_non_zero_defaults():
    # An empty pod counts as 100m cpu and 200Mi memory, on the node side too.
    empty = make_pod()
    node = make_node(cpu="1", memory="1000Mi", running=[make_pod("e")])
    # cpu: (1000-200)*100//1000 = 80; memory: (1000-400)*100//1000 = 60 -> (80+60)//2 = 70
    assert run_scores(LeastAllocated(), empty, [node]) == [70]


def test_weights_and_integer_division():
    pod = make_pod(requests={"cpu": "1", "memory": "1Gi"})
    node = node_with("0", "0", cpu="3", memory="4Gi")
    # cpu: 2000*100//3000 = 66, memory: 3*100//4 = 75; weights 2:1 -> (132+75)//3 = 69
    plugin = LeastAllocated.from_args({"resources": {"cpu": 2, "memory": 1}})
    assert run_scores(plugin, pod, [node]) == [69]


def test_most_allocated():
    pod = make_pod(requests={"cpu": "1", "memory": "2Gi"})
    nodes = [node_with("1", "2Gi"), node_with("0", "0"), node_with("4", "8Gi")]
    assert run_scores(MostAllocated(), pod, nodes) == [50, 25, 100]  # over-full is capped at 100


def test_extended_resources_count_only_when_requested():
    plugin = MostAllocated.from_args({"resources": {"cpu": 1, "nvidia.com/gpu": 1}})
    node = make_node(extra={"nvidia.com/gpu": "4"}, running=[make_pod("g", requests={"nvidia.com/gpu": "1"})])
    cpu_pod = make_pod(requests={"cpu": "1"})
    gpu_pod = make_pod(requests={"cpu": "1", "nvidia.com/gpu": "1"})
    # cpu: the running pod counts its non-zero default 100m: 1100*100//4000 = 27
    assert run_scores(plugin, cpu_pod, [node]) == [27]  # gpu left out: the pod does not ask for it
    assert run_scores(plugin, gpu_pod, [node]) == [38]  # (27 + 2*100//4) // 2
    # A node without the resource leaves it out of the average.
    assert run_scores(plugin, gpu_pod, [make_node()]) == [25]


def test_balanced_allocation():
    pod = make_pod(requests={"cpu": "1", "memory": "1Gi"})
    # fractions cpu 1/4 = .25, memory 1/8 = .125: std = .0625 -> int(93.75) = 93
    assert run_scores(BalancedAllocation(), pod, [make_node()]) == [93]
    # equal fractions -> 100
    assert run_scores(BalancedAllocation(), pod, [make_node(memory="4Gi")]) == [100]
    # fractions are capped at 1: cpu 2.0 -> 1, memory .125 -> std .4375 -> 56
    assert run_scores(BalancedAllocation(), make_pod(requests={"cpu": "8", "memory": "1Gi"}), [make_node()]) == [56]


def test_balanced_allocation_three_resources():
    plugin = BalancedAllocation.from_args({"resources": ["cpu", "memory", "ephemeral-storage"]})
    pod = make_pod(requests={"cpu": "2", "memory": "2Gi", "ephemeral-storage": "1Gi"})
    node = make_node(extra={"ephemeral-storage": "4Gi"})
    # fractions .5, .25, .25: mean 1/3, std = sqrt(((1/6)^2 + 2*(1/12)^2)/3) = 0.11785 -> 88
    assert run_scores(plugin, pod, [node]) == [88]


def test_balanced_allocation_skips_best_effort_pods():
    assert BalancedAllocation().prescore(make_pod(), EMPTY_CLUSTER, []) is None


@pytest.mark.parametrize(
    ("plugin", "args", "message"),
    [
        (LeastAllocated, {"resources": {"cpu": 0}}, "resources.cpu: must be an integer from 1 to 100"),
        (LeastAllocated, {"resources": {"cpu": 1.5}}, "resources.cpu: must be an integer from 1 to 100"),
        (MostAllocated, {"resources": {}}, "resources: must name at least one resource"),
        (MostAllocated, {"resources": ["cpu"]}, "resources: expected a mapping"),
        (BalancedAllocation, {"resources": {"cpu": 1}}, "resources: expected a list of strings"),
        (BalancedAllocation, {"strategy": 1}, "strategy: unknown argument (allowed: resources)"),
    ],
)
def test_bad_args(plugin, args, message):
    with pytest.raises(PolicyError) as exc:
        plugin.from_args(args)
    assert str(exc.value) == message


def test_balanced_allocation_with_one_resource_is_perfectly_balanced():
    # kube-scheduler: with fewer than two fractions the std is 0.
    pod = make_pod(requests={"cpu": "1", "memory": "1Gi"})
    assert run_scores(BalancedAllocation(), pod, [make_node(memory="0")]) == [100]
    assert run_scores(BalancedAllocation.from_args({"resources": ["cpu"]}), pod, [make_node()]) == [100]
