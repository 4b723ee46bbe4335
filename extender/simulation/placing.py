"""One pod's steps in simulate: the standalone cycle, preemption carried out at once, reserve,
assume, bind; and, for a pod group's members, the place taken but not bound yet.

The steps the standalone scheduler takes against a real cluster, on simulate's in-memory state:
`schedule_one`, then (no node fits) preemption whose victims are removed at once and the pod tried
again on its nominated node, then the steps after a decision (extender.cycle.steps: Reserve,
assume, PreBind and bind, or give back) with the in-memory binder. A pod of no group is `take`-n and `bind`-ed at once; a pod group's members are all taken
first and bound only when their group completes, else each place is given back (`give_back`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from extender.cluster.memory_binder import MemoryBinder
from extender.cluster.state import ClusterState
from extender.cycle import steps
from extender.cycle.pod import CycleResult, schedule_one
from extender.errors import ClusterError
from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy.decisions import FitError
from extender.policy.engine import Engine, PluginError
from extender.policy.preemption import preempt
from extender.policy.status import Status


@dataclass(frozen=True, slots=True)
class Placement:
    pod: str
    node: str
    score: float | None  # the chosen node's total, 0..100; None when it was the only feasible node
    priority: int = 0
    feasible: int = 0  # how many nodes could have taken it
    victims: tuple[str, ...] = ()  # pods preempted to make room (the node was nominated first)
    group: str = ""  # the pod group (namespace/name) it was placed with; "" for a pod of no group


@dataclass(frozen=True, slots=True)
class Unplaced:
    pod: str
    reason: str  # the "0/N nodes are available: ..." summary, or why it was not attempted
    priority: int = 0
    group: str = ""  # the pod group (namespace/name) it belongs to; "" for a pod of no group
    # The FitErrors `reason` begins with: the pod's, then preemption's (after "preemption: "),
    # for the report to show by part without parsing the text back.
    fit_error: FitError | None = None
    preemption: FitError | None = None


@dataclass(frozen=True, slots=True)
class Taken:
    """A pod placed and assumed on `placement.node`, its reservations held, not bound yet."""

    place: steps.Taken
    placement: Placement

    @property
    def view(self) -> PodView:
        return self.place.pod


@dataclass(frozen=True, slots=True)
class Unfit:
    """No node fits the pod (before any preemption): the cycle's result says why."""

    view: PodView
    result: CycleResult


def _chosen_score(decision: Any, node: str) -> float | None:
    """The chosen node's total; None when the cycle did not score (a single feasible node)."""
    for info, total in zip(decision.scored, decision.totals, strict=True):
        if info.name == node:
            return float(total)
    return None


class Placer:
    """The run's engine, state, binder and random source, and where the next cycle starts filtering
    (the loop resumes where the previous cycle stopped, on large clusters)."""

    def __init__(self, engine: Engine, state: ClusterState, binder: MemoryBinder, rng: random.Random,
                 percentage_of_nodes_to_score: int) -> None:
        self.engine = engine
        self.state = state
        self.binder = binder
        self.rng = rng
        self.percentage = percentage_of_nodes_to_score
        self.start = 0

    def cycle(self, view: PodView, nodes: Sequence[NodeInfo] | None = None) -> CycleResult:
        """`schedule_one` among every node (or `nodes`, a group's topology domain). Raises PluginError."""
        result = schedule_one(self.engine, self.state, view, rng=self.rng, percentage_of_nodes_to_score=self.percentage,
                              start_index=self.start, nodes=nodes)
        self.start = result.next_start_index
        return result

    def take(self, view: PodView, *, nodes: Sequence[NodeInfo] | None = None,
             preempting: bool = True, group: str = "") -> Taken | Unfit | Unplaced:
        """Place `view` and assume it. Unfit: no node fits and `preempting` is off (the caller
        preempts later, as a group cycle does); Unplaced: it stays pending, with the reason."""
        try:
            result = self.cycle(view, nodes)
        except PluginError as exc:
            return Unplaced(view.key, f"policy plugin failed: {exc}", view.priority, group)
        if not result.node:
            if not preempting:
                return Unfit(view, result)
            return self.preempt(view, result, group=group)
        return self._reserve(view, result, (), group)

    def preempt(self, view: PodView, result: CycleResult, *, group: str = "") -> Taken | Unplaced:
        """The live scheduler's preemption, carried out at once in memory: the victims are deleted,
        the pod nominated, and tried again (on its nominated node first)."""
        decision = result.decision
        state = self.state
        outcome = preempt(self.engine.prepare(view, state), decision, state.all_node_infos(), state,
                          state.disruption_budgets(), rng=self.rng)
        candidate = outcome.candidate
        if candidate is None:
            fit_error = decision.fit_error()
            return Unplaced(view.key, f"{fit_error} preemption: {outcome.message}", view.priority, group,
                            fit_error, outcome.fit_error)
        state.nominator.nominate(view, candidate.node)
        for victim in candidate.victims:
            state.delete_pod(victim.key)
        try:
            retried = schedule_one(self.engine, state, view, rng=self.rng, percentage_of_nodes_to_score=self.percentage,
                                   start_index=self.start)
        except PluginError as exc:
            state.nominator.clear(view.key)
            return Unplaced(view.key, f"policy plugin failed: {exc}", view.priority, group)
        victims = tuple(v.key for v in candidate.victims)
        if retried.node is None:
            state.nominator.clear(view.key)
            fit_error = retried.decision.fit_error()
            return Unplaced(view.key, f"{fit_error} (after preempting {', '.join(victims)})", view.priority, group,
                            fit_error)
        return self._reserve(view, retried, victims, group)

    def _reserve(self, view: PodView, result: CycleResult, victims: tuple[str, ...], group: str) -> Taken | Unplaced:
        node = result.node
        assert node is not None
        taken = steps.take(self.engine, self.state, self.state, view, node)
        if isinstance(taken, Status):
            return Unplaced(view.key, f"node {node} refused at reserve: {taken.reason}", view.priority, group)
        placement = Placement(view.key, node, _chosen_score(result.decision, node), view.priority,
                              len(result.decision.feasible), victims, group)
        return Taken(taken, placement)

    def bind(self, taken: Taken) -> Placement | Unplaced:
        """The reservations' actions and the bind, in memory; a failure gives the place back."""
        place = taken.place
        try:
            steps.prebind(self.binder, place.reservations)
            steps.bind(self.binder, place.pod, place.node, place.reservations)
        except ClusterError as exc:
            self.give_back(taken)
            return Unplaced(place.pod.key, f"bind failed: {exc}", place.pod.priority, taken.placement.group)
        return taken.placement

    def give_back(self, taken: Taken) -> None:
        """Undo `take`: the reservations released, the assumption forgotten (the pod is pending again)."""
        steps.give_back(self.state, taken.place)
