"""Fault injection and the request log.

A client's error handling only runs when the server misbehaves, so tests need to make
it misbehave on purpose: fail the next N matching requests with a chosen status, add
latency, and afterwards check what the client actually sent. Rules match a regular
expression searched in ``path?query`` (so ``watch=true`` or ``/binding$`` both work)
and an optional HTTP method.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from .status import ApiError


@dataclass
class FaultRule:
    kind: str  # "fail" | "delay"
    remaining: int | None  # None: forever
    path_regex: re.Pattern[str] | None
    method: str | None
    status: int = 500
    seconds: float = 0.0
    retry_after: int = 1
    message: str | None = None
    hits: int = 0

    def matches(self, method: str, target: str) -> bool:
        if self.remaining is not None and self.remaining <= 0:
            return False
        if self.method and self.method.upper() != method.upper():
            return False
        return self.path_regex is None or bool(self.path_regex.search(target))


class FaultInjector:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []

    def fail_next(
        self,
        n: int = 1,
        status: int = 500,
        path_regex: str | None = None,
        method: str | None = None,
        retry_after: int = 1,
        message: str | None = None,
    ) -> FaultRule:
        """Answer the next ``n`` matching requests with a failure Status (429/503 carry Retry-After)."""
        rule = FaultRule(
            "fail",
            n,
            re.compile(path_regex) if path_regex else None,
            method,
            status=status,
            retry_after=retry_after,
            message=message,
        )
        with self._lock:
            self._rules.append(rule)
        return rule

    def delay(
        self,
        seconds: float,
        path_regex: str | None = None,
        method: str | None = None,
        count: int | None = None,
    ) -> FaultRule:
        """Add latency to matching requests (all of them, or the next ``count``)."""
        rule = FaultRule(
            "delay", count, re.compile(path_regex) if path_regex else None, method, seconds=seconds
        )
        with self._lock:
            self._rules.append(rule)
        return rule

    def remove(self, rule: FaultRule) -> None:
        with self._lock:
            if rule in self._rules:
                self._rules.remove(rule)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def check(self, method: str, target: str) -> tuple[float, ApiError | None]:
        """Consume the rules matching this request: total added latency, and the failure if any."""
        delay, failure = 0.0, None
        with self._lock:
            for rule in self._rules:
                if not rule.matches(method, target):
                    continue
                if rule.kind == "delay":
                    delay += rule.seconds
                elif failure is None:
                    failure = ApiError.injected(rule.status, rule.retry_after, rule.message)
                else:
                    continue
                rule.hits += 1
                if rule.remaining is not None:
                    rule.remaining -= 1
            self._rules = [r for r in self._rules if r.remaining is None or r.remaining > 0]
        return delay, failure


@dataclass
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any  # parsed JSON, or the raw bytes when not JSON, or None when empty
    time: float = field(default_factory=time.time)
    status: int | None = None  # filled in once answered (200 for watches once streaming)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")


class RequestLog:
    def __init__(self, limit: int = 100_000) -> None:
        self._lock = threading.Lock()
        self._items: list[RecordedRequest] = []
        self._limit = limit

    def add(self, item: RecordedRequest) -> None:
        with self._lock:
            self._items.append(item)
            if len(self._items) > self._limit:
                del self._items[: len(self._items) - self._limit]

    def all(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
