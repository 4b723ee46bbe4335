"""One pod group's scheduling cycle, shared by the standalone scheduler and simulate.

kube-scheduler v1.36's group cycle (schedule_one_podgroup.go, docs/gangs.md): the group's queued
members are tried in one order (priority, high first, then creation); with a topology constraint
the cycle runs once per domain and keeps the domain where most members fit (`PodGroupPodsCount`;
ties to the first domain by name: MostAllocated is not applied); then each member is placed in
turn, each seeing the places of the ones before it, and those no node fits are handed back to the
mode with the group's places still taken (preemption sees them). Whether the places complete the
group (`GangCoordinator.quorum_with`), and what a place becomes then (held for Permit and bound,
or bound at once in simulate), is the mode's.

The mode is a `GroupHost`: the live scheduler's queue entries and reporter, or simulate's pods and
report. Nothing here does IO.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

from extender.cycle.pod import CycleResult, schedule_one
from extender.cycle.steps import PlaceHost
from extender.gangs.topology import Placements, placements
from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy.cluster_view import ClusterView
from extender.policy.engine import Engine

M = TypeVar("M")  # a member, as the mode queues it
T = TypeVar("T")  # a place taken, as the mode keeps it
M_in = TypeVar("M_in", contravariant=True)
T_out = TypeVar("T_out", covariant=True)


class GroupCluster(ClusterView, PlaceHost, Protocol):
    """The mode's cluster state as a group cycle uses it: read, and places assumed and forgotten
    while domains are tried."""

    def node_infos(self, names: Iterable[str]) -> tuple[list[NodeInfo], list[str]]:
        """The infos of `names`, in order, and the names the state does not hold."""


class GroupHost(Protocol[M_in, T_out]):
    """What one group cycle asks of the mode that runs it."""

    @property
    def cluster(self) -> GroupCluster: ...

    @property
    def rng(self) -> random.Random: ...

    def pod(self, member: M_in) -> PodView: ...

    def engine(self, member: M_in) -> Engine:
        """The policy of the member's profile."""

    def place(self, member: M_in, nodes: Sequence[NodeInfo] | None) -> T_out | CycleResult | None:
        """The member's pod cycle, then Reserve and assume (extender.cycle.steps): the place taken;
        the cycle's result when no node fits; None when it failed (the mode reported it)."""

    def unfit(self, member: M_in, result: CycleResult, *, preempting: bool) -> T_out | None:
        """No node fits the member, the group's other places still taken: preempt if `preempting`
        and report; a place when the mode retried it at once and it fits now."""


def _nodes(cluster: GroupCluster, domain: tuple[str, ...] | None) -> list[NodeInfo] | None:
    """The domain's nodes, read anew (they hold the places taken so far); None: every node."""
    return cluster.node_infos(domain)[0] if domain is not None else None


def member_order(pod: PodView) -> tuple[int, str, str]:
    """Sort key of a group's members within its cycle: higher priority first, then older, then name."""
    return (-pod.priority, pod.creation_timestamp, pod.key)


def domains(label: str, cluster: ClusterView, pinned: Sequence[str]) -> Placements:
    """The topology domains a group constrained to `label` may use (`placements`), from every node
    of the cluster; `pinned`: the nodes of members bound or held already."""
    node_labels = {info.name: info.node.labels for info in cluster.all_node_infos()}
    return placements(label, node_labels, pinned)


def best_domain(candidates: Mapping[str, tuple[str, ...]], fitting: Callable[[tuple[str, ...]], int]) -> tuple[str, ...]:
    """The nodes of the domain where `fitting` (members placed there, each seeing the previous
    ones, then given back) counts the most; ties go to the first domain in `candidates`' order
    (`topology.placements` sorts them by label value)."""
    best: tuple[str, ...] = ()
    best_count = -1
    for nodes in candidates.values():
        count = fitting(nodes)
        if count > best_count:
            best, best_count = nodes, count
    return best


def fitting(host: GroupHost[M, T], members: Sequence[M], domain: tuple[str, ...]) -> int:
    """How many of `members` fit in `domain`, each placed (assumed) so the next sees it, then every
    one given back: a trial, reported nowhere."""
    cluster = host.cluster
    tried: list[PodView] = []
    for member in members:
        pod = host.pod(member)
        try:
            result = schedule_one(host.engine(member), cluster, pod, rng=host.rng, nodes=_nodes(cluster, domain))
        except Exception:  # noqa: BLE001 - a plugin's failure: the real attempt reports it
            continue
        if result.node is not None:
            cluster.assume(pod.key, result.node, uid=pod.uid, view=pod)
            tried.append(pod)
    for pod in tried:
        cluster.forget(pod.key)
    return len(tried)


def choose_domain(host: GroupHost[M, T], members: Sequence[M], candidates: Mapping[str, tuple[str, ...]]
                  ) -> tuple[str, ...]:
    """The domain where most members fit (kube-scheduler's PodGroupPodsCount)."""
    return best_domain(candidates, lambda domain: fitting(host, members, domain))


def place_members(host: GroupHost[M, T], members: Sequence[M], domain: tuple[str, ...] | None) -> list[T]:
    """Place each member in turn (in `member_order`, the caller's), inside `domain` when the group
    has one; then hand the unfit ones to the mode, the group's places still taken. A group held to
    one domain is not placed by preemption (kube-scheduler's TopologyPlacementGenerator does not use
    pod-by-pod preemption either). Returns the places taken."""
    taken: list[T] = []
    unfit: list[tuple[M, CycleResult]] = []
    for member in members:
        outcome = host.place(member, _nodes(host.cluster, domain))
        if outcome is None:
            continue
        if isinstance(outcome, CycleResult):
            unfit.append((member, outcome))
        else:
            taken.append(outcome)
    for member, result in unfit:
        retried = host.unfit(member, result, preempting=domain is None)
        if retried is not None:
            taken.append(retried)
    return taken
