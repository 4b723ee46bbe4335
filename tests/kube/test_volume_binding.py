"""The bind-time volume actions against the API server (fake or envtest)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from extender.cluster import prebinding
from extender.errors import ConflictError, NotFoundError
from extender.kube import volume_prebind
from extender.kube.volume_prebind import VolumeBindingError
from extender.model.volumes import ClaimRef
from extender.policy.volume_actions import AwaitVolumes, BindVolume, CheckVolumes, SelectNode
from tests.fakeapi.patches import MERGE_PATCH
from tests.storage_controllers import bind, create_storage, delete_storage, get_claim, get_volume
from tests.storage_objects import (
    FAST,
    SELECTED_NODE,
    claim,
    local_class,
    persistent_volume,
    storage_class,
)

pytestmark = pytest.mark.apiserver



def ref(obj: dict[str, Any]) -> ClaimRef:
    meta = obj["metadata"]
    return ClaimRef(meta["namespace"], meta["name"], meta["uid"], meta["resourceVersion"])


def setup(kube: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    kube.create_node("node-1")
    volume, data = create_storage(kube, local_class(), persistent_volume("pv", node="node-1"), claim("data"))[1:]
    return volume, data


def test_bind_volume_writes_the_claim_ref_once(kube, api_client):
    volume, data = setup(kube)
    action = BindVolume("pv", volume["metadata"]["resourceVersion"], ref(data))
    volume_prebind.bind_volume(api_client, action)
    written = get_volume(kube, "pv")
    assert written["spec"]["claimRef"] == {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                           "namespace": "default", "name": "data",
                                           "uid": data["metadata"]["uid"],
                                           "resourceVersion": data["metadata"]["resourceVersion"]}
    assert written["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    volume_prebind.bind_volume(api_client, action)  # again (a retry): nothing to write
    assert get_volume(kube, "pv")["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]


def test_bind_volume_refuses_a_volume_that_changed_or_was_taken(kube, api_client):
    volume, data = setup(kube)
    stale = volume["metadata"]["resourceVersion"]
    kube.call("PATCH", "/api/v1/persistentvolumes/pv", {"metadata": {"labels": {"x": "y"}}}, content_type=MERGE_PATCH)
    with pytest.raises(VolumeBindingError, match="changed since it was chosen for claim default/data"):
        volume_prebind.bind_volume(api_client, BindVolume("pv", stale, ref(data)))
    rival = create_storage(kube, claim("rival"))[0]
    bind(kube, "rival", "pv")
    fresh = get_volume(kube, "pv")["metadata"]["resourceVersion"]
    with pytest.raises(VolumeBindingError, match="already bound to claim default/rival"):
        volume_prebind.bind_volume(api_client, BindVolume("pv", fresh, ref(data)))
    assert get_volume(kube, "pv")["spec"]["claimRef"]["uid"] == rival["metadata"]["uid"]
    with pytest.raises(VolumeBindingError, match="persistentvolume gone, chosen for claim default/data, no longer"):
        volume_prebind.bind_volume(api_client, BindVolume("gone", "1", ref(data)))


def test_select_node_annotates_the_claim_unless_it_changed(kube, api_client):
    _, data = setup(kube)
    volume_prebind.select_node(api_client, SelectNode(ref(data), "node-1"))
    annotated = get_claim(kube, "data")
    assert annotated["metadata"]["annotations"][SELECTED_NODE] == "node-1"
    volume_prebind.select_node(api_client, SelectNode(ref(data), "node-1"))  # idempotent
    with pytest.raises(VolumeBindingError, match="changed since node node-2 was chosen"):
        volume_prebind.select_node(api_client, SelectNode(ref(data), "node-2"))  # stale version
    with pytest.raises(VolumeBindingError, match="was recreated"):
        volume_prebind.select_node(api_client, SelectNode(ClaimRef("default", "data", "other-uid", "1"), "n"))


def test_select_node_checks_the_class_still_provisions_there(kube, api_client):
    kube.create_node("node-1", labels={"zone": "a"})
    data = create_storage(kube, storage_class(FAST, topologies=[{"zone": ["b"]}]), claim("data", cls=FAST))[1]
    with pytest.raises(VolumeBindingError, match="storageclass fast no longer provisions volumes for node node-1"):
        volume_prebind.select_node(api_client, SelectNode(ref(data), "node-1", FAST))
    kube.call("DELETE", f"/apis/storage.k8s.io/v1/storageclasses/{FAST}")
    with pytest.raises(VolumeBindingError, match="storageclass fast of default/data no longer exists"):
        volume_prebind.select_node(api_client, SelectNode(ref(data), "node-1", FAST))
    assert SELECTED_NODE not in (get_claim(kube, "data")["metadata"].get("annotations") or {})


def await_action(pod: dict[str, Any], node: str, *, bindings=(), provisions=(), timeout=5.0) -> AwaitVolumes:
    meta = pod["metadata"]
    return AwaitVolumes(meta["namespace"], meta["name"], meta["uid"], node, tuple(bindings), tuple(provisions),
                        timeout)


def test_await_returns_once_the_claims_are_bound(kube, api_client):
    volume, data = setup(kube)
    pod = kube.create_pod("db")
    volume_prebind.bind_volume(api_client, BindVolume("pv", volume["metadata"]["resourceVersion"], ref(data)))
    action = await_action(pod, "node-1", bindings=[("pv", ref(data))])
    assert not volume_prebind.bindings_done(api_client, action)
    threading.Timer(0.3, bind, (kube, "data", "pv")).start()
    volume_prebind.await_volumes(api_client, action)  # raises if the binding is not seen within 5 s
    assert volume_prebind.bindings_done(api_client, action)


@pytest.mark.parametrize("fault", ["claim-ref-reset", "wrong-node", "pod-gone", "pod-recreated", "pod-bound"])
def test_await_fails_as_soon_as_the_binding_cannot_happen(kube, api_client, fault):
    volume, data = setup(kube)
    kube.create_node("node-2")
    pod = kube.create_pod("db")
    node = "node-2" if fault == "wrong-node" else "node-1"
    action = await_action(pod, node, bindings=[("pv", ref(data))])
    expected: Any = VolumeBindingError
    if fault == "claim-ref-reset":
        match = "ClaimRef got reset for pv 'pv'"
    elif fault == "wrong-node":
        volume_prebind.bind_volume(api_client, BindVolume("pv", volume["metadata"]["resourceVersion"], ref(data)))
        match = "pv 'pv' node affinity doesn't match node 'node-2'"
    elif fault == "pod-gone":
        kube.delete_pod("db", grace_period_seconds=0)
        kube.wait_for(lambda: kube.get_pod("db") is None, message="pod gone")
        expected, match = NotFoundError, "pod default/db not found"
    elif fault == "pod-recreated":
        kube.delete_pod("db", grace_period_seconds=0)
        kube.wait_for(lambda: kube.get_pod("db") is None, message="pod gone")
        kube.create_pod("db")
        expected, match = ConflictError, "recreated"
    else:
        kube.bind_pod("db", "node-1", uid=pod["metadata"]["uid"])
        expected, match = ConflictError, "already assigned to node node-1"
    with pytest.raises(expected, match=match):
        volume_prebind.await_volumes(api_client, action)


def test_await_notices_a_provisioner_giving_up(kube, api_client):
    kube.create_node("node-1")
    data = create_storage(kube, storage_class(FAST), claim("data", cls=FAST))[1]
    pod = kube.create_pod("db")
    volume_prebind.select_node(api_client, SelectNode(ref(data), "node-1"))
    action = await_action(pod, "node-1", provisions=[ref(data)])
    assert not volume_prebind.bindings_done(api_client, action)
    # A provisioner that fails removes the annotation to hand the claim back to the scheduler.
    kube.call("PATCH", "/api/v1/namespaces/default/persistentvolumeclaims/data",
              {"metadata": {"annotations": {SELECTED_NODE: None}}}, content_type=MERGE_PATCH)
    with pytest.raises(VolumeBindingError, match="provisioning failed for PVC 'data'"):
        volume_prebind.await_volumes(api_client, action)


def test_await_is_bounded_and_ends_when_the_binder_stops(kube, api_client):
    _, data = setup(kube)
    pod = kube.create_pod("db")
    volume_prebind.select_node(api_client, SelectNode(ref(data), "node-1"))
    with pytest.raises(VolumeBindingError, match="timed out after 0.3s waiting for claim"):
        volume_prebind.await_volumes(api_client, await_action(pod, "node-1", provisions=[ref(data)], timeout=0.3))
    stopping = threading.Event()
    threading.Timer(0.2, stopping.set).start()
    # Without the stop it would wait the full 60 s and fail with "timed out" instead.
    with prebinding.stoppable(stopping), pytest.raises(VolumeBindingError, match="shutting down"):
        volume_prebind.await_volumes(api_client, await_action(pod, "node-1", provisions=[ref(data)], timeout=60))


@pytest.mark.parametrize("change", ["none", "claim-deleted", "claim-deleting", "volume-deleted", "node-gone"])
def test_check_volumes_verifies_claims_bound_at_decision_time(kube, api_client, change):
    _, data = setup(kube)
    bind(kube, "data", "pv")
    action = CheckVolumes("node-1", (("pv", ref(get_claim(kube, "data"))),))
    if change == "none":
        volume_prebind.check_volumes(api_client, action)
        return
    if change == "claim-deleted":
        delete_storage(kube)
        match = "persistentvolumeclaim default/data no longer exists"
    elif change == "claim-deleting":  # kept by its pvc-protection finalizer, as in a real cluster
        kube.call("PATCH", "/api/v1/namespaces/default/persistentvolumeclaims/data",
                  {"metadata": {"finalizers": ["kubernetes.io/pvc-protection"]}}, content_type=MERGE_PATCH)
        kube.call("DELETE", "/api/v1/namespaces/default/persistentvolumeclaims/data")
        match = "is being deleted"
    elif change == "volume-deleted":
        kube.call("PATCH", "/api/v1/persistentvolumes/pv", {"metadata": {"finalizers": None}},
                  content_type=MERGE_PATCH)
        kube.call("DELETE", "/api/v1/persistentvolumes/pv")
        match = "persistentvolume pv, bound to default/data, no longer exists"
    else:
        kube.call("DELETE", "/api/v1/nodes/node-1")
        match = "node node-1 no longer exists"
    with pytest.raises(VolumeBindingError, match=match):
        volume_prebind.check_volumes(api_client, action)
