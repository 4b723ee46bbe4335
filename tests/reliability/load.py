"""Bounded load: C client threads with keep-alive sessions sending a mix of verbs for a fixed time.

Shared by the load test and the worker-kill test. Each client owns a requests.Session
(one keep-alive connection, as kube-scheduler keeps one). A connection error may be
retried once on a fresh session when `retry_once` is set (the kill test: the killed
worker's connections break, even halfway through a reply); everything is recorded and
counted, nothing is hidden.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson
import requests

from tests.helpers import wire_body

HEADERS = {"Content-Type": "application/json"}
# What a connection dying under a request looks like: refused/reset before the reply, or the reply
# cut after its headers (a worker killed while writing). Timeouts and bad statuses are not that.
BROKEN_CONNECTION = (requests.ConnectionError, requests.exceptions.ChunkedEncodingError)


@dataclass(frozen=True)
class Call:
    name: str
    verb: str
    body: bytes
    expect: int  # the status this call must get


def mixed_calls() -> list[Call]:
    """The mix: filter/prioritize in both payload modes, preempt in both, and a few bad bodies.

    /bind is left out: the first bind of the snapshot's pending pod changes state and every
    later one is refused (200 with an Error), which would only measure the refusal path.
    """
    calls = []
    for verb, names in (
        ("filter", ("filter-request.json", "filter-request-nodecache-false.json")),
        ("prioritize", ("prioritize-request.json", "prioritize-request-nodecache-false.json")),
        ("preempt", ("preempt-request.json", "preempt-request-nodecache-false.json")),
    ):
        for name in names:
            mode = "names" if "nodecache-false" not in name else "nodes"
            calls += [Call(f"{verb}/{mode}", verb, orjson.dumps(wire_body(name)), 200)] * 3
    calls += [
        Call("bad/truncated", "filter", orjson.dumps(wire_body("filter-request.json"))[:100], 400),
        Call("bad/no-pod", "prioritize", b'{"NodeNames": ["node-1"]}', 400),
    ]
    return calls


@dataclass
class LoadResult:
    requests: int = 0
    errors: list[str] = field(default_factory=list)
    retried: int = 0  # connection errors that a retry on a fresh connection recovered
    latencies_ms: list[float] = field(default_factory=list)
    by_call: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    # (monotonic time, ok) for every call: the kill test looks at what happened after the restart
    timeline: list[tuple[float, bool]] = field(default_factory=list)


def run_load(base: str, *, clients: int, seconds: float, retry_once: bool = False,
             timeout: float = 10.0, on_tick: Any = None) -> LoadResult:
    """Run the mix from `clients` threads for `seconds`; returns what happened."""
    calls = mixed_calls()
    result = LoadResult()
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def client(index: int) -> None:
        session = requests.Session()
        position = index * 7  # clients start at different points of the mix
        while time.monotonic() < stop_at:
            call = calls[position % len(calls)]
            position += 1
            started = time.perf_counter()
            error, retried = None, False
            try:
                response = session.post(f"{base}/{call.verb}", data=call.body, headers=HEADERS, timeout=timeout)
            except BROKEN_CONNECTION as exc:
                if not retry_once:
                    response, error = None, f"{call.name}: connection error {exc!r}"
                else:
                    session.close()
                    session = requests.Session()
                    retried = True
                    try:
                        response = session.post(f"{base}/{call.verb}", data=call.body, headers=HEADERS,
                                                timeout=timeout)
                    except requests.RequestException as exc2:
                        response, error = None, f"{call.name}: connection error after a retry {exc2!r}"
            except requests.RequestException as exc:
                response, error = None, f"{call.name}: {exc!r}"
            elapsed = (time.perf_counter() - started) * 1000
            if response is not None and error is None:
                if response.status_code != call.expect:
                    error = f"{call.name}: status {response.status_code} (expected {call.expect}): " \
                            f"{response.content[:200]!r}"
                elif call.expect >= 400 and not orjson.loads(response.content).get("Error"):
                    error = f"{call.name}: {response.status_code} without an Error"
            with lock:
                result.requests += 1
                result.by_call[call.name] += 1
                result.latencies_ms.append(elapsed)
                result.timeline.append((time.monotonic(), error is None))
                if retried:
                    result.retried += 1
                if error:
                    result.errors.append(error)
        session.close()

    threads = [threading.Thread(target=client, args=(i,), name=f"load-{i}", daemon=True) for i in range(clients)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    if on_tick is not None:
        on_tick(stop_at)
    for thread in threads:
        thread.join(seconds + timeout * 3)
    result.seconds = time.monotonic() - started
    assert not any(t.is_alive() for t in threads), "a load client hung"
    return result
