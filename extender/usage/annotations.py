"""The annotations source: usage that someone else writes onto the nodes (Crane's pattern).

A controller (Crane's annotator, a Prometheus-to-annotation job, a cloud agent) keeps
annotations like these fresh on every node, and the scheduler reads them from the nodes
it already watches: no extra API calls, no extra RBAC.

    cpu_usage_avg_5m: "38.5,2025-05-01T10:00:00Z"    value,time (Crane's format)
    mem_usage_avg_5m: "61.2"                          value alone

The keys and the unit (percent by default, as Crane's rules produce; ratio or absolute
cores/bytes) come from settings.usage.annotations. A value with a time is as old as
that time says. A value without one is dated when this source first saw it: if the
writer stops, the unchanged value ages and goes stale like any other.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from extender.model.nodes import NodeView
from extender.policy.usage_settings import ANNOTATIONS, AnnotationSettings
from extender.usage import readings
from extender.usage.readings import Capacity, Dropped, Fetch, Reading


class AnnotationSource:
    name = ANNOTATIONS

    def __init__(self, settings: AnnotationSettings, *, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self._clock = clock
        self._first_seen: dict[tuple[str, str], tuple[str, float]] = {}  # (node, key) -> (text, when)

    def close(self) -> None:
        """Nothing to release."""

    def fetch(self, nodes: Mapping[str, NodeView]) -> Fetch:
        fetch = Fetch()
        now = self._clock()
        keys = (("cpu", "cpu", self.settings.cpu), ("memory", "memory", self.settings.memory),
                ("cpuStdev", "cpu", self.settings.cpu_stdev), ("memoryStdev", "memory", self.settings.memory_stdev))
        seen: set[tuple[str, str]] = set()
        for name, view in nodes.items():
            annotations = _annotations(view)
            if not annotations:
                continue
            capacity: Capacity | None = None
            figures: dict[str, float] = {}
            stamp = 0.0
            for field, resource, key in keys:
                if not key or key not in annotations:
                    continue
                seen.add((name, key))
                try:
                    value, when = self._parse(name, key, annotations[key], now)
                except Dropped as exc:
                    fetch.dropped[exc.reason] += 1
                    continue
                if capacity is None:
                    capacity = readings.node_capacity(view)
                figures[field] = readings.convert(value, self.settings.unit, resource, capacity)
                stamp = max(stamp, when)
            if "cpu" in figures or "memory" in figures:
                fetch.readings.append(Reading(name, stamp, figures.get("cpu"), figures.get("memory"),
                                              figures.get("cpuStdev"), figures.get("memoryStdev")))
        for gone in self._first_seen.keys() - seen:
            del self._first_seen[gone]
        return fetch

    def _parse(self, node: str, key: str, raw: object, now: float) -> tuple[float, float]:
        if not isinstance(raw, str):
            raise Dropped(readings.MALFORMED)
        text, sep, when = raw.partition(",")
        value = readings.number(text.strip())
        if sep:
            return value, readings.timestamp(when)
        known = self._first_seen.get((node, key))
        if known is None or known[0] != raw:
            known = self._first_seen[(node, key)] = (raw, now)
        return value, known[1]


def _annotations(view: NodeView) -> Mapping[str, object]:
    meta = view.raw.get("metadata") if isinstance(view.raw, Mapping) else None
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    return annotations if isinstance(annotations, Mapping) else {}
