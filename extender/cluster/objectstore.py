"""The small keyed stores of the cluster state: namespaces' labels and PodDisruptionBudgets.

Both follow the same life as every watched kind, so they share one class: an initial
list (`replace`, which marks the store synced), then single adds, updates and deletes.
An object that cannot be read is counted and logged, never stored and never fatal: one
malformed object must not stop a reflector. Readers get the current dict without
locking; it is replaced whole by `replace` and changed one key at a time otherwise.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

from extender.errors import InvalidObject
from extender.model.fields import as_object, as_string_map, object_name

log = logging.getLogger(__name__)

T = TypeVar("T")


class ObjectStore(Generic[T]):
    """`parse(raw)` gives (key, value); `on_change(key)` hears of each change ("" for a full list)."""

    def __init__(self, kind: str, parse: Callable[[Mapping[str, Any]], tuple[str, T]], *,
                 on_change: Callable[[str], None] | None = None, synced: bool = True) -> None:
        self.kind = kind
        self._parse = parse
        self._on_change = on_change
        self._lock = threading.Lock()
        self.items: dict[str, T] = {}
        # A store nothing watches is complete as it is; a source that watches it clears this until its first list.
        self.synced = synced
        self.rejected = 0

    def get(self, key: str) -> T | None:
        return self.items.get(key)

    def values(self) -> list[T]:
        return list(self.items.values())

    def upsert(self, raw: Mapping[str, Any]) -> bool:
        """Add or replace one object; False when it cannot be read (counted, logged, skipped)."""
        readable = self._readable([raw])
        for key, value in readable:
            with self._lock:
                self.items[key] = value
            self._changed(key)
        return bool(readable)

    def delete(self, key: str) -> None:
        with self._lock:
            self.items.pop(key, None)
        self._changed(key)

    def replace(self, raws: Iterable[Mapping[str, Any]]) -> None:
        items = dict(self._readable(raws))
        with self._lock:
            self.items = items
            self.synced = True
        self._changed("")

    def _readable(self, raws: Iterable[Mapping[str, Any]]) -> list[tuple[str, T]]:
        parsed = []
        for raw in raws:
            try:
                parsed.append(self._parse(raw))
            except InvalidObject as exc:
                self.rejected += 1
                log.warning("skipping %s: %s", self.kind, exc)
        return parsed

    def _changed(self, key: str) -> None:
        if self._on_change is not None:
            self._on_change(key)


def namespace_labels(raw: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    """A Namespace as (name, labels): all that pod affinity's namespaceSelector reads."""
    meta = as_object(raw.get("metadata"), "metadata")
    return object_name(meta), as_string_map(meta.get("labels"), "metadata.labels")
