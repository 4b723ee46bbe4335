"""An in-memory etcd: objects, one global resourceVersion counter, event history, watchers.

Why it looks like this:

* One counter shared by every resource, as etcd's revision is, so a resourceVersion
  taken from a lease is a valid (if uninteresting) starting point for a pod watch.
* The history is kept per storage key (one deque per resource), as kube-apiserver's
  watch cache is, and bounded: a watch from a resourceVersion that fell out of the
  window gets ``410 Expired``, which is the event a client must survive by re-listing.
* Watchers are registered under the same lock that appends events, so a watch started
  from a list's resourceVersion can neither miss nor duplicate an event.
* Stored objects are never mutated after they are stored (every write stores a new
  dict), so events can share them with any number of watchers safely.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

ObjectKey = tuple[str, str]  # (namespace or "", name)


def _copy(obj: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of a JSON object; a JSON round trip is several times faster than deepcopy."""
    return orjson.loads(orjson.dumps(obj))


@dataclass(frozen=True)
class StoredEvent:
    """One change: the new object (for DELETED: the last state, stamped with the deletion's
    resourceVersion) and the previous state, which selector transitions need."""

    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    storage: str
    obj: dict[str, Any]
    prev: dict[str, Any] | None


class TooOld(Exception):
    """A watch asked for history the window no longer holds."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest


@dataclass(eq=False)
class Watcher:
    """The server side of one watch: a queue of events plus the controls tests use to break it."""

    storage: str
    namespace: str | None
    events: queue.SimpleQueue[StoredEvent | None] = field(default_factory=queue.SimpleQueue)
    drop_mode: str | None = None  # None | "abrupt" | "mid_event"
    closed: bool = False

    def drop(self, mode: str) -> None:
        self.drop_mode = mode
        self.events.put(None)  # wake the streaming thread

    def wants(self, event: StoredEvent) -> bool:
        if self.namespace is None:
            return True
        return (event.obj.get("metadata") or {}).get("namespace") == self.namespace


class Store:
    """Thread-safe object store; callers that read-modify-write hold :attr:`lock` around it."""

    def __init__(self, history_size: int = 1000) -> None:
        self.lock = threading.RLock()
        self._changed = threading.Condition(self.lock)
        self._rv = 0
        self._history_size = history_size
        self._objects: dict[str, dict[ObjectKey, dict[str, Any]]] = {}
        self._history: dict[str, deque[StoredEvent]] = {}
        self._floor: dict[str, int] = {}  # lowest rv a watch may resume from, per storage
        self._base_floor = 0  # floor of a storage that has no history yet
        self._watchers: set[Watcher] = set()

    # -- reading ---------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        with self.lock:
            return self._rv

    def get(self, storage: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A private copy of the object, or None."""
        with self.lock:
            obj = self._objects.get(storage, {}).get((namespace, name))
            return _copy(obj) if obj is not None else None

    def list(self, storage: str, namespace: str | None = None) -> tuple[list[dict[str, Any]], int]:
        """Objects in etcd key order (namespace, then name), and the list's resourceVersion."""
        with self.lock:
            items = [
                _copy(obj)
                for key, obj in sorted(self._objects.get(storage, {}).items())
                if namespace is None or key[0] == namespace
            ]
            return items, self._rv

    def keys(self, storage: str) -> list[ObjectKey]:
        with self.lock:
            return sorted(self._objects.get(storage, {}))

    def storages(self) -> list[str]:
        with self.lock:
            return sorted(self._objects)

    # -- writing ---------------------------------------------------------------------------

    def _next_rv(self) -> int:
        self._rv += 1
        self._changed.notify_all()
        return self._rv

    @staticmethod
    def _key(obj: dict[str, Any]) -> ObjectKey:
        meta = obj["metadata"]
        return meta.get("namespace") or "", meta["name"]

    def create(self, storage: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store a new object (the caller checked it does not exist); stamps the resourceVersion."""
        with self.lock:
            stored = _copy(obj)
            rv = self._next_rv()
            stored["metadata"]["resourceVersion"] = str(rv)
            self._objects.setdefault(storage, {})[self._key(stored)] = stored
            self._emit(StoredEvent(rv, "ADDED", storage, stored, None))
            return _copy(stored)

    def update(self, storage: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Replace an existing object; a write that changes nothing keeps the old version and
        sends no event, as kube-apiserver skips no-op updates."""
        with self.lock:
            key = self._key(obj)
            prev = self._objects[storage][key]
            candidate = _copy(obj)
            candidate["metadata"]["resourceVersion"] = prev["metadata"]["resourceVersion"]
            if candidate == prev:
                return _copy(prev)
            rv = self._next_rv()
            candidate["metadata"]["resourceVersion"] = str(rv)
            self._objects[storage][key] = candidate
            self._emit(StoredEvent(rv, "MODIFIED", storage, candidate, prev))
            return _copy(candidate)

    def delete(self, storage: str, namespace: str, name: str) -> dict[str, Any]:
        """Remove an object; the DELETED event carries its last state at the deletion's version."""
        with self.lock:
            prev = self._objects[storage].pop((namespace, name))
            rv = self._next_rv()
            gone = _copy(prev)
            gone["metadata"]["resourceVersion"] = str(rv)
            self._emit(StoredEvent(rv, "DELETED", storage, gone, prev))
            return _copy(gone)

    def _emit(self, event: StoredEvent) -> None:
        history = self._history.setdefault(event.storage, deque())
        while len(history) >= max(self._history_size, 0) and history:
            self._floor[event.storage] = history.popleft().rv
        if self._history_size > 0:
            history.append(event)
        else:
            self._floor[event.storage] = event.rv
        for watcher in self._watchers:
            if watcher.storage == event.storage and not watcher.closed and watcher.wants(event):
                watcher.events.put(event)

    # -- watching --------------------------------------------------------------------------

    def floor(self, storage: str) -> int:
        with self.lock:
            return self._floor.get(storage, self._base_floor)

    def watch(
        self, storage: str, namespace: str | None, since: int | None
    ) -> tuple[Watcher, list[StoredEvent]]:
        """Register a watcher. ``since=None`` means "current state": the caller gets synthetic
        ADDED events for every object; otherwise the replay of history after ``since``.
        Raises :class:`TooOld` when the window no longer reaches back to ``since``."""
        with self.lock:
            watcher = Watcher(storage, namespace)
            if since is None:
                initial = [
                    StoredEvent(
                        int(obj["metadata"]["resourceVersion"]), "ADDED", storage, obj, None
                    )
                    for _key, obj in sorted(self._objects.get(storage, {}).items())
                ]
                initial = [e for e in initial if watcher.wants(e)]
            else:
                floor = self._floor.get(storage, self._base_floor)
                if since < floor:
                    raise TooOld(since, floor)
                initial = [
                    e for e in self._history.get(storage, ()) if e.rv > since and watcher.wants(e)
                ]
            self._watchers.add(watcher)
            return watcher, initial

    def unwatch(self, watcher: Watcher) -> None:
        with self.lock:
            watcher.closed = True
            self._watchers.discard(watcher)

    def watchers(self) -> list[Watcher]:
        with self.lock:
            return list(self._watchers)

    def wait_for_rv(self, rv: int, timeout: float) -> bool:
        """Block until the counter reaches ``rv`` (the "too large resource version" wait)."""
        with self._changed:
            return self._changed.wait_for(lambda: self._rv >= rv, timeout=timeout)

    def idle_rv(self, watcher: Watcher) -> int | None:
        """The resourceVersion a bookmark may carry for this watcher: the current one, but
        only if nothing is queued for it (a bookmark promises all earlier events were sent)."""
        with self.lock:
            return self._rv if watcher.events.empty() else None

    # -- history control (what tests use to force 410s) ------------------------------------

    def set_history_size(self, size: int) -> None:
        with self.lock:
            self._history_size = size
            for storage, history in self._history.items():
                while len(history) > size:
                    self._floor[storage] = history.popleft().rv

    def compact(self, storage: str | None = None) -> int:
        """Forget all history (of one storage or all): only watches from now on can resume."""
        with self.lock:
            targets = [storage] if storage else list(set(self._history) | set(self._objects))
            for name in targets:
                self._history.pop(name, None)
                self._floor[name] = self._rv
            if storage is None:
                self._base_floor = self._rv
            return self._rv

    def reset_resource_versions(self) -> int:
        """Renumber every object from 1, as after restoring etcd into a fresh cluster: clients
        now hold versions from the future (or from before the window)."""
        with self.lock:
            rv = 0
            for storage in sorted(self._objects):
                for key in sorted(self._objects[storage]):
                    rv += 1
                    obj = _copy(self._objects[storage][key])
                    obj["metadata"]["resourceVersion"] = str(rv)
                    self._objects[storage][key] = obj
            self._rv = rv
            self._history.clear()
            self._floor.clear()
            self._base_floor = rv
            return rv

    def clear(self) -> None:
        """Drop every object and all history without events (the counter keeps growing)."""
        with self.lock:
            self._objects.clear()
            self._history.clear()
            self._floor.clear()
            self._base_floor = self._rv

    def all_objects(self) -> Iterator[tuple[str, dict[str, Any]]]:
        with self.lock:
            snapshot = [(s, _copy(o)) for s, objs in self._objects.items() for o in objs.values()]
        yield from snapshot
