"""NodeVolumeLimits: CSI attach limits from CSINode allocatable counts."""

from __future__ import annotations

from extender.policy.builtin import NodeVolumeLimits
from extender.policy.engine import Policy
from tests.storage_objects import (
    CSI_DRIVER,
    FAST,
    claim,
    csi_node,
    persistent_volume,
    storage_class,
    volume_attachment,
    with_volumes,
)

from .builders import pod_dict
from .storage_cluster import cluster, decide, feasible, nodes, refusals, running_with

ONLY = Policy(filters=(NodeVolumeLimits(),))
MAX = "node(s) exceed max volume count"



def csi_claim(name: str, handle: str):
    return [claim(name, cls=FAST, volume=f"pv-{name}", bound=True),
            persistent_volume(f"pv-{name}", cls=FAST, csi=(CSI_DRIVER, handle), claim=("default", name))]


def base(*extra, pods=()):
    return cluster(nodes("node-1", "node-2", "node-3"), storage_class(FAST),
                   csi_node("node-1", {CSI_DRIVER: 1}), csi_node("node-2", {CSI_DRIVER: 2}),
                   *csi_claim("old", "h-old"), *csi_claim("new", "h-new"), *extra, pods=pods)


def test_limit_counts_the_volumes_of_pods_already_there():
    state = base(pods=[running_with("old-user", "node-1", "old"), running_with("also", "node-2", "old")])
    decision = decide(with_volumes(pod_dict("p"), ["new"]), state, ONLY)
    assert feasible(decision) == ["node-2", "node-3"]  # node-3 has no CSINode: no limit
    assert refusals(decision) == {"node-1": ("NodeVolumeLimits", (MAX,), False)}
    assert decision.failed["node-1"].detail == f"{CSI_DRIVER}: 1 attached + 1 new > limit 1"


def test_a_volume_already_attached_to_the_node_is_not_counted_twice():
    state = base(pods=[running_with("old-user", "node-1", "old")])
    assert feasible(decide(with_volumes(pod_dict("p"), ["old"]), state, ONLY)) == ["node-1", "node-2", "node-3"]


def test_attachments_without_a_pod_count_too():
    state = base(volume_attachment("va-1", "node-2", "pv-old"), *csi_claim("third", "h-3"),
                 pods=[running_with("t", "node-2", "third")])
    decision = decide(with_volumes(pod_dict("p"), ["new"]), state, ONLY)
    assert feasible(decision) == ["node-1", "node-3"]
    assert decision.failed["node-2"].detail == f"{CSI_DRIVER}: 2 attached + 1 new > limit 2"


def test_unbound_claims_count_under_their_class_provisioner():
    state = base(claim("later", cls=FAST), pods=[running_with("old-user", "node-1", "old")])
    assert feasible(decide(with_volumes(pod_dict("p"), ["later"]), state, ONLY)) == ["node-2", "node-3"]


def test_other_drivers_and_unlimited_drivers_are_not_limited():
    state = cluster(nodes("node-1"), storage_class(FAST, provisioner="other.example.com"),
                    csi_node("node-1", {CSI_DRIVER: 0, "other.example.com": None}), claim("x", cls=FAST))
    assert feasible(decide(with_volumes(pod_dict("p"), ["x"]), state, ONLY)) == ["node-1"]


def test_in_tree_inline_volumes_count_as_their_csi_driver_on_nodes_with_a_csinode():
    ebs = [{"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-1"}}]
    state = cluster(nodes("node-1", "node-2"), csi_node("node-1", {"ebs.csi.aws.com": 0}))
    decision = decide(with_volumes(pod_dict("p"), inline=ebs), state, ONLY)
    assert feasible(decision) == ["node-2"]
    assert decision.failed["node-1"].detail == "ebs.csi.aws.com: 0 attached + 1 new > limit 0"


def test_missing_claim_of_the_new_pod_is_unresolvable():
    state = cluster(nodes("node-1"))
    decision = decide(with_volumes(pod_dict("p"), ["nope"]), state, ONLY)
    assert refusals(decision) == {"node-1": ("NodeVolumeLimits", (
        'looking up PVC default/nope: persistentvolumeclaim "nope" not found',), True)}
