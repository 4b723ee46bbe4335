"""A test's own watch of one namespace's pods: every nodeName each pod was seen with, in order.

"Bound exactly once" is a claim about history, not about the end state: a pod bound, then
bound elsewhere (or unbound and bound again) ends with one nodeName too. This watch starts
before the first pod and resumes from the last resourceVersion after a cut, so a change of
nodeName cannot slip between two looks.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from tests.fakeapi.client import KubeTestClient

WATCH_SECONDS = 5  # each watch request's length: how long stop() may wait


class NodeNames:
    """`seen[name]`: the distinct nodeNames pod `name` had, in the order they appeared;
    `first_bound[name]`: when (time.monotonic) its first nodeName arrived."""

    def __init__(self, kube: KubeTestClient, namespace: str) -> None:
        self.kube = kube
        self.path = f"/api/v1/namespaces/{namespace}/pods"
        self.seen: dict[str, list[str]] = {}
        self.first_bound: dict[str, float] = {}
        self._version = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="test-pod-watch", daemon=True)

    def start(self) -> NodeNames:
        listed = self.kube.call("GET", self.path)
        for pod in listed.get("items") or []:
            self._saw(pod)
        self._version = listed["metadata"]["resourceVersion"]
        self._thread.start()
        return self

    def stop(self) -> None:
        """Within a few seconds: each watch request is short (closing a response another thread
        is reading from would block)."""
        self._stop.set()
        self._thread.join(WATCH_SECONDS + 10)

    def nodes(self, name: str) -> list[str]:
        with self._lock:
            return list(self.seen.get(name, []))

    def _saw(self, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        node = (pod.get("spec") or {}).get("nodeName") or ""
        with self._lock:
            history = self.seen.setdefault(name, [])
            if node and (not history or history[-1] != node):
                history.append(node)
                self.first_bound.setdefault(name, time.monotonic())

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._watch()
            except Exception:  # noqa: BLE001 - a cut connection: resume from the last version
                self._stop.wait(0.2)

    def _watch(self) -> None:
        response = self.kube.session.get(
            self.kube.base_url + self.path,
            params={"watch": "true", "resourceVersion": self._version, "timeoutSeconds": str(WATCH_SECONDS)},
            stream=True, verify=self.kube.verify, timeout=(5, WATCH_SECONDS + 10),
        )
        response.raise_for_status()
        for line in response.iter_lines():
            if self._stop.is_set():
                return
            if not line:
                continue
            event = json.loads(line)
            pod = event.get("object") or {}
            if event.get("type") == "ERROR":
                raise RuntimeError(f"watch error: {pod.get('message')}")
            self._version = (pod.get("metadata") or {}).get("resourceVersion") or self._version
            if event.get("type") in ("ADDED", "MODIFIED"):
                self._saw(pod)
