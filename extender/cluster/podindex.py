"""Indexes over the pods that occupy nodes, so the inter-pod plugins cost O(pods that match).

kube-scheduler walks every pod of every node in its PreFilter and PreScore; at 150,000
pods that is far too slow in Python. The cluster state keeps these instead, updated under
its lock on every watch event, assume and forget:

* namespace -> label key -> label value -> pod keys: a selector's `In`/`Exists`
  requirements pick a small candidate set, which is then matched exactly;
* namespace -> pod keys, for selectors without such a requirement;
* (namespace, controller kind, controller name) -> pod keys, for the default spread selector;
* affinity terms -> pod keys: the pods of a workload share one interned `PodAffinity`, so
  "which existing pods' anti-affinity rejects this pod" evaluates each distinct term once;
* namespace/claim -> pod keys, for the `persistentVolumeClaim` volumes of placed pods
  (VolumeRestrictions: a ReadWriteOncePod claim already in use).

Readers do not lock: each accessor copies the one set it reads into a tuple (atomic
under the GIL), and looks the records up afterwards.
"""

from __future__ import annotations

from extender.model.affinity import PodAffinity
from extender.model.records import PodRecord
from extender.model.selectors import LabelSelector

_NONE: tuple[str, ...] = ()


def _add(table: dict, key: object, pod: str) -> None:  # type: ignore[type-arg]
    found = table.get(key)
    if found is None:
        table[key] = {pod}
    else:
        found.add(pod)


def _discard(table: dict, key: object, pod: str) -> None:  # type: ignore[type-arg]
    found = table.get(key)
    if found is not None:
        found.discard(pod)
        if not found:
            del table[key]


class PodIndex:
    def __init__(self) -> None:
        self._by_namespace: dict[str, set[str]] = {}
        self._by_label: dict[str, dict[str, dict[str, set[str]]]] = {}
        self._by_owner: dict[tuple[str, str, str], set[str]] = {}
        self._by_affinity: dict[PodAffinity, set[str]] = {}
        self._by_claim: dict[str, set[str]] = {}

    def add(self, record: PodRecord) -> None:
        key, namespace = record.key, record.namespace
        _add(self._by_namespace, namespace, key)
        labels = self._by_label.setdefault(namespace, {})
        for name, value in record.labels.items():
            _add(labels.setdefault(name, {}), value, key)
        if record.owner is not None:
            _add(self._by_owner, (namespace, *record.owner), key)
        if record.affinity is not None:
            _add(self._by_affinity, record.affinity, key)
        if record.volumes.claims:
            for claim in record.volumes.direct_claims:
                _add(self._by_claim, f"{namespace}/{claim}", key)

    def remove(self, record: PodRecord) -> None:
        key, namespace = record.key, record.namespace
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
            _discard(self._by_affinity, record.affinity, key)
        if record.volumes.claims:
            for claim in record.volumes.direct_claims:
                _discard(self._by_claim, f"{namespace}/{claim}", key)

    # ---- reads ---------------------------------------------------------------------

    def namespaces(self) -> list[str]:
        return list(self._by_namespace)

    def candidates(self, namespace: str, selector: LabelSelector) -> tuple[str, ...]:
        """Pod keys of `namespace` that may match `selector`: a superset, never a subset."""
        if selector.nothing:
            return _NONE
        labels = self._by_label.get(namespace)
        if labels is None:
            return _NONE
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

    def affinity_groups(self) -> list[tuple[PodAffinity, set[str]]]:
        """(terms, live set of pod keys) for every distinct set of affinity terms of placed pods.

        The sets are the index's own: copy one (tuple(keys)) before iterating it."""
        return list(self._by_affinity.items())
