"""The Binding subresource: every refusal kube-apiserver makes, with its code and message."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.fakeapi_tests.expected import binding, status


def _status(resp) -> tuple[int, str, str]:
    body = resp.json()
    assert body["kind"] == "Status" and body["apiVersion"] == "v1"
    return resp.status_code, body.get("reason", ""), body.get("message", "")


def test_successful_binding(kube) -> None:
    pod = kube.create_pod("p", labels={"keep": "me"})
    resp = kube.bind_pod(
        "p",
        "n1",
        uid=pod["metadata"]["uid"],
        annotations={"example.com/gpu": "0"},
        labels={"topology.kubernetes.io/zone": "a"},
    )
    assert resp.status_code == 201
    assert resp.json() == status(201)
    bound = kube.get_pod("p")
    assert bound["spec"]["nodeName"] == "n1"  # the node need not exist: the server does not check
    assert bound["metadata"]["annotations"] == {"example.com/gpu": "0"}
    assert bound["metadata"]["labels"] == {"keep": "me", "topology.kubernetes.io/zone": "a"}
    scheduled = [c for c in bound["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled == [
        {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": scheduled[0]["lastTransitionTime"],
        }
    ]
    assert int(bound["metadata"]["resourceVersion"]) > int(pod["metadata"]["resourceVersion"])


def test_url_name_must_match_body_name(kube) -> None:
    kube.create_pod("p")
    resp = kube.request("POST", "/api/v1/namespaces/default/pods/p/binding", binding("other", kind="Node", name="n1"))
    assert _status(resp) == (400, "BadRequest", "name in URL does not match name in Binding object")


def test_missing_pod_is_404(kube) -> None:
    assert _status(kube.bind_pod("ghost", "n1")) == (404, "NotFound", 'pods "ghost" not found')


def test_uid_precondition(kube) -> None:
    pod = kube.create_pod("p")
    code, reason, message = _status(kube.bind_pod("p", "n1", uid="0000-stale"))
    assert (code, reason) == (409, "Conflict")
    assert message == (
        'Operation cannot be fulfilled on pods "p": StorageError: invalid object, Code: 4, '
        "Key: /registry/pods/default/p, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: "
        f"UID in precondition: 0000-stale, UID in object meta: {pod['metadata']['uid']}"
    )
    assert kube.get_pod("p")["spec"].get("nodeName") is None


def test_already_assigned(kube) -> None:
    kube.create_pod("p")
    assert kube.bind_pod("p", "n1").status_code == 201
    assert _status(kube.bind_pod("p", "n2")) == (
        409,
        "Conflict",
        'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "n1"',
    )
    assert kube.get_pod("p")["spec"]["nodeName"] == "n1"


def test_being_deleted(kube) -> None:
    kube.create_pod("p", finalizers=["example.com/hold"])
    kube.delete_pod("p")
    assert _status(kube.bind_pod("p", "n1")) == (
        409,
        "Conflict",
        'Operation cannot be fulfilled on pods/binding "p": pod p is being deleted, cannot be '
        "assigned to a host",
    )
    kube.patch_pod(
        "p", {"metadata": {"finalizers": None}}, content_type="application/merge-patch+json"
    )


def test_scheduling_gates(kube) -> None:
    kube.create_pod("p", scheduling_gates=["wait-for-quota"])
    assert _status(kube.bind_pod("p", "n1")) == (
        409,
        "Conflict",
        'Operation cannot be fulfilled on pods/binding "p": pod p has non-empty .spec.schedulingGates',
    )


def test_target_validation(kube) -> None:
    kube.create_pod("p")
    resp = kube.request("POST", "/api/v1/namespaces/default/pods/p/binding", binding("p", kind="Pod"))
    # ValidatePodBinding's errors are not an API status: kube-apiserver answers 500, reason "".
    assert _status(resp) == (
        500,
        "",
        '[target.kind: Unsupported value: "Pod": supported values: "Node", '
        '"<empty>", target.name: Required value]',
    )


def test_legacy_bindings_endpoint(kube) -> None:
    kube.create_pod("p")
    resp = kube.request("POST", "/api/v1/namespaces/default/bindings",
                        binding("p", apiVersion="v1", kind="Node", name="n1"))
    assert resp.status_code == 201
    assert kube.get_pod("p")["spec"]["nodeName"] == "n1"


def test_python_client_binding_deserialization_bug_is_reproduced(kube, core_v1) -> None:
    """The official client expects a Binding back but the server returns a Status: the call
    raises although the pod was bound. Code under test must read the raw reply instead."""
    kube.create_pod("p")
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name="p"),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name="n1"),
    )
    with pytest.raises(Exception):  # noqa: B017 - ValueError or pydantic ValidationError, by client version
        core_v1.create_namespaced_pod_binding("p", "default", body)
    assert kube.get_pod("p")["spec"]["nodeName"] == "n1"
    kube.create_pod("q")
    body.metadata.name = "q"
    resp = core_v1.create_namespaced_pod_binding("q", "default", body, _preload_content=False)
    assert resp.status == 201 and kube.get_pod("q")["spec"]["nodeName"] == "n1"


@pytest.mark.requires_fake("checks the fake's own binding counters and request log")
def test_binding_counters_and_request_log(fake, kube) -> None:
    pod = kube.create_pod("p")
    kube.bind_pod("p", "n1", uid=pod["metadata"]["uid"])
    kube.bind_pod("p", "n2", uid=pod["metadata"]["uid"])  # refused: already assigned
    assert fake.binding_count("default", "p") == 1
    assert fake.bindings == [
        {"namespace": "default", "name": "p", "node": "n1", "uid": pod["metadata"]["uid"]}
    ]
    sent = fake.requests_matching("POST", r"/pods/p/binding$")
    assert [r.status for r in sent] == [201, 409]
    assert all(r.body["metadata"]["uid"] == pod["metadata"]["uid"] for r in sent)


@pytest.mark.requires_fake("copy_binding_labels is a feature switch of the fake")
def test_binding_labels_follow_the_feature_switch(fake, kube) -> None:
    fake.configure(copy_binding_labels=False)
    kube.create_pod("p")
    kube.bind_pod("p", "n1", labels={"zone": "a"}, annotations={"a": "b"})
    pod = kube.get_pod("p")
    assert "labels" not in pod["metadata"] and pod["metadata"]["annotations"] == {"a": "b"}
