"""The usage loop: fetch from the source every `interval`, publish into the store, report the source's state.

One daemon thread per store, never on the request path. A failed fetch keeps the old
samples (they go stale after `maxAge`), is retried sooner than a successful one, and
changes the source's state; the state is logged once per change (down with its reason,
back up), not once per fetch or per pod, and is what /readyz and the
extender_usage_source_up gauge show. The sample-age gauge is refreshed every few
seconds even between fetches, so an alert on it fires on time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from extender import metrics
from extender.model.nodes import NodeView
from extender.model.usage_samples import DOWN, UP
from extender.usage import readings
from extender.usage.readings import Fetch, FetchError
from extender.usage.store import UsageStore

log = logging.getLogger(__name__)

RETRY_AFTER_FAILURE = 10.0  # seconds, or the interval when that is shorter
METRICS_REFRESH = 5.0
_WAIT_FOR_NODES = 0.5


class Source(Protocol):
    name: str

    def fetch(self, nodes: Mapping[str, NodeView]) -> Fetch: ...

    def close(self) -> None: ...


class UsagePoller:
    """Runs `source` into `store`; `nodes()` gives the cluster's nodes now (unknown names are dropped)."""

    def __init__(self, store: UsageStore, source: Source, nodes: Callable[[], Mapping[str, NodeView]], *,
                 ready: Callable[[], bool] = lambda: True, interval: float | None = None) -> None:
        self.store = store
        self.source = source
        self.nodes = nodes
        self.ready = ready
        self.interval = interval if interval is not None else store.settings.interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._reported: tuple[str, str] | None = None
        self.attempts = 0  # fetches tried, successful or not
        self.fetches = 0  # fetches that succeeded

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"usage-{self.source.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self.source.close()

    def _run(self) -> None:
        next_fetch = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_fetch:
                if not self.ready():  # the node list is not in yet: every reading would be "unknown"
                    self._stop.wait(_WAIT_FOR_NODES)
                    continue
                try:
                    ok = self.fetch_once()
                except Exception:  # the loop must outlive any bug in one fetch
                    log.exception("usage fetch from %s failed unexpectedly", self.source.name)
                    ok = False
                self.attempts += 1
                delay = self.interval if ok else min(self.interval, RETRY_AFTER_FAILURE)
                next_fetch = time.monotonic() + delay
            self.refresh_metrics()
            self._stop.wait(max(0.0, min(METRICS_REFRESH, next_fetch - time.monotonic())))

    def fetch_once(self) -> bool:
        """One fetch and publish; True when it succeeded."""
        name = self.source.name
        nodes = self.nodes()
        started = time.perf_counter()
        try:
            fetch = self.source.fetch(nodes)
        except FetchError as exc:
            metrics.USAGE_FETCH_FAILURES.labels(source=name, reason=exc.reason).inc()
            self.store.prune()
            self._report(DOWN, exc.reason, str(exc))
            return False
        finally:
            metrics.USAGE_FETCH_LATENCY.labels(source=name).observe(time.perf_counter() - started)
        self.fetches += 1
        for reason, count in fetch.dropped.items():
            metrics.USAGE_DROPPED.labels(source=name, reason=reason).inc(count)
        if fetch.dropped:
            log.debug("usage from %s: dropped %s", name, dict(fetch.dropped))
        published = self.store.publish(fetch.readings, {n: readings.node_capacity(v) for n, v in nodes.items()})
        detail = "" if fetch.readings else "no node has a figure"
        self._report(UP, "", detail, published=published, dropped=sum(fetch.dropped.values()))
        return True

    def refresh_metrics(self) -> None:
        name = self.source.name
        newest = self.store.newest_timestamp()
        if newest is not None:
            metrics.USAGE_SAMPLE_AGE.labels(source=name).set(max(0.0, time.time() - newest))
        metrics.USAGE_NODES.labels(source=name).set(self.store.fresh_count())
        metrics.USAGE_SOURCE_UP.labels(source=name).set(1 if self.store.state == UP else 0)

    def _report(self, state: str, reason: str, detail: str, *, published: int = 0, dropped: int = 0) -> None:
        """Set the store's state; log only when it changes (up/down, or a different failure reason)."""
        self.store.set_state(state, detail)
        key = (state, reason)
        if key == self._reported:
            return
        first = self._reported is None
        self._reported = key
        name = self.source.name
        if state == DOWN:
            log.warning("node usage source %s is down (%s): %s; load-aware plugins see no data until it "
                        "returns, placement goes by requests alone", name, reason, detail)
        elif first:
            log.info("node usage source %s is up: %d node(s) with a sample, %d value(s) dropped%s",
                     name, published, dropped, f"; {detail}" if detail else "")
        else:
            log.info("node usage source %s is back up: %d node(s) with a sample%s", name, published,
                     f"; {detail}" if detail else "")
