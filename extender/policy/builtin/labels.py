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

from extender.errors import PolicyError
from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.model.selectors import LabelSelector
from extender.policy import names
from extender.policy.builtin import arguments
from extender.policy.builtin.base import PrefilteredFilter, PrescoredScorer
from extender.policy.cluster import ClusterView
from extender.policy.plugins import NodeCheck, NodeScore
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


def _checks(raw: Any, where: str, required: bool, scope: str) -> list[LabelCheck]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise PolicyError(f"{where}: expected a list of {{label, values}} entries")
    checks = []
    for index, item in enumerate(raw):
        path = arguments.join(where, index)
        item = arguments.mapping(item, path)
        arguments.only_keys(item, ("label", "values"), path)
        label = arguments.string(item.get("label"), f"{path}.label")
        values = None
        if "values" in item:
            listed = arguments.string_list(item["values"], f"{path}.values")
            if not listed:
                raise PolicyError(f"{path}.values: must not be empty (omit it to mean any value)")
            values = frozenset(listed)
        text = _describe(label, values)
        if required:
            reason = f"node(s) didn't have required label {text}"
        else:
            reason = f"node(s) had forbidden label {text}"
        detail = f"{where}: pods {scope} {'need' if required else 'must avoid'} nodes labelled {text}"
        status = Status(Code.UNRESOLVABLE, (reason,), detail, names.NODE_LABELS)
        checks.append(LabelCheck(label, values, required, status))
    return checks


def _rule(raw: Any, where: str) -> LabelRule:
    raw = arguments.mapping(raw, where)
    arguments.only_keys(raw, ("namespaces", "excludedNamespaces", "podSelector", "require", "forbid"), where)
    namespaces = None
    if "namespaces" in raw:
        namespaces = frozenset(arguments.string_list(raw["namespaces"], f"{where}.namespaces"))
    excluded = frozenset(arguments.string_list(raw.get("excludedNamespaces"), f"{where}.excludedNamespaces"))
    selector = None
    if raw.get("podSelector") is not None:
        selector = arguments.label_selector(raw["podSelector"], f"{where}.podSelector")
    if namespaces is not None:
        scope = "of namespace(s) " + ", ".join(sorted(namespaces))
    else:
        scope = "in any namespace"
    if excluded:
        scope += " except " + ", ".join(sorted(excluded))
    if selector is not None:
        scope += " matching the rule's podSelector"
    checks = _checks(raw.get("require"), f"{where}.require", True, scope)
    checks += _checks(raw.get("forbid"), f"{where}.forbid", False, scope)
    if not checks:
        raise PolicyError(f"{where}: a rule needs at least one require or forbid entry")
    return LabelRule(namespaces, excluded, selector, tuple(checks))


@dataclass(frozen=True)
class NodeLabels(PrefilteredFilter):
    """Args: `rules: [...]` (see the module docstring). No rules: the filter does nothing."""

    name: ClassVar[str] = names.NODE_LABELS
    needs_pods: ClassVar[bool] = False  # reads the node alone (engine.Policy.needs_pods)
    rules: tuple[LabelRule, ...] = ()

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> NodeLabels:
        args = arguments.mapping(args, "")
        arguments.only_keys(args, ("rules",))
        raw = args.get("rules")
        if raw is None:
            return cls()
        if not isinstance(raw, list):
            raise PolicyError("rules: expected a list of rules")
        return cls(tuple(_rule(item, f"rules[{i}]") for i, item in enumerate(raw)))

    def prefilter(self, pod: PodView, cluster: ClusterView) -> NodeCheck | None:
        checks = tuple(check for rule in self.rules if rule.applies_to(pod) for check in rule.checks)
        if not checks:
            return None

        def check(info: NodeInfo) -> Status | None:
            labels = info.node.labels
            for label_check in checks:
                if label_check.refuses(labels):
                    return label_check.status
            return None

        return check


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
        args = arguments.mapping(args, "")
        arguments.only_keys(args, ("label", "values", "default"))
        if "label" not in args:
            raise PolicyError("label: required")
        label = arguments.string(args["label"], "label")
        if "values" not in args:
            raise PolicyError("values: required")
        table = arguments.mapping(args["values"], "values")
        if not table:
            raise PolicyError("values: must name at least one label value")
        values = tuple(
            sorted((key, float(arguments.number(v, f"values.{key}", minimum=0))) for key, v in table.items())
        )
        default = float(arguments.number(args.get("default", 0), "default", minimum=0))
        return cls(label, values, default)

    def prescore(self, pod: PodView, cluster: ClusterView, nodes: Sequence[NodeInfo]) -> NodeScore:
        label, table, default = self.label, dict(self.values), self.default

        def score(info: NodeInfo) -> float:
            value = info.node.labels.get(label)
            return default if value is None else table.get(value, default)

        return score
