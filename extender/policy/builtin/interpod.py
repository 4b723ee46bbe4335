"""InterPodAffinity: required pod affinity and anti-affinity (filter), preferred ones (scorer).

The same semantics as kube-scheduler v1.36's InterPodAffinity plugin:

* the incoming pod's required affinity: on each node, every term's topology domain must
  hold a pod matching *all* the terms; a term whose domain label the node lacks refuses
  it. The first pod of a group is the exception: when no pod anywhere matches all the
  terms and the pod matches them itself, any node with the labels will do;
* its required anti-affinity: no matching pod in a term's domain;
* symmetry: no pod already placed whose required anti-affinity matches the incoming pod
  in the same domain;
* scoring: the pod's preferred terms against every placed pod (+/- weight), placed
  pods' preferred terms and required affinity terms (`hardPodAffinityWeight`) against
  the pod, summed per topology domain, then min-max normalised.

kube-scheduler walks every pod of every node for this; here the cluster view keeps the
counts per topology domain up to date as pods come and go (`matching_counts`, and the
affinity groups' `counts`; see extender/cluster/topologycounts.py), so a cycle copies and
adds a few dicts: O(domains with matching pods), not O(pods). Affinity refusals are
unresolvable (preemption cannot make a missing pod appear), anti-affinity refusals are
not (evicting the matching pods may help).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

from extender.model.affinity import AffinityTerm, Counts, WeightedTerm, count_on
from extender.model.nodes import NodeInfo, NodeView
from extender.model.pods import PodView
from extender.model.records import PodRecord
from extender.model.selectors import NOTHING
from extender.policy import enqueue, names
from extender.policy.builtin import arguments
from extender.policy.builtin.base import TakesNoArgs
from extender.policy.cluster_view import EMPTY_CLUSTER, ClusterView, PodChange
from extender.policy.enqueue import EventHint
from extender.policy.plugins import FilterPlugin, PreFilterPlugin, PreScorePlugin, ScorePlugin
from extender.policy.status import Code, Status

REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

_SHOWN = 3  # pods named in a detail line


def resolve_namespaces(term: AffinityTerm, cluster: ClusterView) -> AffinityTerm:
    """The incoming pod's term with its namespaceSelector turned into names, as
    kube-scheduler's mergeAffinityTermNamespacesIfNotEmpty does at PreFilter."""
    if term.namespace_selector.nothing:
        return term
    return term.with_namespaces(cluster.namespaces_matching(term.namespace_selector))


def _merge(counts: Counts, key: str, values: dict[str, int]) -> None:
    """Add `values` (a domain -> pods dict the caller may give away) to key's domains."""
    if not values:
        return
    mine = counts.get(key)
    if mine is None:
        counts[key] = values
        return
    for value, n in values.items():
        mine[value] = mine.get(value, 0) + n


def _occupied(values: dict[str, int]) -> frozenset[str]:
    if min(values.values(), default=1) > 0:  # always, but after RemovePod of a pod never counted
        return frozenset(values)
    return frozenset(value for value, n in values.items() if n > 0)


def _keys(terms: Sequence[AffinityTerm]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(t.topology_key for t in terms))


def _matches_all(terms: Sequence[AffinityTerm], namespace: str, labels: Mapping[str, str]) -> bool:
    """podMatchesAllAffinityTerms: false for no terms, as in kube-scheduler."""
    if not terms:
        return False
    for term in terms:
        if not term.matches(namespace, labels):
            return False
    return True


def _node_labels(cluster: ClusterView, node: str) -> Mapping[str, str] | None:
    info = cluster.node_info(node)
    return info.node.labels if info is not None else None


def _copy(counts: Counts) -> Counts:
    return {key: dict(values) for key, values in counts.items()}


@dataclass
class _Counts:
    """kube-scheduler's preFilterState: pods per topology domain, counted three ways. A pod
    counts once per term (existing_anti, anti) or once per distinct key (affinity); only
    which domains are above zero matters."""

    existing_anti: Counts  # placed pods whose required anti-affinity matches the pod
    affinity: Counts  # placed pods matching all of the pod's required affinity terms
    anti: Counts  # placed pods matching one of the pod's required anti-affinity terms

    def copy(self) -> _Counts:
        return _Counts(_copy(self.existing_anti), _copy(self.affinity), _copy(self.anti))


