"""Reading a watch stream's lines, for the benchmarks that keep their own pod watch (bench_e2e's
bind clock, scheduler_perf's pod cache, chaos's history): one reader, each caller its events."""

from __future__ import annotations

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
