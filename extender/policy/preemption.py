"""Preemption: which lower-priority pods to evict, and from which node (kube-scheduler's DefaultPreemption).

Pure: it decides, the standalone scheduler (extender/scheduler/preemptor.py) and
simulate carry the decision out. The choices are kube-scheduler v1.36's:

* a pod with `preemptionPolicy: Never` does not preempt; nor does a pod whose nominated
  node still has a lower-priority pod terminating because of an earlier preemption (the
  room is on its way);
* candidates are the nodes the filters refused for a reason eviction can fix
  (Unschedulable, not UnschedulableAndUnresolvable), visited from a random offset until
  enough are found (10% of them, at least 100) with at least one that violates no
  PodDisruptionBudget;
* on each, every pod of strictly lower priority is removed; if the pod then fits (with
  the whole policy, nominated pods of at least its priority counted), victims are
  reprieved one by one, highest priority (then earliest start) first, those whose
  eviction would violate a budget before the others; the ones that cannot be reprieved
  are the victims;
* the node: fewest budget violations, then the lowest highest-victim priority, then the
  smallest sum of priorities, then the fewest victims, then the latest start time of the
  highest-priority victims, then the first found.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from extender.model.budgets import DisruptionBudget
from extender.model.nodes import NodeInfo
from extender.model.records import PodRecord
from extender.policy.cluster_view import ClusterView, PodChange
from extender.policy.decisions import Decision, FitError
from extender.policy.engine import FilterCycle
from extender.policy.status import Code, Status

NEVER = "not eligible due to preemptionPolicy=Never."
TERMINATING_ON_NOMINATED = "not eligible due to a terminating pod on the nominated node."
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
# One Status for every node no eviction can help (frozen: shared, not built per node per attempt).
_NOT_HELPFUL = Status(Code.UNRESOLVABLE, (NOT_HELPFUL,))
MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100
_NOT_STARTED = "~"  # sorts after every RFC 3339 time: a pod not started yet counts as started now
_INT32 = 2**31


@dataclass(frozen=True, slots=True)
class Candidate:
    node: str
    victims: tuple[PodRecord, ...]  # most important first
    pdb_violations: int


@dataclass
class Outcome:
    """What preemption concluded. `candidate` is None when no node can be freed; `message` then
    says why, as kube-scheduler words it after "preemption: "."""

    candidate: Candidate | None
    message: str = ""
    candidates: list[Candidate] = field(default_factory=list)
    statuses: dict[str, Status] = field(default_factory=dict)  # why each other node is no candidate
    fit_error: FitError | None = None  # the `message`'s parts, when it is one


def importance(pod: PodRecord) -> tuple[int, str]:
    """Sort key, most important first: higher priority, then earlier start (util.MoreImportantPod)."""
    return -pod.priority, pod.start_time or _NOT_STARTED


def eligible(pod_key: str, priority: int, preemption_policy: str, nominated: str,
             decision: Decision, cluster: ClusterView) -> str:
    """Why the pod may not preempt ("" when it may): PodEligibleToPreemptOthers."""
    if preemption_policy == "Never":
        return NEVER
    if nominated:
        status = decision.failed.get(nominated)
        if status is not None and status.code == Code.UNRESOLVABLE:
            return ""  # the nominated node can never work: look elsewhere
        info = cluster.node_info(nominated)
        if info is not None:
            for other in info.pods:
                if other.priority < priority and other.preempted and other.key != pod_key:
                    return TERMINATING_ON_NOMINATED
    return ""


def split_by_budgets(pods: Sequence[PodRecord], budgets: Sequence[DisruptionBudget]
                     ) -> tuple[list[PodRecord], list[PodRecord]]:
    """filterPodsWithPDBViolation: (would violate a budget, would not), order kept."""
    allowed = [budget.allowed for budget in budgets]
    violating: list[PodRecord] = []
    fine: list[PodRecord] = []
    for pod in pods:
        violates = False
        for i, budget in enumerate(budgets):
            if budget.covers(pod.namespace, pod.labels) and pod.name not in budget.disrupted:
                allowed[i] -= 1
                if allowed[i] < 0:
                    violates = True
        (violating if violates else fine).append(pod)
    return violating, fine


def select_victims(cycle: FilterCycle, info: NodeInfo, budgets: Sequence[DisruptionBudget]
                   ) -> tuple[Candidate | None, Status | None]:
    """SelectVictimsOnNode: the fewest, least important pods whose eviction lets the pod fit."""
    pod = cycle.pod
    node = info.node
    potential = [p for p in info.pods if p.priority < pod.priority]
    if not potential:
        return None, Status(Code.UNRESOLVABLE, (NO_VICTIMS,))
    counts_elsewhere = cycle.counts_elsewhere
    current = cycle.updated([PodChange(p, node, -1) for p in potential]) if counts_elsewhere else cycle
    kept = NodeInfo.build(node, (p for p in info.pods if p.priority >= pod.priority))
    status = current.status(kept)
    if status is not None:
        return None, status
    potential.sort(key=importance)
    violating, fine = split_by_budgets(potential, budgets)
    victims: list[PodRecord] = []
    violations = 0
    for group, counts in ((violating, 1), (fine, 0)):
        for victim in group:
            trial = current.updated([PodChange(victim, node, 1)]) if counts_elsewhere else current
            with_victim = kept.adding(victim)
            if trial.status(with_victim) is None:
                current, kept = trial, with_victim  # reprieved: the pod fits with it still there
            else:
                victims.append(victim)
                violations += counts
    if violating and fine:
        victims.sort(key=importance)
    return Candidate(node.name, tuple(victims), violations), None


def candidates_to_find(potential: int) -> int:
    """calculateNumCandidates: 10% of the potential nodes, at least 100, at most all."""
    return min(max(potential * MIN_CANDIDATE_NODES_PERCENTAGE // 100, MIN_CANDIDATE_NODES_ABSOLUTE), potential)


def _latest_start(candidate: Candidate) -> str:
    """The earliest start among the highest-priority victims (a later one is a better node)."""
    top = max(v.priority for v in candidate.victims)
    return min(v.start_time or _NOT_STARTED for v in candidate.victims if v.priority == top)


_CRITERIA: tuple[Callable[[Candidate], object], ...] = (
    lambda c: -c.pdb_violations,
    lambda c: -c.victims[0].priority,
    lambda c: -sum(v.priority + _INT32 for v in c.victims),
    lambda c: -len(c.victims),
    _latest_start,
)


def pick(candidates: Sequence[Candidate]) -> Candidate:
    """pickOneNodeForPreemption: each criterion keeps the best; the first left wins."""
    remaining = list(candidates)
    for criterion in _CRITERIA:
        if len(remaining) == 1:
            break
        best = max(criterion(c) for c in remaining)  # type: ignore[type-var]  # each criterion: ints, or strs alone
        remaining = [c for c in remaining if criterion(c) == best]
    return remaining[0]


def _no_candidate(statuses: dict[str, Status], total: int) -> Outcome:
    """No node can be freed: the FitError of the nodes preemption could not use."""
    fit_error = FitError.of(statuses.values(), 0, total)
    return Outcome(None, str(fit_error), statuses=statuses, fit_error=fit_error)


def preempt(cycle: FilterCycle, decision: Decision, nodes: Sequence[NodeInfo], cluster: ClusterView,
            budgets: Sequence[DisruptionBudget], *, rng: random.Random, nominated: str = "",
            exhaustive: bool = False) -> Outcome:
    """Find the victims and the node for `cycle.pod`, which fits nowhere (`decision`).

    `exhaustive` dry-runs every potential node (explain shows them all); the scheduler
    stops as kube-scheduler does, once enough candidates are found.
    """
    pod = cycle.pod
    why_not = eligible(pod.key, pod.priority, pod.preemption_policy, nominated, decision, cluster)
    if why_not:
        return Outcome(None, why_not)
    statuses: dict[str, Status] = {}
    potential = []
    failed, unschedulable = decision.failed, Code.UNSCHEDULABLE  # read once: this loop runs per node per failed attempt
    for info in nodes:
        status = failed.get(info.name)
        if status is not None and status.code == unschedulable:
            potential.append(info)
        else:
            statuses[info.name] = _NOT_HELPFUL
    if not potential:
        return _no_candidate(statuses, len(nodes))
    wanted = len(potential) if exhaustive else candidates_to_find(len(potential))
    offset = rng.randrange(len(potential))
    fine: list[Candidate] = []
    violating: list[Candidate] = []
    for i in range(len(potential)):
        info = potential[(offset + i) % len(potential)]
        candidate, status = select_victims(cycle, info, budgets)
        if candidate is None:
            statuses[info.name] = status or Status(Code.UNSCHEDULABLE, (NO_VICTIMS,))
            continue
        (fine if candidate.pdb_violations == 0 else violating).append(candidate)
        if fine and len(fine) + len(violating) >= wanted:
            break
    found = fine + violating
    if not found:
        return _no_candidate(statuses, len(nodes))
    return Outcome(pick(found), "", found, statuses)
