"""PodTopologySpread: `DoNotSchedule` constraints (filter) and `ScheduleAnyway` ones (scorer).

The semantics of kube-scheduler v1.36's PodTopologySpread:

* domains are the values of a constraint's `topologyKey` on the nodes that have every
  constraint's key and pass its inclusion policies (`nodeAffinityPolicy` Honor: the pod's
  nodeSelector and required node affinity; `nodeTaintsPolicy` Honor: its tolerations);
* a domain counts the placed, not terminating pods of the pod's namespace that the
  selector matches (`matchLabelKeys` merged); an empty selector counts nothing;
* filter: a node without a constraint's key is refused, unresolvably; otherwise
  `count(domain) + (1 if the pod matches its own selector) - min(count over domains)`
  must not exceed `maxSkew`, where the minimum is 0 while there are fewer domains than
  `minDomains`;
* score: per constraint, `count * log(domains + 2) + maxSkew - 1` (hostname: the node's
  own count, weighted by log(nodes + 2)), summed, rounded, and reverse-normalised so the
  emptiest node gets 100; nodes lacking a key are ignored (score 0).

Pods without constraints of their own get kube-scheduler's system defaults (hostname
maxSkew 3, zone maxSkew 5, ScheduleAnyway) when they belong to a workload. kube-scheduler
builds that default selector from the Services, ReplicaSets, StatefulSets and
ReplicationControllers selecting the pod; this plugin approximates it by the pod's
controller: the pods counted are those with the same controlling ReplicaSet, StatefulSet
or ReplicationController. Services are not watched, so a pod selected only by a Service
gets no default spreading (see docs/plugins.md).

Which nodes form the domains depends only on node labels and taints, so it is computed
once per node generation and pod shape (`ClusterView.memo`); counting uses the label
index, so a cycle costs O(matching pods), not O(all pods).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

from extender.model.nodes import NodeInfo, NodeView
from extender.model.pods import PodView
from extender.model.records import PodRecord
from extender.model.selectors import LabelSelector
from extender.model.spread import (
    DO_NOT_SCHEDULE,
    SCHEDULE_ANYWAY,
    SYSTEM_DEFAULT_CONSTRAINTS,
    WHEN_UNSATISFIABLE,
    SpreadConstraint,
)
from extender.model.wellknown import HOSTNAME
from extender.policy import enqueue, names
from extender.policy.builtin import arguments
from extender.policy.builtin.taints import untolerated_taint
from extender.policy.cluster_view import EMPTY_CLUSTER, ClusterView, PodChange
from extender.policy.enqueue import EventHint
from extender.policy.plugins import FilterPlugin, PreFilterPlugin, PreScorePlugin, ScorePlugin
from extender.policy.status import Code, Status

REASON_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
REASON_MISSING_LABEL = REASON_NOT_MATCH + " (missing required label)"
DEFAULT_OWNER_KINDS = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})
SYSTEM = "System"
LIST = "List"
_MAX_INT32 = 2**31 - 1


@dataclass(frozen=True, slots=True)
class _Rule:
    """A constraint as the plugin evaluates it: a label selector, or the default selector's
    stand-in, the pod's controller (`owner`)."""

    constraint: SpreadConstraint
    owner: tuple[str, str] | None = None

    @property
    def key(self) -> str:
        return self.constraint.topology_key

    def counts_nothing(self) -> bool:
        return self.owner is None and self.constraint.selector.empty

    def selects(self, labels: Mapping[str, str], owner: tuple[str, str] | None) -> bool:
        if self.owner is not None:
            return owner == self.owner
        return self.constraint.selector.matches(labels)

    def per_node(self, cluster: ClusterView, namespace: str) -> dict[str, int]:
        """The placed, not terminating pods of `namespace` the rule counts, per node name (kept
        up to date by the cluster state: a cycle sums node counts instead of walking pods)."""
        if self.counts_nothing():
            return {}
        if self.owner is not None:
            return cluster.spread_counts(namespace, None, self.owner)
        return cluster.spread_counts(namespace, self.constraint.selector)


