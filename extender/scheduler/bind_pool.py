"""Asynchronous binds: the loop decides, a small thread pool talks to the API server.

A bind is one API round-trip; waiting for it in the loop would cap throughput at one
pod per round-trip. The loop therefore *assumes* the pod on its node in the cluster
state (so the next pod already sees the space taken) and hands the bind to a worker.

Just before the call the worker checks the node still exists, is Ready and is not
cordoned (unless the pod tolerates the cordon): the decision may be some milliseconds old. On failure the assumption is
forgotten and, since freed space may help other pods, unschedulable pods are moved
back. What happens to the pod depends on why the bind failed:

* already bound, recreated (UID mismatch), being deleted, gated, gone: the API server
  will refuse every retry, so the pod is dropped (a newer version, if any, comes back
  through the pending watch); one already bound stays counted on the node it is bound to
  until the watch shows it there;
* anything else (429, 5xx, network, node vanished): retry after the pod's backoff.

Bind-time actions (reservations' PreBind work, such as waiting for a pod's volumes to be
bound) run before the bind, on a pool of their own: a pod may wait minutes for a volume
to be provisioned, and those waits must not hold up the binds of other pods (kube-scheduler
gives every binding cycle its own goroutine). `shutdown` ends the waits at once.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from extender import metrics
from extender.cluster import prebinding
from extender.cluster.state import ClusterState
from extender.cycle import steps
from extender.errors import ClusterError, ConflictError, NotFoundError
from extender.model.pods import PodView
from extender.policy.builtin.readiness import UNSCHEDULABLE_TAINT
from extender.policy.reservations import (
    Reservation,
    all_actions,
    all_undo,
    release_all,
)
from extender.scheduler.queueing import QueuedPod, SchedulingQueue
from extender.scheduler.reporting import Reporter

log = logging.getLogger(__name__)

# BIND_ERRORS reasons.
ALREADY_BOUND = "already-bound"
RECREATED = "recreated"
DELETING = "deleting"
GATED = "gated"
NOT_FOUND = "not-found"
CONFLICT = "conflict"
NODE_UNAVAILABLE = "node-unavailable"
FINAL_REASONS = frozenset({ALREADY_BOUND, RECREATED, DELETING, GATED, NOT_FOUND})
_BOUND_TO = re.compile(r"already assigned to node \"?([^\"\s]+)")


def conflict_reason(error: ClusterError) -> str:
    """Classify a refused bind by the (translated) message the binders raise."""
    if isinstance(error, NotFoundError):
        return NOT_FOUND
    text = str(error).lower()
    if "already assigned" in text or "already bound" in text:
        return ALREADY_BOUND
    if "recreated" in text or "uid mismatch" in text or "precondition" in text:
        return RECREATED
    if "being deleted" in text:
        return DELETING
    if "gate" in text:
        return GATED
    return CONFLICT


def error_reason(error: ClusterError) -> str:
    """A BIND_ERRORS label for a non-conflict failure: the HTTP status, else the error's own
    reason (`volume-binding` for a bind-time volume check), else `unreachable`."""
    if error.status is not None:
        return str(error.status)
    return error.reason or "unreachable"


def node_problem(state: ClusterState, node: str, pod: PodView | None = None) -> str:
    """Why `node` cannot take `pod` right now ("" if it can): gone, NotReady, cordoned.

    A cordoned node is no problem for a pod that tolerates the cordon taint, as for the
    NodeReady filter and kube-scheduler's NodeUnschedulable (DaemonSet pods do)."""
    info = state.node_info(node)
    if info is None:
        return f"node {node} no longer exists"
    if not info.node.ready:
        return f"node {node} is not Ready"
    if info.node.unschedulable and not (pod is not None and _tolerates_cordon(pod)):
        return f"node {node} is cordoned"
    return ""


def _tolerates_cordon(pod: PodView) -> bool:
    return any(t.tolerates(UNSCHEDULABLE_TAINT, "", "NoSchedule") for t in pod.tolerations)


@dataclass(frozen=True, slots=True)
class BindJob:
    entry: QueuedPod
    node: str
    started: float  # perf_counter when the pod was popped
    reservations: tuple[Reservation, ...] = ()


