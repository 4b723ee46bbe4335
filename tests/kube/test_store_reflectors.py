"""apply_event: how every reflector of the cluster state applies one watch event to its store."""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY

from extender.cluster.objectstore import ObjectStore, namespace_labels
from extender.kube.store_reflectors import apply_event

KIND = "TestKind"  # a metric label no other test counts under


def _rejected() -> float:
    return REGISTRY.get_sample_value("extender_cache_rejected_objects_total", {"kind": KIND}) or 0.0


def _namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def _apply(store: ObjectStore[Any], kind: str, obj: dict[str, Any], key: str | None) -> None:
    apply_event(KIND, kind, key, store.delete, lambda: store.upsert(obj))


def test_added_and_modified_upsert_and_deleted_deletes() -> None:
    store: ObjectStore[Any] = ObjectStore("Namespace", namespace_labels)
    before = _rejected()
    _apply(store, "ADDED", _namespace("a", team="x"), "a")
    _apply(store, "MODIFIED", _namespace("a", team="y"), "a")
    assert store.get("a") == {"team": "y"}
    _apply(store, "DELETED", _namespace("a"), "a")
    assert store.get("a") is None
    assert _rejected() == before


def test_an_object_without_a_name_is_counted_and_not_applied() -> None:
    store: ObjectStore[Any] = ObjectStore("Namespace", namespace_labels)
    store.upsert(_namespace("a", team="x"))
    before = _rejected()
    _apply(store, "DELETED", {"metadata": {}}, None)
    _apply(store, "ADDED", {"metadata": {}}, None)
    assert _rejected() == before + 2
    assert store.get("a") == {"team": "x"}


def test_an_object_the_store_cannot_read_is_counted_and_not_stored() -> None:
    store: ObjectStore[Any] = ObjectStore("Namespace", namespace_labels)
    before = _rejected()
    _apply(store, "ADDED", {"metadata": {"name": "bad", "labels": ["not", "a", "map"]}}, "bad")
    assert _rejected() == before + 1
    assert store.get("bad") is None and store.rejected == 1
