"""The pure rules of a pod group's scheduling cycle, shared by the standalone scheduler and simulate.

kube-scheduler v1.36's group cycle (schedule_one_podgroup.go, docs/gangs.md): the group's queued
members are tried in one order (priority, high first, then creation), and with a topology
constraint the cycle runs once per domain and keeps the domain where most members fit
(`PodGroupPodsCount`; ties to the first domain by name: MostAllocated is not applied). Whether the
members placed complete the group is `GangCoordinator.quorum_with`. Placing and giving back are
the caller's (the live state, or simulate's copy of it): here they are a callable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from extender.model.pods import PodView


def member_order(pod: PodView) -> tuple[int, str, str]:
    """Sort key of a group's members within its cycle: higher priority first, then older, then name."""
    return (-pod.priority, pod.creation_timestamp, pod.key)


def best_domain(domains: Mapping[str, tuple[str, ...]], fitting: Callable[[tuple[str, ...]], int]) -> tuple[str, ...]:
    """The nodes of the domain where `fitting` (members placed there, each seeing the previous
    ones, then given back) counts the most; ties go to the first domain in `domains`' order
    (`topology.placements` sorts them by label value)."""
    best: tuple[str, ...] = ()
    best_count = -1
    for nodes in domains.values():
        count = fitting(nodes)
        if count > best_count:
            best, best_count = nodes, count
    return best
