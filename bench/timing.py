"""CPU time of a call, as the benchmarks measure it: a leaf module (standard library only), so
any bench may import it without a cycle."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def median_cpu_us(fn: Callable[[], Any], runs: int) -> float:
    """Median CPU µs of fn() over ``runs`` runs: this process's CPU time, which a shared machine
    disturbs less than the wall clock."""
    samples = []
    for _ in range(runs):
        started = time.process_time_ns()
        fn()
        samples.append((time.process_time_ns() - started) / 1000)
    return statistics.median(samples)
