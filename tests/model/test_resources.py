"""The effective request of a pod, as kube-scheduler's resourcehelper.PodRequests computes it."""

from __future__ import annotations

import pytest

from extender.errors import InvalidObject
from extender.model.resources import (
    DEFAULT_MEMORY,
    DEFAULT_MILLI_CPU,
    parse_resource_list,
    pod_request_pair,
    pod_requests,
    subtract,
)

Mi = 2**20


def c(name, requests=None, limits=None, restart=None):
    container = {"name": name, "resources": {}}
    if requests is not None:
        container["resources"]["requests"] = requests
    if limits is not None:
        container["resources"]["limits"] = limits
    if restart:
        container["restartPolicy"] = restart
    return container


def test_containers_add_up():
    spec = {"containers": [c("a", {"cpu": "100m", "memory": "64Mi"}), c("b", {"cpu": "1"})]}
    assert pod_requests(spec) == {"cpu": 1100, "memory": 64 * Mi}


def test_init_containers_take_the_max():
    # kube-scheduler's own example: IC1 2/1G, IC2 2/3G, C1 2/1G, C2 1/1G -> cpu 3, memory 3G
    spec = {
        "initContainers": [c("ic1", {"cpu": "2", "memory": "1G"}), c("ic2", {"cpu": "2", "memory": "3G"})],
        "containers": [c("c1", {"cpu": "2", "memory": "1G"}), c("c2", {"cpu": "1", "memory": "1G"})],
    }
    assert pod_requests(spec) == {"cpu": 3000, "memory": 3 * 10**9}


def test_sidecars_count_in_order():
    # KEP-753: an init container runs beside the sidecars started before it, not after.
    spec = {
        "initContainers": [
            c("side1", {"cpu": "500m"}, restart="Always"),
            c("init", {"cpu": "2"}),  # runs with side1: 2.5
            c("side2", {"cpu": "1"}, restart="Always"),  # started after init: not counted with it
        ],
        "containers": [c("app", {"cpu": "500m"})],
    }
    # app + side1 + side2 = 2, init peak = 2.5
    assert pod_requests(spec) == {"cpu": 2500}
    spec["containers"] = [c("app", {"cpu": "1"})]
    assert pod_requests(spec) == {"cpu": 2500}  # 1 + 0.5 + 1 = 2.5 = init peak
    spec["containers"] = [c("app", {"cpu": "2"})]
    assert pod_requests(spec) == {"cpu": 3500}


def test_overhead_is_added():
    spec = {"containers": [c("a", {"cpu": "1"})], "overhead": {"cpu": "250m", "memory": "120Mi"}}
    assert pod_requests(spec) == {"cpu": 1250, "memory": 120 * Mi}


def test_pod_level_requests_replace_the_container_sum():
    spec = {
        "containers": [c("a", {"cpu": "1", "memory": "1Gi"}), c("b", {"cpu": "1"})],
        "resources": {"requests": {"cpu": "3"}},
        "overhead": {"cpu": "100m"},
    }
    assert pod_requests(spec) == {"cpu": 3100, "memory": 2**30}


def test_limits_only_default_the_requests():
    spec = {"containers": [c("a", limits={"cpu": "2", "memory": "1Gi"}), c("b", {"cpu": "1"}, {"cpu": "4"})]}
    assert pod_requests(spec) == {"cpu": 3000, "memory": 2**30}


def test_non_zero_defaults_are_for_scoring_only():
    spec = {"containers": [c("a"), c("b", {"cpu": "300m"}), c("c", {"cpu": "0"})]}
    assert pod_requests(spec) == {"cpu": 300}
    # a: 100m + 200Mi; b: its 300m + 200Mi; c: explicit 0 cpu stays 0, missing memory defaults
    assert pod_requests(spec, nonzero_defaults=True) == {"cpu": DEFAULT_MILLI_CPU + 300, "memory": 3 * DEFAULT_MEMORY}
    init = {"containers": [c("a")], "initContainers": [c("i", {"cpu": "1"})]}
    assert pod_requests(init, nonzero_defaults=True) == {"cpu": 1000, "memory": DEFAULT_MEMORY}


def test_extended_and_hugepages():
    spec = {"containers": [c("a", {"nvidia.com/gpu": "1", "hugepages-2Mi": "64Mi"}, {"nvidia.com/gpu": "1"})]}
    assert pod_requests(spec) == {"nvidia.com/gpu": 1, "hugepages-2Mi": 64 * Mi}


def test_zero_requests_are_dropped_and_results_shared():
    spec = {"containers": [c("a", {"cpu": "0", "memory": "1Mi"})]}
    first = pod_requests(spec)
    assert first == {"memory": Mi}
    assert pod_requests({"containers": [c("b", {"memory": "1Mi"})]}) is first  # interned


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        ({"containers": [c("a", {"cpu": "-1"})]}, "spec.containers[0].resources.requests.cpu"),
        ({"containers": [c("a", {"cpu": "lots"})]}, "spec.containers[0].resources.requests.cpu"),
        ({"containers": [c("a", limits={"memory": "1Zi"})]}, "spec.containers[0].resources.limits.memory"),
        ({"containers": [], "initContainers": [c("a", {"cpu": "x"})]}, "spec.initContainers[0].resources.requests.cpu"),
        ({"containers": [c("a")], "overhead": {"cpu": "-1"}}, "spec.overhead.cpu"),
        ({"containers": "nope"}, "spec.containers"),
        ({"containers": ["nope"]}, "spec.containers[0]"),
        ({"containers": [c("a", ["cpu"])]}, "spec.containers[0].resources.requests"),
        ({"containers": [c("a", {"cpu": [1]})]}, "spec.containers[0].resources.requests.cpu"),
    ],
)
def test_errors_name_the_field(spec, where):
    with pytest.raises(InvalidObject) as exc:  # QuantityError is one too
        pod_requests(spec)
    assert str(exc.value).startswith(where)


def test_parse_resource_list_and_subtract():
    parsed = parse_resource_list({"cpu": "2", "memory": "1Gi"}, "status.allocatable")
    assert parsed == {"cpu": 2000, "memory": 2**30}
    assert subtract(parsed, {"cpu": 2000, "memory": 1}) == {"memory": 2**30 - 1}
    assert parse_resource_list(None, "x") == {}


@pytest.mark.parametrize("spec", [
    {"containers": [c("a", {"cpu": "100m"}), c("b", limits={"memory": "1Gi"}), c("c")]},
    {"initContainers": [c("side", {"cpu": "500m"}, restart="Always"), c("init", {"memory": "3Gi"})],
     "containers": [c("app")], "overhead": {"cpu": "10m"}},
    {"containers": [c("a", {"cpu": "1"})], "resources": {"requests": {"memory": "2Gi"}}},
])
def test_the_pair_is_both_requests_from_one_parse(spec):
    assert pod_request_pair(spec) == (pod_requests(spec), pod_requests(spec, nonzero_defaults=True))