class AffinityCheck:
    """The per-node check of one pod, with the counts it was prepared with."""

    def __init__(self, pod: PodView, required: tuple[AffinityTerm, ...], anti: tuple[AffinityTerm, ...],
                 counts: _Counts, namespace_labels: Mapping[str, str] | None, cluster: ClusterView) -> None:
        self.pod = pod
        self.required = required
        self.anti = anti
        self.counts = counts
        self.namespace_labels = namespace_labels
        self.cluster = cluster
        self.self_match = _matches_all(required, pod.namespace, pod.labels)
        # What the per-node check reads, keyed by topology key then value (no tuple per lookup).
        self._affinity = counts.affinity
        self._required_keys = _keys(required)
        # Anti-affinity only asks whether a domain holds a pod: the domains above zero, as sets.
        self._anti = tuple((key, _occupied(counts.anti[key])) for key in _keys(anti) if key in counts.anti)
        self._existing = tuple((key, _occupied(values)) for key, values in counts.existing_anti.items())

    def __call__(self, info: NodeInfo) -> Status | None:
        labels = info.node.labels
        if self._required_keys:
            affinity = self._affinity
            pods_exist = True
            for key in self._required_keys:
                value = labels.get(key)
                if value is None:
                    return self._refuse(Code.UNRESOLVABLE, REASON_AFFINITY, info)
                values = affinity.get(key)
                if values is None or values.get(value, 0) <= 0:
                    pods_exist = False
            if not pods_exist and not (not affinity and self.self_match):
                return self._refuse(Code.UNRESOLVABLE, REASON_AFFINITY, info)
        for key, occupied in self._anti:
            if labels.get(key) in occupied:
                return self._refuse(Code.UNSCHEDULABLE, REASON_ANTI_AFFINITY, info)
        for key, occupied in self._existing:
            if labels.get(key) in occupied:
                return self._refuse(Code.UNSCHEDULABLE, REASON_EXISTING_ANTI_AFFINITY, info)
        return None

    def updated(self, changes: Sequence[PodChange]) -> AffinityCheck:
        """The check with pods added or removed (kube-scheduler's AddPod/RemovePod)."""
        counts = self.counts.copy()
        pod = self.pod
        for change in changes:
            other, labels, delta = change.pod, change.node.labels, change.delta
            if other.affinity is not None:
                count_on(counts.existing_anti, [t.topology_key for t in other.affinity.required_anti
                                              if t.matches(pod.namespace, pod.labels, self.namespace_labels)],
                       labels, delta)
            if _matches_all(self.required, other.namespace, other.labels):
                count_on(counts.affinity, self._required_keys, labels, delta)
            count_on(counts.anti, [t.topology_key for t in self.anti if t.matches(other.namespace, other.labels)],
                   labels, delta)
        return AffinityCheck(pod, self.required, self.anti, counts, self.namespace_labels, self.cluster)

    def _refuse(self, code: Code, reason: str, info: NodeInfo) -> Status:
        return Status(code, (reason,), partial(self.explain, reason, info.node), names.INTER_POD_AFFINITY)

    # ---- explain: which pods, which domains (only computed when someone reads it) -----------

    def explain(self, reason: str, node: NodeView) -> str:
        if reason == REASON_AFFINITY:
            return self._explain_affinity(node)
        if reason == REASON_ANTI_AFFINITY:
            return self._explain_pods(node, [(t, self.cluster.matching_pods(t.namespaces, t.selector))
                                             for t in self.anti], "anti-affinity with")
        return self._explain_existing(node)

    def _explain_affinity(self, node: NodeView) -> str:
        missing = [t.topology_key for t in self.required if t.topology_key not in node.labels]
        if missing:
            return f"node has no label {', '.join(sorted(set(missing)))} (the topologyKey of a required affinity term)"
        domains = ", ".join(f"{t.topology_key}={node.labels[t.topology_key]}" for t in self.required)
        return f"no pod matching every required affinity term in {domains}"

    def _same_domain(self, record: PodRecord, key: str, node: NodeView) -> bool:
        labels = _node_labels(self.cluster, record.node_name)
        return labels is not None and labels.get(key) == node.labels.get(key)

    def _explain_pods(self, node: NodeView, found: list[tuple[AffinityTerm, list[PodRecord]]], what: str) -> str:
        shown = []
        for term, records in found:
            for record in records:
                if record.key != self.pod.key and self._same_domain(record, term.topology_key, node):
                    shown.append(f"{record.key} on {record.node_name}")
        if not shown:
            return what + " a pod in this node's domain"
        more = f" and {len(shown) - _SHOWN} more" if len(shown) > _SHOWN else ""
        return f"{what} {', '.join(shown[:_SHOWN])}{more}"

    def _explain_existing(self, node: NodeView) -> str:
        found = []
        for group in self.cluster.affinity_groups():
            for term in group.terms.required_anti:
                if term.matches(self.pod.namespace, self.pod.labels, self.namespace_labels):
                    found.append((term, group.pods()))
        return self._explain_pods(node, found, "the anti-affinity of")


