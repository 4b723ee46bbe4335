"""Parsing storage objects and a pod's volumes: API defaults, kube-scheduler's helpers, bad fields."""

from __future__ import annotations

import pytest

from extender.errors import InvalidObject
from extender.model.pods import PodView
from extender.model.records import record_from_dict
from extender.model.volumes import (
    Claim,
    CSINode,
    StorageCapacity,
    StorageClass,
    Volume,
    parse_pod_volumes,
)
from tests.storage_objects import (
    claim,
    claim_volumes,
    csi_node,
    node_affinity,
    persistent_volume,
    storage_capacity,
    storage_class,
)


def test_claim_fields_and_defaults():
    parsed = Claim.from_dict(claim("data", size="1.5Gi", modes=["ReadWriteOncePod"], selected_node="n1",
                                   owner=("pod", "uid-pod")))
    assert (parsed.key, parsed.class_name, parsed.request, parsed.volume_mode) == \
        ("default/data", "local-storage", 1610612736, "Filesystem")
    assert parsed.access_modes == {"ReadWriteOncePod"} and parsed.selected_node == "n1"
    assert parsed.controller_uid == "uid-pod" and not parsed.fully_bound
    assert Claim.from_dict(claim("b", volume="pv", bound=True)).fully_bound
    assert not Claim.from_dict(claim("c", volume="pv")).fully_bound  # no bind-completed annotation yet


def test_beta_class_annotation_wins_over_the_field():
    raw = claim("data", cls="field")
    raw["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": "beta"}
    assert Claim.from_dict(raw).class_name == "beta"
    volume = persistent_volume("pv", cls="field")
    volume["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": ""}
    assert Volume.from_dict(volume).class_name == ""


def test_claim_without_storage_request_or_with_a_bad_one():
    raw = claim("data")
    del raw["spec"]["resources"]
    assert Claim.from_dict(raw).request is None
    raw["spec"]["resources"] = {"requests": {"storage": "lots"}}
    with pytest.raises(InvalidObject, match="spec.resources.requests.storage"):
        Claim.from_dict(raw)


def test_volume_node_affinity_matches_labels_only():
    volume = Volume.from_dict(persistent_volume("pv", node="n1"))
    assert volume.affinity_matches({"kubernetes.io/hostname": "n1"})
    assert not volume.affinity_matches({"kubernetes.io/hostname": "n2"})
    by_name = persistent_volume("pv", affinity={"required": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}})
    assert not Volume.from_dict(by_name).affinity_matches({"kubernetes.io/hostname": "n1"})  # as CheckNodeAffinity


def test_unreadable_volume_node_affinity_keeps_the_volume_and_matches_nothing():
    bad = persistent_volume("pv", affinity={"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "size", "operator": "Gt", "values": ["big"]}]}]}})
    volume = Volume.from_dict(bad)
    assert not volume.affinity_matches({"size": "5"})
    assert "not an integer" in volume.node_affinity.describe()


def test_volume_csi_identity_including_translated_in_tree_sources():
    assert Volume.from_dict(persistent_volume("pv", csi=("d.example.com", "h1"))).csi.unique_name == "d.example.com/h1"
    ebs = persistent_volume("ebs", cls=None, node="n1")
    ebs["spec"].pop("local")
    ebs["spec"]["awsElasticBlockStore"] = {"volumeID": "aws://us-east-1a/vol-9"}
    csi = Volume.from_dict(ebs).csi
    assert (csi.driver, csi.handle, csi.in_tree_plugin) == ("ebs.csi.aws.com", "vol-9", "kubernetes.io/aws-ebs")
    assert Volume.from_dict(persistent_volume("local", node="n1")).csi is None


def test_storage_class_defaults_and_topologies():
    cls = StorageClass.from_dict(storage_class("c", mode=None, topologies=[{"zone": ["a", "b"]}, {}]))
    assert cls.binding_mode == "Immediate" and not cls.delays_binding and cls.provisions
    assert cls.topology_matches({"zone": "b"}) and not cls.topology_matches({"zone": "c"})
    assert StorageClass.from_dict(storage_class("d")).topology_matches({})  # no terms: everywhere
    assert not StorageClass.from_dict(storage_class("e", provisioner="kubernetes.io/no-provisioner")).provisions


def test_csi_node_limits_and_capacity_limits():
    node = CSINode.from_dict(csi_node("n1", {"a.example.com": 3, "b.example.com": None}))
    assert dict(node.limits) == {"a.example.com": 3}  # a driver without a count has no limit
    assert StorageCapacity.from_dict(storage_capacity("c", "fast", capacity="1Gi", maximum="2Gi")).limit == 2 << 30
    unreachable = StorageCapacity.from_dict(storage_capacity("c", "fast", labels=None))
    assert unreachable.topology is None and unreachable.limit == 10 << 30


def test_pod_volumes_claims_ephemeral_and_inline_disks():
    spec = {"volumes": claim_volumes(["a"], ephemeral=["scratch"], inline=[
        {"gcePersistentDisk": {"pdName": "d1", "readOnly": True}}, {"configMap": {"name": "cm"}},
        {"rbd": {"monitors": ["m"], "image": "i"}}])}
    volumes = parse_pod_volumes(spec, "web-0")
    assert [(c.name, c.ephemeral) for c in volumes.claims] == [("a", False), ("web-0-scratch", True)]
    assert volumes.direct_claims == ("a",)
    assert [(d.kind, d.identity, d.read_only) for d in volumes.disks] == \
        [("gcePersistentDisk", "d1", True), ("rbd", "rbd/i", False)]
    assert [v.driver for v in volumes.inline_csi] == ["pd.csi.storage.gke.io"]
    assert not parse_pod_volumes({"volumes": [{"name": "x", "emptyDir": {}}]}, "p")


def test_pod_view_and_record_carry_the_volumes():
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [], "volumes": claim_volumes(["a"])}}
    assert PodView.from_dict(pod).volumes.direct_claims == ("a",)
    pod["spec"]["nodeName"] = "n1"
    assert record_from_dict(pod).volumes.direct_claims == ("a",)
    with pytest.raises(InvalidObject, match=r"spec.volumes\[0\].persistentVolumeClaim"):
        PodView.from_dict({"metadata": {"name": "p"}, "spec": {"volumes": [{"name": "v", "persistentVolumeClaim": 5}]}})


def test_node_affinity_builder_round_trip():
    volume = Volume.from_dict(persistent_volume("pv", affinity=node_affinity("zone", "a", "b")))
    assert volume.node_affinity.describe() == "zone In ['a', 'b']"
