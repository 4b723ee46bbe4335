"""VolumeRestrictions: a ReadWriteOncePod claim in use, or an inline disk another pod on the node holds.

kube-scheduler v1.36's VolumeRestrictions:

* every `persistentVolumeClaim` volume's claim must exist (else every node is refused,
  unresolvably, with the lister's `persistentvolumeclaim "NAME" not found`);
* a claim with the ReadWriteOncePod access mode already used by a placed pod (bound
  or assumed, on any node) refuses every node: "node(s) unavailable due to
  PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another
  pod" (Unschedulable: preempting that pod would free it);
* an inline GCE PD, AWS EBS, iSCSI or RBD volume conflicts with the same disk used by
  a pod already on the node, unless both mount it read-only (never for EBS):
  "node(s) had no available disk".

Preemption's dry run removes pods: the check's `updated(changes)` recounts the claims
in use, as kube-scheduler's AddPod/RemovePod do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.model.records import PodRecord
from extender.model.volumes import NO_VOLUMES, READ_WRITE_ONCE_POD, InlineDisk
from extender.policy import enqueue, names
from extender.policy.builtin.base import STORAGE_EVENTS, TakesNoArgs
from extender.policy.builtin.volume_binding import claim_not_found
from extender.policy.cluster_view import EMPTY_CLUSTER, ClusterView, PodChange
from extender.policy.enqueue import EventHint
from extender.policy.plugins import FilterPlugin, FilterResult, PreFilterPlugin
from extender.policy.status import Code, Status

NAME = names.VOLUME_RESTRICTIONS
REASON_DISK_CONFLICT = "node(s) had no available disk"
REASON_READ_WRITE_ONCE_POD = ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod "
                              "access mode already in-use by another pod")


def _disk_conflict(disks: Sequence[InlineDisk], info: NodeInfo) -> Status | None:
    for pod in info.pods:
        if pod.volumes is NO_VOLUMES:
            continue
        for theirs in pod.volumes.disks:
            for mine in disks:
                if mine.conflicts(theirs):
                    detail = f"{mine.kind} {mine.identity} is used by pod {pod.key}"
                    return Status(Code.UNSCHEDULABLE, (REASON_DISK_CONFLICT,), detail, NAME)
    return None


@dataclass(frozen=True)
class RestrictionsCheck:
    """The per-node check, with the ReadWriteOncePod claims and how many are in use."""

    namespace: str
    disks: tuple[InlineDisk, ...]
    exclusive: frozenset[str]  # the pod's ReadWriteOncePod claims
    conflicts: int  # references to them by placed pods
    users: tuple[str, ...] = ()  # who uses them, for explain

    def __call__(self, info: NodeInfo) -> Status | None:
        if self.disks:
            refusal = _disk_conflict(self.disks, info)
            if refusal is not None:
                return refusal
        if self.conflicts > 0:
            detail = f"claim(s) {', '.join(sorted(self.exclusive))} in use by {', '.join(self.users) or 'another pod'}"
            return Status(Code.UNSCHEDULABLE, (REASON_READ_WRITE_ONCE_POD,), detail, NAME)
        return None

    def updated(self, changes: Sequence[PodChange]) -> RestrictionsCheck:
        """The check with pods added (+1) or removed (-1): their references to our claims counted."""
        conflicts = self.conflicts
        for change in changes:
            pod = change.pod
            if pod.namespace == self.namespace and pod.volumes.claims:
                conflicts += change.delta * sum(1 for c in pod.volumes.direct_claims if c in self.exclusive)
        if conflicts == self.conflicts:
            return self
        return RestrictionsCheck(self.namespace, self.disks, self.exclusive, conflicts, self.users)


def _shared_volume(pod: PodView, deleted: PodRecord) -> bool:
    """VolumeRestrictions.isSchedulableAfterPodDeleted: of the same namespace, and it mounted one
    of the pod's disks or used one of its claims (ReadWriteOncePod)."""
    if deleted.namespace != pod.namespace or not deleted.volumes:
        return False
    theirs = deleted.volumes
    if any(mine.conflicts(other) for mine in pod.volumes.disks for other in theirs.disks):
        return True
    claims = set(pod.volumes.direct_claims)
    return bool(claims) and any(name in claims for name in theirs.direct_claims)


_EVENTS = (enqueue.NODE_ADDED, enqueue.on(enqueue.PODS, enqueue.DELETE, hint=_shared_volume), *STORAGE_EVENTS)


@dataclass(frozen=True)
class VolumeRestrictions(TakesNoArgs, PreFilterPlugin, FilterPlugin):
    """No args."""

    name: ClassVar[str] = NAME

    def events_to_register(self) -> Sequence[EventHint]:
        """A node added, a placed pod deleted that shared a disk or claim with the pod, any
        storage object changed (a claim: for its users)."""
        return _EVENTS

    def prefilter(self, pod: PodView, cluster: ClusterView) -> RestrictionsCheck | Status | None:
        volumes = pod.volumes
        if not volumes:
            return None
        storage = cluster.storage()
        exclusive = set()
        for name in volumes.direct_claims:
            claim = storage.claim(pod.namespace, name)
            if claim is None:
                return Status(Code.UNRESOLVABLE, (claim_not_found(name),), "", NAME)
            if READ_WRITE_ONCE_POD in claim.access_modes:
                exclusive.add(name)
        conflicts = 0
        users: list[str] = []
        for name in exclusive:
            placed = cluster.claim_users(pod.namespace, name)
            if placed:
                conflicts += 1
                users += [p.key for p in placed]
        if not volumes.disks and conflicts == 0:
            return None
        return RestrictionsCheck(pod.namespace, volumes.disks, frozenset(exclusive), conflicts, tuple(users))

    def filter(self, pod: PodView, node: NodeInfo, cluster: ClusterView | None = None) -> FilterResult:
        check = self.prefilter(pod, cluster if cluster is not None else EMPTY_CLUSTER)
        return check if check is None or isinstance(check, Status) else check(node)
