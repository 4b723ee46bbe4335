"""A small cache of PodViews: kube-scheduler sends the same pod to /filter, then /prioritize.

A pod's (namespace, name, uid, resourceVersion) pins its content, so the view parsed
for the filter call serves the prioritize call and the retries of the same pod. Only
the most recent pods are kept: this saves repeated parsing, it is not a pod store.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from extender.model.pods import PodView

_LIMIT = 256


class PodViewCache:
    def __init__(self, limit: int = _LIMIT) -> None:
        self._views: OrderedDict[tuple[str, str, str, str], PodView] = OrderedDict()
        self._limit = limit
        self._lock = threading.Lock()

    def view(self, raw: Any, parse: Callable[[Any], PodView]) -> PodView:
        """The view of `raw`, parsed by `parse` (which raises for an unreadable pod) on a miss.

        Pods without a uid and resourceVersion (hand-written test bodies) are parsed every time.
        """
        meta = raw.get("metadata") if isinstance(raw, Mapping) else None
        key: tuple[str, str, str, str] | None = None
        if isinstance(meta, Mapping):
            namespace, name = meta.get("namespace") or "", meta.get("name")
            uid, version = meta.get("uid"), meta.get("resourceVersion")
            if isinstance(namespace, str) and isinstance(name, str) and isinstance(uid, str) \
                    and isinstance(version, str) and uid and version:
                key = (namespace, name, uid, version)
        if key is None:
            return parse(raw)
        found = self._views.get(key)
        if found is not None:
            return found
        found = parse(raw)
        with self._lock:
            self._views[key] = found
            while len(self._views) > self._limit:
                self._views.popitem(last=False)
        return found
