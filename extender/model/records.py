"""The small per-pod record the cluster state keeps, instead of whole pod objects.

A 150,000-pod cluster must fit in a few hundred MB, so the state keeps only what
accounting, the inter-pod plugins, preemption and /bind checks read. Request dicts,
label dicts, owners and affinity terms are interned: the replicas of a workload share
one copy of each.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from extender.errors import InvalidObject
from extender.model.affinity import PodAffinity, parse_pod_affinity
from extender.model.devices import Shares, assigned_shares
from extender.model.fields import (
    as_list,
    as_str,
    as_string_map,
    controller_owner,
    object_name,
    object_parts,
)
from extender.model.podgroups import GroupKey, group_key_from_parts
from extender.model.pods import TERMINAL_PHASES, PodView
from extender.model.ports import HostPort, host_ports
from extender.model.resources import Resources, pod_request_pair
from extender.model.volumes import NO_VOLUMES, PodVolumes, parse_pod_volumes

log = logging.getLogger(__name__)

DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
_EMPTY_LABELS: dict[str, str] = {}
_INTERN_LIMIT = 200_000
_labels: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
_owners: dict[tuple[str, str], tuple[str, str]] = {}
# Containers' JSON -> requests and host ports (_spec_parts): at most 4096 sets of up to 8 KB.
_SPEC_PARTS_LIMIT = 4096
_SPEC_KEY_LIMIT = 8192
_spec_parts_seen: dict[bytes, tuple[Resources, Resources, tuple[HostPort, ...]]] = {}


def intern_labels(labels: dict[str, str]) -> dict[str, str]:
    """A shared dict equal to `labels`; callers must never mutate the result."""
    if not labels:
        return _EMPTY_LABELS
    key = tuple(sorted(labels.items()))
    found = _labels.get(key)
    if found is None:
        found = {sys.intern(k): sys.intern(v) for k, v in labels.items()}
        if len(_labels) < _INTERN_LIMIT:
            _labels[key] = found
    return found


def _intern_owner(owner: tuple[str, str] | None) -> tuple[str, str] | None:
    if owner is None:
        return None
    return _owners.setdefault(owner, owner) if len(_owners) < _INTERN_LIMIT else owner


@dataclass(frozen=True, slots=True)
class PodRecord:
    key: str  # namespace/name
    uid: str
    node_name: str
    scheduler_name: str
    phase: str
    deleting: bool
    gated: bool
    requests: Resources
    score_requests: Resources
    assumed: bool = False
    # The full view, kept only while the pod waits for a node: /bind re-runs the filters with it.
    view: PodView | None = None
    namespace: str = ""
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY_LABELS)
    priority: int = 0
    affinity: PodAffinity | None = None
    host_ports: tuple[HostPort, ...] = ()
    owner: tuple[str, str] | None = None  # the controller: (kind, name)
    start_time: str = ""  # status.startTime; "" for pods not started (preemption's tie-break)
    nominated_node: str = ""  # status.nominatedNodeName of a pending pod
    # Being deleted by a scheduler's preemption (DisruptionTarget / PreemptionByScheduler):
    # the room it frees is already promised to the preemptor.
    preempted: bool = False
    volumes: PodVolumes = NO_VOLUMES  # claims and inline disks (volume limits, conflicts, ReadWriteOncePod)
    devices: Shares | None = None  # GPU shares held on node_name, from the assignment annotation
    group: GroupKey | None = None  # the pod group it belongs to (docs/gangs.md); None for most pods

    @property
    def name(self) -> str:
        return self.key.partition("/")[2]

    @property
    def counts(self) -> bool:
        """Whether the pod occupies resources on its node (bound or assumed, not finished)."""
        return bool(self.node_name) and self.phase not in TERMINAL_PHASES



def _spec_parts(spec: Mapping[str, Any]) -> tuple[Resources, Resources, tuple[HostPort, ...]]:
    """A pod's requests (plain and for scoring) and host ports, which depend on its containers,
    init containers, pod-level resources and overhead only. The replicas of a workload have
    the same ones: parsed once per distinct set, looked up by their JSON (a twentieth of the
    parsing's cost), as long as the set is small enough to remember."""
    fields = (spec.get("containers"), spec.get("initContainers"), spec.get("resources"), spec.get("overhead"))
    try:
        key: bytes | None = orjson.dumps(fields)
    except orjson.JSONEncodeError:  # not JSON data (a Python caller's objects): parse it every time
        key = None
    found = _spec_parts_seen.get(key) if key is not None else None
    if found is None:
        requests, score_requests = pod_request_pair(spec)
        found = requests, score_requests, host_ports(spec) if _has_host_ports(spec) else ()
        if key is not None and len(key) <= _SPEC_KEY_LIMIT and len(_spec_parts_seen) < _SPEC_PARTS_LIMIT:
            _spec_parts_seen[key] = found
    return found


def _has_host_ports(spec: Mapping[str, Any]) -> bool:
    for kind in ("containers", "initContainers"):
        for container in spec.get(kind) or ():
            if isinstance(container, Mapping) and container.get("ports"):
                return True
    return False


def devices_held(annotations: Any, node_name: str, key: str) -> Shares | None:
    """A bound pod's device shares; an unreadable assignment is logged and holds nothing
    (the pod still counts for cpu and memory: one bad annotation must not hide the pod)."""
    try:
        return assigned_shares(annotations, node_name)
    except InvalidObject as exc:
        log.warning("pod %s: ignoring its device assignment: %s", key, exc)
        return None


def record_from_view(view: PodView, *, node_name: str | None = None, assumed: bool = False) -> PodRecord:
    """The record of a pod already parsed into a view (pending pods, assumed pods)."""
    return PodRecord(
        key=view.key,
        uid=view.uid,
        node_name=sys.intern(view.node_name if node_name is None else node_name),
        scheduler_name=sys.intern(view.scheduler_name),
        phase=sys.intern(view.phase),
        deleting=view.deleting,
        gated=bool(view.scheduling_gates),
        requests=view.requests,
        score_requests=view.score_requests,
        assumed=assumed,
        view=view if not (view.node_name if node_name is None else node_name) else None,
        namespace=sys.intern(view.namespace),
        labels=intern_labels(view.labels),
        priority=view.priority,
        affinity=view.affinity,
        host_ports=view.host_ports,
        owner=_intern_owner(view.owner),
        start_time=view.start_time,
        nominated_node=view.nominated_node_name,
        volumes=view.volumes,
        group=view.group,
    )


def record_from_dict(raw: Mapping[str, Any]) -> PodRecord:
    """Build a record from a v1.Pod dict; raises InvalidObject/QuantityError on bad fields."""
    meta, spec, status = object_parts(raw, "pod")
    name = object_name(meta)
    phase = str(status.get("phase") or "Pending")
    if not spec.get("nodeName") and phase not in TERMINAL_PHASES:
        return record_from_view(PodView.from_dict(raw))
    namespace = str(meta.get("namespace") or "default")
    node_name = sys.intern(str(spec.get("nodeName") or ""))
    labels = intern_labels(as_string_map(meta.get("labels"), "metadata.labels"))
    priority = spec.get("priority") or 0
    if isinstance(priority, bool) or not isinstance(priority, int):
        priority = 0
    requests, score_requests, ports = _spec_parts(spec)
    return PodRecord(
        key=f"{namespace}/{name}",
        uid=str(meta.get("uid") or ""),
        # Interned: 150,000 pods share a few thousand node names, a few scheduler names and phases.
        node_name=node_name,
        scheduler_name=sys.intern(str(spec.get("schedulerName") or "default-scheduler")),
        phase=sys.intern(phase),
        deleting=bool(meta.get("deletionTimestamp")),
        gated=bool(spec.get("schedulingGates")),
        requests=requests,
        score_requests=score_requests,
        namespace=sys.intern(namespace),
        labels=labels,
        priority=priority,
        affinity=parse_pod_affinity(spec, namespace, labels) if spec.get("affinity") else None,
        host_ports=ports,
        owner=_intern_owner(controller_owner(meta)),
        start_time=sys.intern(as_str(status.get("startTime"), "status.startTime")),
        preempted=bool(meta.get("deletionTimestamp")) and _preempted(status),
        volumes=parse_pod_volumes(spec, name),
        devices=devices_held(meta.get("annotations"), node_name, f"{namespace}/{name}") if node_name else None,
        group=group_key_from_parts(namespace, spec, labels),
    )


def _preempted(status: Mapping[str, Any]) -> bool:
    """kube-scheduler's podTerminatingByPreemption (the deletionTimestamp is checked by the caller)."""
    for condition in as_list(status.get("conditions"), "status.conditions"):
        if isinstance(condition, Mapping) and condition.get("type") == DISRUPTION_TARGET:
            return condition.get("status") == "True" and condition.get("reason") == PREEMPTION_BY_SCHEDULER
    return False