def _existing_anti_counts(pod: PodView, cluster: ClusterView, namespace_labels: Mapping[str, str] | None
                          ) -> Counts:
    """The placed pods whose required anti-affinity terms match the pod, per domain of each
    matching term's key (a pod counts once per matching term)."""
    counts: Counts = {}
    for group in cluster.affinity_groups():
        for term in group.terms.required_anti:
            if term.matches(pod.namespace, pod.labels, namespace_labels):
                _merge(counts, term.topology_key, group.counts(term.topology_key))
    return counts


def _incoming_counts(required: tuple[AffinityTerm, ...], anti: tuple[AffinityTerm, ...],
                     cluster: ClusterView) -> tuple[Counts, Counts]:
    affinity = cluster.matching_counts(required, _keys(required)) if required else {}
    anti_counts: Counts = {}
    for term in anti:
        for key, values in cluster.matching_counts((term,), (term.topology_key,)).items():
            _merge(anti_counts, key, values)
    return affinity, anti_counts


def _all_match(terms: tuple[AffinityTerm, ...], namespace: str, labels: Mapping[str, str]) -> bool:
    """podMatchesAllAffinityTerms; a namespace selector (whose labels the hint does not read)
    counts as a match, so the answer errs towards a retry."""
    return bool(terms) and all(
        term.namespace_selector is not NOTHING and term.selector.matches(labels)
        or term.matches(namespace, labels) for term in terms)


def _repelled(pod: PodView, deleted: PodRecord) -> bool:
    """isSchedulableAfterPodChange for a deletion: the deleted pod matched the pod's required
    anti-affinity, or the pod matched the deleted pod's."""
    mine = pod.affinity.required_anti if pod.affinity is not None else ()
    if _all_match(mine, deleted.namespace, deleted.labels):
        return True
    theirs = deleted.affinity.required_anti if deleted.affinity is not None else ()
    return _all_match(theirs, pod.namespace, pod.labels)


def _attracts(pod: PodView, added: PodRecord) -> bool:
    """isSchedulableAfterPodChange for an added pod: it matches every term of the pod's required
    affinity (one pod must satisfy them all)."""
    return pod.affinity is not None and _all_match(pod.affinity.required, added.namespace, added.labels)


_EVENTS = (enqueue.NODE_ADDED, enqueue.on(enqueue.NODES, enqueue.UPDATE_NODE_LABEL),
           enqueue.on(enqueue.PODS, enqueue.ADD, hint=_attracts), enqueue.on(enqueue.PODS, enqueue.DELETE, hint=_repelled),
           enqueue.on(enqueue.PODS, enqueue.UPDATE_POD_LABEL), enqueue.on(enqueue.NAMESPACES))


@dataclass(frozen=True)
class InterPodAffinity(TakesNoArgs, PreFilterPlugin, FilterPlugin):
    """Filter. No args."""

    name: ClassVar[str] = names.INTER_POD_AFFINITY

    def events_to_register(self) -> Sequence[EventHint]:
        """A node added or relabelled, a namespace changed (namespace selectors), a placed pod
        relabelled, placed where it satisfies the pod's affinity, or deleted where it repelled."""
        return _EVENTS

    def prefilter(self, pod: PodView, cluster: ClusterView) -> AffinityCheck | None:
        terms = pod.affinity
        required = tuple(resolve_namespaces(t, cluster) for t in terms.required) if terms else ()
        anti = tuple(resolve_namespaces(t, cluster) for t in terms.required_anti) if terms else ()
        namespace_labels = cluster.namespace_labels(pod.namespace)
        existing = _existing_anti_counts(pod, cluster, namespace_labels)
        if not existing and not required and not anti:
            return None
        affinity, anti_counts = _incoming_counts(required, anti, cluster)
        return AffinityCheck(pod, required, anti, _Counts(existing, affinity, anti_counts), namespace_labels, cluster)

    def filter(self, pod: PodView, node: NodeInfo, cluster: ClusterView = EMPTY_CLUSTER) -> Status | None:
        check = self.prefilter(pod, cluster)
        return None if check is None else check(node)


# ---- scoring -----------------------------------------------------------------------------


Weighted = tuple[str, dict[str, int], int]  # (topology key, pods per domain, weight per pod)
_MERGE_OVER = 4  # terms on one key beyond which they are summed into one table up front


