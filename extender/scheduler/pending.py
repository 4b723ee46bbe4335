"""The watch of pods waiting for us: unbound, not finished, and naming our schedulerName.

All three conditions are server-side field selectors
(`spec.schedulerName=NAME,spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed`), so
the API server sends only our pods, and a pod that gets bound (by us or anyone) or finishes
stops matching and arrives as DELETED. "Not finished" rather than `status.phase=Pending`, as
kube-scheduler's pod informer selects: a pod whose status was replaced without a phase
(scheduler_perf's EventHandlingPodUpdate does that) is still to be scheduled. Field selectors cannot OR two values, so a process
with several profiles runs one watch per schedulerName.

Pods with a deletionTimestamp are never scheduled (the API server would refuse the
bind). Gated pods go to the queue's gated set, which holds them until an update
without gates arrives. The Reflector does the list+watch mechanics (resourceVersion,
bookmarks, 410 re-list, backoff).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from extender.errors import InvalidObject
from extender.kube.watching import Reflector
from extender.model.fields import object_key, part_of
from extender.model.pods import PodView
from extender.scheduler.queueing import SchedulingQueue

log = logging.getLogger(__name__)

PODS_PATH = "/api/v1/pods"

InvalidPodHandler = Callable[[Mapping[str, Any], str], None]


def pending_field_selector(scheduler_name: str) -> str:
    return f"spec.schedulerName={scheduler_name},spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed"


class PendingPods:
    """Feeds one profile's pending pods into the queue. Callbacks run on the watch thread."""

    def __init__(
        self,
        api_client: Any,
        scheduler_name: str,
        queue: SchedulingQueue,
        *,
        on_invalid: InvalidPodHandler | None = None,
        on_member: Callable[[PodView], None] | None = None,
        **reflector_options: Any,
    ) -> None:
        """`on_member(pod)`: a pod of a pod group was queued (its gated siblings may now go)."""
        self.scheduler_name = scheduler_name
        self.queue = queue
        self.on_invalid = on_invalid
        self.on_member = on_member
        self.reflector = Reflector(
            api_client, PODS_PATH, resource=f"pending-pods-{scheduler_name}",
            field_selector=pending_field_selector(scheduler_name),
            on_list=self.handle_list, on_event=self.handle_event,
            # A list's pods lose their managedFields before decoding; an event's, in _offer.
            trim_managed_fields=True, **reflector_options,
        )

    def start(self) -> None:
        self.reflector.start()

    def stop(self, timeout: float = 5.0) -> None:
        self.reflector.stop(timeout)

    @property
    def synced(self) -> bool:
        return self.reflector.synced

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self.reflector.wait_synced(timeout)

    # ---- reflector callbacks -------------------------------------------------------

    def handle_list(self, items: Iterable[dict[str, Any]]) -> None:
        """A full list: queue every pod in it, drop queued pods it no longer has."""
        seen = []
        for obj in items:
            key = self._offer(obj)
            if key is not None:
                seen.append(key)
        self.queue.sync(self.scheduler_name, seen)

    def handle_event(self, kind: str, obj: dict[str, Any]) -> None:
        if kind == "DELETED":
            key = object_key(obj)
            if key is not None:
                self.queue.delete(key)
            return
        self._offer(obj)

    def _offer(self, obj: Mapping[str, Any]) -> str | None:
        """Queue one pod, or take it out of the queue; returns the key when it is queued."""
        key = object_key(obj)
        if key is None:
            log.warning("pending pod without metadata.name skipped")
            return None
        meta = obj.get("metadata") or {}
        if isinstance(meta, dict):
            # A queued pod keeps its object (PodView.raw) until it is bound, days for a gated
            # one: not its managedFields, which nothing here reads (about 4 KB a pod).
            meta.pop("managedFields", None)
        spec = part_of(obj, "spec")
        if meta.get("deletionTimestamp") or spec.get("nodeName"):
            self.queue.delete(key)
            return None
        try:
            pod = PodView.from_dict(obj)
        except InvalidObject as exc:
            log.warning("pending pod cannot be read", extra={"fields": {
                "pod": key, "profile": self.scheduler_name, "error": str(exc)}})
            self.queue.delete(key)
            if self.on_invalid is not None:
                self.on_invalid(obj, f"pod cannot be scheduled: {exc}")
            return None
        if pod.scheduler_name != self.scheduler_name:
            return None  # a server without field selectors on schedulerName; never happens on a real one
        self.queue.add(pod, self.scheduler_name)
        if pod.group is not None and self.on_member is not None:
            self.on_member(pod)
        return key
