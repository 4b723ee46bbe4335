"""Create/read/update/delete semantics: identity, optimistic concurrency, Status errors, defaults."""

from __future__ import annotations

import json

import pytest
from kubernetes.client import ApiException, V1Namespace, V1ObjectMeta

from tests.fakeapi import KubeApiError
from tests.fakeapi_tests.expected import status

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p"},
    "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
}


def test_create_sets_identity_and_pending_status(kube) -> None:
    pod = kube.call(
        "POST",
        "/api/v1/namespaces/default/pods",
        {**POD, "status": {"phase": "Running", "podIP": "1.2.3.4"}},
    )
    meta = pod["metadata"]
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert int(meta["resourceVersion"]) > 0 and meta["namespace"] == "default"
    assert (
        pod["status"]["phase"] == "Pending" and "podIP" not in pod["status"]
    )  # status is not the client's
    assert pod["status"]["qosClass"] == "BestEffort"
    spec = pod["spec"]
    assert spec["schedulerName"] == "default-scheduler" and spec["priority"] == 0
    assert spec["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert {t["key"] for t in spec["tolerations"]} == {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    }


def test_limits_default_requests_and_qos(kube) -> None:
    pod = kube.create_pod("g", limits={"cpu": "1", "memory": "1Gi"})
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert pod["status"]["qosClass"] == "Guaranteed"
    assert kube.create_pod("b", cpu="100m")["status"]["qosClass"] == "Burstable"


@pytest.mark.parametrize("quantity", ["1e31", "1" * 70, "0.0000000001"], ids=["exponent-31", "70-digits", "sub-nano"])
def test_quantities_kube_apiserver_stores(kube, quantity: str) -> None:
    """What kube-apiserver v1.36.3 accepts, though the extender's own parser refuses the first two."""
    assert kube.create_pod("q", memory=quantity)["status"]["qosClass"] == "Burstable"


def test_gated_pod_gets_scheduling_gated_condition(kube) -> None:
    pod = kube.create_pod("gated", scheduling_gates=["wait"])
    assert pod["status"]["conditions"][0]["reason"] == "SchedulingGated"


def test_resource_versions_are_one_global_counter(kube) -> None:
    a = int(kube.create_node("n1")["metadata"]["resourceVersion"])
    b = int(kube.create_pod("p")["metadata"]["resourceVersion"])
    c = int(kube.call("GET", "/api/v1/nodes")["metadata"]["resourceVersion"])
    assert a < b <= c


def test_list_items_have_no_type_meta_and_are_sorted(kube) -> None:
    for name in ("b", "a", "c"):
        kube.create_pod(name)
    listing = kube.call("GET", "/api/v1/namespaces/default/pods")
    assert listing["kind"] == "PodList" and listing["apiVersion"] == "v1"
    assert [i["metadata"]["name"] for i in listing["items"]] == ["a", "b", "c"]
    assert all("kind" not in i and "apiVersion" not in i for i in listing["items"])


def test_not_found_and_already_exists_are_real_status_objects(kube) -> None:
    resp = kube.request("GET", "/api/v1/namespaces/default/pods/nope")
    assert resp.status_code == 404
    assert resp.json() == status(404, 'pods "nope" not found', "NotFound", {"name": "nope", "kind": "pods"})
    kube.create_pod("p")
    with pytest.raises(KubeApiError) as err:
        kube.create_pod("p")
    assert err.value.code == 409 and err.value.reason == "AlreadyExists"
    assert err.value.status["message"] == 'pods "p" already exists'


def test_put_with_stale_resource_version_conflicts(core_v1, kube) -> None:
    kube.create_node("n1")
    first = core_v1.read_node("n1")
    second = core_v1.read_node("n1")
    first.metadata.labels["a"] = "1"
    core_v1.replace_node("n1", first)
    second.metadata.labels["a"] = "2"
    with pytest.raises(ApiException) as err:
        core_v1.replace_node("n1", second)
    assert err.value.status == 409
    assert json.loads(err.value.body)["message"] == (
        'Operation cannot be fulfilled on nodes "n1": the object has been modified; please apply your changes '
        "to the latest version and try again"
    )


def test_put_without_resource_version_is_unconditional(kube) -> None:
    node = kube.create_node("n1")
    node["metadata"].pop("resourceVersion")
    node["metadata"]["labels"]["x"] = "y"
    assert kube.call("PUT", "/api/v1/nodes/n1", node)["metadata"]["labels"]["x"] == "y"


def test_noop_update_keeps_resource_version(kube) -> None:
    node = kube.create_node("n1")
    again = kube.call("PUT", "/api/v1/nodes/n1", node)
    assert again["metadata"]["resourceVersion"] == node["metadata"]["resourceVersion"]


def test_put_name_mismatch_is_a_bad_request_and_create_with_a_resource_version_a_500(kube) -> None:
    node = kube.create_node("n1")
    resp = kube.request("PUT", "/api/v1/nodes/other", node)
    assert resp.status_code == 400
    assert (
        resp.json()["message"]
        == "the name of the object (n1) does not match the name on the URL (other)"
    )
    resp = kube.request(
        "POST",
        "/api/v1/namespaces/default/pods",
        {**POD, "metadata": {"name": "x", "resourceVersion": "5"}},
    )
    # kube-apiserver v1.36 answers a bare 500 with no reason (found on the real server).
    assert resp.status_code == 500
    assert resp.json() == status(500, "resourceVersion should not be set on objects to be created")


def test_pod_node_name_cannot_be_patched(kube) -> None:
    kube.create_pod("p")
    with pytest.raises(KubeApiError) as err:
        kube.patch_pod("p", {"spec": {"nodeName": "n1"}})
    assert err.value.code == 422 and err.value.reason == "Invalid"
    assert "pod updates may not change fields other than" in err.value.status["message"]


def test_scheduling_gates_can_only_be_removed(kube) -> None:
    kube.create_pod("p", scheduling_gates=["a", "b"])
    kube.patch_pod(
        "p",
        {"spec": {"schedulingGates": [{"name": "a"}]}},
        content_type="application/merge-patch+json",
    )
    with pytest.raises(KubeApiError) as err:
        kube.patch_pod(
            "p",
            {"spec": {"schedulingGates": [{"name": "c"}]}},
            content_type="application/merge-patch+json",
        )
    assert "only deletion is allowed, but found new scheduling gate 'c'" in str(err.value)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}},
            'Pod "p" is invalid: spec.containers[0].image: Required value',
        ),
        (
            {
                "metadata": {"name": "Bad_Name"},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
            'Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain',
        ),
        (
            {
                "metadata": {"name": "p", "labels": {"a": "has space"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
            'Pod "p" is invalid: metadata.labels: Invalid value: "has space": a valid label must be',
        ),
    ],
)
def test_validation_errors_are_422_with_field_paths(kube, body, message: str) -> None:
    resp = kube.request("POST", "/api/v1/namespaces/default/pods", body)
    assert resp.status_code == 422, resp.text
    assert resp.json()["message"].startswith(message)
    assert resp.json()["details"]["causes"]


def test_namespaced_create_needs_the_namespace(kube) -> None:
    resp = kube.request("POST", "/api/v1/namespaces/missing/pods", POD)
    assert resp.status_code == 404 and resp.json()["message"] == 'namespaces "missing" not found'
    kube.create_namespace("team-a")
    assert kube.create_pod("p", namespace="team-a")["metadata"]["namespace"] == "team-a"
    resp = kube.request(
        "POST",
        "/api/v1/namespaces/default/pods",
        {**POD, "metadata": {"name": "x", "namespace": "team-a"}},
    )
    assert resp.status_code == 400


def test_namespaces_with_the_official_client(core_v1) -> None:
    core_v1.create_namespace(V1Namespace(metadata=V1ObjectMeta(name="ns-one")))
    names = [n.metadata.name for n in core_v1.list_namespace().items]
    assert "ns-one" in names and "default" in names
    assert core_v1.read_namespace("ns-one").status.phase == "Active"


def test_generate_name(kube) -> None:
    pod = kube.call(
        "POST", "/api/v1/namespaces/default/pods", {**POD, "metadata": {"generateName": "web-"}}
    )
    assert pod["metadata"]["name"].startswith("web-") and len(pod["metadata"]["name"]) == 9


def test_pod_delete_is_immediate_when_unbound_and_returns_the_pod(kube) -> None:
    kube.create_pod("p")
    deleted = kube.delete_pod("p")
    assert deleted["kind"] == "Pod" and kube.get_pod("p") is None
    assert deleted["metadata"]["deletionGracePeriodSeconds"] == 0


def test_bound_pod_delete_waits_for_the_kubelet_unless_grace_is_zero(kube) -> None:
    """A pod on a node is deleted gracefully (terminationGracePeriodSeconds, 30 s): it stays,
    with a deletionTimestamp, until its kubelet confirms; with no kubelet, forever. Clean-up
    of bound pods must therefore use gracePeriodSeconds=0 (found on the real server)."""
    kube.create_pod("p", node_name="n1")
    deleted = kube.delete_pod("p")
    assert deleted["metadata"]["deletionGracePeriodSeconds"] == 30
    still = kube.get_pod("p")
    assert still is not None and still["metadata"]["deletionTimestamp"]
    kube.delete_pod("p", grace_period_seconds=0)
    assert kube.get_pod("p") is None


def test_node_delete_returns_a_success_status(kube) -> None:
    node = kube.create_node("n1")
    reply = kube.delete_node("n1")
    assert reply["kind"] == "Status" and reply["status"] == "Success"
    assert reply["details"] == {"name": "n1", "kind": "nodes", "uid": node["metadata"]["uid"]}


def test_delete_preconditions(kube) -> None:
    kube.create_pod("p")
    with pytest.raises(KubeApiError) as err:
        kube.delete_pod("p", uid="not-the-uid")
    assert err.value.code == 409
    assert "the UID in the precondition (not-the-uid) does not match the UID in record" in str(
        err.value
    )


def test_finalizers_hold_deletion_until_removed(kube) -> None:
    kube.create_pod("p", finalizers=["example.com/hold"])
    kube.delete_pod("p")
    pod = kube.get_pod("p")
    assert (
        pod["metadata"]["deletionTimestamp"] and pod["metadata"]["deletionGracePeriodSeconds"] == 0
    )
    with pytest.raises(KubeApiError):
        kube.patch_pod(
            "p",
            {"metadata": {"finalizers": ["example.com/hold", "new"]}},
            content_type="application/merge-patch+json",
        )
    kube.patch_pod(
        "p", {"metadata": {"finalizers": None}}, content_type="application/merge-patch+json"
    )
    assert kube.get_pod("p") is None


@pytest.mark.requires_fake("graceful_delete=False is a switch of the fake; the real server is always graceful")
def test_graceful_delete_can_be_switched_off(apiserver, kube) -> None:
    """The fake's lax mode (a switch of the fake: the real server is always graceful)."""
    apiserver.fake.configure(graceful_delete=False)
    kube.create_pod("bound", node_name="n1")
    deleted = kube.delete_pod("bound")
    assert deleted["metadata"]["deletionGracePeriodSeconds"] == 0
    assert kube.get_pod("bound") is None


def test_delete_collection(kube) -> None:
    kube.ensure_namespace("tmp")
    kube.create_pod("a", namespace="tmp", labels={"app": "x"})
    kube.create_pod("b", namespace="tmp")
    listing = kube.call("DELETE", "/api/v1/namespaces/tmp/pods", params={"labelSelector": "app=x"})
    assert [i["metadata"]["name"] for i in listing["items"]] == ["a"]
    assert [p["metadata"]["name"] for p in kube.list_pods("tmp")] == ["b"]


@pytest.mark.requires_fake(
    "the fake does the namespace controller's work at once; envtest runs no controllers, so a "
    "deleted namespace stays Terminating with its content"
)
def test_namespace_delete_removes_content_at_once(kube) -> None:
    kube.ensure_namespace("gone")
    kube.create_pod("a", namespace="gone")
    reply = kube.call("DELETE", "/api/v1/namespaces/gone")
    assert reply["status"]["phase"] == "Terminating"
    assert kube.list_pods("gone") == []


def test_pagination_with_limit_and_continue(kube) -> None:
    for i in range(5):
        kube.create_pod(f"p{i}")
    first = kube.call("GET", "/api/v1/namespaces/default/pods", params={"limit": 2})
    assert [i["metadata"]["name"] for i in first["items"]] == ["p0", "p1"]
    assert first["metadata"]["remainingItemCount"] == 3
    second = kube.call(
        "GET",
        "/api/v1/namespaces/default/pods",
        params={"limit": 10, "continue": first["metadata"]["continue"]},
    )
    assert [i["metadata"]["name"] for i in second["items"]] == ["p2", "p3", "p4"]
    assert "continue" not in second["metadata"]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


@pytest.mark.requires_fake(
    "needs the fake's compact(): a real kube-apiserver serves continue tokens from its watch "
    "cache, which etcd compaction does not expire (only a server started with "
    "--watch-cache=false answers 410 then)"
)
def test_expired_continue_token_is_410(fake, kube) -> None:
    for i in range(3):
        kube.create_pod(f"p{i}")
    first = kube.call("GET", "/api/v1/namespaces/default/pods", params={"limit": 1})
    kube.create_pod("later")
    fake.compact()
    resp = kube.request(
        "GET",
        "/api/v1/namespaces/default/pods",
        params={"limit": 1, "continue": first["metadata"]["continue"]},
    )
    assert resp.status_code == 410 and resp.json()["reason"] == "Expired"


def test_unknown_paths_and_methods(kube) -> None:
    resp = kube.request("GET", "/api/v1/widgets")
    assert (
        resp.status_code == 404
        and resp.json()["message"] == "the server could not find the requested resource"
    )
    resp = kube.request("PUT", "/api/v1/namespaces/default/pods", POD)
    assert resp.status_code == 405 and resp.json()["reason"] == "MethodNotAllowed"
    resp = kube.request("POST", "/api/v1/namespaces/default/pods", None)
    assert resp.status_code == 400


@pytest.mark.parametrize("path", ["/apis/nonexistent.example.com/v1/namespaces/default/foos", "/nope"])
def test_paths_outside_every_api_group_are_a_plain_404(kube, path: str) -> None:
    """Not a Status: kube-apiserver's mux answers text (a client reading events.k8s.io from a
    server that does not serve it gets this, found on the real server)."""
    resp = kube.request("GET", path)
    assert resp.status_code == 404 and resp.text == "404 page not found\n"
    assert resp.headers["Content-Type"].startswith("text/plain")


def test_node_taint_validation(kube) -> None:
    with pytest.raises(KubeApiError) as err:
        kube.create_node("n1", taints=["gpu=true:NoScheduel"])
    # ValidateNode reports spec.taints under "metadata.taints" (sic), as the real server does.
    assert 'metadata.taints[0].effect: Unsupported value: "NoScheduel"' in str(err.value)


def test_new_nodes_get_the_not_ready_taint(kube) -> None:
    """The NodeTaint admission plugin taints every new node; the node lifecycle controller
    removes it when the node is Ready. KubeTestClient.create_node plays that controller."""
    created = kube.call(
        "POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "raw"}}
    )
    assert created["spec"]["taints"] == [
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    ]
    assert "taints" not in kube.create_node("ready")["spec"]
    assert kube.create_node("down", ready=False)["spec"]["taints"] == created["spec"]["taints"]
    assert kube.create_node("gpu", taints=["gpu=true:NoSchedule"])["spec"]["taints"] == [
        {"key": "gpu", "value": "true", "effect": "NoSchedule"}
    ]
    assert "taints" not in kube.set_node_ready("down", True)["spec"]
    assert kube.set_node_ready("ready", False)["spec"]["taints"] == created["spec"]["taints"]


def test_put_status_subresources(kube) -> None:
    pod = kube.create_pod("p")
    pod["status"]["phase"] = "Running"
    pod["spec"]["activeDeadlineSeconds"] = 10  # ignored: a status write changes only status
    updated = kube.call("PUT", "/api/v1/namespaces/default/pods/p/status", pod)
    assert (
        updated["status"]["phase"] == "Running" and "activeDeadlineSeconds" not in updated["spec"]
    )
    pod["status"]["phase"] = "Failed"  # the copy is now stale
    resp = kube.request("PUT", "/api/v1/namespaces/default/pods/p/status", pod)
    assert resp.status_code == 409
    node = kube.create_node("n1", cpu="2")
    node["status"]["allocatable"]["cpu"] = "1500m"
    assert (
        kube.call("PUT", "/api/v1/nodes/n1/status", node)["status"]["allocatable"]["cpu"] == "1500m"
    )


def test_watch_flag_accepts_1(kube) -> None:
    resp = kube.request("GET", "/api/v1/nodes", params={"watch": "1", "timeoutSeconds": "1"})
    assert resp.status_code == 200 and resp.headers["Transfer-Encoding"] == "chunked"


def test_timeout_seconds_must_be_an_integer(kube) -> None:
    resp = kube.request("GET", "/api/v1/nodes", params={"watch": "1", "timeoutSeconds": "0.1"})
    assert resp.status_code == 400
    assert resp.json()["message"] == 'strconv.ParseInt: parsing "0.1": invalid syntax'


def test_the_resize_subresource_changes_only_container_resources(kube) -> None:
    """podResizeStrategy: a PUT of pods/resize keeps everything but each container's resources
    (labels written with it are dropped); renaming a container is refused."""
    kube.create_pod("grow", memory="1Gi", labels={"app": "a"})
    pod = kube.get_pod("grow")
    generation = pod["metadata"]["generation"]
    pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = "512Mi"
    pod["metadata"]["labels"] = {"app": "b"}
    resized = kube.call("PUT", "/api/v1/namespaces/default/pods/grow/resize", pod)
    assert resized["spec"]["containers"][0]["resources"]["requests"]["memory"] == "512Mi"
    assert resized["metadata"]["labels"] == {"app": "a"}
    assert resized["metadata"]["generation"] == generation + 1
    pod = kube.get_pod("grow")
    pod["spec"]["containers"][0]["name"] = "renamed"
    with pytest.raises(KubeApiError) as err:
        kube.call("PUT", "/api/v1/namespaces/default/pods/grow/resize", pod)
    assert err.value.code == 422
    assert "spec.containers[0].name: Forbidden: containers may not be renamed or reordered on resize" \
        in err.value.status["message"]
