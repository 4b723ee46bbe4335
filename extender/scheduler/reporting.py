"""Reporting every scheduling outcome: an Event, the PodScheduled condition, a log line, a metric.

A failed attempt must never be silent, and reporting must never slow scheduling: the
API calls (Events, the pods/status patch) run on a small thread pool of their own, so
the loop and the bind workers never wait for them. Log lines and metrics are written
at once, on the caller's thread.

Messages are kube-scheduler's: `Successfully assigned ns/pod to node` for `Scheduled`,
and the decision's "0/N nodes are available: ..." summary for `FailedScheduling` and
the PodScheduled=False/Unschedulable condition, so `kubectl describe pod` reads the same
as for the default scheduler. An identical failure report for the same pod is posted
at most once a minute (the log line and the metric still count every attempt).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from extender import metrics
from extender.kube.events import post_event, set_pod_scheduled_condition
from extender.policy.decisions import Decision
from extender.policy.preemption import Outcome
from extender.scheduler.profiles import DEFAULT_SCHEDULER_NAME
from extender.scheduler.queueing import QueuedPod

log = logging.getLogger(__name__)

SCHEDULED = "scheduled"
UNSCHEDULABLE = "unschedulable"
ERROR = "error"

REASON_SCHEDULED = "Scheduled"
REASON_FAILED = "FailedScheduling"
CONDITION_UNSCHEDULABLE = "Unschedulable"
CONDITION_ERROR = "SchedulerError"
REPEAT_INTERVAL = 60.0  # an identical failure report for the same pod is posted at most once a minute
_REMEMBERED_FAILURES = 50_000
REPORT_WORKERS = 4  # threads posting Events and PodScheduled patches


def scheduled_message(entry: QueuedPod, node: str) -> str:
    return f"Successfully assigned {entry.key} to {node}"


def _pod_ref(entry: QueuedPod) -> dict[str, str]:
    pod = entry.pod
    return {"namespace": pod.namespace, "name": pod.name, "uid": pod.uid}


class Reporter:
    """Posts Events and conditions asynchronously; logs and counts synchronously.

    `api_client` None reports to logs and metrics only (tests, dry runs). `is_placed(key)`
    tells whether a pod has meanwhile been bound or assumed: a late PodScheduled=False
    patch must not land on a pod that was placed in the meantime.
    """

    def __init__(
        self,
        api_client: Any,
        *,
        instance: str = "",
        workers: int = REPORT_WORKERS,
        max_backlog: int = 10_000,
        is_placed: Callable[[str], bool] | None = None,
        repeat_interval: float = REPEAT_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api_client = api_client
        self.instance = instance
        self.max_backlog = max_backlog
        self.is_placed = is_placed
        self.repeat_interval = repeat_interval
        self._clock = clock
        self._last_failure: OrderedDict[tuple[str, str], tuple[str, float]] = OrderedDict()
        self.dropped = 0
        self.repeats_skipped = 0
        self._backlog = 0
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="report") \
            if api_client is not None else None

    # ---- outcomes -------------------------------------------------------------------

    def scheduled(self, entry: QueuedPod, node: str, *, duration: float) -> None:
        """The bind succeeded."""
        with self._lock:
            self._last_failure.pop((entry.key, entry.uid), None)
        metrics.SCHEDULE_ATTEMPTS.labels(profile=entry.profile, result=SCHEDULED).inc()
        log.info("pod scheduled", extra={"fields": {
            "pod": entry.key, "profile": entry.profile, "result": SCHEDULED, "node": node,
            "attempts": entry.attempts, "duration_ms": round(duration * 1000, 2),
        }})
        self._submit(self._post_event, entry, REASON_SCHEDULED, scheduled_message(entry, node), "Normal")

    def unschedulable(self, entry: QueuedPod, decision: Decision, *, duration: float,
                      preemption: Outcome | None = None, nominated_node: str | None = None) -> None:
        """No node fits: FailedScheduling with the summary, and PodScheduled=False/Unschedulable.

        As kube-scheduler words it, a failed preemption adds " preemption: <why>" to the
        summary; `nominated_node` (the preemption's node, "" to clear) goes into
        status.nominatedNodeName with the condition."""
        message = decision.summary()
        if preemption is not None and preemption.message:
            message = f"{message} preemption: {preemption.message}"
        metrics.SCHEDULE_ATTEMPTS.labels(profile=entry.profile, result=UNSCHEDULABLE).inc()
        log.info("pod unschedulable", extra={"fields": {
            "pod": entry.key, "profile": entry.profile, "result": UNSCHEDULABLE, "message": message,
            "attempts": entry.attempts, "duration_ms": round(duration * 1000, 2),
            **({"nominated_node": nominated_node} if nominated_node else {}),
        }})
        if self._repeated(entry, f"{message}\0{nominated_node}"):
            return
        self._submit(self._post_failure, entry, message, CONDITION_UNSCHEDULABLE, nominated_node)

    def unschedulable_message(self, entry: QueuedPod, message: str, *, duration: float) -> None:
        """Unschedulable for a reason of its pod group (the gang cannot complete, its wait ran
        out): FailedScheduling and PodScheduled=False/Unschedulable with `message`."""
        metrics.SCHEDULE_ATTEMPTS.labels(profile=entry.profile, result=UNSCHEDULABLE).inc()
        log.info("pod unschedulable", extra={"fields": {
            "pod": entry.key, "profile": entry.profile, "result": UNSCHEDULABLE, "message": message,
            "attempts": entry.attempts, "duration_ms": round(duration * 1000, 2),
        }})
        if self._repeated(entry, message):
            return
        self._submit(self._post_failure, entry, message, CONDITION_UNSCHEDULABLE)

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        """Run another report (a pod group's status) on the reporting pool, bounded the same way."""
        self._submit(fn, *args)

    def failed(self, entry: QueuedPod, message: str, *, duration: float, node: str = "") -> None:
        """The attempt failed for a reason other than fit (plugin error, bind refused)."""
        metrics.SCHEDULE_ATTEMPTS.labels(profile=entry.profile, result=ERROR).inc()
        log.warning("pod scheduling failed", extra={"fields": {
            "pod": entry.key, "profile": entry.profile, "result": ERROR, "node": node or None,
            "message": message, "attempts": entry.attempts, "duration_ms": round(duration * 1000, 2),
        }})
        if self._repeated(entry, message):
            return
        self._submit(self._post_failure, entry, message, CONDITION_ERROR)

    def dropped_pod(self, entry: QueuedPod, message: str, *, node: str = "") -> None:
        """A bind the API server refused for good (already bound, recreated, deleting): log only.

        Nothing is posted: the pod is no longer ours to report on, and another scheduler
        (or the new pod under the same name) owns its story now.
        """
        log.info("pod dropped", extra={"fields": {
            "pod": entry.key, "profile": entry.profile, "result": "dropped", "node": node or None,
            "message": message,
        }})

    def invalid_pod(self, pod: dict[str, Any] | Any, message: str) -> None:
        """A pending pod whose fields cannot be read: say so on the pod, it will never be placed."""
        meta = pod.get("metadata") if isinstance(pod, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        ref = {"namespace": str(meta.get("namespace") or "default"), "name": str(meta.get("name") or ""),
               "uid": str(meta.get("uid") or "")}
        scheduler = str((pod.get("spec") or {}).get("schedulerName") or "") if isinstance(pod, dict) else ""
        metrics.SCHEDULE_ATTEMPTS.labels(profile=scheduler, result=ERROR).inc()
        self._submit(self._post_invalid, ref, scheduler, message)

    def _post_invalid(self, ref: dict[str, str], scheduler: str, message: str) -> None:
        post_event(self.api_client, ref, reason=REASON_FAILED, message=message, type="Warning",
                   action="Scheduling", reporting_controller=scheduler or DEFAULT_SCHEDULER_NAME,
                   reporting_instance=self.instance)

    def close(self, timeout: float | None = 10.0) -> None:
        """Finish what is queued (up to `timeout`), then stop the pool."""
        if self._pool is None:
            return
        done = threading.Event()
        pool = self._pool

        def drain() -> None:
            pool.shutdown(wait=True)
            done.set()

        threading.Thread(target=drain, name="report-drain", daemon=True).start()
        if not done.wait(timeout):
            log.warning("reporting did not drain within %.1f s; %d calls left", timeout or 0, self._backlog)

    def _repeated(self, entry: QueuedPod, message: str) -> bool:
        """Whether this pod was told exactly this within `repeat_interval` (then say nothing).

        Every cluster change retries every waiting pod; without this, a busy cluster would
        post an identical FailedScheduling Event per pod per node heartbeat. kube-scheduler's
        event correlator aggregates such repeats in the same spirit.
        """
        key = (entry.key, entry.uid)
        now = self._clock()
        with self._lock:
            last = self._last_failure.get(key)
            if last is not None and last[0] == message and now - last[1] < self.repeat_interval:
                self.repeats_skipped += 1
                return True
            self._last_failure[key] = (message, now)
            self._last_failure.move_to_end(key)
            while len(self._last_failure) > _REMEMBERED_FAILURES:
                self._last_failure.popitem(last=False)
        return False

    # ---- API calls (on the pool) ------------------------------------------------------

    def _submit(self, fn: Callable[..., None], *args: Any) -> None:
        if self._pool is None:
            return
        with self._lock:
            if self._backlog >= self.max_backlog:
                self.dropped += 1
                if self.dropped == 1 or self.dropped % 1000 == 0:
                    log.warning("reporting backlog full (%d): %d reports dropped", self._backlog, self.dropped)
                return
            self._backlog += 1
        try:
            self._pool.submit(self._run, fn, *args)
        except RuntimeError:  # shut down: the process is stopping
            with self._lock:
                self._backlog -= 1

    def _run(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:  # reporting must never take a worker down
            log.exception("reporting failed")
        finally:
            with self._lock:
                self._backlog -= 1

    def _post_event(self, entry: QueuedPod, reason: str, message: str, type_: str) -> None:
        post_event(self.api_client, _pod_ref(entry), reason=reason, message=message, type=type_,
                   action="Binding" if reason == REASON_SCHEDULED else "Scheduling",
                   reporting_controller=entry.profile, reporting_instance=self.instance)

    def _post_failure(self, entry: QueuedPod, message: str, condition_reason: str,
                      nominated_node: str | None = None) -> None:
        post_event(self.api_client, _pod_ref(entry), reason=REASON_FAILED, message=message, type="Warning",
                   action="Scheduling", reporting_controller=entry.profile, reporting_instance=self.instance)
        if self.is_placed is not None and self.is_placed(entry.key):
            return  # placed since: the API server already set PodScheduled=True
        set_pod_scheduled_condition(self.api_client, entry.pod.namespace, entry.pod.name, status="False",
                                    reason=condition_reason, message=message, nominated_node=nominated_node)