def _node_included(rule: _Rule, pod: PodView, node: NodeView) -> bool:
    """matchNodeInclusionPolicies: the pod's required node affinity and/or its tolerations."""
    constraint = rule.constraint
    if constraint.honor_node_affinity:
        for key, value in pod.node_selector.items():
            if node.labels.get(key) != value:
                return False
        terms = pod.required_terms
        if terms is not None and not any(term.matches(node.labels, node.name) for term in terms):
            return False
    return not (constraint.honor_node_taints and untolerated_taint(pod.tolerations, node.taints))


def _has_keys(labels: Mapping[str, str], rules: Sequence[_Rule]) -> bool:
    for rule in rules:
        if rule.key not in labels:
            return False
    return True


def _eligibility(pod: PodView, rules: Sequence[_Rule], cluster: ClusterView,
                 require_all_keys: bool) -> list[dict[str, str]]:
    """Per rule: node name -> its domain, for the nodes whose pods count towards the rule."""

    def compute() -> list[dict[str, str]]:
        result: list[dict[str, str]] = [{} for _ in rules]
        for info in cluster.all_node_infos():
            node = info.node
            if require_all_keys and not _has_keys(node.labels, rules):
                continue
            for i, rule in enumerate(rules):
                if _node_included(rule, pod, node):
                    result[i][node.name] = node.labels.get(rule.key, "")
        return result

    shape = tuple((r.key, r.constraint.honor_node_affinity, r.constraint.honor_node_taints) for r in rules)
    honors_affinity = any(r.constraint.honor_node_affinity for r in rules)
    honors_taints = any(r.constraint.honor_node_taints for r in rules)
    key = ("PodTopologySpread", shape, require_all_keys,
           tuple(sorted(pod.node_selector.items())) if honors_affinity else (),
           pod.required_terms if honors_affinity else None,
           pod.tolerations if honors_taints else ())
    return cluster.memo(key, compute)  # type: ignore[no-any-return]  # what compute() made, or its cached copy


def _bump(counts: dict[str, int], value: str, delta: int) -> None:
    counts[value] = counts.get(value, 0) + delta


_NOT_MATCH = (REASON_NOT_MATCH,)


class SpreadCheck:
    """The filter's per-node check: per rule, the count of every domain and their minimum."""

    def __init__(self, pod: PodView, rules: tuple[_Rule, ...], counts: list[dict[str, int]]) -> None:
        self.pod = pod
        self.rules = rules
        self.counts = counts
        # Per rule, what the check reads for every node: (key, counts, skew allowance).
        # allowance = maxSkew + min - self: a domain fails when its count exceeds it.
        plan = []
        for rule, domains in zip(rules, counts, strict=True):
            low = min(domains.values()) if domains else _MAX_INT32
            minimum = 0 if len(domains) < rule.constraint.min_domains else low
            self_match = 1 if rule.selects(pod.labels, pod.owner) else 0
            plan.append((rule.key, domains, rule.constraint.max_skew + minimum - self_match, rule, minimum, self_match))
        self._plan = tuple(plan)

    def __call__(self, info: NodeInfo) -> Status | None:
        labels = info.node.labels
        for key, domains, allowance, rule, minimum, self_match in self._plan:
            value = labels.get(key)
            if value is None:
                return Status(Code.UNRESOLVABLE, (REASON_MISSING_LABEL,),
                              f"node has no label {key}", names.POD_TOPOLOGY_SPREAD)
            count = domains.get(value, 0)
            if count > allowance:  # the numbers are written only if read: most refusals never are
                return Status(Code.UNSCHEDULABLE, _NOT_MATCH,
                              partial(_detail, rule, value, count, minimum, self_match), names.POD_TOPOLOGY_SPREAD)
        return None

    def updated(self, changes: Sequence[PodChange]) -> SpreadCheck:
        """The counts with pods added or removed (kube-scheduler's AddPod/RemovePod)."""
        counts = [dict(c) for c in self.counts]
        pod = self.pod
        for change in changes:
            other, node = change.pod, change.node
            if other.namespace != pod.namespace or not _has_keys(node.labels, self.rules):
                continue
            for i, rule in enumerate(self.rules):
                if rule.selects(other.labels, other.owner) and _node_included(rule, pod, node):
                    _bump(counts[i], node.labels[rule.key], change.delta)
        return SpreadCheck(pod, self.rules, counts)


def _detail(rule: _Rule, value: str, count: int, minimum: int, self_match: int) -> str:
    c = rule.constraint
    plus = " + this pod" if self_match else ""
    return (f"{c.topology_key}={value}: {count} matching pod(s){plus}, min {minimum} across domains, "
            f"maxSkew {c.max_skew}")


