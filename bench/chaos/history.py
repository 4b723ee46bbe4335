"""The checker's own watch of every pod, from before the first pod to the end of the run.

It talks to kube-apiserver directly, not through the fault proxy, so the proxy's cuts and
delays do not touch it; kube-apiserver and etcd restarts do cut it, and it resumes from the
last resourceVersion it saw. When it cannot (410 Gone after a compaction), it lists again
and writes the difference as events stamped with the list's time: a gap, counted, in which
a pod bound and deleted between two looks would be missed. Every event is stamped with
the run's clock on arrival.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

import orjson
import requests

from bench.chaos.checker import PodEvent, node_of, uid
from bench.chaos.dra_checks import ClaimEvent
from bench.watchstream import watch_events

GONE = 410


class Gone(Exception):
    """The watch's resourceVersion was compacted away: list again."""


def _trim(pod: dict[str, Any]) -> dict[str, Any]:
    meta = dict(pod.get("metadata") or {})
    meta.pop("managedFields", None)
    return {**pod, "metadata": meta}


class PodWatch:
    """Watches pods cluster-wide into ``events``; ``bound_at[ns/name]`` is when each pod's
    nodeName first arrived (for probes); ``clock`` gives the run's seconds."""

    PATH = "/api/v1/pods"

    def __init__(self, base_url: str, token: str, ca_file: str, clock: Callable[[], float]) -> None:
        self.base_url = base_url
        self.verify = ca_file
        self.clock = clock
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"
        self.events: list[PodEvent] = []
        self.bound_at: dict[str, float] = {}
        self.gaps = 0
        self.reconnects = 0
        self._known: dict[str, dict[str, Any]] = {}  # uid -> the pod as last seen
        self._version = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._response: requests.Response | None = None
        self._thread = threading.Thread(target=self._run, name="chaos-pod-watch", daemon=True)

    def start(self) -> PodWatch:
        self._list()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(Exception):
            self._response.raw._fp.fp.raw._sock.shutdown(2)  # type: ignore[union-attr]  # wake read1
        with contextlib.suppress(Exception):
            self._response.close()  # type: ignore[union-attr]
        self._thread.join(10)
        self.session.close()

    def snapshot(self) -> list[PodEvent]:
        with self._lock:
            return list(self.events)

    def _remember(self, kind: str, obj: dict[str, Any]) -> None:
        """What the next re-list compares with (lock held)."""
        if kind == "DELETED":
            self._known.pop(uid(obj), None)
        else:
            self._known[uid(obj)] = obj

    def _record(self, kind: str, pod: dict[str, Any], at: float) -> None:
        pod = _trim(pod)
        with self._lock:
            self.events.append(PodEvent(at, kind, pod))
            self._remember(kind, pod)
            meta = pod.get("metadata") or {}
            name = f"{meta.get('namespace')}/{meta.get('name')}"
            if node_of(pod) and kind != "DELETED":
                self.bound_at.setdefault(name, at)

    def _list(self) -> None:
        """List every pod; what changed since the last look becomes events (all ADDED at the start)."""
        reply = self.session.get(f"{self.base_url}{self.PATH}", verify=self.verify, timeout=30)
        reply.raise_for_status()
        listed = orjson.loads(reply.content)
        now = self.clock()
        items = listed.get("items") or []
        seen = {uid(item) for item in items}
        # What went first: a device or a node freed in the gap is free before it is taken again.
        for gone in [p for u, p in self._known.items() if u not in seen]:
            self._record("DELETED", gone, now)
        changed = []
        for item in items:
            before = self._known.get(uid(item))
            if before is None:
                changed.append(("ADDED", item))
            elif before["metadata"].get("resourceVersion") != item["metadata"].get("resourceVersion"):
                changed.append(("MODIFIED", item))
        for kind, item in sorted(changed, key=lambda change: self._holds(change[1])):
            self._record(kind, item, now)
        self._version = listed["metadata"]["resourceVersion"]

    @staticmethod
    def _holds(obj: dict[str, Any]) -> bool:
        """Does `obj` hold anything (a pod on a node)? Those come last in a re-list."""
        return bool(node_of(obj))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._watch()
            except Gone:
                self.gaps += 1
                self._relist()
            except Exception:  # noqa: BLE001 - a cut connection or a server restarting: resume
                if self._stop.is_set():
                    return
                self.reconnects += 1
                self._stop.wait(0.2)

    def _relist(self) -> None:
        while not self._stop.is_set():
            try:
                self._list()
                return
            except (requests.RequestException, ValueError, KeyError):
                self._stop.wait(0.5)

    def _watch(self) -> None:
        self._response = self.session.get(
            f"{self.base_url}{self.PATH}",
            params={"watch": "true", "resourceVersion": self._version, "allowWatchBookmarks": "true",
                    "timeoutSeconds": "600"},
            stream=True, verify=self.verify, timeout=(5, 700),
        )
        if self._response.status_code == GONE:
            raise Gone()
        self._response.raise_for_status()
        for event, now in watch_events(self._response.raw, self._stop.is_set, self.clock):
            self._event(event, now)

    def _event(self, event: dict[str, Any], now: float) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == GONE:
                raise Gone()
            raise RuntimeError(f"watch error: {obj.get('message')}")
        self._version = (obj.get("metadata") or {}).get("resourceVersion") or self._version
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self._record(str(kind), obj, now)


class ClaimWatch(PodWatch):
    """The same watch over every ResourceClaim (resource.k8s.io/v1), into ``claim_events``
    (bench.chaos.dra_checks.ClaimEvent), for the DRA checks: one watch of one resource is in
    etcd's order, so a device freed by one claim and taken by another is seen in that order."""

    PATH = "/apis/resource.k8s.io/v1/resourceclaims"

    def __init__(self, base_url: str, token: str, ca_file: str, clock: Callable[[], float]) -> None:
        super().__init__(base_url, token, ca_file, clock)
        self.claim_events: list[ClaimEvent] = []
        self._thread.name = "chaos-claim-watch"

    @staticmethod
    def _holds(obj: dict[str, Any]) -> bool:
        return bool((obj.get("status") or {}).get("allocation"))

    def snapshot_claims(self) -> list[ClaimEvent]:
        with self._lock:
            return list(self.claim_events)

    def _record(self, kind: str, obj: dict[str, Any], at: float) -> None:
        obj = _trim(obj)
        with self._lock:
            self.claim_events.append(ClaimEvent(at, kind, obj))
            self._remember(kind, obj)
