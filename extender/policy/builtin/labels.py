"""Node labels as policy: NodeLabels (filter, e.g. tenancy) and LabelPreference (scorer, e.g. cost).

NodeLabels rules say which labels a node must have or must not have, for the pods
a rule selects (by namespace and/or pod labels), without touching the pods:

    rules:
      - namespaces: [team-a]                 # optional; also excludedNamespaces
        podSelector: {matchLabels: {...}}    # optional metav1.LabelSelector
        require: [{label: tenant, values: [team-a]}]   # values omitted: label must exist
        forbid:  [{label: node-role.kubernetes.io/control-plane}]

Which rules apply is decided once per pod; per node it is a few dict look-ups.
Refusals are unresolvable (preemption cannot relabel a node) and their Status is
built when the policy loads, so a refused node costs no allocation.

LabelPreference scores a node from a table keyed by one label's value
(`label`, `values: {spot: 10, on-demand: 0}`, `default`), scaled so the best gets 100.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.model.selectors import LabelSelector, parse_label_selector
from extender.policy import enqueue, names
from extender.policy.builtin import arguments
from extender.policy.builtin.base import PrefilteredFilter, PrescoredScorer
from extender.policy.cluster_view import ClusterView
from extender.policy.enqueue import EventHint
from extender.policy.plugins import Check, NodeCheck, NodeScore
from extender.policy.status import Code, Status


@dataclass(frozen=True)
class LabelCheck:
    """One `require`/`forbid` entry; `values` None means "any value"."""

    label: str
    values: frozenset[str] | None
    required: bool
    status: Status

    def refuses(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.label)
        if self.required:
            return value is None or (self.values is not None and value not in self.values)
        return value is not None and (self.values is None or value in self.values)


def _describe(label: str, values: frozenset[str] | None) -> str:
    if values is None:
        return label
    if len(values) == 1:
        return f"{label}={next(iter(values))}"
    return f"{label} in ({', '.join(sorted(values))})"


@dataclass(frozen=True)
class LabelRule:
    namespaces: frozenset[str] | None
    excluded_namespaces: frozenset[str]
    pod_selector: LabelSelector | None
    checks: tuple[LabelCheck, ...]

    def applies_to(self, pod: PodView) -> bool:
        if self.namespaces is not None and pod.namespace not in self.namespaces:
            return False
        if pod.namespace in self.excluded_namespaces:
            return False
        return self.pod_selector is None or self.pod_selector.matches(pod.labels)


def _checks(entries: tuple[dict[str, Any], ...], where: str, required: bool, scope: str) -> list[LabelCheck]:
    checks = []
    for entry in entries:
        label = entry["label"]
        values = None if entry["values"] is None else frozenset(entry["values"])
        text = _describe(label, values)
        if required:
            reason = f"node(s) didn't have required label {text}"
        else:
            reason = f"node(s) had forbidden label {text}"
        detail = f"{where}: pods {scope} {'need' if required else 'must avoid'} nodes labelled {text}"
        status = Status(Code.UNRESOLVABLE, (reason,), detail, names.NODE_LABELS)
        checks.append(LabelCheck(label, values, required, status))
    return checks


def _rule(raw: dict[str, Any], where: str) -> LabelRule:
    namespaces = None if raw["namespaces"] is None else frozenset(raw["namespaces"])
    excluded = frozenset(raw["excludedNamespaces"])
    selector = raw["podSelector"]
    if namespaces is not None:
        scope = "of namespace(s) " + ", ".join(sorted(namespaces))
    else:
        scope = "in any namespace"
    if excluded:
        scope += " except " + ", ".join(sorted(excluded))
    if selector is not None:
        scope += " matching the rule's podSelector"
    checks = _checks(raw["require"], f"{where}.require", True, scope)
    checks += _checks(raw["forbid"], f"{where}.forbid", False, scope)
    return LabelRule(namespaces, excluded, selector, tuple(checks))


_ENTRY = arguments.schema({"label": arguments.string(), "values": arguments.strings(
    default=None, empty="must not be empty (omit it to mean any value)")})
_ENTRIES = "expected a list of {label, values} entries"
_RULES = arguments.schema({"rules": arguments.items(arguments.schema({
    "namespaces": arguments.strings(default=None),  # None: any namespace
    "excludedNamespaces": arguments.strings(),
    "podSelector": arguments.value(arguments.parsed(parse_label_selector), default=None, null=None),
    "require": arguments.items(_ENTRY.load, _ENTRIES),
    "forbid": arguments.items(_ENTRY.load, _ENTRIES),
}, arguments.one_needed(("require", "forbid"), "a rule needs at least one require or forbid entry")).load,
    "expected a list of rules")})


_PREFERENCE = arguments.schema({
    "label": arguments.string(required=True),
    "values": arguments.table(lambda raw: arguments.read_number(raw, minimum=0), required=True,
                              empty="must name at least one label value"),
    "default": arguments.number(minimum=0, default=0.0),
})


@dataclass(frozen=True)
class NodeLabels(PrefilteredFilter):
    """Args: `rules: [...]` (see the module docstring). No rules: the filter does nothing."""

    name: ClassVar[str] = names.NODE_LABELS
    needs_pods: ClassVar[bool] = False  # reads the node alone (engine.Policy.needs_pods)
    rules: tuple[LabelRule, ...] = ()

    def events_to_register(self) -> Sequence[EventHint]:
        """A node added, or one whose labels changed."""
        return (enqueue.NODE_ADDED, enqueue.on(enqueue.NODES, enqueue.UPDATE_NODE_LABEL))

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> NodeLabels:
        rules = arguments.load(_RULES, args)["rules"]
        return cls(tuple(_rule(rule, f"rules[{i}]") for i, rule in enumerate(rules)))

    def prefilter(self, pod: PodView, cluster: ClusterView) -> NodeCheck | None:
        applied = tuple(i for i, rule in enumerate(self.rules) if rule.applies_to(pod))
        checks = tuple(check for i in applied for check in self.rules[i].checks)
        if not checks:
            return None

        def check(info: NodeInfo) -> Status | None:
            labels = info.node.labels
            for label_check in checks:
                if label_check.refuses(labels):
                    return label_check.status
            return None

        return Check(check, memo_key=applied)  # the rules that apply to the pod (FilterCycle.run)


@dataclass(frozen=True)
class LabelPreference(PrescoredScorer):
    """Args: `label` (required), `values: {value: number >= 0}`, `default` (for other or missing values)."""

    name: ClassVar[str] = names.LABEL_PREFERENCE
    needs_pods: ClassVar[bool] = False  # reads the node alone (engine.Policy.needs_pods)
    label: str
    values: tuple[tuple[str, float], ...]
    default: float = 0

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> LabelPreference:
        args = arguments.load(_PREFERENCE, args)
        return cls(args["label"], tuple(sorted(args["values"].items())), args["default"])

    def prescore(self, pod: PodView, cluster: ClusterView, nodes: Sequence[NodeInfo]) -> NodeScore:
        label, table, default = self.label, dict(self.values), self.default

        def score(info: NodeInfo) -> float:
            value = info.node.labels.get(label)
            return default if value is None else table.get(value, default)

        return score
