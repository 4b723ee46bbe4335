"""The watched kinds kept in a keyed store of the cluster state, each declared once.

One `WatchedKind` ties together everything about watching one API kind:

* `parse`: the model's reader of one object (raw dict -> (key, value)), what its store keeps;
* `store`: the ClusterState attribute holding the objects (an ObjectStore made from this);
* `group`, `version`, `resource`: the reflector's list-and-watch path (kube/source.py), the
  rejected-objects metric's name, and the RBAC rule checks/permissions.py derives (get, list,
  watch across the cluster; tests/deploy/test_rbac_matches_code.py holds the chart and
  kustomize to it);
* `modes`: which modes watch it (and so need the rule);
* `event`: the resource (policy/enqueue.py) under which its changes reach the standalone
  queue's hints, where the filters that registered for it are asked; None when no filter
  reads the kind (a change then wakes no pod).

Nodes, pods, the storage kinds and the DRA kinds have stores of their own (indexes, assume
caches, their own events); a kind that is read by key, as namespaces and PodDisruptionBudgets
are, takes a declaration here and nothing else in the adapters. docs/architecture.md has the
recipe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from extender.cluster.objectstore import ObjectStore, namespace_labels
from extender.model.budgets import DisruptionBudget, budget_from_dict
from extender.model.fields import object_key
from extender.policy import enqueue

T = TypeVar("T")

WEBHOOK = "webhook"
STANDALONE = "standalone"
EVERY_MODE = frozenset({WEBHOOK, STANDALONE})


@dataclass(frozen=True)
class WatchedKind(Generic[T]):
    """One API kind, watched into a keyed store of the cluster state (see the module docstring)."""

    kind: str
    resource: str
    group: str
    version: str
    namespaced: bool
    parse: Callable[[Mapping[str, Any]], tuple[str, T]]
    store: str
    modes: frozenset[str]
    why: str
    event: str | None = None

    @property
    def path(self) -> str:
        """The list-and-watch path of every object of the kind, across namespaces."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        return f"{base}/{self.resource}"

    def key_of(self, raw: Mapping[str, Any]) -> str | None:
        """The store key of a watch event's object (`namespace/name`, or `name`); None without a name."""
        return object_key(raw, self.namespaced)

    def new_store(self, on_change: Callable[[str], None] | None = None) -> ObjectStore[T]:
        return ObjectStore(self.kind, self.parse, on_change=on_change)


def _budget(raw: Mapping[str, Any]) -> tuple[str, DisruptionBudget]:
    budget = budget_from_dict(raw)
    return budget.key, budget


NAMESPACES: WatchedKind[dict[str, str]] = WatchedKind(
    "Namespace", "namespaces", "", "v1", False, namespace_labels, "namespaces", EVERY_MODE,
    "watch namespace labels for pod affinity namespaceSelectors", event=enqueue.NAMESPACES)
BUDGETS: WatchedKind[DisruptionBudget] = WatchedKind(
    "PodDisruptionBudget", "poddisruptionbudgets", "policy", "v1", True, _budget, "budgets",
    frozenset({STANDALONE}), "respect disruption budgets when preempting")

KINDS: tuple[WatchedKind[Any], ...] = (NAMESPACES, BUDGETS)
BY_RESOURCE: dict[str, WatchedKind[Any]] = {kind.resource: kind for kind in KINDS}


def watched_in(mode: str) -> tuple[WatchedKind[Any], ...]:
    return tuple(kind for kind in KINDS if mode in kind.modes)


__all__ = ["BUDGETS", "BY_RESOURCE", "EVERY_MODE", "KINDS", "NAMESPACES", "STANDALONE", "WEBHOOK", "WatchedKind",
           "watched_in"]
