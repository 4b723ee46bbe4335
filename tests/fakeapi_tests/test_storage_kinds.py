"""The storage kinds as kube-apiserver v1.36 serves them: defaults, admission, validation, immutability.

Each test passes on the fake and on a real kube-apiserver (envtest), which is how the fake's
rules in tests/fakeapi/storage.py are kept honest.
"""

from __future__ import annotations

import pytest

from tests.fakeapi import KubeApiError
from tests.fakeapi.patches import MERGE_PATCH
from tests.storage_controllers import create_storage, get_claim, get_volume
from tests.storage_objects import (
    claim,
    csi_driver,
    csi_node,
    local_class,
    persistent_volume,
    storage_capacity,
    storage_class,
    volume_attachment,
)

CLAIMS = "/api/v1/namespaces/default/persistentvolumeclaims"



def causes(err: KubeApiError) -> set[tuple[str, str]]:
    return {(c["field"], c["reason"]) for c in (err.status.get("details") or {}).get("causes") or []}


def test_defaults_status_reset_and_protection_finalizers(kube) -> None:
    cls, volume, data = create_storage(kube, storage_class("plain", mode=None),
                                       persistent_volume("pv", node="n1", phase=None), claim("data", cls="plain"))
    assert (cls["volumeBindingMode"], cls["reclaimPolicy"]) == ("Immediate", "Delete")
    assert volume["spec"]["volumeMode"] == "Filesystem" and volume["status"]["phase"] == "Pending"
    assert volume["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]
    assert data["spec"]["volumeMode"] == "Filesystem" and data["status"] == {"phase": "Pending"}
    assert data["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    driver = create_storage(kube, csi_driver("d.example.com", storage_capacity=False))[0]
    assert driver["spec"]["attachRequired"] is True and driver["spec"]["storageCapacity"] is False


def test_status_given_at_creation_is_ignored(kube) -> None:
    body = claim("data")
    body["status"] = {"phase": "Bound"}
    assert kube.call("POST", CLAIMS, body)["status"] == {"phase": "Pending"}
    volume = persistent_volume("pv", node="n1")
    assert kube.call("POST", "/api/v1/persistentvolumes", volume)["status"]["phase"] == "Pending"


def test_a_claim_without_class_gets_the_default_class(kube) -> None:
    create_storage(kube, storage_class("standard", default=True))
    assert create_storage(kube, claim("data", cls=None))[0]["spec"]["storageClassName"] == "standard"
    explicit = create_storage(kube, claim("none", cls=""))[0]
    assert explicit["spec"]["storageClassName"] == ""  # "" means no class: never defaulted


def test_deleting_a_protected_claim_leaves_it_terminating(kube) -> None:
    create_storage(kube, local_class(), claim("data"))
    kube.call("DELETE", f"{CLAIMS}/data")
    assert get_claim(kube, "data")["metadata"]["deletionTimestamp"]


def test_claim_validation(kube) -> None:
    body = claim("data")
    body["spec"]["accessModes"] = []
    del body["spec"]["resources"]
    with pytest.raises(KubeApiError) as err:
        kube.call("POST", CLAIMS, body)
    assert err.value.code == 422
    assert causes(err.value) == {("spec.accessModes", "FieldValueRequired"),
                                 ("spec.resources[storage]", "FieldValueRequired")}
    mixed = claim("mixed", modes=["ReadWriteOncePod", "ReadWriteOnce"])
    with pytest.raises(KubeApiError, match="may not use ReadWriteOncePod with other access modes"):
        kube.call("POST", CLAIMS, mixed)


def test_claim_spec_is_immutable_except_its_volume_name_once(kube) -> None:
    create_storage(kube, local_class(), claim("data"))
    patched = kube.call("PATCH", f"{CLAIMS}/data", {"spec": {"volumeName": "pv-1"}}, content_type=MERGE_PATCH)
    assert patched["spec"]["volumeName"] == "pv-1"
    for change in ({"volumeName": "pv-2"}, {"accessModes": ["ReadWriteMany"]}):
        with pytest.raises(KubeApiError, match="spec is immutable after creation") as err:
            kube.call("PATCH", f"{CLAIMS}/data", {"spec": change}, content_type=MERGE_PATCH)
        assert err.value.code == 422
    annotated = kube.call("PATCH", f"{CLAIMS}/data", {"metadata": {"annotations": {
        "volume.kubernetes.io/selected-node": "n1"}}}, content_type=MERGE_PATCH)
    assert annotated["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "n1"


def test_volume_validation(kube) -> None:
    local = persistent_volume("local", node="n1")
    del local["spec"]["nodeAffinity"]
    with pytest.raises(KubeApiError, match="Local volume requires node affinity"):
        kube.call("POST", "/api/v1/persistentvolumes", local)
    none = persistent_volume("none", node="n1")
    del none["spec"]["local"], none["spec"]["nodeAffinity"]
    with pytest.raises(KubeApiError, match="must specify a volume type"):
        kube.call("POST", "/api/v1/persistentvolumes", none)


def test_volume_claim_ref_is_writable_and_status_goes_through_its_subresource(kube) -> None:
    create_storage(kube, persistent_volume("pv", node="n1"))
    ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "default", "name": "c", "uid": "u"}
    written = kube.call("PATCH", "/api/v1/persistentvolumes/pv", {"spec": {"claimRef": ref},
                                                                   "status": {"phase": "Released"}},
                        content_type=MERGE_PATCH)
    assert written["spec"]["claimRef"]["uid"] == "u" and written["status"]["phase"] == "Available"
    with pytest.raises(KubeApiError, match="immutable"):
        kube.call("PATCH", "/api/v1/persistentvolumes/pv", {"spec": {"local": {"path": "/other"}}},
                  content_type=MERGE_PATCH)
    assert get_volume(kube, "pv")["spec"]["local"]["path"] == "/mnt/disks/pv"


def test_update_with_a_stale_resource_version_conflicts(kube) -> None:
    volume = create_storage(kube, persistent_volume("pv", node="n1"))[0]
    kube.call("PATCH", "/api/v1/persistentvolumes/pv", {"metadata": {"labels": {"a": "b"}}}, content_type=MERGE_PATCH)
    with pytest.raises(KubeApiError) as err:
        kube.call("PUT", "/api/v1/persistentvolumes/pv", volume)
    assert err.value.code == 409


def test_class_fields_are_immutable(kube) -> None:
    create_storage(kube, storage_class("fast"))
    with pytest.raises(KubeApiError, match="field is immutable") as err:
        kube.call("PATCH", "/apis/storage.k8s.io/v1/storageclasses/fast", {"volumeBindingMode": "Immediate"},
                  content_type=MERGE_PATCH)
    assert err.value.code == 422
    relabelled = kube.call("PATCH", "/apis/storage.k8s.io/v1/storageclasses/fast",
                           {"metadata": {"labels": {"tier": "gold"}}}, content_type=MERGE_PATCH)
    assert relabelled["metadata"]["labels"] == {"tier": "gold"}


def test_csi_objects(kube) -> None:
    node = create_storage(kube, csi_node("n1", {"csi.example.com": 2}))[0]
    assert node["spec"]["drivers"][0]["allocatable"]["count"] == 2
    recounted = kube.call("PATCH", "/apis/storage.k8s.io/v1/csinodes/n1", {"spec": {"drivers": [
        {"name": "csi.example.com", "nodeID": "n1", "allocatable": {"count": 5}}]}}, content_type=MERGE_PATCH)
    assert recounted["spec"]["drivers"][0]["allocatable"]["count"] == 5  # the count is mutable in v1.36
    capacity = create_storage(kube, storage_capacity("cap", "fast", labels={"zone": "a"}))[0]
    assert capacity["storageClassName"] == "fast" and capacity["nodeTopology"]["matchLabels"] == {"zone": "a"}
    attachment = create_storage(kube, volume_attachment("va", "n1", "pv"))[0]
    assert attachment["spec"]["source"] == {"persistentVolumeName": "pv"}
    items = kube.call("GET", "/apis/storage.k8s.io/v1/volumeattachments")["items"]
    assert [i["metadata"]["name"] for i in items] == ["va"]
