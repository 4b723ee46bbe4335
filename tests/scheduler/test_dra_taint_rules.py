"""DeviceTaintRules on a kube-apiserver that serves them, end to end with the standalone scheduler.

kube-apiserver v1.36.3 serves resource.k8s.io/v1beta2 DeviceTaintRules only with
`--runtime-config=resource.k8s.io/v1beta2=true` and the DRADeviceTaintRules gate (beta, off by
default): this module starts such a control plane of its own. The fake API server, like a
default v1.36 kube-apiserver, serves none, and the source then reads taints from slices only
(tests/policy/test_dynamic_resources.py covers the rules in the store on either server).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from extender.kube.client import build_api_client
from tests.fakeapi.envtest import find_assets
from tests.fakeapi.fixtures import ApiServerHandle, running_envtest
from tests.scheduler.test_dra import (
    API,
    create_claim,
    create_class,
    create_pod,
    create_slice,
    devices_of,
    get_claim,
    wait_bound,
)

RULES = "/apis/resource.k8s.io/v1beta2/devicetaintrules"


@pytest.fixture(scope="module")
def rules_server() -> Iterator[ApiServerHandle]:
    assets = find_assets()
    if assets is None:
        pytest.skip("needs a real kube-apiserver with DeviceTaintRules turned on (KUBEBUILDER_ASSETS): the fake, "
                    "like kube-apiserver v1.36 by default, does not serve them")
    with running_envtest(assets, ("--runtime-config=resource.k8s.io/v1beta2=true",
                                  "--feature-gates=DRADeviceTaintRules=true")) as handle:
        yield handle


@pytest.fixture
def rules_kube(rules_server: ApiServerHandle) -> Iterator[Any]:
    rules_server.reset()
    yield rules_server.client
    rules_server.client.call("DELETE", RULES)


@pytest.fixture
def rules_client(rules_server: ApiServerHandle) -> Iterator[Any]:
    client = build_api_client(kubeconfig=str(rules_server.kubeconfig))
    yield client
    client.close()


def test_a_device_taint_rule_keeps_new_claims_off_the_device_until_it_is_deleted(rules_kube, rules_client,
                                                                                 make_scheduler):
    kube = rules_kube
    for name in ("node-1", "node-2"):
        kube.create_node(name)
    create_class(kube)
    create_slice(kube, "node-2", "gpu-0", "gpu-1")
    kube.call("POST", RULES, {
        "apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceTaintRule", "metadata": {"name": "drain-gpu-0"},
        "spec": {"deviceSelector": {"driver": "gpu.example.com", "pool": "node-2", "device": "gpu-0"},
                 "taint": {"key": "maintenance", "value": "planned", "effect": "NoSchedule"}}})
    create_claim(kube, "first")
    create_claim(kube, "second")
    make_scheduler(client=rules_client)
    create_pod(kube, "first", "first")
    assert wait_bound(kube, "first") == "node-2"
    assert devices_of(get_claim(kube, "first")) == ["node-2/gpu-1"]  # gpu-0 is tainted
    create_pod(kube, "second", "second")
    events = kube.wait_for(lambda: [e for e in kube.list_events("default", reason="FailedScheduling",
                                                                involved_name="second")],
                           message="the second pod refused while gpu-0 is tainted")
    assert "cannot allocate all claims" in events[0]["message"]
    kube.call("DELETE", f"{RULES}/drain-gpu-0")
    assert wait_bound(kube, "second", timeout=15) == "node-2"
    assert devices_of(kube.call("GET", f"{API}/namespaces/default/resourceclaims/second")) == ["node-2/gpu-0"]
