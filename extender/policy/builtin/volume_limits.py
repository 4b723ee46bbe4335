"""NodeVolumeLimits: no more CSI volumes on a node than its drivers can attach.

kube-scheduler v1.36's NodeVolumeLimits (nodevolumelimits/csi.go): a node's limit per CSI
driver is `CSINode.spec.drivers[].allocatable.count`; a node without a CSINode, or a
driver without a count, has no limit. The volumes counted are unique by driver and
volume handle:

* of the pods already on the node (bound or assumed): their claims' volumes, and their
  in-tree inline volumes whose plugin is migrated to CSI (AWS EBS, GCE PD, Azure Disk,
  Cinder, Portworx; only on nodes with a CSINode);
* the VolumeAttachments to the node of CSI volumes no pod there uses (volumes still
  attached after their pod left);
* the new pod's, minus those already attached.

A bound claim counts as its PV's CSI driver and handle (in-tree PVs translated); an
unbound one as its class's provisioner, with a handle of its own. A node where the new
volumes would exceed a driver's limit is refused: "node(s) exceed max volume count"
(Unschedulable). A missing claim of the new pod refuses the node unresolvably; missing
claims of pods already there are not counted. Volume limit scaling (the alpha
VolumeLimitScaling gate) is not done, as in kube-scheduler's default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.model.records import PodRecord
from extender.model.volumes import (
    IN_TREE_PROVISIONERS,
    NO_VOLUMES,
    Claim,
    CSINode,
    CSIVolume,
    PodVolumes,
)
from extender.policy import enqueue, names
from extender.policy.builtin.base import STORAGE_EVENTS, TakesNoArgs
from extender.policy.cluster_view import EMPTY_CLUSTER, ClusterView
from extender.policy.enqueue import EventHint
from extender.policy.plugins import FilterPlugin, FilterResult, NodeCheck, PreFilterPlugin
from extender.policy.status import Code, Status
from extender.policy.storage import StorageView

NAME = names.NODE_VOLUME_LIMITS
REASON_MAX_VOLUME_COUNT = "node(s) exceed max volume count"
_UNBOUND_HANDLE_PREFIX = "unbound-claim"


def claim_volume(claim: Claim, storage: StorageView, has_csi_node: bool) -> CSIVolume | None:
    """getCSIDriverInfo: the driver and handle a claim's volume is counted under, if any (in-tree
    volumes count as their CSI driver only on a node with a CSINode)."""
    if claim.volume_name:
        volume = storage.volume(claim.volume_name)
        if volume is not None:
            csi = volume.csi
            if csi is None or (csi.in_tree_plugin and not has_csi_node):
                return None
            return csi
    if not claim.class_name:
        return None
    cls = storage.storage_class(claim.class_name)
    if cls is None:
        return None
    handle = f"{_UNBOUND_HANDLE_PREFIX}-{claim.namespace}/{claim.name}"
    driver = IN_TREE_PROVISIONERS.get(cls.provisioner)
    if driver is not None:
        return CSIVolume(driver, handle, cls.provisioner) if has_csi_node else None
    return CSIVolume(cls.provisioner, handle)


def _attachable(namespace: str, pod_uid: str, volumes: PodVolumes, storage: StorageView,
                has_csi_node: bool, into: dict[str, str], *, new_pod: bool) -> Status | None:
    """filterAttachableVolumes: add the pod's countable volumes to `into` (unique name -> driver)."""
    for ref in volumes.claims:
        if not ref.name:  # an error, not a node's fault: the engine fails the attempt when it is read
            return Status(Code.ERROR, (f"{NAME}: PersistentVolumeClaim had no name",))
        claim = storage.claim(namespace, ref.name)
        if claim is None:
            if new_pod:
                reason = f'looking up PVC {namespace}/{ref.name}: persistentvolumeclaim "{ref.name}" not found'
                return Status(Code.UNRESOLVABLE, (reason,), "", NAME)
            continue
        if ref.ephemeral and claim.controller_uid != pod_uid:
            if new_pod:
                return Status(Code.ERROR, (f"PVC {namespace}/{ref.name} was not created for the pod (pod is not owner)",))
            continue
        volume = claim_volume(claim, storage, has_csi_node)
        if volume is not None and volume.driver and volume.handle:
            into[volume.unique_name] = volume.driver
    if has_csi_node:
        for inline in volumes.inline_csi:
            into[inline.unique_name] = inline.driver
    return None


