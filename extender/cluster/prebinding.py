"""Carrying out the bind-time work that reservations describe (kube-scheduler's PreBind).

A plugin's `Reservation.actions` are plain data (see extender.policy.reservations). Each
binder is handed a table of handlers, one per action type, when it is built: the kube
binder's perform the actions against the API server (`extender.kube.binder.api_server_actions`),
the memory binder's apply them to the in-memory cluster of simulate and the snapshot webhook
(`extender.cluster.memory_binder.in_memory_actions`), so a simulated placement goes through the
same steps as a live one, and no table is filled by the side effect of an import.

Handlers raise ClusterError when the work cannot be done; the caller then releases the
reservations and does not bind. A handler that waits (for volumes to be bound) sleeps
through `wait()`, which returns early once the binder running it is stopping
(`stoppable`), so a shutdown never hangs on it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from extender.errors import ClusterError

Handler = Callable[[Any], None]  # carries out one action, bound to its target (API client or state)
Handlers = Mapping[type, Handler]
_STOPPING: ContextVar[threading.Event | None] = ContextVar("prebinding_stopping", default=None)


def run(actions: Sequence[Any], handlers: Handlers, *, where: str) -> None:
    """Carry out `actions` in order with `handlers`; an action with no handler is refused."""
    for action in actions:
        handler = handlers.get(type(action))
        if handler is None:
            raise ClusterError(f"no {where} handler for bind-time action {type(action).__name__}")
        handler(action)


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
