"""Pod groups from both APIs as one frozen `PodGroup`, pod membership, and group status builders.

kube-scheduler v1.36 (`scheduling.k8s.io/v1alpha2`, alpha gates `GenericWorkload` and
`GangScheduling`) and scheduler-plugins' Coscheduling (`scheduling.x-k8s.io/v1alpha1`, the
CRD training operators use) describe the same thing: a quorum of pods placed together or not
at all. The coordinator (`extender.gangs`) and the adapters only see the one notion below;
docs/gangs.md lists the facts each parse rule comes from. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from extender.errors import InvalidObject
from extender.model.fields import (
    as_list,
    as_object,
    as_str,
    as_string_map,
    object_name,
    object_parts,
)
from extender.model.resources import Resources, parse_resource_list

API_V1ALPHA2 = "scheduling.k8s.io/v1alpha2"
API_COSCHEDULING = "scheduling.x-k8s.io/v1alpha1"
APIS = (API_V1ALPHA2, API_COSCHEDULING)
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"

GANG = "gang"
BASIC = "basic"

#: kube-scheduler's GangScheduling `permitTimeoutDuration` (gangscheduling.go): not configurable.
V1ALPHA2_TIMEOUT_SECONDS = 300.0
#: Coscheduling's default wait (`util.DefaultWaitTime`, plugin arg `permitWaitingTimeSeconds`).
COSCHEDULING_TIMEOUT_SECONDS = 60.0

# The PodGroupScheduled condition (k8s.io/api scheduling/v1alpha2 types.go, schedule_one_podgroup.go).
SCHEDULED_CONDITION = "PodGroupScheduled"
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"
SCHEDULED_REASONS = (REASON_SCHEDULED, REASON_UNSCHEDULABLE, REASON_SCHEDULER_ERROR)


class Condition(TypedDict):
    """The PodGroupScheduled condition as `scheduled_condition_patch` writes it (a metav1.Condition)."""

    type: str
    status: str
    reason: str
    message: str
    lastTransitionTime: str
    observedGeneration: NotRequired[int]  # omitempty


# kube-scheduler v1.36.3's messages, as observed on the binary (docs/gangs.md), for parity: the
# group's condition when its cycle fails, and each placed member's when the gang cannot complete.
KUBE_GROUP_UNSCHEDULABLE_MESSAGE = "pod group is unschedulable"
KUBE_MEMBER_UNSCHEDULABLE_MESSAGE = ("pod group is unschedulable, waiting for minCount pods from a gang to be "
                                     "scheduled, one or more plugins asked to wait and no plugin rejected pod")

# Coscheduling's phases (apis/scheduling/v1alpha1/types.go); `Unknown` is declared, never set.
PHASE_PENDING = "Pending"
PHASE_SCHEDULING = "Scheduling"
PHASE_RUNNING = "Running"
PHASE_FINISHED = "Finished"
PHASE_FAILED = "Failed"
FINAL_PHASES = frozenset({PHASE_FINISHED, PHASE_FAILED})


@dataclass(frozen=True, slots=True, order=True)
class GroupKey:
    """Which group: the API it comes from matters, a v1alpha2 `pg1` and a CRD `pg1` are two groups."""

    api: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PodGroup:
    key: GroupKey
    uid: str
    generation: int
    policy: str  # GANG or BASIC
    min_count: int  # 1 for basic groups
    timeout: float  # seconds a placed member may wait for its quorum
    min_resources: Resources  # Coscheduling's spec.minResources, {} when absent
    topology_keys: tuple[str, ...]  # v1alpha2 spec.schedulingConstraints.topology[].key (at most one)
    created: str = ""  # metadata.creationTimestamp (RFC 3339, UTC: sorts as text); "" when unset

    @property
    def is_gang(self) -> bool:
        return self.policy == GANG


def _int(raw: Any, where: str, *, minimum: int, default: int | None = None) -> int:
    if raw is None and default is not None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise InvalidObject(f"{where}: expected an integer")
    if raw < minimum:
        raise InvalidObject(f"{where}: must be at least {minimum}, got {raw}")
    if raw > 2**31 - 1:
        raise InvalidObject(f"{where}: must fit an int32, got {raw}")
    return raw


def _created(raw: Any) -> str:
    """metadata.creationTimestamp as written (the API server's RFC 3339 in UTC), "" when absent."""
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    value = meta.get("creationTimestamp") if isinstance(meta, Mapping) else None
    return value if isinstance(value, str) else ""


def _meta_parts(raw: Any, kind: str) -> tuple[str, str, str, int, Mapping[str, Any]]:
    meta, spec, _status = object_parts(raw, kind)
    name = object_name(meta)
    namespace = as_str(meta.get("namespace"), "metadata.namespace")
    if not namespace:
        raise InvalidObject("metadata.namespace: required (a PodGroup is namespaced)")
    generation = meta.get("generation")
    generation = generation if isinstance(generation, int) and not isinstance(generation, bool) else 0
    return name, namespace, as_str(meta.get("uid"), "metadata.uid"), generation, spec


def api_of(raw: Any) -> str:
    """The API a group object comes from, by its apiVersion; InvalidObject for anything else."""
    if not isinstance(raw, Mapping):
        raise InvalidObject("PodGroup: expected an object")
    version = raw.get("apiVersion")
    if version not in APIS:
        raise InvalidObject(f"apiVersion: expected one of {', '.join(APIS)}, got {version!r}")
    return str(version)


def parse_pod_group(raw: Any, api: str | None = None) -> PodGroup:
    """A PodGroup of either API; `api` is needed when the object has no apiVersion (list items)."""
    api = api or api_of(raw)
    if api == API_V1ALPHA2:
        return _parse_v1alpha2(raw)
    if api == API_COSCHEDULING:
        return _parse_coscheduling(raw)
    raise InvalidObject(f"apiVersion: expected one of {', '.join(APIS)}, got {api!r}")


def _parse_v1alpha2(raw: Any) -> PodGroup:
    name, namespace, uid, generation, spec = _meta_parts(raw, "PodGroup")
    if spec.get("schedulingPolicy") is None:
        raise InvalidObject("spec.schedulingPolicy: required")
    policy_raw = as_object(spec.get("schedulingPolicy"), "spec.schedulingPolicy")
    present = [k for k in ("basic", "gang") if policy_raw.get(k) is not None]
    if len(present) != 1:
        raise InvalidObject("spec.schedulingPolicy: exactly one of basic or gang must be set")
    if present == ["gang"]:
        gang = as_object(policy_raw["gang"], "spec.schedulingPolicy.gang")
        policy, min_count = GANG, _int(gang.get("minCount"), "spec.schedulingPolicy.gang.minCount", minimum=1)
    else:
        as_object(policy_raw["basic"], "spec.schedulingPolicy.basic")
        policy, min_count = BASIC, 1
    constraints = as_object(spec.get("schedulingConstraints"), "spec.schedulingConstraints")
    keys = []
    topology = as_list(constraints.get("topology"), "spec.schedulingConstraints.topology")
    if len(topology) > 1:
        raise InvalidObject(f"spec.schedulingConstraints.topology: at most 1 item, got {len(topology)}")
    for i, item in enumerate(topology):
        where = f"spec.schedulingConstraints.topology[{i}]"
        key = as_str(as_object(item, where).get("key"), f"{where}.key")
        if not key:
            raise InvalidObject(f"{where}.key: required")
        keys.append(key)
    return PodGroup(GroupKey(API_V1ALPHA2, namespace, name), uid, generation, policy, min_count,
                    V1ALPHA2_TIMEOUT_SECONDS, {}, tuple(keys), _created(raw))


def _parse_coscheduling(raw: Any) -> PodGroup:
    name, namespace, uid, generation, spec = _meta_parts(raw, "PodGroup")
    # minMember is `omitempty` with minimum 1: absent reads as 0, which Coscheduling treats like 1.
    min_count = _int(spec.get("minMember"), "spec.minMember", minimum=1, default=1)
    seconds = spec.get("scheduleTimeoutSeconds")
    timeout = (COSCHEDULING_TIMEOUT_SECONDS if seconds is None
               else float(_int(seconds, "spec.scheduleTimeoutSeconds", minimum=1)))
    min_resources = parse_resource_list(spec.get("minResources"), "spec.minResources")
    return PodGroup(GroupKey(API_COSCHEDULING, namespace, name), uid, generation, GANG, min_count,
                    timeout, min_resources, (), _created(raw))


def group_key_from_parts(namespace: str, spec: Mapping[str, Any], labels: Mapping[str, str]) -> GroupKey | None:
    """The group a pod belongs to: `spec.schedulingGroup.podGroupName` first (kube-scheduler's own
    field), else the Coscheduling label; None for a pod of no group."""
    group = spec.get("schedulingGroup")
    if group is not None:
        name = as_str(as_object(group, "spec.schedulingGroup").get("podGroupName"),
                      "spec.schedulingGroup.podGroupName")
        if not name:
            raise InvalidObject("spec.schedulingGroup.podGroupName: required (the only member of the union)")
        return GroupKey(API_V1ALPHA2, namespace, name)
    name = labels.get(POD_GROUP_LABEL, "")
    return GroupKey(API_COSCHEDULING, namespace, name) if name else None


def group_key_of(pod: Any) -> GroupKey | None:
    """`group_key_from_parts` for a whole v1.Pod dict."""
    meta, spec, _status = object_parts(pod, "Pod")
    labels = as_string_map(meta.get("labels"), "metadata.labels")
    return group_key_from_parts(as_str(meta.get("namespace"), "metadata.namespace"), spec, labels)


def _conditions(raw_group: Any) -> list[Mapping[str, Any]]:
    _meta, _spec, status = object_parts(raw_group, "PodGroup")
    return [c for c in as_list(status.get("conditions"), "status.conditions") if isinstance(c, Mapping)]


def scheduled_condition_patch(raw_group: Any, reason: str, message: str, now: str) -> dict[str, Any] | None:
    """The status patch that records one group scheduling outcome, as kube-scheduler writes it, or
    None when nothing changes.

    `reason` is `Scheduled` (status True), `Unschedulable` or `SchedulerError` (False). A group
    already `True` is never set back to False (a later cycle for extra members must not undo it).
    `lastTransitionTime` (`now`, RFC 3339) changes only with the status, as meta.SetStatusCondition
    does. The patch carries the whole conditions list, so it means the same as a JSON merge patch
    and as a strategic merge patch (keyed by type) of the status subresource.
    """
    if reason not in SCHEDULED_REASONS:
        raise ValueError(f"reason must be one of {', '.join(SCHEDULED_REASONS)}, got {reason!r}")
    status = "True" if reason == REASON_SCHEDULED else "False"
    meta, _spec, _status = object_parts(raw_group, "PodGroup")
    generation = meta.get("generation") if isinstance(meta.get("generation"), int) else 0
    conditions = _conditions(raw_group)
    existing = next((c for c in conditions if c.get("type") == SCHEDULED_CONDITION), None)
    if existing is not None and existing.get("status") == "True" and status != "True":
        return None
    condition: Condition = {
        "type": SCHEDULED_CONDITION, "status": status, "reason": reason, "message": message,
        "lastTransitionTime": (existing.get("lastTransitionTime") or now
                               if existing is not None and existing.get("status") == status else now),
    }
    if generation:  # omitempty: the API server stores no 0 (and sets no generation on PodGroups)
        condition["observedGeneration"] = generation
    if existing is not None and all(existing.get(k) == condition.get(k)
                                    for k in ("status", "reason", "message", "observedGeneration")):
        return None
    kept = [dict(c) if c is not existing else condition for c in conditions]
    if existing is None:
        kept.append(condition)
    return {"status": {"conditions": kept}}


@dataclass(frozen=True, slots=True)
class MemberCounts:
    """What Coscheduling's controller reads from the group's labelled pods."""

    pods: int
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    occupied_by: str = ""  # "ns/owner[,ns/owner]" of the first pod's owners, sorted


def count_members(pods: Iterable[Mapping[str, Any]]) -> MemberCounts:
    """Count the member pods' phases; `occupied_by` from the first pod's ownerReferences."""
    total = running = succeeded = failed = 0
    occupied = ""
    for pod in pods:
        meta, _spec, status = object_parts(pod, "Pod")
        if total == 0:
            namespace = as_str(meta.get("namespace"), "metadata.namespace")
            owners = sorted(f"{namespace}/{as_str(as_object(ref, 'metadata.ownerReferences').get('name'), 'name')}"
                            for ref in as_list(meta.get("ownerReferences"), "metadata.ownerReferences"))
            occupied = ",".join(owners)
        total += 1
        phase = status.get("phase")
        running += phase == "Running"
        succeeded += phase == "Succeeded"
        failed += phase == "Failed"
    return MemberCounts(total, running, succeeded, failed, occupied)


def _coscheduling_step(status: dict[str, Any], min_member: int, counts: MemberCounts) -> dict[str, Any]:
    """One reconcile of Coscheduling's PodGroup controller (podgroup_controller.go `Reconcile`)."""
    new = dict(status)
    phase = status.get("phase", "")
    if phase in FINAL_PHASES:
        return new
    if phase == "":
        new["phase"] = PHASE_PENDING
    elif phase == PHASE_PENDING:
        if counts.pods >= min_member:
            new["phase"] = PHASE_SCHEDULING
            if counts.occupied_by:
                new["occupiedBy"] = counts.occupied_by
    else:
        new.update(running=counts.running, succeeded=counts.succeeded, failed=counts.failed)
        if counts.pods < min_member:
            new["phase"] = PHASE_PENDING
        else:
            active = counts.succeeded + counts.running
            new["phase"] = PHASE_RUNNING if active >= min_member else PHASE_SCHEDULING
            if counts.failed and counts.failed + active >= min_member:
                new["phase"] = PHASE_FAILED
            if counts.succeeded >= min_member:
                new["phase"] = PHASE_FINISHED
    return new


def coscheduling_status(raw_group: Any, counts: MemberCounts) -> dict[str, Any] | None:
    """The Coscheduling status the scheduler-plugins controller would settle on for these members
    (its reconciles run to their fixed point), as a status merge patch; None when unchanged."""
    group = parse_pod_group(raw_group, API_COSCHEDULING)
    _meta, _spec, status = object_parts(raw_group, "PodGroup")
    current = {k: status[k] for k in ("phase", "occupiedBy", "running", "succeeded", "failed") if k in status}
    settled = dict(current)
    for _ in range(4):  # "" -> Pending -> Scheduling -> counted: three steps at most
        step = _coscheduling_step(settled, group.min_count, counts)
        if step == settled:
            break
        settled = step
    changed = {k: v for k, v in settled.items() if current.get(k) != v}
    return {"status": changed} if changed else None
