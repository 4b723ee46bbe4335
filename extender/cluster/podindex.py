"""Indexes over the pods that occupy nodes, so the inter-pod plugins cost O(pods that match).

kube-scheduler walks every pod of every node in its PreFilter and PreScore; at 150,000
pods that is far too slow in Python. The cluster state keeps these instead, updated under
its lock on every watch event, assume and forget:

* namespace -> label key -> label value -> pod keys: a selector's `In`/`Exists`
  requirements pick a small candidate set, which is then matched exactly;
* namespace -> pod keys, for selectors without such a requirement;
* (namespace, controller kind, controller name) -> pod keys, for the default spread selector;
* affinity terms -> pod keys and their count per topology domain: the pods of a workload
  share one interned `PodAffinity`, so "which existing pods' anti-affinity rejects this
  pod" evaluates each distinct term once and reads the group's counts;
* (terms' namespaces and selectors, topology keys) -> count per domain of the pods matching
  them, for the incoming pods' terms: created on first use, then kept up to date here
  (see extender/cluster/topologycounts.py);
* (namespace, spread selector or controller) -> count per node of the pods a topology spread
  rule counts, terminating ones left out: created on first use, then kept up to date here;
* namespace/claim -> pod keys, for the `persistentVolumeClaim` volumes of placed pods
  (VolumeRestrictions: a ReadWriteOncePod claim already in use).

Readers do not lock: each accessor copies the one set it reads into a tuple (atomic
under the GIL), and looks the records up afterwards. `counts` is the exception: it may
create a counter, so the state calls it under its lock.

The domain counts need each node's labels: the state hands them over (`relabel_node`)
whenever a node appears, changes labels or goes, and the index moves the counts of the
pods on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from extender.cluster.topologycounts import (
    GroupCounts,
    NodeCounts,
    Selection,
    SelectorCounts,
    SpreadKey,
)
from extender.model.affinity import Counts, PodAffinity, count_on
from extender.model.records import PodRecord
from extender.model.selectors import LabelSelector

_NONE: tuple[str, ...] = ()
# Selector counters not asked for during this many reads are dropped when one is created,
# and never more than _MAX_SELECTORS are kept: each costs a selector match per pod event
# in its namespaces.
_IDLE_READS = 5000
_MAX_SELECTORS = 128


_NO_LABELS: dict[str, dict[str, set[str]]] = {}


def _add(table: dict, key: object, pod: str) -> None:  # type: ignore[type-arg]  # one helper for the index tables of every key type
    found = table.get(key)
    if found is None:
        table[key] = {pod}
    else:
        found.add(pod)


def _discard(table: dict, key: object, pod: str) -> None:  # type: ignore[type-arg]  # one helper for the index tables of every key type
    found = table.get(key)
    if found is not None:
        found.discard(pod)
        if not found:
            del table[key]


def _topology_keys(terms: PodAffinity) -> tuple[str, ...]:
    keys = [t.topology_key for t in (*terms.required, *terms.required_anti)]
    keys += [w.term.topology_key for w in (*terms.preferred, *terms.preferred_anti)]
    return tuple(dict.fromkeys(keys))


class PodIndex:
    def __init__(self, nodes: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self._by_namespace: dict[str, set[str]] = {}
        self._by_label: dict[str, dict[str, dict[str, set[str]]]] = {}
        self._by_owner: dict[tuple[str, str, str], set[str]] = {}
        self._by_affinity: dict[PodAffinity, GroupCounts] = {}
        self._by_claim: dict[str, set[str]] = {}
        self._nodes: dict[str, Mapping[str, str]] = dict(nodes or {})  # node -> labels
        self._selectors: dict[tuple[Selection, tuple[str, ...]], SelectorCounts] = {}
        self._selectors_in: dict[str, list[SelectorCounts]] = {}  # namespace -> its counters
        self._spread: dict[SpreadKey, NodeCounts] = {}
        self._spread_in: dict[str, list[NodeCounts]] = {}  # namespace -> its spread counters
        self._reads = 0

    def add(self, record: PodRecord) -> None:
        key, namespace = record.key, record.namespace
        _add(self._by_namespace, namespace, key)
        labels = self._by_label.setdefault(namespace, {})
        for name, value in record.labels.items():
            _add(labels.setdefault(name, {}), value, key)
        if record.owner is not None:
            _add(self._by_owner, (namespace, *record.owner), key)
        if record.affinity is not None:
            group = self._by_affinity.get(record.affinity)
            if group is None:
                group = self._by_affinity[record.affinity] = GroupCounts(_topology_keys(record.affinity))
            group.pods.add(key)
        self._count(record, self._nodes.get(record.node_name), 1)
        self._count_on_node(record, 1)
        if record.volumes.claims:
            for claim in record.volumes.direct_claims:
                _add(self._by_claim, f"{namespace}/{claim}", key)

    def remove(self, record: PodRecord) -> None:
        key, namespace = record.key, record.namespace
        self._count(record, self._nodes.get(record.node_name), -1)
        self._count_on_node(record, -1)
        _discard(self._by_namespace, namespace, key)
        labels = self._by_label.get(namespace)
        if labels is not None:
            for name, value in record.labels.items():
                values = labels.get(name)
                if values is not None:
                    _discard(values, value, key)
                    if not values:
                        del labels[name]
            if not labels:
                del self._by_label[namespace]
        if record.owner is not None:
            _discard(self._by_owner, (namespace, *record.owner), key)
        if record.affinity is not None:
            group = self._by_affinity.get(record.affinity)
            if group is not None:
                group.pods.discard(key)
                if not group.pods:
                    del self._by_affinity[record.affinity]
        if record.volumes.claims:
            for claim in record.volumes.direct_claims:
                _discard(self._by_claim, f"{namespace}/{claim}", key)

    def relabel_node(self, name: str, labels: Mapping[str, str] | None, records: Iterable[PodRecord]) -> None:
        """Node `name` now has `labels` (None: gone); `records` are the indexed pods on it,
        whose domain counts move from the old labels to the new ones."""
        old = self._nodes.get(name)
        if labels is None:
            self._nodes.pop(name, None)
        else:
            self._nodes[name] = labels
        if old == labels:
            return
        for record in records:
            self._count(record, old, -1)
            self._count(record, labels, 1)

    def _count(self, record: PodRecord, labels: Mapping[str, str] | None, delta: int) -> None:
        """Add a pod to (+1) or take it from (-1) the domain counts, on a node with `labels`."""
        if labels is None:
            return  # on no known node: in no domain
        if record.affinity is not None:
            group = self._by_affinity.get(record.affinity)
            if group is not None:
                count_on(group.counts, group.keys, labels, delta)
        counters = self._selectors_in.get(record.namespace)
        if counters:
            pod_labels = record.labels
            for counter in counters:
                if counter.matches(pod_labels):
                    count_on(counter.counts, counter.keys, labels, delta)

    def _count_on_node(self, record: PodRecord, delta: int) -> None:
        counters = self._spread_in.get(record.namespace)
        if counters:
            for counter in counters:
                if counter.counted(record):
                    counter.add(record.node_name, delta)

    # ---- reads ---------------------------------------------------------------------

    def namespaces(self) -> list[str]:
        return list(self._by_namespace)

    def candidates(self, namespace: str, selector: LabelSelector) -> tuple[str, ...]:
        """Pod keys of `namespace` that may match `selector`: a superset, never a subset."""
        if selector.nothing:
            return _NONE
        # No entry when no pod of the namespace has a label: a selector without anchors
        # (matching everything) still finds the namespace's pods below.
        labels = self._by_label.get(namespace, _NO_LABELS)
        best: tuple[str, ...] | None = None
        for key, values in selector.anchors():
            by_value = labels.get(key)
            if by_value is None:
                return _NONE  # every match needs this label, and no pod has it
            if values is None:
                found: tuple[str, ...] = tuple(k for keys in list(by_value.values()) for k in tuple(keys))
            else:
                found = tuple(k for v in values for k in tuple(by_value.get(v, _NONE)))
            if best is None or len(found) < len(best):
                best = found
                if not best:
                    return _NONE
        if best is None:
            return tuple(self._by_namespace.get(namespace, _NONE))
        return best

    def owned(self, namespace: str, kind: str, name: str) -> tuple[str, ...]:
        return tuple(self._by_owner.get((namespace, kind, name), _NONE))

    def claim_users(self, namespace: str, claim: str) -> tuple[str, ...]:
        """Keys of the placed pods with a `persistentVolumeClaim` volume of `namespace/claim`."""
        return tuple(self._by_claim.get(f"{namespace}/{claim}", _NONE))

    def affinity_groups(self) -> list[tuple[PodAffinity, GroupCounts]]:
        """(terms, group) for every distinct set of affinity terms of placed pods.

        The groups are the index's own, live: copy a set or dict before iterating it."""
        return list(self._by_affinity.items())

    def counts(self, selection: Selection, keys: tuple[str, ...], pods: Mapping[str, PodRecord]) -> Counts:
        """Placed pods matching every (namespaces, selector) of `selection`, per domain of each
        of `keys`: a copy. The counter is created from `pods` (the state's records) on first
        use and maintained from then on. The caller holds the state's lock."""
        self._reads += 1
        found = self._selectors.get((selection, keys))
        if found is None:
            found = self._create(selection, keys, pods)
        found.used = self._reads
        return {key: dict(values) for key, values in found.counts.items()}

    def _create(self, selection: Selection, keys: tuple[str, ...], pods: Mapping[str, PodRecord]) -> SelectorCounts:
        self._evict()
        counter = SelectorCounts(selection, keys)
        first = selection[0][1]
        nodes = self._nodes
        for namespace in counter.namespaces:
            for key in self.candidates(namespace, first):
                record = pods.get(key)
                if record is not None and counter.matches(record.labels):
                    labels = nodes.get(record.node_name)
                    if labels is not None:
                        count_on(counter.counts, keys, labels, 1)
            self._selectors_in.setdefault(namespace, []).append(counter)
        self._selectors[(selection, keys)] = counter
        return counter

    def _stale(self, counters: Mapping[Any, SelectorCounts | NodeCounts]) -> list[Any]:
        """The keys of the counters nobody asked for lately, and of the oldest beyond the cap
        once one more is made: each costs a match per pod event in its namespaces."""
        idle = [k for k, c in counters.items() if c.used < self._reads - _IDLE_READS]
        kept = len(counters) - len(idle)
        if kept >= _MAX_SELECTORS:
            dropped = set(idle)
            by_age = sorted((k for k in counters if k not in dropped), key=lambda k: counters[k].used)
            idle += by_age[:kept - _MAX_SELECTORS + 1]
        return idle

    def _evict(self) -> None:
        """Drop the stale selector counters, and rebuild the namespace lookup without them."""
        selectors = self._selectors
        idle = self._stale(selectors)
        if not idle:
            return
        for key in idle:
            del selectors[key]
        self._selectors_in = {}
        for counter in selectors.values():
            for namespace in counter.namespaces:
                self._selectors_in.setdefault(namespace, []).append(counter)

    def node_counts(self, key: SpreadKey, pods: Mapping[str, PodRecord]) -> dict[str, int]:
        """The pods a spread rule counts in a namespace (`key`: namespace, selector, or the
        controller for the default rule), per node: a copy. Created from `pods` on first use
        and maintained from then on; dropped after _IDLE_READS reads without being asked for.
        The caller holds the state's lock."""
        self._reads += 1
        found = self._spread.get(key)
        if found is None:
            found = self._create_node_counts(key, pods)
        found.used = self._reads
        return dict(found.counts)

    def _create_node_counts(self, key: SpreadKey, pods: Mapping[str, PodRecord]) -> NodeCounts:
        for stale in self._stale(self._spread):
            counter = self._spread.pop(stale)
            self._spread_in[counter.namespace].remove(counter)
        counter = NodeCounts(key)
        namespace, selector, owner = key
        candidates = self.owned(namespace, *owner) if owner is not None else \
            self.candidates(namespace, selector) if selector is not None else _NONE
        for pod in candidates:
            record = pods.get(pod)
            if record is not None and counter.counted(record):
                counter.add(record.node_name, 1)
        self._spread[key] = counter
        self._spread_in.setdefault(namespace, []).append(counter)
        return counter
