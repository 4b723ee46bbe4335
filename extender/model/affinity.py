"""Inter-pod affinity terms, parsed once per pod spec, as kube-scheduler's framework.AffinityTerm.

A term selects pods by label in a set of namespaces; it is satisfied (affinity) or
violated (anti-affinity) per topology domain: the nodes sharing the term's
`topologyKey` label value. The parsing follows `framework.newAffinityTerm`:

* a nil `labelSelector` matches no pod; `{}` matches every pod;
* `namespaces` empty and `namespaceSelector` nil means the pod's own namespace;
  otherwise the listed namespaces, plus those whose labels match `namespaceSelector`
  (nil matches none, `{}` matches all);
* `matchLabelKeys` / `mismatchLabelKeys` add `key In (pod's value)` / `key NotIn (pod's
  value)` to the selector for each key the pod carries. The API server does this merge
  when the pod is created; doing it again here is harmless (an ANDed duplicate) and makes
  snapshots of pods that never went through an API server mean the same.

Pods of one workload carry identical terms, so parsed terms are interned: 500 replicas
share one `PodAffinity`, which is also what lets the cluster state group existing pods by
their terms and evaluate each distinct term once per scheduling cycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from extender.errors import InvalidObject
from extender.model.fields import as_list, as_object, as_str
from extender.model.selectors import NOTHING, LabelSelector, Requirement, parse_label_selector

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    namespaces: frozenset[str]
    namespace_selector: LabelSelector  # NOTHING when the term has none
    selector: LabelSelector
    topology_key: str

    def matches(self, namespace: str, labels: Mapping[str, str],
                namespace_labels: Mapping[str, str] | None = None) -> bool:
        """framework.AffinityTerm.Matches: the pod's namespace is selected, then its labels.

        `namespace_labels` are the labels of the pod's namespace (None when unknown, which
        an empty namespace selector still matches, as `labels.Set(nil)` does in Go).
        """
        if namespace in self.namespaces or self.namespace_selector.matches(namespace_labels or {}):
            return self.selector.matches(labels)
        return False

    def with_namespaces(self, extra: frozenset[str]) -> AffinityTerm:
        """The term with its namespace selector resolved into names (kube-scheduler's
        mergeAffinityTermNamespacesIfNotEmpty): the selector is then Nothing."""
        return AffinityTerm(self.namespaces | extra, NOTHING, self.selector, self.topology_key)


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    weight: int
    term: AffinityTerm


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """Every pod (anti-)affinity term of one pod spec; empty tuples where the spec has none."""

    required: tuple[AffinityTerm, ...] = ()
    required_anti: tuple[AffinityTerm, ...] = ()
    preferred: tuple[WeightedTerm, ...] = ()
    preferred_anti: tuple[WeightedTerm, ...] = ()

    @property
    def has_required(self) -> bool:
        return bool(self.required or self.required_anti)

    @property
    def has_preferred(self) -> bool:
        return bool(self.preferred or self.preferred_anti)


def _label_keys(raw: Any, where: str) -> tuple[str, ...]:
    return tuple(as_str(key, f"{where}[{i}]") for i, key in enumerate(as_list(raw, where)))


def _term(raw: Any, where: str, namespace: str, labels: Mapping[str, str]) -> AffinityTerm:
    term = as_object(raw, where)
    topology_key = as_str(term.get("topologyKey"), f"{where}.topologyKey")
    if not topology_key:
        raise InvalidObject(f"{where}.topologyKey: required")
    selector = parse_label_selector(term.get("labelSelector"), f"{where}.labelSelector", nil_matches_nothing=True)
    extra: list[Requirement] = []
    for key in _label_keys(term.get("matchLabelKeys"), f"{where}.matchLabelKeys"):
        if key in labels:
            extra.append(Requirement(key, "In", frozenset({labels[key]})))
    for key in _label_keys(term.get("mismatchLabelKeys"), f"{where}.mismatchLabelKeys"):
        if key in labels:
            extra.append(Requirement(key, "NotIn", frozenset({labels[key]})))
    selector = selector.with_requirements(tuple(extra))
    names = frozenset(_label_keys(term.get("namespaces"), f"{where}.namespaces"))
    raw_ns_selector = term.get("namespaceSelector")
    ns_selector = parse_label_selector(raw_ns_selector, f"{where}.namespaceSelector", nil_matches_nothing=True)
    if not names and raw_ns_selector is None:
        names = frozenset({namespace})
    return AffinityTerm(names, ns_selector, selector, topology_key)


def _weighted(raw: Any, where: str, namespace: str, labels: Mapping[str, str]) -> WeightedTerm:
    item = as_object(raw, where)
    weight = item.get("weight", 0)
    if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
        raise InvalidObject(f"{where}.weight: expected an integer in 1..100")
    return WeightedTerm(weight, _term(item.get("podAffinityTerm"), f"{where}.podAffinityTerm", namespace, labels))


def _block(affinity: Mapping[str, Any], kind: str, namespace: str, labels: Mapping[str, str]
           ) -> tuple[tuple[AffinityTerm, ...], tuple[WeightedTerm, ...]]:
    where = f"spec.affinity.{kind}"
    block = as_object(affinity.get(kind), where)
    required = tuple(_term(t, f"{where}.{REQUIRED}[{i}]", namespace, labels)
                     for i, t in enumerate(as_list(block.get(REQUIRED), f"{where}.{REQUIRED}")))
    preferred = tuple(_weighted(t, f"{where}.{PREFERRED}[{i}]", namespace, labels)
                      for i, t in enumerate(as_list(block.get(PREFERRED), f"{where}.{PREFERRED}")))
    return required, preferred


_interned: dict[tuple[str, bytes, tuple[tuple[str, str], ...]], PodAffinity | None] = {}
_INTERN_LIMIT = 20_000


def _uses_pod_labels(affinity: Mapping[str, Any]) -> bool:
    text = orjson.dumps(affinity)
    return b"atchLabelKeys" in text


def parse_pod_affinity(spec: Mapping[str, Any], namespace: str, labels: Mapping[str, str]) -> PodAffinity | None:
    """The pod's inter-pod affinity terms, or None when it has none. Raises InvalidObject."""
    affinity = as_object(spec.get("affinity"), "spec.affinity")
    raw = {kind: affinity[kind] for kind in ("podAffinity", "podAntiAffinity") if affinity.get(kind)}
    if not raw:
        return None
    try:
        canonical = orjson.dumps(raw, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        raise InvalidObject("spec.affinity: not JSON") from None
    key_labels = tuple(sorted(labels.items())) if _uses_pod_labels(raw) else ()
    key = (namespace, canonical, key_labels)
    found: PodAffinity | None | Literal[False] = _interned.get(key, False)
    if found is not False:
        return found
    required, preferred = _block(affinity, "podAffinity", namespace, labels)
    required_anti, preferred_anti = _block(affinity, "podAntiAffinity", namespace, labels)
    parsed: PodAffinity | None  # declared apart, so that mypy narrows it to PodAffinity on the next line
    parsed = PodAffinity(required, required_anti, preferred, preferred_anti)
    if not (parsed.has_required or parsed.has_preferred):
        parsed = None
    if len(_interned) < _INTERN_LIMIT:
        _interned[key] = parsed
    return parsed


Counts = dict[str, dict[str, int]]  # topology key -> label value -> pods


def bump(counts: Counts, key: str, value: str, delta: int) -> None:
    """Add `delta` pods to (key, value); a domain at zero, and a key with no domain left, are
    dropped, as kube-scheduler's topology-pair maps delete them."""
    values = counts.get(key)
    if values is None:
        if delta:
            counts[key] = {value: delta}
        return
    total = values.get(value, 0) + delta
    if total:
        values[value] = total
    else:
        values.pop(value, None)
        if not values:
            del counts[key]


def count_on(counts: Counts, keys: Iterable[str], labels: Mapping[str, str], delta: int) -> None:
    """Count a pod on a node with `labels` once for each of `keys` the node has (a node without
    the key is in no domain of it)."""
    for key in keys:
        value = labels.get(key)
        if value is not None:
            bump(counts, key, value, delta)
