"""Discovery for the official client, and the KubeTestClient helpers."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.fakeapi import KubeApiError, KubeTestClient


def test_version_and_api_discovery(official_client, kube) -> None:
    version = client.VersionApi(official_client).get_code()
    assert version.major == "1" and version.git_version.startswith("v1.")
    assert client.CoreApi(official_client).get_api_versions().versions == ["v1"]
    groups = {g.name for g in client.ApisApi(official_client).get_api_versions().groups}
    assert {"events.k8s.io", "coordination.k8s.io", "authorization.k8s.io"} <= groups
    resources = {r.name: r for r in client.CoreV1Api(official_client).get_api_resources().resources}
    assert resources["pods"].namespaced and not resources["nodes"].namespaced
    assert "create" in resources["pods/binding"].verbs and "patch" in resources["pods/status"].verbs
    leases = client.CoordinationV1Api(official_client).get_api_resources()
    assert [r.name for r in leases.resources] == ["leases"]
    for path in ("/healthz", "/readyz", "/livez"):
        assert kube.request("GET", path).text == "ok"


def test_create_node_reports_status_like_a_kubelet(kube, core_v1) -> None:
    kube.create_node(
        "n1",
        cpu="8",
        memory="16Gi",
        labels={"zone": "a"},
        taints=["gpu=true:NoSchedule"],
        extra_resources={"nvidia.com/gpu": "2"},
        allocatable={"cpu": "7500m", "memory": "15Gi", "pods": "110"},
    )
    node = core_v1.read_node("n1")
    assert (
        node.status.capacity["nvidia.com/gpu"] == "2" and node.status.allocatable["cpu"] == "7500m"
    )
    assert {c.type: c.status for c in node.status.conditions}["Ready"] == "True"
    assert node.spec.taints[0].key == "gpu" and node.spec.taints[0].effect == "NoSchedule"
    assert (
        node.metadata.labels["zone"] == "a"
        and node.metadata.labels["kubernetes.io/hostname"] == "n1"
    )


def test_node_readiness_and_cordon(kube) -> None:
    kube.create_node("n1", ready=False)
    ready = {c["type"]: c["status"] for c in kube.get_node("n1")["status"]["conditions"]}
    assert ready["Ready"] == "False" and ready["MemoryPressure"] == "False"
    kube.set_node_ready("n1", True)
    conditions = kube.get_node("n1")["status"]["conditions"]
    assert [c["status"] for c in conditions if c["type"] == "Ready"] == ["True"] and len(
        conditions
    ) == 4
    kube.cordon_node("n1")
    assert kube.get_node("n1")["spec"]["unschedulable"] is True
    assert [
        n["metadata"]["name"]
        for n in kube.call(
            "GET", "/api/v1/nodes", params={"fieldSelector": "spec.unschedulable=true"}
        )["items"]
    ] == ["n1"]
    kube.cordon_node("n1", False)
    assert "unschedulable" not in kube.get_node("n1")["spec"]
    kube.delete_node("n1")
    assert kube.get_node("n1") is None


def test_create_pod_options(kube) -> None:
    pod = kube.create_pod(
        "p",
        cpu="250m",
        memory="64Mi",
        scheduler_name="mine",
        node_selector={"zone": "a"},
        tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        priority_class_name="system-node-critical",
        annotations={"a": "b"},
        init_containers=[{"name": "init", "image": "busybox:1"}],
    )
    spec = pod["spec"]
    assert spec["schedulerName"] == "mine" and spec["nodeSelector"] == {"zone": "a"}
    assert spec["priority"] == 2000001000
    assert spec["containers"][0]["resources"]["requests"] == {"cpu": "250m", "memory": "64Mi"}
    assert spec["tolerations"][0]["key"] == "gpu"
    with pytest.raises(KubeApiError) as err:
        kube.create_pod("q", priority_class_name="no-such-class")
    assert err.value.code == 403


def test_pod_phase_and_field_selected_listing(kube) -> None:
    kube.create_pod("done")
    kube.set_pod_phase("done", "Succeeded")
    kube.create_pod("pending")
    assert [
        p["metadata"]["name"] for p in kube.list_pods(field_selector="status.phase=Pending")
    ] == ["pending"]


def test_wait_for_returns_the_value_or_fails_clearly(kube) -> None:
    assert KubeTestClient.wait_for(lambda: 42, timeout=0.1) == 42
    with pytest.raises(AssertionError, match="waiting for the impossible"):
        KubeTestClient.wait_for(lambda: None, timeout=0.1, message="the impossible")


def test_delete_all_leaves_namespaces(kube) -> None:
    kube.ensure_namespace("team")
    kube.ensure_namespace("team")  # idempotent
    kube.create_node("n1")
    kube.create_pod("p", namespace="team")
    kube.delete_all()
    assert kube.list_pods() == [] and kube.list_nodes() == []
    assert kube.call("GET", "/api/v1/namespaces/team")["metadata"]["name"] == "team"
