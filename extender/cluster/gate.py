"""Watch events wait for the verb requests in flight: kube-scheduler is waiting for those.

A webhook worker answers kube-scheduler and applies watch events in one process, and
so under one GIL. kube-scheduler binds each pod while it already asks about the next
one, so the pod watch delivers the previous bind while a filter or prioritize call is
being answered; applying it then (about 0.1 ms of Python, more on a busy machine)
delays the call by as much, and kube-scheduler's whole loop with it. An event is
rarely urgent to the millisecond, the call always is: a watch thread waits for the
requests in flight to finish before applying an event, at most `max_wait` per event,
so a server that is never idle still applies at least 1/max_wait events per second per
watch (1000 at the default).
"""

from __future__ import annotations

import threading


class ServingGate:
    """Counts requests in flight; `wait_idle` blocks (GIL released) until there are none."""

    def __init__(self, max_wait: float = 0.001) -> None:
        self.max_wait = max_wait
        self._idle = threading.Condition(threading.Lock())
        self._busy = 0

    def enter(self) -> None:
        with self._idle:
            self._busy += 1

    def leave(self) -> None:
        with self._idle:
            self._busy -= 1
            if not self._busy:
                self._idle.notify_all()

    @property
    def busy(self) -> bool:
        return self._busy > 0

    def wait_idle(self) -> bool:
        """Wait until no request is in flight, up to `max_wait`; whether it is idle now."""
        if not self._busy:  # the usual case, without the lock
            return True
        with self._idle:
            return self._idle.wait_for(lambda: not self._busy, self.max_wait)
