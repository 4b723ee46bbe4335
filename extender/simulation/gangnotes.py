"""What `explain` says about a pod of a pod group: its group, the quorum, and what it waits for.

The same coordinator the schedulers run (extender.gangs), fed once with the group and its
member pods as read: so the answer is the standalone scheduler's admission (docs/gangs.md).
Pure: the caller reads the objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from extender.errors import InvalidObject
from extender.gangs.coordinator import GangCoordinator, Member
from extender.model.podgroups import PodGroup
from extender.model.pods import TERMINAL_PHASES, PodView


def _member(pod: PodView, node: str) -> Member:
    assert pod.group is not None
    return Member(pod.uid or pod.key, pod.key, pod.group, pod.scheduler_name, node,
                  bool(pod.scheduling_gates), dict(pod.requests))


def group_note(pod: PodView, group: PodGroup | None, cluster_pods: Iterable[Mapping[str, Any]]) -> str:
    """One line for a member (`pod.group` set): the group, its members and what the pod waits for."""
    assert pod.group is not None
    coordinator = GangCoordinator()
    if group is not None:
        coordinator.upsert_group(group)
    for raw in cluster_pods:
        try:
            other = PodView.from_dict(raw)
        except InvalidObject:
            continue
        if other.group == pod.group and other.key != pod.key and other.phase not in TERMINAL_PHASES:
            coordinator.upsert_member(_member(other, other.node_name))
    coordinator.upsert_member(_member(pod, ""))  # explained as if pending
    status = coordinator.status(pod.group)
    admission = coordinator.admission(pod.uid or pod.key)
    head = f"pod group {pod.group} ({pod.group.api}"
    if group is None:
        return f"{head}): {admission.message}; the pod waits for it"
    policy = f"gang, minCount {group.min_count}" if group.is_gang else "basic"
    counts = f"{status.members} members, {status.bound} bound"
    if not admission.admitted:
        return f"{head}, {policy}): {counts}; the pod waits: {admission.message}"
    if not group.is_gang:
        return f"{head}, {policy}): {counts}; each member is placed on its own"
    missing = max(0, group.min_count - status.bound)
    return (f"{head}, {policy}): {counts}; {missing} more, this pod among them, must be placed together, "
            "or none is bound")
