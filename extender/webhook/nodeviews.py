"""A cache of NodeViews for full-NodeList requests.

kube-scheduler sends the same node objects on every call when nodeCacheCapable is
false; a node's (uid, resourceVersion) pins its content, so its view is parsed
once, not once per pod.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from extender.model.nodes import NodeView

_LIMIT = 20_000


class NodeViewCache:
    def __init__(self, limit: int = _LIMIT) -> None:
        self._views: dict[tuple[str, str, str], NodeView] = {}
        self._limit = limit
        self._lock = threading.Lock()

    def view(self, raw: Mapping[str, Any]) -> NodeView:
        """The view of `raw`; raises InvalidObject when the node has no usable name."""
        meta = raw.get("metadata")
        if isinstance(meta, Mapping):
            key = (meta.get("name"), meta.get("uid"), meta.get("resourceVersion"))
            if key[2] and isinstance(key[0], str) and isinstance(key[1], str) and isinstance(key[2], str):
                found = self._views.get(key)  # type: ignore[arg-type]
                if found is None:
                    # Keep the view, not the request's 8 KB node dict: replies use the items
                    # of their own request, and a cached raw would pin every old body in memory.
                    found = replace(NodeView.from_dict(raw), raw={})
                    if found.error:  # never cache an unreadable node: one bad request would make the
                        return found  # real node unusable for every later request until its RV changes
                    with self._lock:
                        if len(self._views) >= self._limit:
                            self._views.clear()
                        self._views[key] = found  # type: ignore[index]
                return found
        return NodeView.from_dict(raw)
