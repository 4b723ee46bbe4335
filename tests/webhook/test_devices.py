"""Shared GPUs in webhook mode: /filter, /prioritize and /bind over a live (fake or envtest) API server.

The bind is the interesting part: /bind picks the devices at Reserve, records them in the
device ledger, and creates the Binding with the assignment in its annotations, which the
API server copies onto the pod in the same request. A failed bind leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from extender.kube.client import request_json
from extender.kube.deviceledger import Ledger
from extender.model.devices import ASSIGNMENT_ANNOTATION, LedgerClaim, NodeDeviceUse, Use
from extender.settings import Settings
from extender.webhook.runtime import Runtime, build_runtime
from tests.devicebuilders import assigned, create_ready_node, gpu, gpu_limits
from tests.helpers import ROOT

pytestmark = pytest.mark.apiserver

LEDGER_NAMESPACE = "gpu-ledgers"
POLICY = ROOT / "config" / "policy-webhook-devices.yaml"


@pytest.fixture
def cluster(kube: Any) -> Any:
    kube.ensure_namespace(LEDGER_NAMESPACE)
    create_ready_node(kube, "gpu-1", [gpu("GPU-0", 16000), gpu("GPU-1", 16000)])
    create_ready_node(kube, "cpu-1")
    return kube


@pytest.fixture
def settings(apiserver: Any) -> Settings:
    return Settings(source="kube", kubeconfig=str(apiserver.kubeconfig), policy=str(POLICY),
                    lease_namespace=LEDGER_NAMESPACE)


@pytest.fixture
def runtime(settings: Settings, cluster: Any) -> Iterator[Runtime]:
    """Started on the cluster, its caches synced (``client``, tests/conftest.py's, uses it)."""
    rt = build_runtime(settings)
    rt.start()
    assert rt.source.wait_synced(10)
    yield rt
    rt.stop()


def gpu_pod(kube: Any, runtime: Runtime, name: str, **request: int) -> dict[str, Any]:
    pod = kube.create_pod(name, limits=gpu_limits(**request))
    kube.wait_for(lambda: runtime.state.pod(f"default/{name}"), message=f"{name} in the extender's state")
    return pod


def bind(client: FlaskClient, pod: dict[str, Any], node: str = "gpu-1") -> str:
    meta = pod["metadata"]
    reply = client.post("/bind", json={"PodName": meta["name"], "PodNamespace": meta["namespace"],
                                       "PodUID": meta["uid"], "Node": node})
    assert reply.status_code == 200, reply.data
    return reply.get_json()["Error"]


def test_filter_prioritize_and_bind_a_gpu_pod(client: FlaskClient, runtime: Runtime, kube: Any) -> None:
    pod = gpu_pod(kube, runtime, "infer", memory=6000, cores=25)
    args = {"Pod": pod, "NodeNames": ["gpu-1", "cpu-1"]}
    filtered = client.post("/filter", json=args).get_json()
    assert filtered["NodeNames"] == ["gpu-1"]
    assert filtered["FailedAndUnresolvableNodes"] == {"cpu-1": "node(s) had no shared GPUs"}
    scores = client.post("/prioritize", json={"Pod": pod, "NodeNames": ["gpu-1"]}).get_json()
    assert scores[0]["Host"] == "gpu-1" and 0 <= scores[0]["Score"] <= 10

    assert bind(client, pod) == ""
    bound = kube.get_pod("infer")
    assert bound["spec"]["nodeName"] == "gpu-1"
    # The API server copied the Binding's annotation onto the pod, in the same request.
    assert assigned(bound) == {"GPU-0": (6000, 25)}
    assert '"node":"gpu-1"' in bound["metadata"]["annotations"][ASSIGNMENT_ANNOTATION]
    lease = kube.get_lease("gpu-ledger.gpu-1", LEDGER_NAMESPACE)
    assert pod["metadata"]["uid"] in lease["metadata"]["annotations"]["extender.example/gpu-ledger"]
    kube.wait_for(lambda: runtime.state.pod("default/infer").devices == (("GPU-0", 6000, 25),),
                  message="the watch to bring the assignment")


def test_binds_fill_the_devices_and_then_refuse(client: FlaskClient, runtime: Runtime, kube: Any) -> None:
    pods = [gpu_pod(kube, runtime, f"p{i}", memory=10000) for i in range(3)]
    assert bind(client, pods[0]) == "" and bind(client, pods[1]) == ""  # one per device: 6000 MiB left each
    error = bind(client, pods[2])
    assert "Insufficient GPU memory" in error and "p2" in error
    assert kube.get_pod("p2")["spec"].get("nodeName") is None
    assert sorted(d for p in ("p0", "p1") for d in assigned(kube.get_pod(p))) == ["GPU-0", "GPU-1"]
    filtered = client.post("/filter", json={"Pod": pods[2], "NodeNames": ["gpu-1"]}).get_json()
    assert filtered["FailedNodes"] == {"gpu-1": "Insufficient GPU memory"}


@pytest.mark.requires_fake("fails the bind with 500 on demand (the fake's fail_next)")
def test_a_failed_bind_leaves_nothing_behind(apiserver: Any, client: FlaskClient, runtime: Runtime,
                                            kube: Any) -> None:
    pod = gpu_pod(kube, runtime, "unlucky", gpus=1)
    apiserver.fake.fail_next(1, 500, path_regex=r"/pods/unlucky/binding$", method="POST")
    error = bind(client, pod)
    assert "500" in error
    after = kube.get_pod("unlucky")
    assert after["spec"].get("nodeName") is None
    assert ASSIGNMENT_ANNOTATION not in (after["metadata"].get("annotations") or {})
    use = runtime.state.device_use("gpu-1")
    assert use.used("GPU-0") == Use() and use.used("GPU-1") == Use()  # the claim was released
    assert pod["metadata"]["uid"] in use.released
    # kube-scheduler retries: the same pod binds, and its stale ledger entry does not block it.
    assert bind(client, pod) == ""
    assert assigned(kube.get_pod("unlucky")) == {"GPU-0": (16000, 100)}


def test_binding_annotations_reach_the_pod_atomically(apiserver: Any, api_client: Any, kube: Any) -> None:
    """The API server itself (fake or real): annotations on a Binding land on the pod with the bind."""
    kube.create_node("n1")
    pod = kube.create_pod("p")
    body = {"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": "p", "namespace": "default", "uid": pod["metadata"]["uid"],
                         "annotations": {ASSIGNMENT_ANNOTATION: '{"node":"n1","containers":{}}'}},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}
    request_json(api_client, "POST", "/api/v1/namespaces/default/pods/p/binding", body=body)
    bound = kube.get_pod("p")
    assert bound["spec"]["nodeName"] == "n1"
    assert bound["metadata"]["annotations"][ASSIGNMENT_ANNOTATION] == '{"node":"n1","containers":{}}'


def test_a_share_another_process_just_took_is_not_given_again(client: FlaskClient, runtime: Runtime, kube: Any,
                                                              api_client: Any) -> None:
    """Another process handed GPU-0 out a moment ago (its pod not visible here yet): the bind
    goes to GPU-1 instead, and the Binding carries the moved assignment."""
    other = Ledger(api_client, namespace=LEDGER_NAMESPACE)
    other.record(LedgerClaim("gpu-1", "default/elsewhere", "uid-elsewhere", (("GPU-0", 12000, 0),),
                             {"GPU-0": (16000, 100)}, NodeDeviceUse()))
    pod = gpu_pod(kube, runtime, "moved", memory=8000)
    assert bind(client, pod) == ""
    assert assigned(kube.get_pod("moved")) == {"GPU-1": (8000, 0)}
    assert runtime.state.device_use("gpu-1").used("GPU-0") == Use()
