"""Reflectors into the keyed stores of the cluster state: the volume store and the DRA store.

Both stores take a kind's full list (`replace`), then single adds, updates and deletions,
count the objects they cannot read, and report unsynced until every kind they `expect` has
listed. One Reflector per kind feeds them with the same list+watch, resume and re-list
behaviour as the node and pod reflectors; what differs between the stores is only how a
deletion event names its key and what the kind is called in the metrics.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any, Protocol

from extender import metrics
from extender.kube.watching import Reflector

log = logging.getLogger(__name__)


class KindStore(Protocol):
    rejected: int

    def expect(self, resources: Iterable[str]) -> None: ...

    def replace(self, resource: str, raws: Iterable[Mapping[str, Any]]) -> None: ...

    def upsert(self, resource: str, raw: Mapping[str, Any]) -> Any:
        """The stored object, or a falsy value when it could not be read."""

    def delete(self, resource: str, key: str) -> None: ...

    def counts(self) -> dict[str, int]: ...


KeyOf = Callable[[str, Mapping[str, Any]], "str | None"]  # (resource, raw object) -> store key


def store_reflectors(store: KindStore, paths: Mapping[str, str], api_client: Any, *, key_of: KeyOf,
                     kinds: Mapping[str, str], **options: Any) -> list[Reflector]:
    """One Reflector per resource of `paths`; the store is unsynced until each has listed.
    `kinds`: each resource's Kind, as the rejected-objects metric names it."""
    store.expect(paths)
    feed = _Feed(store, key_of, kinds)
    return [Reflector(api_client, path, resource=resource, on_list=partial(feed.listed, resource),
                      on_event=partial(feed.event, resource), **options)
            for resource, path in paths.items()]


class _Feed:
    def __init__(self, store: KindStore, key_of: KeyOf, kinds: Mapping[str, str]) -> None:
        self.store, self.key_of, self.kinds = store, key_of, kinds

    def listed(self, resource: str, items: Iterable[dict[str, Any]]) -> None:
        before = self.store.rejected
        self.store.replace(resource, items)
        self._count_rejected(resource, self.store.rejected - before)
        log.info("cluster state: %d %s", self.store.counts()[resource], resource)

    def event(self, resource: str, kind: str, obj: dict[str, Any]) -> None:
        apply_event(self.kinds[resource], kind, self.key_of(resource, obj), partial(self.store.delete, resource),
                    partial(self.store.upsert, resource, obj))

    def _count_rejected(self, resource: str, count: int) -> None:
        count_rejected(self.kinds[resource], count)


def apply_event(what: str, kind: str, key: str | None, delete: Callable[[str], object],
                upsert: Callable[[], object]) -> None:
    """One watch event (`kind`: ADDED, MODIFIED, DELETED) of an object keyed `key` into its store,
    as every reflector of the cluster state applies it: DELETED deletes the key, anything else
    calls `upsert`. An object without a name, or one `upsert` could not read (a falsy result),
    counts as rejected under `what` (the metric's kind): one bad object never stops a watch."""
    if key is None:
        count_rejected(what, 1)
        log.warning("skipping %s %s event without metadata.name", what, kind)
    elif kind == "DELETED":
        delete(key)
    elif not upsert():
        count_rejected(what, 1)


def count_rejected(what: str, count: int) -> None:
    """`count` objects of kind `what` could not be read: extender_rejected_objects_total."""
    if count > 0:
        metrics.REJECTED_OBJECTS.labels(kind=what).inc(count)
