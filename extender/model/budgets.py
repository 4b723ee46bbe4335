"""PodDisruptionBudgets as preemption reads them (kube-scheduler's filterPodsWithPDBViolation).

Only three things matter: which pods a budget selects (its namespace and selector: a nil
or empty selector selects none there), how many disruptions it still allows
(`status.disruptionsAllowed`), and which pods are already being disrupted
(`status.disruptedPods`, which do not count again).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extender.model.fields import Namespaced, as_object, as_str, object_name, object_parts
from extender.model.selectors import LabelSelector, parse_label_selector


@dataclass(frozen=True, slots=True)
class DisruptionBudget(Namespaced):
    namespace: str
    name: str
    selector: LabelSelector
    allowed: int
    disrupted: frozenset[str]

    def covers(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether the budget counts a disruption of this pod (an empty selector covers none)."""
        if namespace != self.namespace or not labels or self.selector.empty:
            return False
        return self.selector.matches(labels)


def budget_from_dict(raw: Mapping[str, Any]) -> DisruptionBudget:
    """Raises InvalidObject naming the bad field."""
    meta, spec, status = object_parts(raw, "poddisruptionbudget")
    allowed = status.get("disruptionsAllowed") or 0
    if isinstance(allowed, bool) or not isinstance(allowed, int):
        allowed = 0
    disrupted = as_object(status.get("disruptedPods"), "status.disruptedPods")
    return DisruptionBudget(
        namespace=as_str(meta.get("namespace"), "metadata.namespace") or "default",
        name=object_name(meta),
        selector=parse_label_selector(spec.get("selector"), "spec.selector", nil_matches_nothing=True),
        allowed=allowed,
        disrupted=frozenset(str(name) for name in disrupted),
    )
