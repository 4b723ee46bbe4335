"""The bind-time volume actions in memory (simulate, the snapshot webhook): the binder plays the PV controller."""

from __future__ import annotations

import pytest

from extender.cluster.memory_binder import MemoryBinder
from extender.cluster.volume_handlers import VolumeBindingError
from extender.cluster.volume_store import CLAIMS, VOLUMES
from extender.policy.volume_actions import AwaitVolumes, BindVolume, CheckVolumes, SelectNode
from tests.policy.storage_cluster import cluster, nodes
from tests.storage_objects import FAST, claim, local_class, persistent_volume, storage_class


def memory_state():
    return cluster(nodes("node-1"), local_class(), storage_class(FAST), persistent_volume("pv", node="node-1"),
                   claim("data", uid="uid-data"), claim("dyn", cls=FAST, uid="uid-dyn"))


def test_in_memory_binds_complete_at_once_and_selected_nodes_pin():
    state = memory_state()
    store = state.volumes
    data = store.claim("default", "data")
    MemoryBinder(state).prebind([BindVolume("pv", store.volume("pv").resource_version, data.ref()),
                    SelectNode(store.claim("default", "dyn").ref(), "node-1"),
                    AwaitVolumes("default", "p", "uid-p", "node-1", (("pv", data.ref()),), (), 5)])
    volume, bound = store.volume("pv"), store.claim("default", "data")
    assert (volume.phase, volume.claim_ref.name, bound.volume_name, bound.fully_bound) == ("Bound", "data", "pv", True)
    assert store.claim("default", "dyn").selected_node == "node-1"
    assert [c.key for c in store.objects(CLAIMS)] == ["default/data", "default/dyn"]
    assert len(store.objects(VOLUMES)) == 1


def test_in_memory_bind_refuses_a_taken_volume():
    state = memory_state()
    store = state.volumes
    MemoryBinder(state).prebind([BindVolume("pv", store.volume("pv").resource_version, store.claim("default", "dyn").ref())])
    with pytest.raises(Exception, match="already bound to claim default/dyn"):
        MemoryBinder(state).prebind([BindVolume("pv", store.volume("pv").resource_version, store.claim("default", "data").ref())])


def test_in_memory_check_of_bound_claims():
    state = memory_state()
    store = state.volumes
    data = store.claim("default", "data")
    MemoryBinder(state).prebind([BindVolume("pv", store.volume("pv").resource_version, data.ref())])
    check = CheckVolumes("node-1", (("pv", data.ref()),))
    MemoryBinder(state).prebind([check])
    store.delete(CLAIMS, "default/data")
    with pytest.raises(VolumeBindingError, match="no longer exists"):
        MemoryBinder(state).prebind([check])
