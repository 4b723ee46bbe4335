"""Bounded load on a real gunicorn (2 workers): C keep-alive clients, mixed verbs, fixed time, zero errors.

Latency figures are printed, not asserted: timing assertions make flaky tests, and the
numbers belong to bench/ (a shared 2-core CI box measures the box as much as the code).
"""

from __future__ import annotations

import pytest

from tests.reliability.figures import FIGURES
from tests.reliability.load import run_load
from tests.reliability.servers import LiveServer

LOAD_SECONDS = 10.0  # the issue allows up to 30 s; 10 s keeps the suite inside its CI budget
LOAD_CLIENTS = 8


@pytest.mark.slow
def test_bounded_load_without_errors(gunicorn_server: LiveServer) -> None:
    workers_before = gunicorn_server.workers()
    result = run_load(gunicorn_server.url, clients=LOAD_CLIENTS, seconds=LOAD_SECONDS)

    load = FIGURES.load
    load.requests += result.requests
    load.errors += len(result.errors)
    load.seconds += result.seconds
    load.clients = LOAD_CLIENTS
    load.latencies_ms += result.latencies_ms
    load.by_verb.update(result.by_call)
    print(f"\nload: {result.requests} requests in {result.seconds:.1f} s from {LOAD_CLIENTS} clients, "
          f"{len(result.errors)} errors, p50 {load.p50:.1f} ms, p99 {load.p99:.1f} ms")

    assert result.requests > LOAD_CLIENTS * 10, "the load barely ran"
    assert not result.errors, f"{len(result.errors)} error(s), first: {result.errors[:5]}"
    assert set(result.by_call) >= {"filter/names", "filter/nodes", "prioritize/names", "prioritize/nodes",
                                   "preempt/names", "preempt/nodes", "bad/truncated", "bad/no-pod"}
    assert gunicorn_server.workers() == workers_before, "a worker died or was restarted under load"
