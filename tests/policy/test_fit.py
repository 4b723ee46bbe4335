"""ResourceFit, against kube-scheduler's NodeResourcesFit filter."""

from __future__ import annotations

import pytest

from extender.policy.builtin import ResourceFit
from extender.policy.builtin.fit import is_extended_resource
from extender.policy.status import Code

from .builders import make_node, make_pod, reasons, run_filter

FIT = ResourceFit()


@pytest.mark.parametrize(
    ("requests", "node", "running", "expected"),
    [
        ({"cpu": "1", "memory": "1Gi"}, {}, [], ()),
        ({"cpu": "4"}, {}, [], ()),  # exactly fits
        ({"cpu": "4001m"}, {}, [], ("Insufficient cpu",)),
        ({"cpu": "3"}, {}, [{"cpu": "1500m"}], ("Insufficient cpu",)),
        ({"memory": "9Gi"}, {}, [], ("Insufficient memory",)),
        # Every missing resource is its own reason, in kube-scheduler's order.
        ({"cpu": "5", "memory": "9Gi"}, {}, [], ("Insufficient cpu", "Insufficient memory")),
        ({"ephemeral-storage": "20Gi"}, {"extra": {"ephemeral-storage": "10Gi"}}, [], ("Insufficient ephemeral-storage",)),
        ({"hugepages-2Mi": "64Mi"}, {"extra": {"hugepages-2Mi": "128Mi"}}, [], ()),
        ({"hugepages-2Mi": "256Mi"}, {"extra": {"hugepages-2Mi": "128Mi"}}, [], ("Insufficient hugepages-2Mi",)),
        ({"hugepages-1Gi": "1Gi"}, {}, [], ("Insufficient hugepages-1Gi",)),
        ({"nvidia.com/gpu": "1"}, {"extra": {"nvidia.com/gpu": "2"}}, [{"nvidia.com/gpu": "1"}], ()),
        ({"nvidia.com/gpu": "2"}, {"extra": {"nvidia.com/gpu": "2"}}, [{"nvidia.com/gpu": "1"}], ("Insufficient nvidia.com/gpu",)),
        # An extended resource the node does not have at all.
        ({"example.com/fpga": "1"}, {}, [], ("Insufficient example.com/fpga",)),
        # A pod with no requests only checks the pod count.
        ({}, {"cpu": "0", "memory": "0"}, [], ()),
        ({}, {"pods": "2"}, [{}, {}], ("Too many pods",)),
        ({}, {"pods": None}, [], ("Too many pods",)),
        ({"cpu": "5"}, {"pods": "1"}, [{}], ("Too many pods", "Insufficient cpu")),
    ],
)
def test_fit(requests, node, running, expected):
    pods = [make_pod(f"r{i}", requests=r) for i, r in enumerate(running)]
    result = run_filter(FIT, make_pod(requests=requests), make_node(running=pods, **node))
    assert reasons(result) == expected
    if expected:
        assert result.plugin == "ResourceFit"


def test_detail_has_the_numbers():
    node = make_node(running=[make_pod("r", requests={"cpu": "3800m"})])
    result = run_filter(FIT, make_pod(requests={"cpu": "500m", "memory": "1Gi"}), node)
    assert result.detail == "Insufficient cpu (requested 500m, free 200m)"
    full = make_node(pods="1", running=[make_pod("r")])
    assert run_filter(FIT, make_pod(), full).detail == "Too many pods (allowed 1, already 1)"


def test_request_larger_than_the_node_is_unresolvable():
    busy = make_node(running=[make_pod("r", requests={"cpu": "3"})])
    assert run_filter(FIT, make_pod(requests={"cpu": "2"}), busy).code == Code.UNSCHEDULABLE
    assert run_filter(FIT, make_pod(requests={"cpu": "5"}), busy).code == Code.UNRESOLVABLE
    assert run_filter(FIT, make_pod(requests={"example.com/x": "1"}), busy).code == Code.UNRESOLVABLE


def test_effective_request_counts_init_containers_and_sidecars():
    # init 3 cpu alone > app 1 cpu + sidecar 1 cpu, so the peak is the init container's 3 + 0.
    pod = make_pod(
        containers=[{"name": "app", "resources": {"requests": {"cpu": "1"}}}],
        init_containers=[
            {"name": "setup", "resources": {"requests": {"cpu": "3"}}},
            {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
        ],
    )
    assert pod.requests["cpu"] == 3000
    assert reasons(run_filter(FIT, pod, make_node(cpu="2999m"))) == ("Insufficient cpu",)
    assert run_filter(FIT, pod, make_node(cpu="3")) is None


def test_ignored_resources_apply_to_extended_resources_only():
    plugin = ResourceFit.from_args({"ignoredResources": ["example.com/a"], "ignoredResourceGroups": ["vendor.io"]})
    node = make_node()
    assert run_filter(plugin, make_pod(requests={"example.com/a": "1"}), node) is None
    assert run_filter(plugin, make_pod(requests={"vendor.io/b": "1"}), node) is None
    assert reasons(run_filter(plugin, make_pod(requests={"example.com/b": "1"}), node)) == ("Insufficient example.com/b",)
    # hugepages and cpu are not extended resources, so they cannot be ignored.
    plugin = ResourceFit.from_args({"ignoredResources": ["hugepages-2Mi", "cpu"]})
    assert reasons(run_filter(plugin, make_pod(requests={"hugepages-2Mi": "2Mi"}), node)) == ("Insufficient hugepages-2Mi",)


@pytest.mark.parametrize(
    ("name", "extended"),
    [("cpu", False), ("hugepages-2Mi", False), ("nvidia.com/gpu", True), ("kubernetes.io/foo", False),
     ("requests.example.com/x", False), ("example.com/x", True)],
)
def test_is_extended_resource(name, extended):
    assert is_extended_resource(name) is extended


# Bad args: tests/policy/test_argument_messages.py (FROM_ARGS_CASES).
