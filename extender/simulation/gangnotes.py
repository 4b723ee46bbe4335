"""What `explain` says about a pod of a pod group: its group, the quorum, and what it waits for
(`GangCoordinator.describe`).

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
    return "; ".join(coordinator.describe(pod.uid or pod.key))
