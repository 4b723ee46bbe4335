"""The scheduling queue, after kube-scheduler's PriorityQueue: active, backoff, unschedulable, gated.

* **active**: a heap, highest priority first, then oldest (creation time), then arrival.
* **backoff**: pods that failed recently wait `1 s * 2^(attempts-1)`, capped at 10 s, so
  a pod that cannot fit does not spin the loop. A loop with nothing active takes the
  unschedulable pod whose backoff ends first rather than idle (kube-scheduler's
  SchedulerPopFromBackoffQ, on by default since v1.33); a pod backing off after an error
  (an API failure) waits its backoff out, as in kube-scheduler's error backoff queue.
* **unschedulable**: pods no node could take. Nothing will change for them until the
  cluster does, so they wait for `move_all` (a node added, a pod deleted, ...) or, as a
  safety net, `max_unschedulable_seconds`.
* **gated**: pods with `spec.schedulingGates` are held aside, never popped and never
  reported on, until an update without gates arrives; so are members of a pod group that
  `pre_enqueue` does not admit yet (kube-scheduler's PreEnqueue), until `ungate` re-checks them.

Each pod key is in exactly one place (or "in flight" between `pop` and the outcome), so
watch re-lists and duplicate events never schedule a pod twice. Heaps use lazy deletion:
an entry's `generation` changes whenever it moves, and stale heap items are skipped.

A cluster event that arrives while a pod is in flight is remembered (`_move_seq`, and
`_events` for the events only some pods care about): if that pod then turns out
unschedulable and the event may help it, it goes to backoff instead of waiting for the
*next* event, which is how kube-scheduler avoids losing the wake-up (its in-flight events).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from extender import metrics
from extender.model.pods import PodView

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"
IN_FLIGHT = "in-flight"
QUEUES = (ACTIVE, BACKOFF, UNSCHEDULABLE, GATED)

INITIAL_BACKOFF = 1.0
MAX_BACKOFF = 10.0
MAX_UNSCHEDULABLE_SECONDS = 300.0  # kube-scheduler's podMaxInUnschedulablePodsDuration
_EVENTS_CHECKED_PAST = 64  # in-flight events kept before the old ones are looked for


# Whether an event may help a waiting pod, from the pod and the plugins that refused it
# (kube-scheduler's queueing hints): move_all's `wakes`.
Wakes: TypeAlias = Callable[[PodView, frozenset[str]], bool]


def backoff_seconds(attempts: int, initial: float = INITIAL_BACKOFF, maximum: float = MAX_BACKOFF) -> float:
    """kube-scheduler's calculateBackoffDuration: initial, doubled per extra attempt, capped."""
    if attempts <= 1:
        return min(initial, maximum)
    return min(initial * float(2 ** min(attempts - 1, 30)), maximum)


def scheduling_signature(pod: PodView) -> Any:
    """What an update must change for a waiting pod to deserve another try.

    Status-only updates (our own PodScheduled patch, kubelet-free status churn) must not
    move an unschedulable pod, or reporting a failure would trigger the next attempt
    forever. kube-scheduler compares the pod minus status and metadata noise the same way.
    """
    raw = pod.raw
    meta = raw.get("metadata") or {}
    return (raw.get("spec"), meta.get("labels"), meta.get("annotations"), meta.get("deletionTimestamp"))


@dataclass(eq=False)
class QueuedPod:
    """A pod in the queue, with its attempt count and where it currently is."""

    pod: PodView
    profile: str
    added: float
    attempts: int = 0
    backoff_until: float = 0.0
    unschedulable_since: float = 0.0
    where: str = ""
    generation: int = 0
    deleted: bool = False
    signature: Any = field(default=None, repr=False)
    move_seq_at_pop: int = 0
    event_seq_at_pop: int = 0
    popped_at: float = 0.0
    # The plugins that refused nodes in its last unschedulable attempt: which cluster events
    # may help it (kube-scheduler's queueing hints read its UnschedulablePlugins).
    rejected_by: frozenset[str] = frozenset()
    # A background step for it failed while it was in flight (an eviction): retry, not wait.
    retry_requested: bool = False

    @property
    def key(self) -> str:
        return self.pod.key

    @property
    def uid(self) -> str:
        return self.pod.uid


