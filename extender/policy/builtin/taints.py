"""Taints: TaintToleration (filter) and TaintPreferNoSchedule (scorer), as kube-scheduler's TaintToleration.

The filter refuses a node with a NoSchedule or NoExecute taint the pod does not
tolerate (PreferNoSchedule only affects the score); the refusal is unresolvable,
as preemption cannot remove a taint. The reason is kube-scheduler's fixed phrase
(v1.33+ stopped naming the taint in it so that nodes aggregate); the taint itself
goes in the detail. The scorer counts PreferNoSchedule taints the pod does not
tolerate and reverse-normalises, so the node with the fewest gets 100.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from extender.model.nodes import NodeInfo, Taint
from extender.model.pods import PodView, Toleration
from extender.policy import enqueue, names
from extender.policy.builtin.base import (
    PrefilteredFilter,
    PrescoredScorer,
    TakesNoArgs,
    default_normalize_int,
)
from extender.policy.cluster_view import ClusterView
from extender.policy.enqueue import EventHint
from extender.policy.plugins import Check, NodeCheck, NodeScore, NormalizeScores, Score
from extender.policy.status import Code, Status

REASON_UNTOLERATED = "node(s) had untolerated taint(s)"
_FILTER_EFFECTS = ("NoSchedule", "NoExecute")


@lru_cache(maxsize=4096)
def _untolerated(key: str, value: str, effect: str) -> Status:
    # One Status per distinct taint, shared by every node and request that hits it.
    detail = f"untolerated taint {{{key}: {value}}} (effect {effect})"
    return Status(Code.UNRESOLVABLE, (REASON_UNTOLERATED,), detail, names.TAINT_TOLERATION)


def untolerated_taint(tolerations: Sequence[Toleration], taints: Sequence[Taint]) -> Taint | None:
    """The first NoSchedule/NoExecute taint no toleration tolerates (FindMatchingUntoleratedTaint
    with DoNotScheduleTaintsFilterFunc), or None."""
    for taint in taints:
        if taint.effect not in _FILTER_EFFECTS:
            continue
        if not any(t.tolerates(taint.key, taint.value, taint.effect) for t in tolerations):
            return taint
    return None


@dataclass(frozen=True)
class TaintToleration(TakesNoArgs, PrefilteredFilter):
    """No args."""

    name: ClassVar[str] = names.TAINT_TOLERATION
    needs_pods: ClassVar[bool] = False  # reads the node alone (engine.Policy.needs_pods)

    def events_to_register(self) -> Sequence[EventHint]:
        """A node added, or one whose taints changed."""
        return (enqueue.NODE_ADDED, enqueue.on(enqueue.NODES, enqueue.UPDATE_NODE_TAINT))

    def prefilter(self, pod: PodView, cluster: ClusterView) -> NodeCheck | None:
        tolerations = tuple(t for t in pod.tolerations if t.effect in ("", *_FILTER_EFFECTS))
        if any(not t.key and t.operator == "Exists" and not t.effect for t in tolerations):
            return None  # tolerates every taint: nothing to check on any node

        def check(info: NodeInfo) -> Status | None:
            taints = info.node.taints
            if not taints:
                return None
            for taint in taints:
                effect = taint.effect
                if effect != "NoSchedule" and effect != "NoExecute":
                    continue
                key, value = taint.key, taint.value
                for toleration in tolerations:
                    if toleration.tolerates(key, value, effect):
                        break
                else:
                    return _untolerated(key, value, effect)
            return None

        return Check(check, memo_key=tolerations)  # all it reads of the pod (FilterCycle.run)


@dataclass(frozen=True)
class TaintPreferNoSchedule(TakesNoArgs, PrescoredScorer, NormalizeScores):
    """No args. Raw score: the number of intolerable PreferNoSchedule taints."""

    name: ClassVar[str] = names.TAINT_PREFER_NO_SCHEDULE
    needs_pods: ClassVar[bool] = False  # reads the node alone (engine.Policy.needs_pods)

    def prescore(self, pod: PodView, cluster: ClusterView, nodes: Sequence[NodeInfo]) -> NodeScore:
        tolerations = tuple(t for t in pod.tolerations if t.effect in ("", "PreferNoSchedule"))

        def score(info: NodeInfo) -> float:
            taints = info.node.taints
            if not taints:
                return 0
            count = 0
            for taint in taints:
                if taint.effect != "PreferNoSchedule":
                    continue
                if not any(t.tolerates(taint.key, taint.value, "PreferNoSchedule") for t in tolerations):
                    count += 1
            return count

        return Score(score, memo_key=tolerations)  # all it reads of the pod (Engine._remembered)

    def normalize_scores(self, scores: Sequence[float]) -> list[float]:
        """Fewer intolerable taints is better: kube-scheduler's reversed DefaultNormalizeScore."""
        return default_normalize_int(list(scores), reverse=True)
