"""One scheduling cycle for one pod: pick nodes, filter, score, choose. Pure: no IO, no clock.

kube-scheduler v1.36's schedulePod (schedule_one.go). The standalone loop, the group cycle and
`simulate` all call `schedule_one`, so a placement means the same thing live and offline. The
caller takes the place (extender.cycle.steps) and binds; this function only reads the cluster,
through the engine's ClusterView.

Like kube-scheduler, large clusters are not searched exhaustively: once enough feasible
nodes are found (`percentageOfNodesToScore`, adaptive by default) filtering stops and
only those are scored. The search starts where the previous cycle stopped
(`start_index` in, `next_start_index` out), so every node gets its turn.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy.cluster_view import ClusterView
from extender.policy.decisions import Decision
from extender.policy.engine import Engine, FilterCycle

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
_MIN_CHUNK = 32
TIE_BREAK_NAME = "nodeName"  # the policy's settings.tieBreak for the smallest name (policy/loading.py)


@dataclass(frozen=True, slots=True)
class CycleResult:
    """`node` is None when no node fits; `decision` says why (or how the nodes scored)."""

    node: str | None
    decision: Decision
    evaluated: int = 0
    next_start_index: int = 0


def nodes_to_find(total: int, percentage: int = 0) -> int:
    """kube-scheduler's numFeasibleNodesToFind: how many feasible nodes are enough.

    Under 100 nodes: all of them. Percentage 0 means adaptive: 50% minus 1% per 125
    nodes, at least 5%. Never fewer than 100 nodes.
    """
    if total < MIN_FEASIBLE_NODES_TO_FIND:
        return total
    if percentage <= 0:
        percentage = max(50 - total // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    if percentage >= 100:
        return total
    return max(total * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


def _filter_until(cycle: FilterCycle, nodes: Sequence[NodeInfo], start: int,
                  wanted: int) -> tuple[Decision, int]:
    """Filter from `start` (wrapping) until `wanted` nodes pass or every node was tried.

    Returns the merged decision and how many nodes were processed.
    """
    count = len(nodes)
    if wanted >= count:
        ordered = list(nodes[start:]) + list(nodes[:start]) if start else nodes
        return cycle.run(ordered), count
    merged = Decision(pod=cycle.pod, total=0)
    processed = 0
    while processed < count and len(merged.feasible) < wanted:
        size = min(max(wanted - len(merged.feasible), _MIN_CHUNK), count - processed)
        begin = (start + processed) % count
        chunk = nodes[begin:begin + size]
        if len(chunk) < size:
            chunk = list(chunk) + list(nodes[:size - len(chunk)])
        part = cycle.run(chunk)
        merged.feasible.extend(part.feasible)
        merged.failed.update(part.failed)
        merged.prefilter = part.prefilter
        processed += size
    del merged.feasible[wanted:]
    merged.total = processed
    return merged, processed


def _nominated_fit(cycle: FilterCycle, state: ClusterView, pod: PodView) -> NodeInfo | None:
    """The node preemption nominated for the pod, when it fits there now: kube-scheduler
    tries it first (evaluateNominatedNode) and takes it without scoring the others."""
    name = state.nominated_node(pod.key) or pod.nominated_node_name
    info = state.node_info(name) if name else None
    if info is not None and cycle.status(info) is None:
        return info
    return None


def select_host(decision: Decision, rng: random.Random, *, by_name: bool = False) -> str | None:
    """The best-scoring node; ties broken uniformly at random, as kube-scheduler's selectHost,
    or (`by_name`, the policy's `settings.tieBreak: nodeName`) to the smallest node name, as the
    FGD paper's simulator does: a fixed order that packs ties onto the same machines.

    Found with C loops (max, then the indices of the best): identical pods on identical
    nodes tie on hundreds of nodes every cycle, and a Python loop drawing a number per tie
    (kube-scheduler's reservoir sampling) cost as much as scoring them."""
    if not decision.feasible:
        return None
    totals = decision.totals
    if len(decision.feasible) == 1 or not totals:
        return decision.feasible[0].name
    best_score = max(totals)
    best = [i for i, score in enumerate(totals) if score == best_score]
    if len(best) == 1:
        return decision.scored[best[0]].name
    if by_name:
        scored = decision.scored
        return min(scored[i].name for i in best)
    return decision.scored[best[rng.randrange(len(best))]].name


def schedule_one(
    engine: Engine,
    state: ClusterView,
    pod: PodView,
    *,
    rng: random.Random,
    percentage_of_nodes_to_score: int = 0,
    start_index: int = 0,
    nodes: Sequence[NodeInfo] | None = None,
) -> CycleResult:
    """Decide where `pod` goes among every node of `state` (or among `nodes`: a pod group's
    topology domain). Raises PluginError if a plugin fails."""
    given = nodes
    if nodes is None:
        nodes = state.all_node_infos()
    total = len(nodes)
    if total == 0:
        return CycleResult(None, Decision(pod=pod, total=0))
    cycle = engine.prepare(pod, state)
    nominated = _nominated_fit(cycle, state, pod)
    if nominated is not None:
        return CycleResult(nominated.name, Decision(pod=pod, total=1, feasible=[nominated]), 1, start_index)
    candidates = nodes if cycle.only is None else _named(cycle.only, state, given)
    start = start_index % len(candidates) if candidates else 0
    wanted = nodes_to_find(len(candidates), percentage_of_nodes_to_score)
    decision, processed = _filter_until(cycle, candidates, start, wanted)
    if cycle.only is not None:  # findNodesThatFitPod: the others have the absent nodes' status
        decision.total = total
        decision.absent = cycle.absent
    if len(decision.feasible) > 1:
        engine.score(pod, decision.feasible, decision, state)
    host = select_host(decision, rng, by_name=engine.policy.settings.get("tieBreak") == TIE_BREAK_NAME)
    return CycleResult(host, decision, processed, (start_index + processed) % total)


def _named(names: frozenset[str], state: ClusterView, nodes: Sequence[NodeInfo] | None) -> list[NodeInfo]:
    """The nodes a PreFilterResult names that exist (among `nodes` when given), by name: a
    DaemonSet pod's one node is looked up, not found by walking thousands."""
    if nodes is not None:
        return [info for info in nodes if info.name in names]
    found = (state.node_info(name) for name in sorted(names))
    return [info for info in found if info is not None]
