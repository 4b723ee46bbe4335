"""The three patch flavours, unit-level and through the server (including pods/status)."""

from __future__ import annotations

import pytest

from tests.fakeapi.patches import (
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    apply_patch,
    json_patch,
    merge_patch,
    strategic_merge_patch,
)
from tests.fakeapi.status import ApiError


def test_merge_patch_rfc7386() -> None:
    target = {"a": 1, "b": {"c": 2, "d": 3}, "l": [1, 2]}
    assert merge_patch(target, {"b": {"c": None, "e": 4}, "l": [3], "n": {"x": None}}) == {
        "a": 1,
        "b": {"d": 3, "e": 4},
        "l": [3],
        "n": {},
    }
    assert target["b"] == {"c": 2, "d": 3}  # not mutated


def test_strategic_merge_conditions_merge_by_type() -> None:
    status = {
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "PodScheduled", "status": "True"},
            ]
        }
    }
    patched = strategic_merge_patch(
        status,
        {
            "status": {
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"},
                    {"type": "Initialized", "status": "True"},
                ]
            }
        },
    )
    assert patched["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"},
        {"type": "Initialized", "status": "True"},
    ]


def test_strategic_merge_directives() -> None:
    obj = {
        "metadata": {"finalizers": ["a", "b"]},
        "spec": {
            "containers": [{"name": "x", "image": "1"}, {"name": "y", "image": "2"}],
            "tolerations": [{"key": "k"}],
        },
    }
    patched = strategic_merge_patch(
        obj,
        {
            "metadata": {"finalizers": ["c"], "$deleteFromPrimitiveList/finalizers": ["a"]},
            "spec": {
                "containers": [{"name": "y", "$patch": "delete"}, {"name": "x", "image": "3"}],
                "tolerations": [{"key": "other"}],
            },
        },
    )
    assert patched["metadata"]["finalizers"] == ["b", "c"]
    assert patched["spec"]["containers"] == [{"name": "x", "image": "3"}]
    assert patched["spec"]["tolerations"] == [{"key": "other"}]  # no merge key: replaced
    replaced = strategic_merge_patch(obj, {"spec": {"$patch": "replace", "containers": []}})
    assert replaced["spec"] == {"containers": []}


def test_json_patch_ops_and_failures() -> None:
    doc = {"metadata": {"labels": {"a/b": "1"}}, "spec": {"list": [1, 2]}}
    out = json_patch(
        doc,
        [
            {"op": "add", "path": "/spec/list/-", "value": 3},
            {"op": "replace", "path": "/metadata/labels/a~1b", "value": "2"},
            {"op": "test", "path": "/spec/list/0", "value": 1},
            {"op": "copy", "from": "/spec/list", "path": "/spec/copy"},
            {"op": "move", "from": "/spec/copy", "path": "/spec/moved"},
            {"op": "remove", "path": "/spec/list/0"},
        ],
    )
    assert out == {
        "metadata": {"labels": {"a/b": "2"}},
        "spec": {"list": [2, 3], "moved": [1, 2, 3]},
    }
    with pytest.raises(ApiError) as err:
        json_patch(doc, [{"op": "test", "path": "/spec/list/0", "value": 9}])
    assert err.value.code == 422
    with pytest.raises(ApiError):
        json_patch(doc, [{"op": "remove", "path": "/nope"}])


def test_unknown_patch_type_is_415() -> None:
    with pytest.raises(ApiError) as err:
        apply_patch("application/apply-patch+yaml", {}, {})
    assert err.value.code == 415 and err.value.reason == "UnsupportedMediaType"


def test_pod_status_patch_sets_podscheduled_without_touching_other_conditions(
    kube, core_v1
) -> None:
    kube.create_pod("p")
    kube.patch_pod(
        "p",
        {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
        status_subresource=True,
    )
    # The python client sends a dict body as a strategic merge patch.
    core_v1.patch_namespaced_pod_status(
        "p",
        "default",
        {
            "status": {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/1 nodes",
                    }
                ]
            }
        },
    )
    conditions = {c["type"]: c for c in kube.get_pod("p")["status"]["conditions"]}
    assert conditions["Ready"]["status"] == "False"
    assert conditions["PodScheduled"]["reason"] == "Unschedulable"


def test_status_patch_keeps_spec_but_not_metadata_and_main_patch_keeps_status(kube) -> None:
    """The status strategies reset spec only: labels, annotations and finalizers do change
    through pods/status (and nodes/status), as on kube-apiserver v1.36."""
    kube.create_pod("p", labels={"a": "1"})
    kube.patch_pod(
        "p",
        {
            "metadata": {"labels": {"a": "2"}, "annotations": {"x": "y"}},
            "spec": {"activeDeadlineSeconds": 5},
            "status": {"phase": "Running"},
        },
        status_subresource=True,
    )
    pod = kube.get_pod("p")
    assert pod["status"]["phase"] == "Running"
    assert pod["metadata"]["labels"] == {"a": "2"} and pod["metadata"]["annotations"] == {"x": "y"}
    assert "activeDeadlineSeconds" not in pod["spec"]
    kube.patch_pod("p", {"metadata": {"labels": {"a": "3"}}, "status": {"phase": "Failed"}})
    pod = kube.get_pod("p")
    assert pod["metadata"]["labels"] == {"a": "3"} and pod["status"]["phase"] == "Running"
    kube.create_node("n1")
    kube.patch_node(
        "n1",
        {"metadata": {"labels": {"z": "1"}}, "spec": {"unschedulable": True}},
        status_subresource=True,
    )
    node = kube.get_node("n1")
    assert node["metadata"]["labels"]["z"] == "1" and not node["spec"].get("unschedulable")


@pytest.mark.parametrize("content_type", [MERGE_PATCH, STRATEGIC_MERGE_PATCH, JSON_PATCH])
def test_patch_flavours_on_node_labels(kube, content_type: str) -> None:
    kube.create_node("n1")
    body = (
        [{"op": "add", "path": "/metadata/labels/zone", "value": "a"}]
        if content_type == JSON_PATCH
        else {"metadata": {"labels": {"zone": "a"}}}
    )
    resp = kube.request("PATCH", "/api/v1/nodes/n1", body, content_type=content_type)
    assert resp.status_code == 200, resp.text
    assert resp.json()["metadata"]["labels"]["zone"] == "a"
    assert resp.json()["metadata"]["labels"]["kubernetes.io/hostname"] == "n1"


def test_patch_with_stale_resource_version_conflicts(kube) -> None:
    node = kube.create_node("n1")
    kube.patch_node("n1", {"metadata": {"labels": {"x": "1"}}})
    resp = kube.request(
        "PATCH",
        "/api/v1/nodes/n1",
        {
            "metadata": {
                "resourceVersion": node["metadata"]["resourceVersion"],
                "labels": {"x": "2"},
            }
        },
        content_type=MERGE_PATCH,
    )
    assert resp.status_code == 409 and resp.json()["reason"] == "Conflict"


def test_patch_of_missing_object_is_404(kube) -> None:
    resp = kube.request("PATCH", "/api/v1/nodes/ghost", {"metadata": {}}, content_type=MERGE_PATCH)
    assert resp.status_code == 404 and resp.json()["message"] == 'nodes "ghost" not found'
