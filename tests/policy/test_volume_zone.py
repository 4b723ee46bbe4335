"""VolumeZone: a bound volume's zone and region labels against the node's."""

from __future__ import annotations

import pytest

from extender.policy.builtin import VolumeZone
from extender.policy.builtin.volume_zone import zones_of
from extender.policy.engine import Policy
from tests.storage_objects import (
    CSI_DRIVER,
    FAST,
    REGION,
    ZONE,
    claim,
    persistent_volume,
    storage_class,
    with_volumes,
)

from .builders import pod_dict
from .storage_cluster import cluster, decide, feasible, nodes, refusals

ONLY = Policy(filters=(VolumeZone(),))
CONFLICT = "node(s) had no available volume zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"


def pod(*claims: str):
    return with_volumes(pod_dict("p"), claims)


def zoned():
    return nodes("in-a", "in-b", "beta-a", "nolabels",
                 in_a={ZONE: "a", REGION: "r"}, in_b={ZONE: "b", REGION: "r"}, beta_a={BETA_ZONE: "a"})


def bound(labels):
    return [storage_class(FAST), claim("data", cls=FAST, volume="pv", bound=True),
            persistent_volume("pv", cls=FAST, csi=(CSI_DRIVER, "h"), labels=labels, claim=("default", "data"))]


def test_zone_label_must_match_or_be_absent_on_the_node():
    decision = decide(pod("data"), cluster(zoned(), *bound({ZONE: "a"})), ONLY)
    # A node with no zone label is not constrained; one with only the beta label does not
    # satisfy a volume's GA label (kube-scheduler translates the volume's beta keys, not the node's).
    assert feasible(decision) == ["in-a", "nolabels"]
    assert refusals(decision) == {"in-b": ("VolumeZone", (CONFLICT,), True), "beta-a": ("VolumeZone", (CONFLICT,), True)}
    assert decision.failed["in-b"].detail == "PV pv needs topology.kubernetes.io/zone in ['a'], the node has 'b'"


def test_beta_volume_labels_multi_zone_values_and_regions():
    state = cluster(zoned(), *bound({BETA_ZONE: "b__c", REGION: "r"}))
    assert feasible(decide(pod("data"), state, ONLY)) == ["in-b", "nolabels"]
    elsewhere = cluster(zoned(), *bound({REGION: "other"}))
    assert feasible(decide(pod("data"), elsewhere, ONLY)) == ["nolabels"]


def test_unparsable_zone_list_is_ignored():
    assert zones_of("a__") is None and zones_of(" a __ b ") == frozenset({"a", "b"})
    assert feasible(decide(pod("data"), cluster(zoned(), *bound({ZONE: "a____b"})), ONLY)) == \
        ["beta-a", "in-a", "in-b", "nolabels"]


def test_unbound_wait_for_first_consumer_claims_are_left_to_volume_binding():
    state = cluster(zoned(), storage_class(FAST), claim("data", cls=FAST))
    assert len(feasible(decide(pod("data"), state, ONLY))) == 4


@pytest.mark.parametrize(("objects", "reason"), [
    ([], 'persistentvolumeclaim "data" not found'),
    ([claim("data", cls=None)], "PersistentVolumeClaim had no pv name and storageClass name"),
    ([claim("data", cls="missing")], 'storageclass.storage.k8s.io "missing" not found'),
    ([storage_class("now", mode="Immediate"), claim("data", cls="now")], "PersistentVolume had no name"),
    ([claim("data", volume="gone", bound=True)], 'persistentvolume "gone" not found'),
])
def test_prefilter_refusals(objects, reason):
    decision = decide(pod("data"), cluster(zoned(), *objects), ONLY)
    assert set(refusals(decision).values()) == {("VolumeZone", (reason,), True)}