def _rules(pod: PodView, action: str, defaults: tuple[SpreadConstraint, ...]) -> tuple[_Rule, ...]:
    """The pod's constraints of `action`, or the default constraints when it has none."""
    if pod.spread:
        return tuple(_Rule(c) for c in pod.spread if c.when_unsatisfiable == action)
    owner = pod.owner
    if owner is None or owner[0] not in DEFAULT_OWNER_KINDS:
        return ()
    return tuple(_Rule(c, owner) for c in defaults if c.when_unsatisfiable == action)


SYSTEM_DEFAULTS = tuple(SpreadConstraint(skew, key, SCHEDULE_ANYWAY, LabelSelector(()))
                        for key, skew in SYSTEM_DEFAULT_CONSTRAINTS)


def _defaulting(args: dict[str, Any]) -> tuple[tuple[SpreadConstraint, ...], bool]:
    """kube-scheduler's PodTopologySpreadArgs: `defaultingType` System (default) or List."""
    if args["defaultingType"] == LIST:
        return args["defaultConstraints"], False
    if args["defaultConstraints"]:
        raise arguments.Invalid({"defaultConstraints": ["must be empty when defaultingType is System"]})
    return SYSTEM_DEFAULTS, True


_CONSTRAINT = arguments.schema({
    "maxSkew": arguments.integer(minimum=1, maximum=_MAX_INT32),
    "topologyKey": arguments.string(),
    "whenUnsatisfiable": arguments.one_of(WHEN_UNSATISFIABLE, "must be DoNotSchedule or ScheduleAnyway",
                                          default=DO_NOT_SCHEDULE),
}, lambda c: SpreadConstraint(c["maxSkew"], c["topologyKey"], c["whenUnsatisfiable"], LabelSelector(())))
_ARGS = arguments.schema({
    "defaultingType": arguments.one_of((SYSTEM, LIST), "must be System or List", default=SYSTEM),
    "defaultConstraints": arguments.items(_CONSTRAINT.load, "expected a list", default=()),
}, _defaulting)


@dataclass(frozen=True)
class _SpreadPlugin:
    """The args the filter and the scorer share (kube-scheduler's PodTopologySpreadArgs)."""

    name: ClassVar[str] = names.POD_TOPOLOGY_SPREAD
    defaults: tuple[SpreadConstraint, ...] = SYSTEM_DEFAULTS
    system_defaulted: bool = True

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> Any:
        return cls(*arguments.load(_ARGS, args))


def _counted(pod: PodView, other: PodRecord) -> bool:
    """PodTopologySpread.isSchedulableAfterPodChange: a pod of the same namespace that a hard
    constraint's selector counts. Without hard constraints of its own the pod was refused by
    defaults this hint does not rebuild: yes."""
    if other.namespace != pod.namespace:
        return False
    hard = [c for c in pod.spread if c.when_unsatisfiable == DO_NOT_SCHEDULE]
    return not hard or any(c.selector.matches(other.labels) for c in hard)


_EVENTS = (enqueue.NODE_ADDED, enqueue.on(enqueue.NODES, enqueue.UPDATE_NODE_LABEL, enqueue.UPDATE_NODE_TAINT),
           enqueue.on(enqueue.PODS, enqueue.ADD, enqueue.DELETE, hint=_counted), enqueue.on(enqueue.PODS, enqueue.UPDATE_POD_LABEL))


@dataclass(frozen=True)
class PodTopologySpread(_SpreadPlugin, PreFilterPlugin, FilterPlugin):
    """Filter for `DoNotSchedule` constraints. Args: `defaultingType`, `defaultConstraints`."""

    def events_to_register(self) -> Sequence[EventHint]:
        """A node added, relabelled or tainted, a placed pod relabelled, and a pod placed or
        deleted that a hard constraint counts."""
        return _EVENTS

    def prefilter(self, pod: PodView, cluster: ClusterView) -> SpreadCheck | None:
        rules = _rules(pod, DO_NOT_SCHEDULE, self.defaults)
        if not rules:
            return None
        eligible = _eligibility(pod, rules, cluster, True)
        counts: list[dict[str, int]] = []
        for rule, nodes in zip(rules, eligible, strict=True):
            domains = dict.fromkeys(nodes.values(), 0)
            for node, count in rule.per_node(cluster, pod.namespace).items():
                value = nodes.get(node)
                if value is not None:
                    domains[value] += count
            counts.append(domains)
        return SpreadCheck(pod, rules, counts)

    def filter(self, pod: PodView, node: NodeInfo, cluster: ClusterView = EMPTY_CLUSTER) -> Status | None:
        check = self.prefilter(pod, cluster)
        return None if check is None else check(node)


