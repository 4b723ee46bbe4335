"""The metrics.k8s.io source: NodeMetrics from metrics-server, through the API server's aggregation layer.

One list call per fetch (GET /apis/metrics.k8s.io/v1beta1/nodes, RBAC: get and list
on nodes.metrics.k8s.io). Each item is one instantaneous sample per node:

    {"metadata": {"name": "node-1"}, "timestamp": "2025-05-01T10:00:00Z", "window": "20.03s",
     "usage": {"cpu": "1234567n", "memory": "2048Mi"}}

The ways it fails, each a fetch failure reason: 404 when the API is not registered (no
metrics-server installed; envtest and most test clusters), 503 when it is registered but
metrics-server is down or not ready, 403 without the RBAC rule, no connection at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extender.errors import ClusterError, NotFoundError
from extender.kube.client import request_json
from extender.model.nodes import NodeView
from extender.policy.usage_settings import METRICS_SERVER
from extender.usage import readings
from extender.usage.readings import Dropped, Fetch, FetchError, Reading

NODE_METRICS_PATH = "/apis/metrics.k8s.io/v1beta1/nodes"


def failure(exc: ClusterError) -> FetchError:
    """An API error as a fetch failure with its reason."""
    if isinstance(exc, NotFoundError):
        return FetchError(readings.NOT_SERVED, "metrics.k8s.io/v1beta1 is not served by the API server "
                                               "(is metrics-server installed?)")
    if exc.status in (401, 403):
        return FetchError(readings.FORBIDDEN, f"not allowed to list nodes.metrics.k8s.io: {exc}")
    if exc.status is None:
        return FetchError(readings.UNREACHABLE, str(exc))
    if exc.status >= 500 or exc.status == 429:
        return FetchError(readings.UNAVAILABLE, f"metrics API unavailable: {exc}")
    return FetchError(readings.BAD_REPLY, str(exc))


def parse_node_metrics(items: Any, nodes: Mapping[str, NodeView]) -> Fetch:
    """Readings from NodeMetrics items (a live list or a snapshot's), garbage dropped and counted."""
    fetch = Fetch()
    if not isinstance(items, list):
        raise FetchError(readings.BAD_REPLY, "NodeMetricsList without an items list")
    seen: set[str] = set()
    for item in items:
        try:
            reading = _reading(item, nodes)
        except Dropped as exc:
            fetch.dropped[exc.reason] += 1
            continue
        if reading.node in seen:
            fetch.dropped[readings.DUPLICATE] += 1
            continue
        seen.add(reading.node)
        fetch.readings.append(reading)
    return fetch


def _reading(item: Any, nodes: Mapping[str, NodeView]) -> Reading:
    if not isinstance(item, Mapping):
        raise Dropped(readings.MALFORMED)
    meta = item.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        raise Dropped(readings.MALFORMED)
    if name not in nodes:
        raise Dropped(readings.UNKNOWN_NODE)
    usage = item.get("usage")
    if not isinstance(usage, Mapping) or ("cpu" not in usage and "memory" not in usage):
        raise Dropped(readings.MALFORMED)
    cpu = readings.quantity(usage["cpu"], "cpu") if "cpu" in usage else None
    memory = readings.quantity(usage["memory"], "memory") if "memory" in usage else None
    window = readings.go_duration(item["window"]) if item.get("window") is not None else 0.0
    return Reading(name, readings.timestamp(item.get("timestamp")), cpu, memory, window=window)


class MetricsApiSource:
    """Fetches NodeMetrics through `api_client` (the same client and credentials as the watches)."""

    name = METRICS_SERVER

    def __init__(self, api_client: Any, *, timeout: float = 10.0) -> None:
        self.api_client = api_client
        self.timeout = timeout

    def fetch(self, nodes: Mapping[str, NodeView]) -> Fetch:
        try:
            reply = request_json(self.api_client, "GET", NODE_METRICS_PATH, timeout=self.timeout)
        except ClusterError as exc:
            raise failure(exc) from None
        return parse_node_metrics(reply.get("items"), nodes)

    def close(self) -> None:
        """The API client belongs to the runtime."""
