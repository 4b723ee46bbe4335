"""Preemption in the standalone scheduler: decide, nominate, evict in the background.

When a pod fits nowhere, the scheduling loop asks `Preemptor.attempt`. The decision is
the pure `extender.policy.preemption` (the same as simulate's and explain's); here it is
carried out as kube-scheduler v1.36 does with async preemption:

* the pod is nominated to the chosen node at once, in the cluster state (later cycles
  count its requests there against pods of lower priority) and, with its
  FailedScheduling report, in `status.nominatedNodeName`;
* pods of lower priority nominated to the same node lose their nomination;
* on a worker thread, each victim gets the condition DisruptionTarget
  (PreemptionByScheduler), is deleted (UID precondition, its own grace period), and a
  `Preempted` Event says by whom; a victim already being deleted is left alone;
* while its evictions run, the preemptor is gated (DefaultPreemption's PreEnqueue, "waiting
  for the preemption for this pod to be finished"): a cycle before its victims are gone would
  find them still there and preempt again, on another node;
* then it waits in the unschedulable queue; the victims' deletions move it (or the end of its
  evictions ungates it), and its next cycle tries the nominated node first.

A failed eviction (403, 409, 5xx...) is logged and counted, and the preemptor is retried
after its backoff, so a refusal never turns into a hot loop.
"""

from __future__ import annotations

import logging
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from extender import metrics
from extender.cluster.state import ClusterState
from extender.errors import ClusterError
from extender.kube import evicting
from extender.kube.events import post_event
from extender.model.pods import PodView
from extender.policy.decisions import Decision
from extender.policy.engine import Engine
from extender.policy.preemption import NEVER, TERMINATING_ON_NOMINATED, Candidate, Outcome, preempt
from extender.scheduler.queueing import QueuedPod, SchedulingQueue

log = logging.getLogger(__name__)

PREEMPTED = "Preempted"
PREEMPT_WORKERS = 4  # threads carrying out evictions


class Preemptor:
    def __init__(self, api_client: Any, state: ClusterState, queue: SchedulingQueue, *, instance: str = "",
                 workers: int = PREEMPT_WORKERS, rng: random.Random | None = None) -> None:
        self.api_client = api_client
        self.state = state
        self.queue = queue
        self.instance = instance
        self.rng = rng or random.Random()
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="preempt") \
            if api_client is not None else None
        self._lock = threading.Lock()
        self._evicting: set[str] = set()  # preemptors whose victims are being evicted

    def running(self, pod: PodView) -> bool:
        """Whether `pod`'s evictions still run (the queue's `preempting` gate; asked under its lock)."""
        return pod.key in self._evicting

    def attempt(self, entry: QueuedPod, engine: Engine, decision: Decision) -> tuple[Outcome, str | None]:
        """Run preemption for a pod no node could take; nominate and start evicting on success.

        Returns the outcome and what the pod's status.nominatedNodeName should become: the
        chosen node, "" when a nomination is given up, None to leave it as it is.
        """
        pod = entry.pod
        nominated = self.state.nominated_node(pod.key) or pod.nominated_node_name
        outcome = preempt(engine.prepare(pod, self.state), decision, self.state.all_node_infos(), self.state,
                          self.state.disruption_budgets(), rng=self.rng, nominated=nominated)
        candidate = outcome.candidate
        if candidate is None:
            result = "not-eligible" if outcome.message in (NEVER, TERMINATING_ON_NOMINATED) else "no-candidate"
            metrics.PREEMPTION_ATTEMPTS.labels(result=result).inc()
            log.info("preemption found no node", extra={"fields": {
                "pod": pod.key, "profile": entry.profile, "message": outcome.message}})
            if result == "no-candidate" and nominated:
                # kube-scheduler nominates "" then: the old node can no longer be freed for it.
                self.state.nominator.clear(pod.key)
                return outcome, ""
            return outcome, None
        metrics.PREEMPTION_ATTEMPTS.labels(result="nominated").inc()
        self._take_over(entry, candidate.node)
        log.info("preempting", extra={"fields": {
            "pod": pod.key, "profile": entry.profile, "node": candidate.node,
            "victims": ",".join(v.key for v in candidate.victims), "pdb_violations": candidate.pdb_violations}})
        if self._pool is not None:
            with self._lock:
                self._evicting.add(pod.key)
            if not self._submit(self._evict_gated, entry, candidate):
                self._release(pod.key)
        return outcome, candidate.node

    def close(self, timeout: float | None = 10.0) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=timeout is None or timeout > 0, cancel_futures=not timeout)

    # ---- internals -----------------------------------------------------------------

    def _take_over(self, entry: QueuedPod, node: str) -> None:
        """Nominate the pod to `node`; lower-priority pods nominated there lose their claim."""
        pod = entry.pod
        for other in self.state.nominations().get(node, ()):
            if other.key != pod.key and other.priority < pod.priority:
                self.state.nominator.clear(other.key)
                namespace, _, name = other.key.partition("/")
                self._submit(evicting.clear_nominated_node, self.api_client, namespace, name)
        self.state.nominator.nominate(pod, node)

    def _submit(self, fn: Any, *args: Any) -> bool:
        if self._pool is None:
            return False
        try:
            self._pool.submit(self._run, fn, *args)
        except RuntimeError:  # shutting down
            return False
        return True

    def _evict_gated(self, entry: QueuedPod, candidate: Candidate) -> None:
        try:
            self._evict(entry, candidate)
        finally:
            self._release(entry.key)

    def _release(self, key: str) -> None:
        """The evictions ended: the preemptor may be tried again (its victims' deletions may have
        come while it was gated, and gated pods do not wait for cluster events)."""
        with self._lock:
            self._evicting.discard(key)
        self.queue.ungate([key])

    @staticmethod
    def _run(fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except Exception:  # a background step must never take the pool down
            log.exception("preemption step failed")

    def _evict(self, entry: QueuedPod, candidate: Candidate) -> None:
        pod = entry.pod
        condition = f"{pod.scheduler_name}: preempting to accommodate a higher priority pod"
        note = f"Preempted by pod {pod.uid} on node {candidate.node}"
        failed = 0
        for victim in candidate.victims:
            if victim.deleting:
                metrics.PREEMPTION_VICTIMS.labels(outcome="already-deleting").inc()
                continue
            namespace, name = victim.namespace, victim.name
            try:
                if evicting.mark_disruption_target(self.api_client, namespace, name, condition) and \
                        evicting.delete_pod(self.api_client, namespace, name, victim.uid):
                    post_event(self.api_client, {"namespace": namespace, "name": name, "uid": victim.uid},
                               reason=PREEMPTED, message=note, type="Normal", action="Preempting",
                               reporting_controller=entry.profile, reporting_instance=self.instance)
                    metrics.PREEMPTION_VICTIMS.labels(outcome="evicted").inc()
                else:
                    metrics.PREEMPTION_VICTIMS.labels(outcome="already-gone").inc()
            except ClusterError as exc:
                failed += 1
                metrics.PREEMPTION_VICTIMS.labels(outcome="failed").inc()
                log.warning("cannot evict %s for %s: %s", victim.key, pod.key, exc)
        if failed:
            self.queue.retry(pod.key)  # after its backoff: preemption runs again with fresh data
