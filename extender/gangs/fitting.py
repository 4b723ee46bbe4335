"""Can a gang's members still to place fit in the cluster at all? (the webhook's filter)

Coscheduling refuses a member in PreFilter, unresolvable so that kube-scheduler does not preempt
for it, when the cluster's free room summed over all nodes cannot cover the group's
`minResources` plus `pods: minMember` (core.go `CheckClusterResource`, where the group's own pods
count as free). We do that, and the same for the members themselves: the room the quorum still
needs against the room there is. Every check is a bound that no placement can beat (sums, and
each member against every node), so a refusal is certain: a gang that a better packing would fit
is never refused here; the scheduling itself finds out the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from extender.model.quantities import format_units
from extender.model.resources import Resources, add_into

REASON_MIN_RESOURCES = "pod group's minResources exceed the cluster's free room"
REASON_MEMBERS = "pod group's members need more than the cluster's free room"
REASON_NO_NODE = "pod group's members fit on too few nodes"
PODS = "pods"


@dataclass(frozen=True, slots=True)
class Misfit:
    reason: str  # a short fixed phrase
    message: str  # with the numbers


def _gaps(need: Mapping[str, int], have: Mapping[str, int]) -> dict[str, int]:
    return {name: amount - have.get(name, 0) for name, amount in need.items() if amount > have.get(name, 0)}


def _describe(gaps: Mapping[str, int]) -> str:
    return ", ".join(f"{name} short by {format_units(name, amount)}" for name, amount in sorted(gaps.items()))


def _fits(request: Mapping[str, int], free: Mapping[str, int]) -> bool:
    return all(amount <= free.get(name, 0) for name, amount in request.items() if amount > 0)


def fits_at_all(
    to_place: Sequence[Resources],
    still_needed: int,
    free: Sequence[Mapping[str, int]],
    *,
    min_resources: Mapping[str, int] | None = None,
    min_count: int = 0,
    group_usage: Mapping[str, int] | None = None,
    placed: int = 0,
) -> Misfit | None:
    """None, or why the group certainly cannot complete its quorum now.

    `to_place`: the requests of the members not placed yet; `still_needed`: how many of them the
    quorum needs (min_count minus the members bound, held or allowed); `free`: each node's free
    room (allocatable minus every pod's requests, `pods` included when pod counts should count);
    `group_usage` and `placed`: the summed requests and number of the group's placed members,
    which Coscheduling's minResources check counts as free.
    """
    track_pods = any(PODS in room for room in free)
    total: Resources = {}
    for room in free:  # an over-committed node has no room, but takes none from the others
        add_into(total, {name: amount for name, amount in room.items() if amount > 0})
    if min_resources:
        need = dict(min_resources)
        need[PODS] = max(need.get(PODS, 0), min_count)
        have = dict(total)
        add_into(have, group_usage or {})
        have[PODS] = have.get(PODS, 0) + placed
        if not track_pods:
            need.pop(PODS)
        gaps = _gaps(need, have)
        if gaps:
            return Misfit(REASON_MIN_RESOURCES, f"minResources: {_describe(gaps)}")
    if still_needed <= 0:
        return None
    requests = [{**r, PODS: 1} if track_pods else r for r in to_place]
    if len(requests) < still_needed:
        return Misfit(REASON_MEMBERS, f"{still_needed} more members needed, {len(requests)} left to place")
    fitting = [r for r in requests if any(_fits(r, room) for room in free)]
    if len(fitting) < still_needed:
        return Misfit(REASON_NO_NODE, f"{still_needed} more members needed, {len(fitting)} of the "
                      f"{len(requests)} left fit on some node")
    # Per resource, the quorum needs at least the sum of its `still_needed` smallest requests.
    names = {name for r in fitting for name in r}
    need = {name: sum(sorted(r.get(name, 0) for r in fitting)[:still_needed]) for name in names}
    gaps = _gaps(need, total)
    if gaps:
        return Misfit(REASON_MEMBERS, f"{still_needed} more members: {_describe(gaps)}")
    return None
