"""List+watch of one resource in a daemon thread, the way client-go's Reflector does it.

List (paginated), hand the items over, then watch from the list's resourceVersion
with bookmarks; keep the resourceVersion of every event; on a clean end reconnect
from it; on 410 Gone (or "resourceVersion too large" after an etcd restore) list
again; on failures reconnect with capped, jittered exponential backoff. A watch that
silently stops delivering is the classic cause of pods staying Pending with no
error anywhere, so the time of the last event is kept and a long silence is logged.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import orjson
import urllib3
from kubernetes import client as k8s_client

from extender import metrics
from extender.cluster.gate import ServingGate
from extender.errors import ClusterError, GoneError
from extender.kube import client as kube_client
from extender.kube.liststream import ListStream
from extender.kube.managedfields import without_managed_fields

log = logging.getLogger(__name__)

ListHandler = Callable[[Iterable[dict[str, Any]]], None]
EventHandler = Callable[[str, dict[str, Any]], None]
EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})
# A watch that receives nothing at all for this long is presumed dead (a connection dropped
# without a reset, a server that stopped sending) and opened again from its resourceVersion.
# kube-apiserver's watch cache sends a live watch a bookmark about every minute, so it is
# never this quiet (client-go gets the same from HTTP/2 pings, after 30 + 15 s).
WATCH_IDLE_TIMEOUT = 90.0
_READ_SIZE = 1 << 16
_LIST_READ_SIZE = 1 << 18


class LineReader:
    """Splits a byte stream into newline-terminated lines, however the chunks fall.

    kube-apiserver writes one JSON object per line, but TCP and chunked encoding
    cut the stream anywhere: a line may span chunks and a chunk may hold many lines.
    Whatever follows the last newline stays in `pending` until more data arrives.
    """

    def __init__(self, max_line: int = 64 << 20) -> None:
        self._parts: list[bytes] = []
        self._size = 0
        self.max_line = max_line

    def feed(self, chunk: bytes) -> list[bytes]:
        """Add a chunk; return the complete lines it finished (without the newline, blanks dropped)."""
        lines: list[bytes] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                break
            piece = chunk[start:end]
            if self._parts:
                self._parts.append(piece)
                piece = b"".join(self._parts)
                self._parts.clear()
                self._size = 0
            if piece.strip():
                lines.append(piece)
            start = end + 1
        if start < len(chunk):
            self._parts.append(chunk[start:])
            self._size += len(chunk) - start
            if self._size > self.max_line:
                raise ValueError(f"watch line longer than {self.max_line} bytes")
        return lines

    @property
    def pending(self) -> bytes:
        """The unfinished tail: non-empty at end of stream means the last event was cut off."""
        return b"".join(self._parts)


def iter_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Lines of a chunk stream; a final unterminated line is yielded only if it is complete JSON."""
    reader = LineReader()
    for chunk in chunks:
        yield from reader.feed(chunk)
    tail = reader.pending
    if tail.strip():
        try:
            orjson.loads(tail)
        except orjson.JSONDecodeError:
            raise TruncatedStream(len(tail)) from None
        yield tail


class TruncatedStream(Exception):
    """The stream ended in the middle of an event: the connection dropped, not bad data."""


class _Restart(Exception):
    """Internal: end this watch and reconnect, counting `cause`."""

    def __init__(self, cause: str, error: ClusterError | None = None) -> None:
        super().__init__(cause)
        self.cause = cause
        self.error = error