def _tables(weighted: list[Weighted]) -> tuple[Weighted, ...]:
    """The weighted counts as the per-node score reads them. Each is looked up per node, which
    costs less than summing thousands of domains per pod, unless many share a key: those are
    summed into one table (weight 1)."""
    by_key: dict[str, list[Weighted]] = {}
    for item in weighted:
        by_key.setdefault(item[0], []).append(item)
    tables: list[Weighted] = []
    for key, items in by_key.items():
        if len(items) <= _MERGE_OVER:
            tables += items
            continue
        total: dict[str, int] = {}
        for _, values, weight in items:
            for value, n in values.items():
                total[value] = total.get(value, 0) + n * weight
        tables.append((key, total, 1))
    return tuple(tables)


class AffinityScore:
    """Per-node sum of the weighted pods in the node's domains; min-max normalised over the
    scored nodes. `tables` hold only domains with pods (an empty tuple never gets here)."""

    def __init__(self, tables: tuple[Weighted, ...]) -> None:
        self.tables = tables

    def __call__(self, info: NodeInfo) -> float:
        labels = info.node.labels
        total = 0
        for key, values, weight in self.tables:
            value = labels.get(key)
            if value is not None:
                pods = values.get(value)
                if pods:
                    total += pods * weight
        return total

    def normalize(self, scores: Sequence[float], nodes: Sequence[NodeInfo] = ()) -> list[float]:
        if not self.tables or not scores:
            return [0.0] * len(scores)
        low, high = min(scores), max(scores)
        spread = high - low
        if spread <= 0:
            return [0.0] * len(scores)
        return [float(int(100 * (s - low) / spread)) for s in scores]


_PREFERRED_ARGS = arguments.schema({
    "hardPodAffinityWeight": arguments.integer(minimum=0, maximum=100, default=1),
    "ignorePreferredTermsOfExistingPods": arguments.boolean(default=False),
})


@dataclass(frozen=True)
class PreferredInterPodAffinity(PreScorePlugin, ScorePlugin):
    """Scorer. Args `hardPodAffinityWeight` (0..100, default 1) and
    `ignorePreferredTermsOfExistingPods` (default false), as kube-scheduler's InterPodAffinityArgs."""

    name: ClassVar[str] = names.INTER_POD_AFFINITY
    hard_pod_affinity_weight: int = 1
    ignore_preferred_terms_of_existing_pods: bool = False

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> PreferredInterPodAffinity:
        args = arguments.load(_PREFERRED_ARGS, args)
        return cls(args["hardPodAffinityWeight"], args["ignorePreferredTermsOfExistingPods"])

    def prescore(self, pod: PodView, cluster: ClusterView, nodes: Sequence[NodeInfo]) -> AffinityScore | None:
        terms = pod.affinity
        preferred: tuple[WeightedTerm, ...] = terms.preferred if terms else ()
        preferred_anti: tuple[WeightedTerm, ...] = terms.preferred_anti if terms else ()
        has_constraints = bool(preferred or preferred_anti)
        if self.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return None
        scores: list[Weighted] = []
        for weighted, sign in [*((w, 1) for w in preferred), *((w, -1) for w in preferred_anti)]:
            term = resolve_namespaces(weighted.term, cluster)
            for key, values in cluster.matching_counts((term,), (term.topology_key,)).items():
                scores.append((key, values, sign * weighted.weight))
        self._existing_terms(pod, cluster, scores)
        if not scores:
            return None  # kube-scheduler's Skip: no term matched anything on a labelled node
        return AffinityScore(_tables(scores))

    def _existing_terms(self, pod: PodView, cluster: ClusterView, scores: list[Weighted]) -> None:
        """The placed pods' terms against the pod: required affinity (hard weight) and preferred."""
        namespace_labels = cluster.namespace_labels(pod.namespace)
        for group in cluster.affinity_groups():
            terms = group.terms
            weighted: list[tuple[AffinityTerm, int]] = []
            if self.hard_pod_affinity_weight > 0:
                weighted += [(t, self.hard_pod_affinity_weight) for t in terms.required]
            if not self.ignore_preferred_terms_of_existing_pods:
                weighted += [(w.term, w.weight) for w in terms.preferred]
                weighted += [(w.term, -w.weight) for w in terms.preferred_anti]
            for term, weight in weighted:
                if term.matches(pod.namespace, pod.labels, namespace_labels):
                    values = group.counts(term.topology_key)
                    if values:
                        scores.append((term.topology_key, values, weight))

    def score(self, pod: PodView, node: NodeInfo, cluster: ClusterView = EMPTY_CLUSTER) -> float:
        fn = self.prescore(pod, cluster, [node])
        return 0 if fn is None else fn(node)

