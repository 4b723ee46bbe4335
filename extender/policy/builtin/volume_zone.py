"""VolumeZone: a bound volume's zone and region labels must match the node's.

kube-scheduler v1.36's VolumeZone: for each `persistentVolumeClaim` volume of the pod
(ephemeral ones are not looked at), the bound PV's `topology.kubernetes.io/zone`,
`topology.kubernetes.io/region` and their `failure-domain.beta.kubernetes.io/` forms
(a value may list several zones joined by `__`) must each be matched by the node's
label of the same key, or of its GA form. A node without any of the four labels is
not constrained. Claims not bound yet are skipped when their class binds on first
consumer (VolumeBinding decides those); a missing claim, class or volume refuses
every node with the lister's NotFound text. Refusals are UnschedulableAndUnresolvable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.model.wellknown import BETA_REGION, BETA_ZONE, REGION, ZONE
from extender.policy import enqueue, names
from extender.policy.builtin.base import STORAGE_EVENTS, TakesNoArgs
from extender.policy.builtin.volume_binding import claim_not_found
from extender.policy.cluster_view import EMPTY_CLUSTER, ClusterView
from extender.policy.enqueue import EventHint
from extender.policy.plugins import FilterPlugin, FilterResult, NodeCheck, PreFilterPlugin
from extender.policy.status import Code, Status

NAME = names.VOLUME_ZONE
REASON_CONFLICT = "node(s) had no available volume zone"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA = {BETA_ZONE: ZONE, BETA_REGION: REGION}
MULTI_ZONE_DELIMITER = "__"


@dataclass(frozen=True, slots=True)
class VolumeTopology:
    volume: str
    key: str
    values: frozenset[str]


def zones_of(value: str) -> frozenset[str] | None:
    """LabelZonesToSet: `a__b` -> {a, b}; None (the label is ignored) when an element is empty."""
    zones = [zone.strip() for zone in value.split(MULTI_ZONE_DELIMITER)]
    if any(not zone for zone in zones):
        return None
    return frozenset(zones)


def _unresolvable(reason: str) -> Status:
    return Status(Code.UNRESOLVABLE, (reason,), "", NAME)


def volume_topologies(pod: PodView, cluster: ClusterView) -> list[VolumeTopology] | Status:
    """getPVbyPod: the zone constraints of the pod's bound volumes, or why every node is refused."""
    storage = cluster.storage()
    found: list[VolumeTopology] = []
    for name in pod.volumes.direct_claims:
        if not name:
            return _unresolvable("PersistentVolumeClaim had no name")
        claim = storage.claim(pod.namespace, name)
        if claim is None:
            return _unresolvable(claim_not_found(name))
        if not claim.volume_name:
            if not claim.class_name:
                return _unresolvable("PersistentVolumeClaim had no pv name and storageClass name")
            cls = storage.storage_class(claim.class_name)
            if cls is None:
                return _unresolvable(f'storageclass.storage.k8s.io "{claim.class_name}" not found')
            if cls.delays_binding:
                continue
            return _unresolvable("PersistentVolume had no name")
        volume = storage.volume(claim.volume_name)
        if volume is None:
            return _unresolvable(f'persistentvolume "{claim.volume_name}" not found')
        for key in TOPOLOGY_LABELS:
            value = volume.labels.get(key)
            if value is None:
                continue
            zones = zones_of(value)
            if zones is not None:
                found.append(VolumeTopology(volume.name, key, zones))
    return found


def _detail(topology: VolumeTopology, labels: Mapping[str, str]) -> str:
    value = labels.get(topology.key, labels.get(_GA.get(topology.key, topology.key)))
    have = f"the node has {value!r}" if value is not None else "the node has no such label"
    return f"PV {topology.volume} needs {topology.key} in {sorted(topology.values)}, {have}"


@dataclass(frozen=True)
class VolumeZone(TakesNoArgs, PreFilterPlugin, FilterPlugin):
    """No args."""

    name: ClassVar[str] = NAME

    def events_to_register(self) -> Sequence[EventHint]:
        """A node added or relabelled (its zone), any storage object changed (a claim: for its
        users)."""
        return (enqueue.NODE_ADDED, enqueue.on(enqueue.NODES, enqueue.UPDATE_NODE_LABEL), *STORAGE_EVENTS)

    def prefilter(self, pod: PodView, cluster: ClusterView) -> NodeCheck | Status | None:
        if not pod.volumes.claims:
            return None
        topologies = volume_topologies(pod, cluster)
        if isinstance(topologies, Status) or not topologies:
            return topologies if isinstance(topologies, Status) else None  # a Status, else no volume constraint

        def check(info: NodeInfo) -> Status | None:
            labels = info.node.labels
            if not any(key in labels for key in TOPOLOGY_LABELS):
                return None
            for topology in topologies:
                value = labels.get(topology.key)
                if value is None:
                    value = labels.get(_GA.get(topology.key, topology.key))
                if value is None or value not in topology.values:
                    return Status(Code.UNRESOLVABLE, (REASON_CONFLICT,), _detail(topology, labels), NAME)
            return None

        return check

    def filter(self, pod: PodView, node: NodeInfo, cluster: ClusterView | None = None) -> FilterResult:
        check = self.prefilter(pod, cluster if cluster is not None else EMPTY_CLUSTER)
        return check if check is None or isinstance(check, Status) else check(node)
