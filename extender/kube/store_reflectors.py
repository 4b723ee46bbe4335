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
        key = self.key_of(resource, obj)
        if key is None:
            self._count_rejected(resource, 1)
            log.warning("skipping %s %s event without metadata.name", resource, kind)
            return
        if kind == "DELETED":
            self.store.delete(resource, key)
        elif not self.store.upsert(resource, obj):
            self._count_rejected(resource, 1)

    def _count_rejected(self, resource: str, count: int) -> None:
        if count > 0:
            metrics.REJECTED_OBJECTS.labels(kind=self.kinds[resource]).inc(count)
