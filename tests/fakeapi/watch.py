"""Streaming one watch: replay, live events, selector transitions, bookmarks, timeouts, drops.

The stream follows kube-apiserver's cacher (``cacheWatcher.convertToWatchEvent``):
an object that starts matching the selectors arrives as ADDED, one that stops
matching as DELETED (carrying its previous content at the new resourceVersion), and
bookmarks carry only ``kind``, ``apiVersion`` and ``metadata.resourceVersion``.
Errors after the stream has started (410 Expired) are sent as an ``ERROR`` event with a
``Status`` object, then the stream ends, as the real server does. A watch from a
resourceVersion the server has not reached yet waits for it (kube-apiserver v1.36 does not
answer it with 504 "too large", unlike a list).
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from .resources import ResourceType
from .selectors import Selection
from .status import ApiError
from .store import Store, StoredEvent, TooOld, Watcher

INITIAL_EVENTS_END = "k8s.io/initial-events-end"


class StreamWriter(Protocol):
    """What the HTTP layer offers a watch: whole lines, and two ways to end."""

    def send(self, data: bytes) -> None: ...

    def finish(self) -> None: ...

    def abort(self) -> None: ...


@dataclass
class WatchPlan:
    """A parsed watch request, ready to stream."""

    resource: ResourceType
    namespace: str | None
    selection: Selection
    since: int | None  # None: start with the current state as ADDED events
    bookmarks: bool
    timeout: float
    send_initial_events_end: bool
    serve: Callable[[dict[str, Any]], dict[str, Any]]  # storage form -> served form


@dataclass
class WatchSettings:
    bookmark_interval: float
    too_large_rv_wait: float


def encode_event(kind: str, obj: dict[str, Any]) -> bytes:
    return orjson.dumps({"type": kind, "object": obj}) + b"\n"


def _transition(event: StoredEvent, selection: Selection) -> str | None:
    """The event type this watcher sees, or None if the change is invisible to it."""
    cur = event.type != "DELETED" and selection.matches(event.obj)
    old = event.prev is not None and selection.matches(event.prev)
    if cur and not old:
        return "ADDED"
    if cur and old:
        return "MODIFIED"
    if old and not cur:
        return "DELETED"
    return None


def _bookmark(
    plan: WatchPlan, rv: int, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if annotations:
        meta["annotations"] = annotations
    return {"kind": plan.resource.kind, "apiVersion": plan.resource.api_version, "metadata": meta}


def run_watch(
    store: Store,
    plan: WatchPlan,
    writer: StreamWriter,
    settings: WatchSettings,
    on_register: Callable[[Watcher], None] | None = None,
) -> None:
    """Stream until timeout, error, client disconnect or a test-injected drop."""
    deadline = time.monotonic() + plan.timeout
    if plan.since is not None and plan.since > store.resource_version:
        # A watch from the future waits for the store to get there and then streams what
        # follows; it never fails with "too large" (only lists and gets do, after
        # too_large_rv_wait). Unreached by the timeout, it ends cleanly with nothing sent.
        if not store.wait_for_rv(plan.since, plan.timeout):
            writer.finish()
            return
    try:
        watcher, initial = store.watch(plan.resource.storage, plan.namespace, plan.since)
    except TooOld as exc:
        writer.send(encode_event("ERROR", ApiError.expired(str(exc)).status()))
        writer.finish()
        return
    if on_register:
        on_register(watcher)
    try:
        _stream(store, plan, watcher, initial, writer, settings, deadline)
    finally:
        store.unwatch(watcher)


def _stream(
    store: Store,
    plan: WatchPlan,
    watcher: Watcher,
    initial: list[StoredEvent],
    writer: StreamWriter,
    settings: WatchSettings,
    deadline: float,
) -> None:
    for event in initial:
        if plan.since is None:
            if plan.selection.matches(event.obj):
                writer.send(encode_event("ADDED", plan.serve(event.obj)))
        else:
            _send(plan, event, writer)
    if plan.send_initial_events_end and plan.bookmarks:
        rv = store.idle_rv(watcher) or store.resource_version
        writer.send(encode_event("BOOKMARK", _bookmark(plan, rv, {INITIAL_EVENTS_END: "true"})))
    interval = max(settings.bookmark_interval, 0.01)
    next_bookmark = time.monotonic() + interval
    while True:
        now = time.monotonic()
        if now >= deadline:
            if plan.bookmarks:
                rv = store.idle_rv(watcher)
                if rv is not None:
                    writer.send(encode_event("BOOKMARK", _bookmark(plan, rv)))
            writer.finish()
            return
        wait = deadline - now
        if plan.bookmarks:
            wait = min(wait, max(next_bookmark - now, 0))
        try:
            event = watcher.events.get(timeout=wait)
        except queue.Empty:
            event = None
            if plan.bookmarks and time.monotonic() >= next_bookmark:
                rv = store.idle_rv(watcher)
                if rv is not None:
                    writer.send(encode_event("BOOKMARK", _bookmark(plan, rv)))
                next_bookmark = time.monotonic() + interval
            continue
        if watcher.drop_mode is not None:
            _drop(plan, watcher, event, writer, store)
            return
        if event is not None:
            _send(plan, event, writer)


def _send(plan: WatchPlan, event: StoredEvent, writer: StreamWriter) -> None:
    kind = _transition(event, plan.selection)
    if kind is None:
        return
    obj = event.obj
    if kind == "DELETED" and event.type != "DELETED":
        assert event.prev is not None
        obj = dict(event.prev, metadata=dict(event.prev["metadata"], resourceVersion=str(event.rv)))
    writer.send(encode_event(kind, plan.serve(obj)))


def _drop(
    plan: WatchPlan,
    watcher: Watcher,
    pending: StoredEvent | None,
    writer: StreamWriter,
    store: Store,
) -> None:
    """End the stream the way a broken connection would: without the final chunk and, in
    ``mid_event`` mode, after the first half of an event line (the pending event if there is
    one, so a client that resumes correctly receives it again in full)."""
    if watcher.drop_mode == "mid_event":
        kind = _transition(pending, plan.selection) if pending is not None else None
        if pending is not None and kind is not None:
            line = encode_event(kind, plan.serve(pending.obj))
        else:
            line = encode_event("MODIFIED", _bookmark(plan, store.resource_version))
        writer.send(line[: len(line) // 2])
    writer.abort()
