"""Node affinity: NodeAffinity (filter) and PreferredNodeAffinity (scorer), as kube-scheduler's NodeAffinity.

The filter requires every `nodeSelector` pair AND one of the required
`nodeSelectorTerms` (terms ORed, expressions ANDed). PodView parsed and validated
them already, so the per-node work is dict look-ups. `addedAffinity` in the args
is kube-scheduler's scheduler-enforced affinity, applied to every pod.
The scorer sums the weights of matching preferred terms and scales so the best
node gets 100 (kube-scheduler's DefaultNormalizeScore, integer maths included).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from extender.model.nodes import NodeInfo
from extender.model.pods import PodView, PreferredTerm
from extender.model.selectors import NodeSelectorTerm, parse_node_selector_term
from extender.policy import enqueue, names
from extender.policy.builtin import arguments
from extender.policy.builtin.base import PrefilteredFilter, PrescoredScorer, default_normalize_int
from extender.policy.cluster_view import ClusterView
from extender.policy.enqueue import EventHint
from extender.policy.plugins import Check, NodeCheck, NodeScore, NormalizeScores, Score
from extender.policy.status import Code, Status

REASON_POD = "node(s) didn't match Pod's node affinity/selector"
REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
REASON_CONFLICT = "pod affinity terms conflict"  # nodeaffinity.errReasonConflict
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"

_POD_MISMATCH = Status(Code.UNRESOLVABLE, (REASON_POD,), "", names.NODE_AFFINITY)
_ENFORCED_MISMATCH = Status(Code.UNRESOLVABLE, (REASON_ENFORCED,), "", names.NODE_AFFINITY)
_CONFLICT = Status(Code.UNRESOLVABLE, (REASON_CONFLICT,), "", names.NODE_AFFINITY)


def named_nodes(terms: tuple[NodeSelectorTerm, ...] | None) -> frozenset[str] | None:
    """The nodes the required terms name by `metadata.name In`, or None when a term names none
    (terms are ORed: then any node may do). NodeAffinity's PreFilter: the fields of a term are
    ANDed (their name sets intersected), the terms ORed (united)."""
    if not terms:
        return None
    found: set[str] = set()
    for term in terms:
        named: frozenset[str] | None = None
        for requirement in term.fields:
            if requirement.key == "metadata.name" and requirement.operator == "In":
                values = cast("frozenset[str]", requirement.values)  # a frozenset for In
                named = values if named is None else named & values
        if named is None:
            return None
        found |= named
    return frozenset(found)


def _matches_any(terms: tuple[NodeSelectorTerm, ...], info: NodeInfo) -> bool:
    labels = info.node.labels
    name = info.node.name
    for term in terms:
        if term.matches(labels, name):
            return True
    return False


_TERM = arguments.parsed(parse_node_selector_term)
# kube-scheduler also takes preferred terms in NodeAffinity's addedAffinity; ours belong to PreferredNodeAffinity.
_NON_EMPTY = "expected a non-empty list of node selector terms"
_TERMS = arguments.schema({
    "nodeSelectorTerms": arguments.items(_TERM, _NON_EMPTY, empty=_NON_EMPTY),
}, lambda required: required["nodeSelectorTerms"])
_REQUIRED_ARGS = arguments.schema({"addedAffinity": arguments.value(arguments.schema({
    REQUIRED: arguments.value(_TERMS.load, default=None, null=None),
}).load, default={REQUIRED: None})})
_WEIGHTED_TERM = arguments.schema({
    "weight": arguments.integer(minimum=1, maximum=100),
    "preference": arguments.value(_TERM),
}, lambda term: PreferredTerm(term["weight"], term["preference"]))
_PREFERRED_ARGS = arguments.schema({"addedAffinity": arguments.value(arguments.schema({
    PREFERRED: arguments.items(_WEIGHTED_TERM.load, "expected a list of weighted terms"),
}).load, default={PREFERRED: ()})})


@dataclass(frozen=True)
class NodeAffinity(PrefilteredFilter):
    """Args: `addedAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [...]}}`."""

    name: ClassVar[str] = names.NODE_AFFINITY
    needs_pods: ClassVar[bool] = False  # reads the node alone (engine.Policy.needs_pods)
    added_terms: tuple[NodeSelectorTerm, ...] | None = None

    def events_to_register(self) -> Sequence[EventHint]:
        """A node added, or one whose labels changed."""
        return (enqueue.NODE_ADDED, enqueue.on(enqueue.NODES, enqueue.UPDATE_NODE_LABEL))

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> NodeAffinity:
        return cls(arguments.load(_REQUIRED_ARGS, args)["addedAffinity"][REQUIRED])

    def prefilter(self, pod: PodView, cluster: ClusterView) -> NodeCheck | Status | None:
        selector = tuple(pod.node_selector.items())
        required = pod.required_terms
        added = self.added_terms
        if not selector and required is None and added is None:
            return None
        named = named_nodes(required)
        if named is not None and not named:
            return _CONFLICT

        def check(info: NodeInfo) -> Status | None:
            if added is not None and not _matches_any(added, info):
                return _ENFORCED_MISMATCH
            if selector:
                labels = info.node.labels
                for key, value in selector:
                    if labels.get(key) != value:
                        return _POD_MISMATCH
            if required is not None and not _matches_any(required, info):
                return _POD_MISMATCH
            return None

        return Check(check, memo_key=(selector, required), only_nodes=named)  # all it reads of the pod


@dataclass(frozen=True)
class PreferredNodeAffinity(PrescoredScorer, NormalizeScores):
    """Args: `addedAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight, preference}]}`."""

    name: ClassVar[str] = names.PREFERRED_NODE_AFFINITY
    needs_pods: ClassVar[bool] = False  # reads the node alone (engine.Policy.needs_pods)
    added_terms: tuple[PreferredTerm, ...] = ()

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> PreferredNodeAffinity:
        return cls(arguments.load(_PREFERRED_ARGS, args)["addedAffinity"][PREFERRED])

    def prescore(self, pod: PodView, cluster: ClusterView, nodes: Sequence[NodeInfo]) -> NodeScore | None:
        terms = tuple((p.weight, p.term) for p in (*pod.preferred_terms, *self.added_terms) if p.weight)
        if not terms:
            return None  # kube-scheduler skips the plugin: every node would score 0

        def score(info: NodeInfo) -> float:
            labels = info.node.labels
            name = info.node.name
            total = 0
            for weight, term in terms:
                if term.matches(labels, name):
                    total += weight
            return total

        return Score(score, memo_key=terms)  # all it reads of the pod (Engine._remembered)

    def normalize_scores(self, scores: Sequence[float]) -> list[float]:
        return default_normalize_int(list(scores))