def _chunks(response: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
    """Read whatever has arrived (read1), so events are handled as they come, not per 64 KB."""
    while True:
        data = response.read1(_READ_SIZE)
        if not data:
            return
        yield data


def _blocks(response: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
    """Read a list reply in blocks of _LIST_READ_SIZE: kube-apiserver streams it in chunks of
    a few hundred bytes, and reading those one by one cost more than decoding them."""
    while True:
        data = response.read(_LIST_READ_SIZE)
        if not data:
            return
        yield data


def _too_large_rv(error: ClusterError) -> bool:
    """kube-apiserver's "Too large resource version" (504): our RV is ahead of the server's."""
    details = getattr(error, "details", None) or {}
    causes = details.get("causes") if isinstance(details, Mapping) else None
    if isinstance(causes, list):
        for cause in causes:
            if isinstance(cause, Mapping) and cause.get("reason") == "ResourceVersionTooLarge":
                return True
    return "too large resource version" in str(error).lower()


class Reflector:
    """List+watch one resource path in a daemon thread, calling `on_list` then `on_event`.

    `on_list(items)` receives an iterable that fetches the pages as it goes, so at most
    two pages of raw objects are alive at a time (the one handed over and the next,
    fetched meanwhile), or with `page_size` 0 reads one unpaginated reply an object at a
    time; it must consume it to the end. An exception out of it (a page request that
    failed, a reply cut short) means the list did not happen.
    `on_event(type, obj)` gets ADDED, MODIFIED and DELETED events; bookmarks only
    move the resourceVersion. Both run on the reflector's thread. With `yield_to`, each
    event first waits for the requests in flight of that gate (extender.cluster.gate).
    """

    def __init__(
        self,
        api_client: k8s_client.ApiClient,
        path: str,
        *,
        on_list: ListHandler,
        on_event: EventHandler,
        resource: str = "",
        field_selector: str | None = None,
        label_selector: str | None = None,
        page_size: int = 500,
        watch_timeout: tuple[float, float] = (300.0, 600.0),
        request_timeout: float = 60.0,
        initial_backoff: float = 0.8,
        max_backoff: float = 30.0,
        stall_after: float = 300.0,
        min_healthy_stream: float = 1.0,
        yield_to: ServingGate | None = None,
        trim_managed_fields: bool = False,
    ) -> None:
        self.api_client = api_client
        self.path = path
        self.resource = resource or path.rstrip("/").rpartition("/")[2]
        self.on_list = on_list
        self.on_event = on_event
        self.field_selector = field_selector
        self.label_selector = label_selector
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.request_timeout = request_timeout
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.stall_after = stall_after
        self.min_healthy_stream = min_healthy_stream
        self.yield_to = yield_to  # requests this process is answering go first (extender.cluster.gate)
        # List pages lose metadata.managedFields before they are decoded (extender/kube/managedfields.py):
        # only for handlers that never read it.
        self.trim_managed_fields = trim_managed_fields

        self.resource_version = ""
        self.synced = False
        self.last_event_monotonic = time.monotonic()
        self.malformed_events = 0
        self.lists = 0
        self.restarts: dict[str, int] = {}
        self._synced_event = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._response: urllib3.BaseHTTPResponse | None = None
        self._thread: threading.Thread | None = None
        self._failures = 0
        self._relists_in_a_row = 0  # re-lists with no healthy watch between them
        self._stall_warned_at = 0.0

    # ---- lifecycle ----------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError(f"reflector for {self.path} already started")
        self._thread = threading.Thread(target=self._run, name=f"watch-{self.resource}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """End the thread promptly: wake any backoff sleep and cut the open stream."""
        self._stop.set()
        with self._lock:
            response = self._response
        if response is not None:
            _abort(response)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self._synced_event.wait(timeout)

    def check_stall(self, now: float | None = None) -> bool:
        """Warn (once per `stall_after`) when nothing, not even a bookmark, arrived for a long time."""
        now = time.monotonic() if now is None else now
        silent = now - self.last_event_monotonic
        if silent < self.stall_after:
            return False
        if now - self._stall_warned_at >= self.stall_after:
            self._stall_warned_at = now
            log.warning(
                "no %s watch event (not even a bookmark) for %.0f s: the cluster state may be stale "
                "and pods may stay Pending without an error; resourceVersion %s",
                self.resource, silent, self.resource_version or "(none)",
            )
        return True

    # ---- the loop -------------------------------------------------------------

    def _run(self) -> None:
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self._list()
                    need_list = False
                    self._failures = 0
                self._watch()
            except _Restart as restart:
                self._count_restart(restart.cause)
                if restart.cause == "gone":
                    need_list = True
                    log.info("%s watch: %s; listing again", self.resource, restart.error or "resourceVersion expired")
                    self._before_relist()
                    continue
                if restart.error is not None:
                    log.warning("%s watch: %s", self.resource, restart.error)
                self._sleep_backoff(getattr(restart.error, "retry_after", None))
            except ClusterError as exc:
                if isinstance(exc, GoneError) or _too_large_rv(exc):
                    self._count_restart("gone")
                    need_list = True
                    log.info("%s: %s; listing again", self.resource, exc)
                    self._before_relist()
                    continue
                self._count_restart("error")
                if exc.status is None:
                    # The server was unreachable: it may come back restored from a backup,
                    # where our resourceVersion means something else. Only a list is safe.
                    need_list = True
                log.warning("%s %s failed: %s", self.resource, "list" if need_list else "watch", exc)
                self._sleep_backoff(getattr(exc, "retry_after", None))
            except Exception:  # never let the thread die: a dead watch means a stale cache forever
                if self._stop.is_set():
                    break
                self._count_restart("error")
                log.exception("%s reflector failed; retrying", self.resource)
                self._sleep_backoff(None)

    def _before_relist(self) -> None:
        """Re-list at once the first time; back off if the fresh list's version is refused again
        (apiservers behind a load balancer that disagree), instead of spinning on lists."""
        if self._relists_in_a_row:
            self._sleep_backoff(None)
        self._relists_in_a_row += 1

    def _count_restart(self, cause: str) -> None:
        if self._stop.is_set():
            return
        self.restarts[cause] = self.restarts.get(cause, 0) + 1
        metrics.WATCH_RESTARTS.labels(resource=self.resource, cause=cause).inc()

    def _sleep_backoff(self, retry_after: float | None) -> None:
        """Capped exponential backoff, jittered within the upper half of each step (client-go: 0.8 s to 30 s)."""
        delay = min(self.max_backoff, self.initial_backoff * (2 ** self._failures))
        self._failures = min(self._failures + 1, 30)
        delay = delay / 2 + random.uniform(0, delay / 2)
        if retry_after:
            delay = max(delay, min(retry_after, self.max_backoff))
        self._stop.wait(delay)

    def _selectors(self) -> dict[str, Any]:
        return {"fieldSelector": self.field_selector or None, "labelSelector": self.label_selector or None}

    # ---- list -------------------------------------------------------------------

    def _page(self, token: str) -> dict[str, Any]:
        query = {**self._selectors(), "limit": self.page_size, "continue": token or None}
        status, data = kube_client.request_bytes(self.api_client, "GET", self.path, query=query,
                                                 timeout=(5.0, self.request_timeout))
        if self.trim_managed_fields:
            data = without_managed_fields(data)
        return kube_client.decode_reply(data, f"GET {self.path}", status)

    def _pages(self, done: list[str]) -> Generator[dict[str, Any], None, None]:
        """The list's items, page by page. The next page is asked for as soon as a page
        arrives, on a helper thread, so the API server prepares it (and the reply travels)
        while this page's items are handed over, instead of the two taking turns. At most
        two pages are alive at a time."""
        fetcher = ThreadPoolExecutor(1, thread_name_prefix=f"list-{self.resource}")
        try:
            page = self._page("")
            while True:
                if self._stop.is_set():
                    raise _Stopped()
                meta = page.get("metadata") or {}
                items = page.get("items") or []
                if not isinstance(items, list):
                    raise ClusterError(f"GET {self.path}: list reply has no items list")
                token = str(meta.get("continue") or "")
                following = fetcher.submit(self._page, token) if token else None
                yield from (item for item in items if isinstance(item, dict))
                del items, page
                if following is None:
                    done.append(str(meta.get("resourceVersion") or ""))
                    return
                page = self._arrived(following)
        finally:
            # A list cut short (stop, a failed page) does not wait for the page in flight.
            fetcher.shutdown(wait=False, cancel_futures=True)

    def _streamed(self, done: list[str]) -> Generator[dict[str, Any], None, None]:
        """The list's items from one unpaginated reply, decoded one by one as it arrives
        (extender/kube/liststream.py): `page_size` 0."""
        response = kube_client.open_request(self.api_client, "GET", self.path, query=self._selectors(),
                                            timeout=(5.0, self.request_timeout))
        with self._lock:
            self._response = response
        try:
            if self._stop.is_set():
                raise _Stopped()
            stream = ListStream(_blocks(response), f"GET {self.path}",
                                trim=without_managed_fields if self.trim_managed_fields else None)
            yield from stream.items()
            done.append(str(stream.metadata.get("resourceVersion") or ""))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if self._stop.is_set():
                raise _Stopped() from None
            raise ClusterError(f"GET {self.path}: list reply cut short: {exc}") from None
        finally:
            with self._lock:
                self._response = None
            response.close()  # a list left unread is not handed back to the pool
            response.release_conn()

    def _arrived(self, page: Future[dict[str, Any]]) -> dict[str, Any]:
        """The page being fetched, once it is in; _Stopped as soon as stop() is called meanwhile."""
        while True:
            try:
                return page.result(timeout=0.1)
            except TimeoutError:
                if self._stop.is_set():
                    raise _Stopped() from None

    def _list(self) -> None:
        done: list[str] = []
        pages = self._pages(done) if self.page_size > 0 else self._streamed(done)
        try:
            self.on_list(pages)
            for _ in pages:  # a handler that stopped early: the list still has to complete
                pass
        except _Stopped:
            return
        finally:
            pages.close()
        self.resource_version = done[0] if done else ""
        self.lists += 1
        self.last_event_monotonic = time.monotonic()
        if not self.synced:
            self.synced = True
            self._synced_event.set()
        log.info("%s listed at resourceVersion %s", self.resource, self.resource_version)

    # ---- watch ----------------------------------------------------------------------

    def _watch(self) -> None:
        timeout_seconds = int(random.uniform(*self.watch_timeout))
        query = {
            **self._selectors(),
            "watch": "true",
            "resourceVersion": self.resource_version or None,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": timeout_seconds,
        }
        started = time.monotonic()
        response = kube_client.open_request(self.api_client, "GET", self.path, query=query,
                                            timeout=(5.0, min(timeout_seconds + 30.0, WATCH_IDLE_TIMEOUT)))
        with self._lock:
            self._response = response
        if self._stop.is_set():
            _abort(response)
        events = 0
        cause = "closed"
        try:
            for line in iter_lines(_chunks(response)):
                if self._handle_line(line):
                    events += 1
        except TruncatedStream:
            cause = "truncated"
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            if self._stop.is_set():
                return
            cause = "truncated"
            log.info("%s watch stream broke: %s", self.resource, exc)
        finally:
            with self._lock:
                self._response = None
            response.close()  # never hand a half-read connection back to the pool
            response.release_conn()
        if self._stop.is_set():
            return
        healthy = events > 0 or time.monotonic() - started >= self.min_healthy_stream
        if healthy:
            self._failures = 0
            self._relists_in_a_row = 0
        self._count_restart(cause)
        log.debug("%s watch ended (%s) after %d events at resourceVersion %s",
                  self.resource, cause, events, self.resource_version)
        if not healthy:
            self._sleep_backoff(None)

    def _handle_line(self, line: bytes) -> bool:
        """Apply one watch event; return whether it was a valid event (bookmarks count)."""
        if self.yield_to is not None:
            self.yield_to.wait_idle()
        try:
            event = orjson.loads(line)
            kind = event["type"]
            obj = event["object"]
            if not isinstance(obj, dict) or not isinstance(kind, str):
                raise TypeError("type or object has the wrong JSON type")
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            self._malformed(f"{exc}: {line[:200]!r}")
            return False
        if kind == "ERROR":
            self._watch_error(obj)
        meta = obj.get("metadata")
        version = meta.get("resourceVersion") if isinstance(meta, dict) else None
        self._relists_in_a_row = 0  # the watch made progress
        if kind == "BOOKMARK":
            if version:
                self.resource_version = str(version)
            self.last_event_monotonic = time.monotonic()
            return True
        if kind not in EVENT_TYPES:
            self._malformed(f"unknown event type {kind!r}")
            return False
        self.last_event_monotonic = time.monotonic()
        try:
            self.on_event(kind, obj)
        except Exception:  # one bad object must not stop the stream; the RV still moves past it
            self._malformed(f"handler failed on {kind} event")
            log.exception("%s watch: handler failed on %s event", self.resource, kind)
        if version:
            self.resource_version = str(version)
        return True

    def _watch_error(self, status: dict[str, Any]) -> None:
        code = status.get("code")
        error = kube_client.error_from_reply(
            code if isinstance(code, int) else 500, orjson.dumps(status), f"watch {self.path}"
        )
        if isinstance(error, GoneError) or _too_large_rv(error):
            raise _Restart("gone", error)
        raise _Restart("error_event", error)

    def _malformed(self, what: str) -> None:
        self.malformed_events += 1
        metrics.REJECTED_OBJECTS.labels(kind=f"{self.resource}-event").inc()
        log.warning("%s watch: skipping malformed event: %s", self.resource, what)


class _Stopped(Exception):
    """Internal: stop() was called while listing."""


def _abort(response: urllib3.BaseHTTPResponse) -> None:
    """Wake a thread blocked reading this response: shut the socket down, then close it."""
    try:
        response.shutdown()
    except Exception:  # already released or closed: nothing is blocked on it
        pass
    try:
        response.close()
    except Exception:
        pass
