"""Allocation scorers: LeastAllocated, MostAllocated and BalancedAllocation, as kube-scheduler computes them.

Least/MostAllocated follow NodeResourcesFit's scoring strategies: for each
configured resource, `(allocatable - requested) * 100 / allocatable` (or
`requested * 100 / allocatable`) with integer division, averaged with the
resource weights; cpu and memory count the pod's and the node's requests with
kube-scheduler's non-zero defaults (100m, 200Mi) so empty pods still spread out.
BalancedAllocation scores `(1 - std) * 100` over the requested/allocatable
fractions, with actual requests, and skips best-effort pods as kube-scheduler does.
All three are already on 0..100, so they normalise to themselves.

A resource the node does not have (allocatable 0) is left out of the average; an
extended resource or hugepage size the pod does not request is left out too. An extended
resource a DeviceClass serves (DRAExtendedResource) counts, on a node that does not advertise
it, the class's devices there and those allocated (dra_extended.device_totals), as
NodeResourcesFit does in kube-scheduler v1.36.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from extender.dra.objects import DeviceClass
from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy import names
from extender.policy.builtin import arguments
from extender.policy.builtin.base import PrescoredScorer, identity
from extender.policy.builtin.dra_extended import device_totals
from extender.policy.builtin.fit import is_dra_extended_resource
from extender.policy.cluster_view import ClusterView
from extender.policy.dra_view import DraView
from extender.policy.plugins import NodeScore, NormalizeScores, Score

DEFAULT_RESOURCES = (("cpu", 1), ("memory", 1))
NONZERO_RESOURCES = frozenset({"cpu", "memory"})


def is_scalar_resource(name: str) -> bool:
    """k8s `IsScalarResourceName`: extended, hugepages-*, and other domain-prefixed resources."""
    return name.startswith("hugepages-") or "/" in name


_SOME = "must name at least one resource"
_WEIGHTED = arguments.schema({"resources": arguments.table(
    lambda raw: arguments.read_integer(raw, minimum=1, maximum=100),
    default=dict(DEFAULT_RESOURCES), null=dict(DEFAULT_RESOURCES), empty=_SOME)})
_BALANCED = arguments.schema({"resources": arguments.strings(default=("cpu", "memory"), null=("cpu", "memory"),
                                                             empty=_SOME)})


Term = tuple[str, int, int, bool]


def _terms(resources: tuple[tuple[str, int], ...], pod: PodView, nonzero: bool) -> tuple[Term, ...]:
    """Per pod: (resource, weight, pod request, count the node's non-zero requests?)."""
    terms = []
    for name, weight in resources:
        use_nonzero = nonzero and name in NONZERO_RESOURCES
        amount = (pod.score_requests if use_nonzero else pod.requests).get(name, 0)
        if amount == 0 and is_scalar_resource(name):
            continue  # kube-scheduler leaves unrequested scalar resources out
        terms.append((name, weight, amount, use_nonzero))
    return tuple(terms)


def _weighted(rows: Sequence[tuple[str, int, int]], used_by: Mapping[str, int], allocatable: Mapping[str, int],
              most: bool) -> tuple[int, int]:
    """The weighted sum of each resource's score (MostAllocated: used share; LeastAllocated: free
    share, in whole percent as kube-scheduler's integer arithmetic) and the sum of the weights of
    the resources the node has."""
    total = weights = 0
    for name, weight, amount in rows:
        capacity = allocatable.get(name)
        if capacity and capacity > 0:
            used = used_by.get(name, 0) + amount
            if most:
                total += (100 if used >= capacity else used * 100 // capacity) * weight
            elif used < capacity:
                total += (capacity - used) * 100 // capacity * weight
            weights += weight
    return total, weights


@dataclass(frozen=True)
class _AllocationScorer(PrescoredScorer, NormalizeScores):
    resources: tuple[tuple[str, int], ...] = DEFAULT_RESOURCES
    most: ClassVar[bool] = False

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> _AllocationScorer:
        """Args: `resources: {cpu: 1, memory: 1}`, resource name to weight 1..100."""
        return cls(tuple(arguments.load(_WEIGHTED, args)["resources"].items()))

    def prescore(self, pod: PodView, cluster: ClusterView, nodes: Sequence[NodeInfo]) -> NodeScore:
        terms = _terms(self.resources, pod, nonzero=True)
        # Split by which node total they read, so the per-node loop has no branch for it.
        nonzero = tuple((name, weight, amount) for name, weight, amount, use in terms if use)
        actual = tuple((name, weight, amount) for name, weight, amount, use in terms if not use)
        most = self.most
        backed = _dra_backed(actual, cluster)
        if backed:
            return self._with_devices(nonzero, actual, cluster.dra(), backed)

        def score(info: NodeInfo) -> float:
            allocatable = info.node.allocatable
            total, weights = _weighted(nonzero, info.score_requested, allocatable, most)
            if actual:
                more, more_weights = _weighted(actual, info.requested, allocatable, most)
                total += more
                weights += more_weights
            return total // weights if weights else 0

        return Score(score, memo_key=terms)  # all it reads of the pod (Engine._remembered)

    def _with_devices(self, nonzero: tuple[tuple[str, int, int], ...], actual: tuple[tuple[str, int, int], ...],
                      dra: DraView, backed: Mapping[str, DeviceClass]) -> NodeScore:
        """The score for a pod asking for an extended resource a DeviceClass serves: on a node
        that does not advertise it, its devices there stand for allocatable and requested. No
        memo key: the score follows the devices' allocations, which pods do not show."""
        most = self.most

        def term(capacity: int, used: int, weight: int) -> int:
            if most:
                return (100 if used >= capacity else used * 100 // capacity) * weight
            return (capacity - used) * 100 // capacity * weight if used < capacity else 0

        def score(info: NodeInfo) -> float:
            allocatable = info.node.allocatable
            total = weights = 0
            for totals, entries in ((info.score_requested, nonzero), (info.requested, actual)):
                for name, weight, amount in entries:
                    capacity = allocatable.get(name) or 0
                    used = totals.get(name, 0) + amount
                    if capacity <= 0 and name in backed:
                        capacity, held = device_totals(dra, backed[name], info.name, info.node.labels)
                        used = held + amount
                    if capacity > 0:
                        total += term(capacity, used, weight)
                        weights += weight
            return total // weights if weights else 0

        return score

    def normalize_scores(self, scores: Sequence[float]) -> list[float]:
        return identity(list(scores))


def _dra_backed(terms: tuple[tuple[str, int, int], ...], cluster: ClusterView) -> dict[str, DeviceClass]:
    """The pod's scored extended resources that a DeviceClass serves (getDRAPreScoredParams)."""
    if not any(is_dra_extended_resource(name) for name, _, _ in terms):
        return {}
    dra = cluster.dra()
    if not dra.enabled:
        return {}
    return {name: cls for name, _, _ in terms
            if is_dra_extended_resource(name) and (cls := dra.extended_class(name)) is not None}


@dataclass(frozen=True)
class LeastAllocated(_AllocationScorer):
    """Prefer emptier nodes (spreading): kube-scheduler's default NodeResourcesFit strategy."""

    name: ClassVar[str] = names.LEAST_ALLOCATED


@dataclass(frozen=True)
class MostAllocated(_AllocationScorer):
    """Prefer fuller nodes (bin packing), so that empty nodes can be scaled down."""

    name: ClassVar[str] = names.MOST_ALLOCATED
    most: ClassVar[bool] = True


@dataclass(frozen=True)
class BalancedAllocation(PrescoredScorer, NormalizeScores):
    """Args: `resources: [cpu, memory]` (weights do not apply to this formula)."""

    name: ClassVar[str] = names.BALANCED_ALLOCATION
    resources: tuple[str, ...] = ("cpu", "memory")

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> BalancedAllocation:
        return cls(arguments.load(_BALANCED, args)["resources"])

    def prescore(self, pod: PodView, cluster: ClusterView, nodes: Sequence[NodeInfo]) -> NodeScore | None:
        terms = _terms(tuple((name, 1) for name in self.resources), pod, nonzero=False)
        if not any(amount for _, _, amount, _ in terms):
            return None  # best-effort pod: kube-scheduler skips this scorer (issue 129138)
        pairs = tuple((name, amount) for name, _, amount, _ in terms)
        if len(pairs) == 2:
            pair = _balanced_pair(*pairs[0], *pairs[1])
            return Score(pair, memo_key=pairs)  # all it reads of the pod (Engine._remembered)

        def score(info: NodeInfo) -> float:
            allocatable = info.node.allocatable
            requested = info.requested
            fractions = []
            for name, amount in pairs:
                capacity = allocatable.get(name)
                if capacity and capacity > 0:
                    fraction = (requested.get(name, 0) + amount) / capacity
                    fractions.append(1.0 if fraction > 1 else fraction)
            if len(fractions) == 2:
                std = abs((fractions[0] - fractions[1]) / 2)
            elif len(fractions) > 2:
                mean = sum(fractions) / len(fractions)
                std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
            else:
                std = 0.0
            return int((1 - std) * 100)

        return Score(score, memo_key=pairs)  # all it reads of the pod (Engine._remembered)

    def normalize_scores(self, scores: Sequence[float]) -> list[float]:
        return identity(list(scores))


def _balanced_pair(first: str, first_amount: int, second: str, second_amount: int) -> NodeScore:
    """The usual cpu+memory case without a list per node: std of two values is half their gap."""

    def score(info: NodeInfo) -> float:
        allocatable = info.node.allocatable
        requested = info.requested
        first_capacity = allocatable.get(first)
        second_capacity = allocatable.get(second)
        if not (first_capacity and second_capacity and first_capacity > 0 and second_capacity > 0):
            return 100  # one fraction or none: std 0
        a = (requested.get(first, 0) + first_amount) / first_capacity
        b = (requested.get(second, 0) + second_amount) / second_capacity
        return int((1 - abs(((a if a < 1 else 1.0) - (b if b < 1 else 1.0)) / 2)) * 100)

    return score
