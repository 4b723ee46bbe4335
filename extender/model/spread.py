"""Topology spread constraints, parsed once per pod spec (kube-scheduler's topologySpreadConstraint).

Defaults as kube-scheduler applies them: `minDomains` 1, `nodeAffinityPolicy` Honor,
`nodeTaintsPolicy` Ignore. A nil `labelSelector` matches no pod (`LabelSelectorAsSelector`),
and `matchLabelKeys` add `key In (pod's value)` for each key the pod carries; a nil
selector stays Nothing, as `mergeLabelSetWithSelector` leaves it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extender.errors import InvalidObject
from extender.model.fields import as_choice, as_list, as_object, as_str
from extender.model.selectors import LabelSelector, Requirement, parse_label_selector
from extender.model.wellknown import HOSTNAME, ZONE

# core/v1 UnsatisfiableConstraintAction and NodeInclusionPolicy: the values each field takes.
WHEN_UNSATISFIABLE = (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY) = ("DoNotSchedule", "ScheduleAnyway")
NODE_INCLUSION_POLICIES = (HONOR, IGNORE) = ("Honor", "Ignore")


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector
    min_domains: int = 1
    honor_node_affinity: bool = True
    honor_node_taints: bool = False


# kube-scheduler's systemDefaultConstraints, for pods without constraints of their own that
# belong to a workload (see the PodTopologySpread plugin for how the selector is found).
SYSTEM_DEFAULT_CONSTRAINTS = (
    (HOSTNAME, 3),
    (ZONE, 5),
)


def _policy(raw: Any, where: str, default: str) -> bool:
    return as_choice(raw, where, NODE_INCLUSION_POLICIES, default) == HONOR


def _positive(raw: Any, where: str, default: int | None = None) -> int:
    if raw is None and default is not None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise InvalidObject(f"{where}: expected an integer of at least 1")
    return raw


def _constraint(raw: Any, where: str, labels: Mapping[str, str]) -> SpreadConstraint:
    item = as_object(raw, where)
    key = as_str(item.get("topologyKey"), f"{where}.topologyKey")
    if not key:
        raise InvalidObject(f"{where}.topologyKey: required")
    when = as_choice(item.get("whenUnsatisfiable"), f"{where}.whenUnsatisfiable", WHEN_UNSATISFIABLE, DO_NOT_SCHEDULE)
    selector = parse_label_selector(item.get("labelSelector"), f"{where}.labelSelector", nil_matches_nothing=True)
    keys = as_list(item.get("matchLabelKeys"), f"{where}.matchLabelKeys")
    extra = []
    for i, label in enumerate(keys):
        label = as_str(label, f"{where}.matchLabelKeys[{i}]")
        if label in labels:
            extra.append(Requirement(label, "In", frozenset({labels[label]})))
    return SpreadConstraint(
        max_skew=_positive(item.get("maxSkew"), f"{where}.maxSkew"),
        topology_key=key,
        when_unsatisfiable=when,
        selector=selector.with_requirements(tuple(extra)),
        min_domains=_positive(item.get("minDomains"), f"{where}.minDomains", 1),
        honor_node_affinity=_policy(item.get("nodeAffinityPolicy"), f"{where}.nodeAffinityPolicy", HONOR),
        honor_node_taints=_policy(item.get("nodeTaintsPolicy"), f"{where}.nodeTaintsPolicy", IGNORE),
    )


def parse_spread_constraints(spec: Mapping[str, Any], labels: Mapping[str, str]) -> tuple[SpreadConstraint, ...]:
    """spec.topologySpreadConstraints, in order. Raises InvalidObject naming the bad field."""
    where = "spec.topologySpreadConstraints"
    return tuple(_constraint(item, f"{where}[{i}]", labels)
                 for i, item in enumerate(as_list(spec.get("topologySpreadConstraints"), where)))