def _limit_refusal(csi_node: CSINode, counts: Mapping[str, int], new: Mapping[str, int]) -> Status | None:
    for driver, count in new.items():
        limit = csi_node.limits.get(driver)
        if limit is not None and counts.get(driver, 0) + count > limit:
            attached = counts.get(driver, 0)
            detail = f"{driver}: {attached} attached + {count} new > limit {limit}"
            return Status(Code.UNSCHEDULABLE, (REASON_MAX_VOLUME_COUNT,), detail, NAME)
    return None


def _freed_attachment(pod: PodView, deleted: PodRecord) -> bool:
    """NodeVolumeLimits (CSILimits).isSchedulableAfterPodDeleted: it attached a volume."""
    volumes = deleted.volumes
    return bool(volumes.claims or volumes.inline_csi)


_EVENTS = (enqueue.NODE_ADDED, enqueue.on(enqueue.NODES, enqueue.UPDATE_NODE_ALLOCATABLE),
           enqueue.on(enqueue.PODS, enqueue.DELETE, hint=_freed_attachment), *STORAGE_EVENTS)


@dataclass(frozen=True)
class NodeVolumeLimits(TakesNoArgs, PreFilterPlugin, FilterPlugin):
    """No args."""

    name: ClassVar[str] = NAME

    def events_to_register(self) -> Sequence[EventHint]:
        """A node added or grown, a placed pod deleted that attached a volume, any storage object
        changed (a claim: for its users)."""
        return _EVENTS

    def prefilter(self, pod: PodView, cluster: ClusterView) -> NodeCheck | None:
        volumes = pod.volumes
        if not volumes.claims and not volumes.inline_csi:
            return None
        storage = cluster.storage()
        # The pod's own volumes depend on the node only through whether it has a CSINode. What
        # cannot be read is reported per node, as kube-scheduler's Filter does, so that the
        # PreFilter refusals of the plugins after this one keep precedence.
        new_pod: dict[bool, tuple[Status | None, dict[str, str]]] = {}
        for has_csi_node in (True, False):
            found: dict[str, str] = {}
            refusal = _attachable(pod.namespace, pod.uid, volumes, storage, has_csi_node, found, new_pod=True)
            new_pod[has_csi_node] = (refusal, found)

        def check(info: NodeInfo) -> Status | None:
            csi_node = storage.csi_node(info.name)
            refusal, found = new_pod[csi_node is not None]
            if refusal is not None or not found:
                return refusal
            if csi_node is None or not any(driver in csi_node.limits for driver in found.values()):
                return None  # no limit on any driver the pod adds volumes of
            return _count(info, csi_node, storage, dict(found))

        return check

    def filter(self, pod: PodView, node: NodeInfo, cluster: ClusterView | None = None) -> FilterResult:
        check = self.prefilter(pod, cluster if cluster is not None else EMPTY_CLUSTER)
        return None if check is None else check(node)


def _count(info: NodeInfo, csi_node: CSINode, storage: StorageView, new: dict[str, str]) -> Status | None:
    """The volumes attached to the node, per driver, against the limits, with the pod's new ones."""
    attached: dict[str, str] = {}
    for placed in info.pods:
        if placed.volumes is not NO_VOLUMES:  # most pods: an identity check, not a call
            _attachable(placed.namespace, placed.uid, placed.volumes, storage, True, attached, new_pod=False)
    counts: dict[str, int] = {}
    for unique, driver in attached.items():
        new.pop(unique, None)
        counts[driver] = counts.get(driver, 0) + 1
    leftover: dict[str, str] = {}
    for attachment in storage.attachments_on(info.name):
        volume = _attached_volume(attachment.attacher, attachment.volume_name, storage)
        if volume is not None and volume not in attached:
            leftover[volume] = attachment.attacher
    for driver in leftover.values():
        counts[driver] = counts.get(driver, 0) + 1
    wanted: dict[str, int] = {}
    for driver in new.values():
        wanted[driver] = wanted.get(driver, 0) + 1
    return _limit_refusal(csi_node, counts, wanted)


def _attached_volume(attacher: str, volume_name: str, storage: StorageView) -> str | None:
    """getNodeVolumeAttachmentInfo: an attachment counts when it names a CSI PV the cache knows."""
    if not attacher or not volume_name:
        return None
    volume = storage.volume(volume_name)
    if volume is None or volume.csi is None or volume.csi.in_tree_plugin:
        return None
    return f"{attacher}/{volume.csi.handle}"
