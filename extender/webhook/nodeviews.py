"""A cache of NodeViews for full-NodeList requests.

kube-scheduler sends the same node objects on every call when nodeCacheCapable is
false; a node's (uid, resourceVersion) pins its content, so its view is parsed
once, not once per pod. Better still, the same object comes as the same bytes: a
request read by pieces (`wire.sent_args`) finds each node's view by its bytes and
decodes only the nodes it has not seen, where decoding and freeing every node was
85 % of the webhook's CPU on this path (bench e2e, 230 nodes per call).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from extender import wire
from extender.cluster.state import ClusterState, infos_from_views
from extender.errors import InvalidObject
from extender.model.nodes import NodeInfo, NodeView
from extender.webhook import bodies

_LIMIT = 20_000
_PIECE_BYTES_LIMIT = 64 * 1024 * 1024  # node bytes kept as keys; a cluster of 5000 nodes needs ~20 MB


class NodeViewCache:
    def __init__(self, limit: int = _LIMIT, piece_bytes_limit: int = _PIECE_BYTES_LIMIT) -> None:
        self._views: dict[tuple[str, str, str], NodeView] = {}
        self._pieces: dict[bytes, NodeView] = {}
        self._piece_bytes = 0
        self._piece_bytes_limit = piece_bytes_limit
        self._infos: dict[str, tuple[NodeInfo, NodeView, NodeInfo]] = {}
        self._limit = limit
        self._lock = threading.Lock()

    def infos(self, views: Sequence[NodeView], state: ClusterState) -> list[NodeInfo]:
        """`cluster.state.infos_from_views`, memoised: a node's info (the request's view with the
        pods the state knows there) is reused while neither the state's info nor the request's
        view changes; a dataclass copy per node and call adds up to milliseconds at a few
        hundred nodes."""
        result = []
        combined = self._infos
        for view in views:
            known = state.node_info(view.name)
            # The state's own info holds another view than the request's: the info is a copy, worth keeping.
            copied = known if known is not None and known.node is not view else None
            if copied is not None:
                entry = combined.get(view.name)
                if entry is not None and entry[0] is copied and entry[1] is view:
                    result.append(entry[2])
                    continue
            (info,) = infos_from_views((view,), state)
            if copied is not None:
                if len(combined) >= self._limit:
                    combined.clear()
                combined[view.name] = (copied, view, info)
            result.append(info)
        return result

    def view(self, raw: Mapping[str, Any]) -> NodeView:
        """The view of `raw`; raises InvalidObject when the node has no usable name."""
        meta = raw.get("metadata")
        if isinstance(meta, Mapping):
            name, uid, version = meta.get("name"), meta.get("uid"), meta.get("resourceVersion")
            if version and isinstance(name, str) and isinstance(uid, str) and isinstance(version, str):
                key = (name, uid, version)
                found = self._views.get(key)
                if found is None:
                    # Keep the view, not the request's 8 KB node dict: replies use the items
                    # of their own request, and a cached raw would pin every old body in memory.
                    found = replace(NodeView.from_dict(raw), raw={})
                    if found.error:  # never cache an unreadable node: one bad request would make the
                        return found  # real node unusable for every later request until its RV changes
                    with self._lock:
                        if len(self._views) >= self._limit:
                            self._views.clear()
                        self._views[key] = found
                return found
        return NodeView.from_dict(raw)

    def args(self, raw: bytes | bytearray) -> Any:
        """A verb body: ExtenderArgs with the nodes as sent when `wire.sent_args` can read it
        so, else the decoded JSON (which the verb validates as any body)."""
        return wire.sent_args(raw, self.piece_view) or bodies.decode_json(raw)

    def piece_view(self, piece: bytes) -> NodeView | None:
        """The view of one Node's bytes; None unless they are one JSON object with a name (the
        body is then decoded whole, and the verb words the error)."""
        found = self._pieces.get(piece)
        if found is not None:
            return found
        raw = wire.decode_sent_item(piece)
        if raw is None:
            return None
        try:
            view = self.view(raw)
        except InvalidObject:
            return None
        if not view.error:
            with self._lock:
                if self._piece_bytes + len(piece) > self._piece_bytes_limit or len(self._pieces) >= self._limit:
                    self._pieces.clear()
                    self._piece_bytes = 0
                self._pieces[piece] = view
                self._piece_bytes += len(piece)
        return view
