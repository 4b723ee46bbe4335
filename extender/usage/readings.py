"""What a usage source hands the store: one checked reading per node, and a count of what it dropped.

Sources differ in units (quantities, ratios, percentages, cores) and in how they fail;
this module is where their values become millicores and bytes, and where garbage is
caught: negative or non-finite numbers, unreadable quantities or timestamps, nodes the
cluster does not have. A dropped value is counted by reason (the metric
extender_usage_dropped_values_total) and never reaches a scheduling cycle.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from extender.errors import ExtenderError, InvalidObject, QuantityError
from extender.model.nodes import NodeView
from extender.model.quantities import parse_quantity
from extender.model.resources import parse_resource_list
from extender.policy.usage_settings import ABSOLUTE, PERCENT, RATIO

# Reasons a value is dropped (label values of extender_usage_dropped_values_total).
NEGATIVE = "negative"
NOT_A_NUMBER = "not-a-number"
BAD_QUANTITY = "bad-quantity"
BAD_TIMESTAMP = "bad-timestamp"
UNKNOWN_NODE = "unknown-node"
MALFORMED = "malformed"
DUPLICATE = "duplicate"

# Reasons a whole fetch fails (label values of extender_usage_fetch_failures_total).
NOT_SERVED = "not-served"  # 404: no metrics-server (the metrics.k8s.io API is not registered)
UNAVAILABLE = "unavailable"  # 503 and other 5xx: registered, but its backend is down
FORBIDDEN = "forbidden"  # 401/403: credentials or RBAC
UNREACHABLE = "unreachable"  # connection refused, DNS, timeout
BAD_REPLY = "bad-reply"  # not the JSON we expect
BAD_QUERY = "bad-query"  # Prometheus refused the query, or it is not an instant vector
NOT_CONFIGURED = "not-configured"  # the source cannot work in this mode (no API server)


class FetchError(ExtenderError):
    """A fetch that produced nothing usable; `reason` is one of the fetch failure reasons."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class Dropped(ValueError):
    """One value is garbage; `reason` says which kind."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Capacity:
    cpu: int  # millicores
    memory: int  # bytes


@dataclass(frozen=True, slots=True)
class Reading:
    """One node's measurement in millicores and bytes (None: the source gave no figure)."""

    node: str
    timestamp: float
    cpu: float | None = None
    memory: float | None = None
    cpu_stdev: float | None = None
    memory_stdev: float | None = None
    window: float = 0.0


@dataclass
class Fetch:
    readings: list[Reading] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)


def node_capacity(view: NodeView) -> Capacity:
    """The node's status.capacity cpu and memory, falling back to allocatable (Trimaran divides by capacity)."""
    status = view.raw.get("status") if isinstance(view.raw, Mapping) else None
    raw = status.get("capacity") if isinstance(status, Mapping) else None
    try:
        capacity = parse_resource_list(raw, "status.capacity")
    except InvalidObject:
        capacity = {}
    allocatable = view.allocatable
    return Capacity(capacity.get("cpu") or allocatable.get("cpu", 0),
                    capacity.get("memory") or allocatable.get("memory", 0))


def number(raw: Any) -> float:
    """A finite, non-negative float from a JSON number or a numeric string (Prometheus sends strings)."""
    if isinstance(raw, bool):
        raise Dropped(MALFORMED)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise Dropped(NOT_A_NUMBER) from None
    if not math.isfinite(value):
        raise Dropped(NOT_A_NUMBER)
    if value < 0:
        raise Dropped(NEGATIVE)
    return value


def quantity(raw: Any, resource: str) -> float:
    """A Kubernetes quantity as millicores (cpu) or bytes (memory), not rounded."""
    if not isinstance(raw, str):
        raise Dropped(BAD_QUANTITY)
    try:
        value = parse_quantity(raw)
    except QuantityError:
        raise Dropped(BAD_QUANTITY) from None
    if value < 0:
        raise Dropped(NEGATIVE)
    return float(value * 1000) if resource == "cpu" else float(value)


def convert(value: float, unit: str, resource: str, capacity: Capacity) -> float:
    """A source's figure in `unit` as millicores (cpu) or bytes (memory)."""
    total = capacity.cpu if resource == "cpu" else capacity.memory
    if unit == RATIO:
        return value * total
    if unit == PERCENT:
        return value / 100 * total
    if unit == ABSOLUTE:
        return value * 1000 if resource == "cpu" else value
    raise ValueError(f"unknown unit {unit!r}")


def timestamp(raw: Any) -> float:
    """Unix seconds from an RFC 3339 time (a time without zone is taken as UTC)."""
    if not isinstance(raw, str) or not raw:
        raise Dropped(BAD_TIMESTAMP)
    try:
        moment = datetime.fromisoformat(raw.strip())
    except ValueError:
        raise Dropped(BAD_TIMESTAMP) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


_GO_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration(raw: Any) -> float:
    """Seconds from a Go duration string (`20.5s`, `1m0s`), as NodeMetrics' `window` is written."""
    if not isinstance(raw, str) or not raw:
        raise Dropped(MALFORMED)
    text = raw.strip()
    if text == "0":
        return 0.0
    position, total = 0, 0.0
    for match in _GO_DURATION.finditer(text):
        if match.start() != position:
            raise Dropped(MALFORMED)
        total += float(match[1]) * _GO_UNITS[match[2]]
        position = match.end()
    if position != len(text) or position == 0:
        raise Dropped(MALFORMED)
    return total
