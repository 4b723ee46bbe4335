"""Who hears of a change in the cluster state: the standalone queue's "retry sooner" hints.

kube-scheduler moves unschedulable pods back to its active queue when a cluster event
could make them fit (a node added, a pod deleted, a namespace relabelled). The state
tells its listeners of each change after it is applied, outside its lock, so a listener
may read the state; a listener that raises is logged and never breaks the watch that
fed the change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

NODE_ADDED, NODE_UPDATED, NODE_DELETED = "node-added", "node-updated", "node-deleted"
POD_ADDED, POD_UPDATED, POD_DELETED = "pod-added", "pod-updated", "pod-deleted"
# After POD_UPDATED, for a pod on a node whose requests went down (an in-place resize):
# kube-scheduler's NodeResourcesFit queues the pods it refused on that event alone.
POD_SCALED_DOWN = "pod-scaled-down"
# After POD_ADDED or POD_UPDATED, for a pod that now holds a node and did not before (or only
# as assumed: the watch confirms a bind): kube-scheduler's AssignedPodAdd.
POD_PLACED = "pod-placed"
# After POD_UPDATED, for a placed pod whose labels changed: its UpdatePodLabel. Other updates
# of a placed pod change no plugin's answer (a finished pod comes as POD_UPDATED alone).
POD_RELABELED = "pod-relabeled"
# A full pod list replaced the pods (obj: every pod record listed). Its deletions come as
# POD_DELETED; the pods it brought or changed come only here, in one event.
PODS_LISTED = "pods-listed"
# An object of a keyed kind (cluster/kinds.py) changed: obj is (its resource, its key; "" for a
# full list). Namespaces' labels, PodDisruptionBudgets.
KIND_CHANGED = "kind-changed"
Listener = Callable[[str, Any], None]


class Listeners:
    """An append-only list of listeners; notified in the order they were added."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def add(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def notify(self, event: str, obj: Any) -> None:
        for listener in self._listeners:
            try:
                listener(event, obj)
            except Exception:  # a listener must never break the watch that feeds the state
                log.exception("cluster state listener failed on %s", event)
