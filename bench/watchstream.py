"""Reading a watch stream's lines, for the benchmarks that keep their own pod watch (bench_e2e's
bind clock, scheduler_perf's pod cache and claim watch, chaos's history): one reader, each caller
its events; and `WatchLoop`, the resumed, reconnecting watch half of a list+watch."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson


def watch_events(raw: Any, stopped: Callable[[], bool],
                 clock: Callable[[], float] = time.monotonic) -> Iterator[tuple[dict[str, Any], float]]:
    """Each event of the stream `raw` (urllib3's raw response) with the time its chunk arrived,
    until the stream ends or `stopped()`; chunks are read as they come (`read1`), so an event is
    stamped when it reached us, not when a buffer filled."""
    tail = b""
    while not stopped():
        chunk = raw.read1(1 << 16)
        if not chunk:
            return
        now = clock()
        lines = (tail + chunk).split(b"\n")
        tail = lines.pop()
        for line in lines:
            if line.strip():
                yield orjson.loads(line), now


class WatchLoop:
    """The watch half of a list+watch, shared by the pod cache and the claim watch: resumed
    from the last resourceVersion, reconnecting after any failure until closed. Bookmarks only
    move the resourceVersion; a 410 calls `relist()` (which returns the new one); every other
    event goes to `on_event(kind, obj)`, in order, on the loop's thread, with `arrived` the time
    its chunk reached us (watch_events' stamp)."""

    def __init__(self, kube: Any, path: str, name: str, on_event: Callable[[str, dict[str, Any]], None],
                 relist: Callable[[], str]) -> None:
        self.kube, self.path, self.name = kube, path, name
        self.on_event, self.relist = on_event, relist
        self.version = ""
        self.arrived = 0.0
        self._stop = False
        self._response: Any = None
        self._thread: threading.Thread | None = None

    def start(self, version: str) -> None:
        self.version = version
        self._thread = threading.Thread(target=self._run, name=self.name.replace(" ", "-"), daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop:
            try:
                self._response = self.kube.session.get(
                    f"{self.kube.base_url}{self.path}",
                    params={"watch": "true", "resourceVersion": self.version, "timeoutSeconds": "3600",
                            "allowWatchBookmarks": "true"},
                    stream=True, verify=self.kube.verify, timeout=(10, 3600))
                self._response.raise_for_status()
                for event, arrived in watch_events(self._response.raw, lambda: self._stop):
                    self.arrived = arrived
                    self._event(event)
            except Exception as exc:  # noqa: BLE001 (reconnects from the last resourceVersion)
                if not self._stop:
                    print(f"# {self.name}: the watch failed, reconnecting: {exc!r}", file=sys.stderr)
                    time.sleep(0.2)

    def _event(self, event: dict[str, Any]) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:  # too old: list again
                self.version = self.relist()
                return
            raise RuntimeError(f"watch error: {obj.get('message')}")
        self.version = (obj.get("metadata") or {}).get("resourceVersion") or self.version
        if kind != "BOOKMARK":
            self.on_event(str(kind), obj)

    def close(self) -> None:
        self._stop = True
        with contextlib.suppress(Exception):
            self._response.raw._fp.fp.raw._sock.shutdown(2)  # wake the reader blocked in read1
        with contextlib.suppress(Exception):
            self._response.close()
        if self._thread is not None:
            self._thread.join(5)