class BindPool:
    """Runs binds on `workers` threads; `may_bind()` is asked again right before each call."""

    def __init__(
        self,
        binder: Any,
        state: ClusterState,
        queue: SchedulingQueue,
        reporter: Reporter,
        *,
        workers: int = 16,
        prebind_workers: int = 64,
        may_bind: Callable[[], bool] = lambda: True,
        on_undone: Callable[[QueuedPod], None] | None = None,
    ) -> None:
        """`on_undone(entry)`: a pod's place was given back (bind failed or not tried)."""
        self.binder = binder
        self.on_undone = on_undone
        self.state = state
        self.queue = queue
        self.reporter = reporter
        self.may_bind = may_bind
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="bind")
        # Binds with bind-time actions (volumes): mostly asleep, waiting for controllers.
        self._prebind_pool = ThreadPoolExecutor(max_workers=max(1, prebind_workers), thread_name_prefix="prebind")
        self._lock = threading.Condition()
        self._in_flight = 0
        self._stopping = threading.Event()  # ends bind-time waits (volumes) on shutdown

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def submit(self, entry: QueuedPod, node: str, started: float,
               reservations: Sequence[Reservation] = ()) -> None:
        job = BindJob(entry, node, started, tuple(reservations))
        with self._lock:
            self._in_flight += 1
        pool = self._prebind_pool if all_actions(job.reservations) else self._pool
        try:
            pool.submit(self._run, job)
        except RuntimeError:  # shut down under us: undo as if the bind had never been tried
            self._finish()
            self._unassume(job)
            self.queue.give_back(entry)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every submitted bind finished; False on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: self._in_flight == 0, timeout)

    def shutdown(self, timeout: float | None = 10.0) -> bool:
        self._stopping.set()
        drained = self.drain(timeout)
        for pool in (self._pool, self._prebind_pool):
            pool.shutdown(wait=drained, cancel_futures=not drained)
        return drained

    def _finish(self) -> None:
        with self._lock:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._lock.notify_all()

    def _run(self, job: BindJob) -> None:
        try:
            self._bind(job)
        except Exception:  # never lose a pod to a bug: forget it and retry later
            log.exception("bind worker failed for %s", job.entry.key)
            self._undo(job)
            self.queue.requeue_backoff(job.entry)
        finally:
            self._finish()

    def _keep_counted(self, job: BindJob, node: str) -> None:
        """The pod is bound already, to `node`, by another process (a previous leader whose bind
        the API server took late, after an etcd outage): keep it counted there until the watch
        shows it. Forgetting it would show its room free meanwhile, and the next pod could take
        it (seen under chaos: 4.5 cpus bound on a 4-cpu node, docs/reliability.md)."""
        self._release(job)
        if self.on_undone is not None:
            self.on_undone(job.entry)
        self.state.assume(job.entry.key, node, uid=job.entry.pod.uid, view=job.entry.pod)

    def _undo(self, job: BindJob) -> None:
        self._unassume(job)
        # The space it held is free again: pods waiting for space may fit now.
        self.queue.move_all("assumed-pod-forgotten")

    def _unassume(self, job: BindJob) -> None:
        self._release(job)
        self.state.forget(job.entry.key)
        if self.on_undone is not None:
            self.on_undone(job.entry)

    def _undo_writes(self, job: BindJob) -> None:
        """Take back what the bind-time actions wrote (Unreserve's API side: a claim's reservation),
        when the pod is not bound after them; a failure is logged, the pod is requeued anyway."""
        undo = all_undo(job.reservations)
        if not undo:
            return
        try:
            self.binder.prebind(undo)
        except Exception:  # the bind failed already: the retry meets what is left, as kube-scheduler's does
            log.exception("undoing the bind-time writes of %s failed", job.entry.key)

    @staticmethod
    def _release(job: BindJob) -> None:
        try:
            release_all(job.reservations)
        except Exception:  # a plugin's bug must not lose the pod: log it, the pod is requeued anyway
            log.exception("releasing the reservations of %s failed", job.entry.key)

    def _bind(self, job: BindJob) -> None:
        entry, node = job.entry, job.node
        pod = entry.pod
        if not self.may_bind():
            # Leadership lost (or stopping without finishing): hand the pod back untried.
            self._unassume(job)
            self.queue.give_back(entry)
            return
        problem = node_problem(self.state, node, pod)
        if problem:
            metrics.BIND_ERRORS.labels(reason=NODE_UNAVAILABLE).inc()
            self._undo(job)
            self.reporter.failed(entry, f"Binding rejected: {problem}", node=node,
                                 duration=time.perf_counter() - job.started)
            self.queue.requeue_backoff(entry)
            return
        actions = all_actions(job.reservations)
        try:
            if actions:
                with prebinding.stoppable(self._stopping):
                    self.binder.prebind(actions)
                if not self.may_bind():  # leadership lost while waiting: the next leader takes it
                    self._undo_writes(job)
                    self._unassume(job)
                    self.queue.give_back(entry)
                    return
            steps.bind(self.binder, pod, node, job.reservations)
        except (ConflictError, NotFoundError) as exc:
            if actions:
                self._undo_writes(job)
            reason = conflict_reason(exc)
            metrics.BIND_ERRORS.labels(reason=reason).inc()
            bound_to = _BOUND_TO.search(str(exc)) if reason == ALREADY_BOUND else None
            if bound_to:
                self._keep_counted(job, bound_to.group(1))
            else:
                self._undo(job)
            if reason in FINAL_REASONS:
                self.reporter.dropped_pod(entry, str(exc), node=node)
                self.queue.done(entry)
            else:
                self.reporter.failed(entry, f"Binding rejected: {exc}", node=node,
                                     duration=time.perf_counter() - job.started)
                self.queue.requeue_backoff(entry)
            return
        except ClusterError as exc:
            if actions:
                self._undo_writes(job)
            metrics.BIND_ERRORS.labels(reason=error_reason(exc)).inc()
            self._undo(job)
            self.reporter.failed(entry, f"Binding rejected: {exc}", node=node,
                                 duration=time.perf_counter() - job.started)
            self.queue.requeue_backoff(entry)
            return
        self.queue.done(entry)
        self.reporter.scheduled(entry, node, duration=time.perf_counter() - job.started)