# ---- scoring -----------------------------------------------------------------------------


class SpreadScore:
    def __init__(self, rules: tuple[_Rule, ...], domain_counts: list[dict[str, int]],
                 node_counts: list[dict[str, int]], weights: list[float], ignored: frozenset[str]) -> None:
        self.ignored = ignored
        # Per rule: (key, whether counts are per node, the counts, weight, maxSkew - 1).
        self._plan = tuple(
            (rule.key, rule.key == HOSTNAME, node_counts[i] if rule.key == HOSTNAME else domain_counts[i],
             weights[i], rule.constraint.max_skew - 1)
            for i, rule in enumerate(rules))

    def __call__(self, info: NodeInfo) -> float:
        node = info.node
        name = node.name
        if name in self.ignored:
            return 0
        labels = node.labels
        score = 0.0
        for key, per_node, counts, weight, extra in self._plan:
            value = labels.get(key)
            if value is not None:
                score += counts.get(name if per_node else value, 0) * weight + extra
        return math.floor(score + 0.5)  # Go's math.Round; scores are never negative

    def normalize(self, scores: Sequence[float], nodes: Sequence[NodeInfo] = ()) -> list[float]:
        ignored = self.ignored
        kept = [s for s, info in zip(scores, nodes, strict=True) if info.node.name not in ignored] \
            if ignored else list(scores)
        low = min(kept) if kept else 0
        high = max(max(kept), 0) if kept else 0
        result = []
        for score, info in zip(scores, nodes, strict=True):
            if ignored and info.node.name in ignored:
                result.append(0.0)
            elif high == 0:
                result.append(100.0)
            else:
                result.append(float(100 * int(high + low - score) // int(high)))
        return result


@dataclass(frozen=True)
class PreferredPodTopologySpread(_SpreadPlugin, PreScorePlugin, ScorePlugin):
    """Scorer for `ScheduleAnyway` constraints (and the default ones). Same args as the filter."""

    def prescore(self, pod: PodView, cluster: ClusterView, nodes: Sequence[NodeInfo]) -> SpreadScore | None:
        rules = _rules(pod, SCHEDULE_ANYWAY, self.defaults)
        if not rules or not nodes:
            return None
        require_all = bool(pod.spread) or not self.system_defaulted
        labels = [info.node.labels for info in nodes]
        ignored = frozenset(info.node.name for info, node_labels in zip(nodes, labels, strict=True)
                            if not _has_keys(node_labels, rules)) if require_all else frozenset()
        if ignored:
            labels = [info.node.labels for info in nodes if info.node.name not in ignored]
        domain_counts: list[dict[str, int]] = []
        weights = []
        for rule in rules:
            key = rule.key
            if key == HOSTNAME:
                domain_counts.append({})
                weights.append(math.log(len(labels) + 2))
                continue
            values = dict.fromkeys((node_labels.get(key, "") for node_labels in labels), 0)
            domain_counts.append(values)
            weights.append(math.log(len(values) + 2))
        eligible = _eligibility(pod, rules, cluster, require_all)
        node_counts: list[dict[str, int]] = [{} for _ in rules]
        for i, rule in enumerate(rules):
            by_node, domains = eligible[i], domain_counts[i]
            placed = rule.per_node(cluster, pod.namespace)  # a copy: kept as the hostname rule's counts
            if rule.key == HOSTNAME:
                node_counts[i] = placed
                continue
            for node, count in placed.items():
                value = by_node.get(node)
                if value is not None and value in domains:
                    domains[value] += count
        return SpreadScore(rules, domain_counts, node_counts, weights, ignored)

    def score(self, pod: PodView, node: NodeInfo, cluster: ClusterView = EMPTY_CLUSTER) -> float:
        fn = self.prescore(pod, cluster, [node])
        return 0 if fn is None else fn(node)
