"""The cluster state's volume store: tables, indexes, the assume cache, listener events, readiness."""

from __future__ import annotations

from dataclasses import replace

import pytest

from extender.cluster.state import ClusterState
from extender.cluster.volume_store import (
    ATTACHMENTS,
    CAPACITIES,
    CLAIMS,
    CLASSES,
    STORAGE_CHANGED,
    VOLUMES,
)
from tests.storage_objects import (
    claim,
    persistent_volume,
    storage_capacity,
    storage_class,
    volume_attachment,
)


def versioned(obj, rv):
    obj["metadata"]["resourceVersion"] = str(rv)
    return obj


@pytest.fixture
def state():
    state = ClusterState()
    state.volumes.replace(VOLUMES, [versioned(persistent_volume("pv-1", cls="a"), 1),
                                    versioned(persistent_volume("pv-2", cls="b"), 2)])
    state.volumes.replace(CLAIMS, [versioned(claim("data"), 3)])
    return state


def test_lookups_and_class_index(state):
    store = state.storage()
    assert [v.name for v in store.volumes_of_class("a")] == ["pv-1"]
    store.upsert(VOLUMES, versioned(persistent_volume("pv-1", cls="b"), 4))  # moved to another class
    assert store.volumes_of_class("a") == []
    assert sorted(v.name for v in store.volumes_of_class("b")) == ["pv-1", "pv-2"]
    store.delete(VOLUMES, "pv-2")
    assert [v.name for v in store.volumes_of_class("b")] == ["pv-1"] and store.volume("pv-2") is None
    assert store.claim("default", "data").name == "data" and store.claim("other", "data") is None


def test_assumed_objects_are_served_until_the_watch_brings_a_newer_version(state):
    store = state.storage()
    taken = replace(store.volume("pv-1"), claim_ref=store.claim("default", "data").ref())
    store.assume_volume(taken)
    assert store.volume("pv-1") is taken and store.volumes_of_class("a") == [taken]
    assert store.stored_volume("pv-1").claim_ref is None
    store.upsert(VOLUMES, versioned(persistent_volume("pv-1", cls="a", claim=("default", "data")), 5))
    assert store.volume("pv-1") is not taken and store.volume("pv-1").resource_version == "5"
    store.restore_volume(taken)  # a stale release is harmless
    assert store.volume("pv-1").claim_ref.name == "data"


def test_assume_refuses_out_of_sync_or_missing_objects_and_restore_undoes(state):
    store = state.storage()
    stale = replace(store.claim("default", "data"), resource_version="2", selected_node="n1")
    with pytest.raises(ValueError, match="out of sync"):
        store.assume_claim(stale)
    with pytest.raises(ValueError, match="no longer exists"):
        store.assume_claim(replace(stale, name="gone"))
    current = replace(store.claim("default", "data"), selected_node="n1")
    store.assume_claim(current)
    assert store.claim("default", "data").selected_node == "n1"
    store.restore_claim(current)
    assert store.claim("default", "data").selected_node is None


def test_in_memory_writes_get_new_versions_and_void_assumptions(state):
    store = state.storage()
    assumed = replace(store.claim("default", "data"), selected_node="n1")
    store.assume_claim(assumed)
    written = store.write(CLAIMS, replace(store.stored_claim("default", "data"), selected_node="n2"))
    assert written.resource_version.startswith("memory-")
    assert store.claim("default", "data").selected_node == "n2"


def test_changes_that_may_help_waiting_pods_are_announced(state):
    events = []
    state.listeners.add(lambda event, obj: events.append((event, obj)))
    store = state.storage()
    store.upsert(CLASSES, storage_class("fast"))
    store.upsert(CLASSES, storage_class("fast"))  # no change: no event
    store.delete(CLAIMS, "default/data")  # a claim going away helps nobody
    store.upsert(ATTACHMENTS, volume_attachment("va", "n1", "pv-1"))
    store.delete(ATTACHMENTS, "va")  # a detached volume frees a slot
    assert events == [(STORAGE_CHANGED, (CLASSES, "fast")), (STORAGE_CHANGED, (ATTACHMENTS, "va")),
                      (STORAGE_CHANGED, (ATTACHMENTS, "va"))]


def test_unreadable_objects_are_skipped_and_counted(state):
    store = state.storage()
    bad = claim("bad")
    bad["spec"]["resources"]["requests"]["storage"] = "huge"
    assert store.upsert(CLAIMS, bad) is None
    store.replace(CAPACITIES, [storage_capacity("ok", "fast"), {"metadata": {}}])
    assert store.rejected == 2 and [c.name for c in store.capacities_of_class("fast")] == ["ok"]


def test_readiness_waits_for_every_expected_kind():
    state = ClusterState()
    state.replace_nodes([])
    state.replace_pods([])
    state.volumes.expect([CLAIMS, VOLUMES])
    assert not state.ready
    state.volumes.replace(CLAIMS, [])
    assert not state.ready
    state.volumes.replace(VOLUMES, [])
    assert state.ready


def test_claim_users_index_follows_placed_pods():
    state = ClusterState()
    pod = {"metadata": {"name": "u", "namespace": "default"},
           "spec": {"nodeName": "n1", "containers": [],
                    "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]},
           "status": {"phase": "Running"}}
    state.replace_pods([pod])
    assert [r.key for r in state.claim_users("default", "data")] == ["default/u"]
    pod["status"]["phase"] = "Succeeded"
    state.upsert_pod(pod)
    assert state.claim_users("default", "data") == []
