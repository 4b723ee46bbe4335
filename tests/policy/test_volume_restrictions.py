"""VolumeRestrictions: ReadWriteOncePod claims in use, and inline disks shared on a node."""

from __future__ import annotations

from extender.model.pods import PodView
from extender.model.records import record_from_dict
from extender.policy.builtin import VolumeRestrictions
from extender.policy.cluster_view import PodChange
from extender.policy.engine import Engine, Policy
from tests.storage_objects import claim, local_class, with_volumes

from .builders import pod_dict
from .storage_cluster import cluster, decide, feasible, nodes, refusals, running_with

ONLY = Policy(filters=(VolumeRestrictions(),))
RWOP = ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already "
        "in-use by another pod")
DISK = "node(s) had no available disk"



def test_a_read_write_once_pod_claim_in_use_refuses_every_node():
    objects = [local_class(), claim("solo", modes=["ReadWriteOncePod"], volume="pv", bound=True)]
    user = running_with("user", "node-1", "solo")
    state = cluster(nodes("node-1", "node-2"), *objects, pods=[user])
    decision = decide(with_volumes(pod_dict("p"), ["solo"]), state, ONLY)
    assert feasible(decision) == []
    assert set(refusals(decision).values()) == {("VolumeRestrictions", (RWOP,), False)}  # preemption may help
    assert "default/user" in decision.failed["node-2"].detail
    free = cluster(nodes("node-1", "node-2"), *objects)
    assert feasible(decide(with_volumes(pod_dict("p"), ["solo"]), free, ONLY)) == ["node-1", "node-2"]


def test_preemption_removing_the_user_frees_the_claim():
    objects = [local_class(), claim("solo", modes=["ReadWriteOncePod"])]
    user = running_with("user", "node-1", "solo")
    state = cluster(nodes("node-1"), *objects, pods=[user])
    cycle = Engine(ONLY).prepare(PodView.from_dict(with_volumes(pod_dict("p"), ["solo"])), state)
    info = state.node_info("node-1")
    assert cycle.refusal(info) is not None
    record = record_from_dict(user)
    without = cycle.updated([PodChange(record, info.node, -1)])
    assert without.refusal(info.without({record.key})) is None
    assert without.updated([PodChange(record, info.node, 1)]).refusal(info) is not None


def test_shared_read_write_once_claims_are_not_restricted():
    objects = [local_class(), claim("shared")]
    state = cluster(nodes("node-1"), *objects, pods=[running_with("user", "node-1", "shared")])
    assert feasible(decide(with_volumes(pod_dict("p"), ["shared"]), state, ONLY)) == ["node-1"]


def test_missing_claim():
    decision = decide(with_volumes(pod_dict("p"), ["nope"]), cluster(nodes("node-1")), ONLY)
    assert set(refusals(decision).values()) == {
        ("VolumeRestrictions", ('persistentvolumeclaim "nope" not found',), True)}


def gce(name: str, read_only: bool = False):
    return {"gcePersistentDisk": {"pdName": name, "readOnly": read_only}}


def test_inline_disks_conflict_on_the_same_node_unless_both_are_read_only():
    pods = [running_with("a", "node-1", inline=[gce("disk-1")]), running_with("b", "node-2", inline=[gce("disk-2", True)])]
    state = cluster(nodes("node-1", "node-2", "node-3"), pods=pods)
    decision = decide(with_volumes(pod_dict("p"), inline=[gce("disk-1", True)]), state, ONLY)
    assert feasible(decision) == ["node-2", "node-3"]
    assert refusals(decision) == {"node-1": ("VolumeRestrictions", (DISK,), False)}
    assert decision.failed["node-1"].detail == "gcePersistentDisk disk-1 is used by pod default/a"
    reader = decide(with_volumes(pod_dict("p"), inline=[gce("disk-2", True)]), state, ONLY)
    assert feasible(reader) == ["node-1", "node-2", "node-3"]
    writer = decide(with_volumes(pod_dict("p"), inline=[gce("disk-2")]), state, ONLY)
    assert feasible(writer) == ["node-1", "node-3"]


def test_ebs_volumes_always_conflict_and_rbd_needs_a_shared_monitor():
    ebs = {"awsElasticBlockStore": {"volumeID": "vol-1", "readOnly": True}}
    rbd = {"rbd": {"monitors": ["m1", "m2"], "image": "img", "readOnly": False}}
    pods = [running_with("a", "node-1", inline=[ebs]), running_with("b", "node-2", inline=[rbd])]
    state = cluster(nodes("node-1", "node-2"), pods=pods)
    assert feasible(decide(with_volumes(pod_dict("p"), inline=[ebs]), state, ONLY)) == ["node-2"]
    same_monitor = {"rbd": {"monitors": ["m2"], "image": "img"}}
    other_monitor = {"rbd": {"monitors": ["m9"], "image": "img"}}
    assert feasible(decide(with_volumes(pod_dict("p"), inline=[same_monitor]), state, ONLY)) == ["node-1"]
    assert feasible(decide(with_volumes(pod_dict("p"), inline=[other_monitor]), state, ONLY)) == ["node-1", "node-2"]
