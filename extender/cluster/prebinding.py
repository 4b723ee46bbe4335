"""Carrying out the bind-time work that reservations describe (kube-scheduler's PreBind).

A plugin's `Reservation.actions` are plain data (see extender.policy.reservations). Each
action type has two handlers, registered here: one that performs it against the API
server, one that applies it to the in-memory cluster of simulate and the snapshot webhook,
so a simulated placement goes through the same steps as a live one.

Handlers raise ClusterError when the work cannot be done; the caller then releases the
reservations and does not bind. A handler that waits (for volumes to be bound) sleeps
through `wait()`, which returns early once the binder running it is stopping
(`stoppable`), so a shutdown never hangs on it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from extender.errors import ClusterError

KUBE = "kube"
MEMORY = "memory"
Handler = Callable[[Any, Any], None]  # (api client or cluster state, action)

_HANDLERS: dict[str, dict[type, Handler]] = {KUBE: {}, MEMORY: {}}
_STOPPING: ContextVar[threading.Event | None] = ContextVar("prebinding_stopping", default=None)


def register(action_type: type, *, kube: Handler, memory: Handler) -> None:
    """Declare how an action type is carried out in each mode."""
    _HANDLERS[KUBE][action_type] = kube
    _HANDLERS[MEMORY][action_type] = memory


def run(actions: Sequence[Any], *, kind: str, target: Any) -> None:
    """Carry out `actions` in order against `target` (an ApiClient for KUBE, a ClusterState for MEMORY)."""
    table = _HANDLERS[kind]
    for action in actions:
        handler = table.get(type(action))
        if handler is None:
            raise ClusterError(f"no {kind} handler for bind-time action {type(action).__name__}")
        handler(target, action)


@contextmanager
def stoppable(stopping: threading.Event) -> Iterator[None]:
    """Run handlers in this block so that setting `stopping` ends their waits."""
    token = _STOPPING.set(stopping)
    try:
        yield
    finally:
        _STOPPING.reset(token)


def wait(seconds: float) -> bool:
    """Sleep up to `seconds` in a handler that polls; True (at once) when the binder is stopping."""
    stopping = _STOPPING.get()
    if stopping is None:
        time.sleep(seconds)
        return False
    return stopping.wait(seconds)
