"""The storage kinds watched into the cluster state: lists, events, readiness, and RBAC gaps."""

from __future__ import annotations

from typing import Any

import pytest

from extender.cluster.state import ClusterState
from extender.cluster.volume_store import STORAGE_CHANGED
from tests.fakeapi.fixtures import fake_only
from tests.fakeapi.patches import MERGE_PATCH
from tests.helpers import wait_for
from tests.storage_controllers import create_storage
from tests.storage_objects import (
    claim,
    csi_driver,
    csi_node,
    local_class,
    persistent_volume,
    storage_capacity,
    volume_attachment,
)

pytestmark = pytest.mark.apiserver



def test_every_kind_is_listed_then_followed(kube, make_source) -> None:
    create_storage(kube, local_class(), persistent_volume("pv", node="n1"), claim("data"),
                   csi_node("n1", {"csi.example.com": 3}), csi_driver("csi.example.com"),
                   storage_capacity("cap", "local-storage"), volume_attachment("va", "n1", "pv"))
    state = ClusterState()
    events: list[Any] = []
    state.listeners.add(lambda event, obj: events.append(obj) if event == STORAGE_CHANGED else None)
    source = make_source(state)
    assert source.wait_synced(10) and state.ready
    store = state.volumes
    assert store.claim("default", "data").class_name == "local-storage"
    assert store.volume("pv").affinity_matches({"kubernetes.io/hostname": "n1"})
    assert dict(store.csi_node("n1").limits) == {"csi.example.com": 3}
    assert store.csi_driver("csi.example.com").storage_capacity
    assert [c.name for c in store.capacities_of_class("local-storage")] == ["cap"]
    assert [a.volume_name for a in store.attachments_on("n1")] == ["pv"]
    events.clear()
    kube.call("PATCH", "/api/v1/namespaces/default/persistentvolumeclaims/data",
              {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "n1"}}}, content_type=MERGE_PATCH)
    wait_for(lambda: store.claim("default", "data").selected_node == "n1", message="claim update")
    assert ("persistentvolumeclaims", "default/data") in events
    kube.call("DELETE", "/apis/storage.k8s.io/v1/volumeattachments/va")
    wait_for(lambda: store.attachments_on("n1") == [], message="attachment deleted")
    assert ("volumeattachments", "va") in events  # a detached volume may let a pod fit


@fake_only("denies list on persistentvolumes through the fake's authorizer")
def test_a_kind_the_service_account_cannot_list_keeps_the_state_unready(apiserver, make_source) -> None:
    fake = apiserver.fake
    fake.deny("list", "persistentvolumes")
    state = ClusterState()
    source = make_source(state)
    assert not source.wait_synced(1)
    assert state.nodes_synced and not state.volumes.synced and not state.ready
    assert source.storage[1].restarts.get("error", 0) >= 1
    fake.allow_all()
    assert source.wait_synced(10) and state.ready