class SchedulingQueue:
    """Thread-safe: watch threads add and delete, the loop pops, bind workers requeue."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        initial_backoff: float = INITIAL_BACKOFF,
        max_backoff: float = MAX_BACKOFF,
        max_unschedulable_seconds: float = MAX_UNSCHEDULABLE_SECONDS,
        publish_metrics: bool = True,
        pre_enqueue: Callable[[PodView], bool] | None = None,
        claims_ready: Callable[[PodView], bool] | None = None,
        preempting: Callable[[PodView], bool] | None = None,
    ) -> None:
        """`pre_enqueue(pod)`, asked only for pods of a pod group (`pod.group`), and
        `claims_ready(pod)` (DynamicResources' PreEnqueue: scheduler/claim_gate.py), asked for
        every pod, each with the queue's lock held (they must not call back into the queue):
        may the pod be tried now? `preempting(pod)` (DefaultPreemption's PreEnqueue): its
        victims are still being evicted, so it waits gated until `ungate`."""
        self._clock = clock
        self.pre_enqueue = pre_enqueue
        self.claims_ready = claims_ready
        self.preempting = preempting
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_unschedulable_seconds = max_unschedulable_seconds
        self._lock = threading.Lock()
        self._wakeup = threading.Condition(self._lock)
        self._entries: dict[str, QueuedPod] = {}
        self._active: list[tuple[int, str, int, int, QueuedPod]] = []
        self._backoff: list[tuple[float, int, int, QueuedPod]] = []  # refused pods: an idle loop pops them
        self._error_backoff: list[tuple[float, int, int, QueuedPod]] = []
        self._unschedulable: dict[int, QueuedPod] = {}  # by id(): move_all must not scan every pod
        self._counts = dict.fromkeys((*QUEUES, IN_FLIGHT), 0)
        self._seq = itertools.count()
        self._move_seq = 0
        # The hinted moves (some pods only) made while pods were in flight, kept while an
        # attempt that started before them runs (binds keep pods in flight all the time).
        self._event_seq = 0
        self._events: list[tuple[int, Wakes]] = []
        self._in_flight: dict[int, QueuedPod] = {}  # by id()
        self._next_unschedulable_check = 0.0
        self._closed = False
        self._gauges = {name: metrics.QUEUE_DEPTH.labels(queue=name) for name in QUEUES} \
            if publish_metrics else {}

    # ---- reads --------------------------------------------------------------------

    def depth(self) -> dict[str, int]:
        """How many pods wait in each queue (and how many are in flight)."""
        with self._lock:
            return dict(self._counts)

    def where(self, key: str) -> str | None:
        with self._lock:
            entry = self._entries.get(key)
            return entry.where if entry is not None else None

    def get(self, key: str) -> QueuedPod | None:
        with self._lock:
            return self._entries.get(key)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    @property
    def closed(self) -> bool:
        return self._closed

    # ---- watch side -------------------------------------------------------------------

    def add(self, pod: PodView, profile: str) -> None:
        """Add a pending pod, or update the one already queued under its key.

        A pod recreated under the same name (new UID) starts over. An update that changes
        what scheduling reads moves a waiting pod forward; other updates only refresh it.
        """
        signature = scheduling_signature(pod)
        with self._lock:
            if self._closed:
                return
            now = self._clock()
            entry = self._entries.get(pod.key)
            if entry is not None and entry.uid != pod.uid:
                if entry.where == IN_FLIGHT:
                    entry.deleted = True  # the old pod's outcome must not requeue it
                else:
                    self._place(entry, "")
                entry = None
            if entry is None:
                entry = QueuedPod(pod, profile, now, signature=signature)
                self._entries[pod.key] = entry
                self._place(entry, ACTIVE if self._admitted(pod) else GATED)
                return
            changed = signature != entry.signature
            priority_changed = pod.priority != entry.pod.priority
            entry.pod, entry.profile, entry.signature = pod, profile, signature
            if entry.where == IN_FLIGHT:
                entry.deleted = False  # events are ordered: the latest one says it is pending
                return  # the outcome decides where it goes; it will use the fresh pod
            if pod.scheduling_gates:
                if entry.where != GATED:
                    self._place(entry, GATED)
                return
            if entry.where == GATED:
                if self._admitted(pod):
                    self._place(entry, ACTIVE)
            elif entry.where == UNSCHEDULABLE and changed:
                self._place(entry, BACKOFF if entry.backoff_until > now else ACTIVE)
            elif entry.where == ACTIVE and priority_changed:
                self._place(entry, ACTIVE)  # re-push with the new priority

    def delete(self, key: str) -> None:
        """The pod is gone (deleted, bound, or no longer ours): forget it wherever it is."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return
            if entry.where == IN_FLIGHT:
                entry.deleted = True
                return
            self._place(entry, "")
            del self._entries[key]

    def sync(self, profile: str, keys: Iterable[str]) -> None:
        """After a full list of `profile`'s pending pods: drop the ones the list no longer has."""
        keep = set(keys)
        with self._lock:
            for key, entry in list(self._entries.items()):
                if entry.profile == profile and key not in keep:
                    if entry.where == IN_FLIGHT:
                        entry.deleted = True
                    else:
                        self._place(entry, "")
                        del self._entries[key]

    def move_all(self, event: str = "", *, rejected_by: frozenset[str] | None = None,
                 wakes: Wakes | None = None) -> int:
        """A cluster event that may make unschedulable pods fit: give them another try.

        With `rejected_by`, only the pods some of those plugins refused move (a placed pod
        can only help pods waiting on inter-pod rules); with `wakes`, only the pods it says
        yes to (scheduler/hints.py). Pods still inside their backoff go to the backoff
        queue, the rest to active. Returns how many pods moved.
        """
        if rejected_by is not None:
            if wakes is not None:
                raise ValueError("move_all takes rejected_by or wakes, not both")
            wakes = _rejected_by_any(rejected_by)
        with self._lock:
            if wakes is None:
                self._move_seq += 1
            elif self._in_flight:
                self._event_seq += 1
                self._events.append((self._event_seq, wakes))
            now = self._clock()
            moved = 0
            for entry in list(self._unschedulable.values()):
                if wakes is not None and not wakes(entry.pod, entry.rejected_by):
                    continue
                self._place(entry, BACKOFF if entry.backoff_until > now else ACTIVE)
                moved += 1
            return moved

    def ungate(self, keys: Iterable[str]) -> int:
        """Ask `pre_enqueue` and `claims_ready` again for these gated pods (their pod group, its
        members or their claims changed); the admitted ones become active. Returns how many moved."""
        moved = 0
        with self._lock:
            for key in keys:
                entry = self._entries.get(key)
                if entry is not None and entry.where == GATED and self._admitted(entry.pod):
                    self._place(entry, ACTIVE)
                    moved += 1
        return moved

    def pop_members(self, keys: Iterable[str]) -> list[QueuedPod]:
        """Take these waiting pods out of the queue together with one just popped (a pod group's
        cycle tries its members at once): each is then in flight, as after `pop`. Pods not waiting
        (in flight, unknown) or not admitted are left where they are."""
        taken = []
        with self._lock:
            now = self._clock()
            for key in keys:
                entry = self._entries.get(key)
                if entry is None or entry.where in ("", IN_FLIGHT) or not self._admitted(entry.pod):
                    continue
                entry.attempts += 1
                entry.move_seq_at_pop = self._move_seq
                entry.event_seq_at_pop = self._event_seq
                entry.popped_at = now
                self._place(entry, IN_FLIGHT)
                taken.append(entry)
        return taken

    def retry(self, key: str) -> None:
        """Something done in the background for a waiting pod failed (an eviction): try it
        again after its backoff, without waiting for a cluster event."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.where == IN_FLIGHT:
                entry.retry_requested = True  # the attempt still runs: its requeue sends it to backoff
            if entry is None or entry.where != UNSCHEDULABLE:
                return
            entry.backoff_until = max(entry.backoff_until, self._clock() + self._backoff_for(entry))
            self._place(entry, BACKOFF, error=True)

    # ---- loop side ----------------------------------------------------------------------

    def pop(self, timeout: float | None = None) -> QueuedPod | None:
        """The next pod to schedule, waiting up to `timeout` seconds (None: until closed).

        The pod is then in flight: exactly one of `done`, `requeue_backoff`,
        `requeue_unschedulable` or `give_back` must follow.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while True:
                if self._closed:
                    return None
                self._flush_locked()
                entry = self._pop_active() or _pop_backoff(self._backoff)
                if entry is not None and not self._admitted(entry.pod):
                    self._place(entry, GATED)  # its pod group changed since it was admitted
                    continue
                if entry is not None:
                    entry.attempts += 1
                    entry.move_seq_at_pop = self._move_seq
                    entry.event_seq_at_pop = self._event_seq
                    entry.popped_at = self._clock()
                    self._place(entry, IN_FLIGHT)
                    return entry
                wait = None if deadline is None else deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    return None
                if self._error_backoff:
                    until_next = max(0.001, self._error_backoff[0][0] - self._clock())
                    wait = until_next if wait is None else min(wait, until_next)
                self._wakeup.wait(wait)

    def done(self, entry: QueuedPod) -> None:
        """The attempt ended and the pod leaves the queue (bound, or dropped on purpose)."""
        with self._lock:
            self._retire(entry)

    def requeue_backoff(self, entry: QueuedPod) -> None:
        """A transient failure (API error, node vanished): retry after the pod's backoff."""
        with self._lock:
            if self._drop_if_gone(entry):
                return
            entry.backoff_until = self._clock() + self._backoff_for(entry)
            self._place(entry, BACKOFF, error=True)

    def requeue_unschedulable(self, entry: QueuedPod) -> None:
        """No node fits. Wait for a cluster event, unless one already came during the attempt."""
        with self._lock:
            if self._drop_if_gone(entry):
                return
            now = self._clock()
            entry.backoff_until = now + self._backoff_for(entry)
            retry, entry.retry_requested = entry.retry_requested, False
            if entry.pod.scheduling_gates:
                self._place(entry, GATED)
            elif retry or self._move_seq != entry.move_seq_at_pop or self._woken_in_flight(entry):
                self._place(entry, BACKOFF)
            else:
                entry.unschedulable_since = now
                self._place(entry, UNSCHEDULABLE)

    def give_back(self, entry: QueuedPod) -> None:
        """Return a popped pod untried (leadership lost, shutting down): the attempt does not count."""
        with self._lock:
            if self._drop_if_gone(entry):
                return
            entry.attempts = max(0, entry.attempts - 1)
            self._place(entry, ACTIVE if self._admitted(entry.pod) else GATED)

    def park(self, entry: QueuedPod) -> None:
        """Return a popped pod untried to the gated set (its pod group's other members have not
        reached the queue yet); `ungate` brings it back. The attempt does not count."""
        with self._lock:
            if self._drop_if_gone(entry):
                return
            entry.attempts = max(0, entry.attempts - 1)
            self._place(entry, GATED)

    def flush(self) -> None:
        """Move due backoff pods to active, and long-waiting unschedulable pods back into play."""
        with self._lock:
            self._flush_locked()

    def close(self) -> None:
        """Wake every `pop` with None; later adds are ignored."""
        with self._lock:
            self._closed = True
            self._wakeup.notify_all()

    # ---- internals (lock held) ------------------------------------------------------------

    def _admitted(self, pod: PodView) -> bool:
        """Not gated: no scheduling gates, not running preemption, admitted by `pre_enqueue` if it
        is a group's member, and by `claims_ready`."""
        if pod.scheduling_gates:
            return False
        if self.preempting is not None and self.preempting(pod):
            return False
        if pod.group is not None and self.pre_enqueue is not None and not self.pre_enqueue(pod):
            return False
        return self.claims_ready is None or self.claims_ready(pod)

    def _woken_in_flight(self, entry: QueuedPod) -> bool:
        """Whether a hinted move made since `entry` was popped may help it."""
        since = entry.event_seq_at_pop
        return any(seq > since and wakes(entry.pod, entry.rejected_by) for seq, wakes in self._events)

    def _backoff_for(self, entry: QueuedPod) -> float:
        return backoff_seconds(entry.attempts, self.initial_backoff, self.max_backoff)

    def _drop_if_gone(self, entry: QueuedPod) -> bool:
        """Retire an outcome's entry if its pod was deleted or replaced meanwhile."""
        if entry.deleted or self._entries.get(entry.key) is not entry or self._closed:
            self._retire(entry)
            return True
        return False

    def _retire(self, entry: QueuedPod) -> None:
        """Out of every queue; also frees the key unless a newer pod (new UID) holds it."""
        if entry.where:
            self._place(entry, "")
        if self._entries.get(entry.key) is entry:
            del self._entries[entry.key]

    def _place(self, entry: QueuedPod, where: str, *, error: bool = False) -> None:
        """Move `entry` to `where` ("" = out of every queue), keeping counts and heaps right.
        `error`: a backoff after an error, which an idle loop does not cut short."""
        if entry.where:
            self._counts[entry.where] -= 1
            self._publish(entry.where)
            if entry.where == UNSCHEDULABLE:
                del self._unschedulable[id(entry)]
            elif entry.where == IN_FLIGHT:
                del self._in_flight[id(entry)]
                self._forget_old_events()
        entry.where = where
        entry.generation += 1
        if not where:
            return
        self._counts[where] += 1
        self._publish(where)
        if where == ACTIVE:
            pod = entry.pod
            heapq.heappush(
                self._active, (-pod.priority, pod.creation_timestamp, next(self._seq), entry.generation, entry)
            )
            self._wakeup.notify()
        elif where == BACKOFF:
            heapq.heappush(self._error_backoff if error else self._backoff,
                           (entry.backoff_until, next(self._seq), entry.generation, entry))
            self._wakeup.notify()
        elif where == UNSCHEDULABLE:
            self._unschedulable[id(entry)] = entry
        elif where == IN_FLIGHT:
            self._in_flight[id(entry)] = entry

    def _forget_old_events(self) -> None:
        """Drop the in-flight events no attempt still running started before: all of them when
        nothing is in flight, else (checked past a few dozen) those older than the oldest pop."""
        if not self._in_flight:
            self._events.clear()
        elif len(self._events) > _EVENTS_CHECKED_PAST:
            oldest = min(entry.event_seq_at_pop for entry in self._in_flight.values())
            self._events = [event for event in self._events if event[0] > oldest]

    def _publish(self, where: str) -> None:
        gauge = self._gauges.get(where)
        if gauge is not None:
            gauge.set(self._counts[where])

    def _pop_active(self) -> QueuedPod | None:
        active = self._active
        while active:
            _, _, _, generation, entry = heapq.heappop(active)
            if entry.generation == generation and entry.where == ACTIVE:
                return entry
        return None

    def _flush_locked(self) -> None:
        now = self._clock()
        for backoff in (self._backoff, self._error_backoff):
            while backoff and backoff[0][0] <= now:
                _, _, generation, entry = heapq.heappop(backoff)
                if entry.generation == generation and entry.where == BACKOFF:
                    self._place(entry, ACTIVE)
            # Drop stale heap items now and then so lazy deletion cannot grow without bound.
            while backoff and (backoff[0][2] != backoff[0][3].generation or backoff[0][3].where != BACKOFF):
                heapq.heappop(backoff)
        if self._counts[UNSCHEDULABLE] and self.max_unschedulable_seconds > 0 \
                and now >= self._next_unschedulable_check:
            # A scan of every entry: at most once a second, not on every pop.
            self._next_unschedulable_check = now + min(1.0, self.max_unschedulable_seconds)
            limit = now - self.max_unschedulable_seconds
            for entry in list(self._unschedulable.values()):
                if entry.unschedulable_since <= limit:
                    self._place(entry, BACKOFF if entry.backoff_until > now else ACTIVE)


def _rejected_by_any(plugins: frozenset[str]) -> Wakes:
    return lambda pod, rejected_by: bool(rejected_by & plugins)


def _pop_backoff(backoff: list[tuple[float, int, int, QueuedPod]]) -> QueuedPod | None:
    """The backing-off pod whose backoff ends first (stale heap items skipped)."""
    while backoff:
        _, _, generation, entry = heapq.heappop(backoff)
        if entry.generation == generation and entry.where == BACKOFF:
            return entry
    return None
