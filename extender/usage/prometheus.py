"""The Prometheus source: PromQL instant queries, one sample per node, for clusters without metrics-server.

Each configured query (cpu, memory, and optionally their window standard deviations)
is sent to `GET <url>/api/v1/query` and must return an instant vector with one series
per node, the node's name in the label `nodeLabel`:

    {"status": "success", "data": {"resultType": "vector",
     "result": [{"metric": {"node": "node-1"}, "value": [1714557600.0, "0.42"]}]}}

Values are ratios, percentages or absolute figures (cores, bytes) as each query's
`unit` says. A query Prometheus refuses, or one that does not return a vector, fails
the whole fetch with reason bad-query and Prometheus' own error text, so a typo in the
policy shows up in /readyz and the log rather than as quietly missing data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
import urllib3

from extender.model.nodes import NodeView
from extender.policy.usage_settings import PROMETHEUS, PrometheusSettings, Query
from extender.usage import readings
from extender.usage.readings import Capacity, Dropped, Fetch, FetchError, Reading

QUERY_PATH = "/api/v1/query"
USER_AGENT = "extender/0.1 (usage source)"
_MAX_ERROR = 300


class PrometheusSource:
    name = PROMETHEUS

    def __init__(self, settings: PrometheusSettings) -> None:
        self.settings = settings
        # No retries (urllib3 would log each one: a log line per fetch during an outage) and no kept
        # connections, so a pooled socket Prometheus closed meanwhile can never fail a fetch: one
        # new connection every interval costs nothing.
        options: dict[str, Any] = {"maxsize": 1, "retries": urllib3.Retry(total=0, redirect=2, raise_on_status=False)}
        if settings.ca_file:
            options["ca_certs"] = settings.ca_file
            options["cert_reqs"] = "CERT_REQUIRED"
        self._pool = urllib3.PoolManager(**options)

    def close(self) -> None:
        self._pool.clear()

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT, "Connection": "close"}
        if self.settings.bearer_token_file:
            # Read on every fetch: projected service account tokens are rotated in place.
            try:
                with open(self.settings.bearer_token_file, encoding="utf-8") as handle:
                    token = handle.read().strip()
            except OSError as exc:
                raise FetchError(readings.FORBIDDEN, f"cannot read bearerTokenFile: {exc}") from None
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def _query(self, query: Query, field: str) -> list[Any]:
        """The result list of one instant query; raises FetchError."""
        url = self.settings.url + QUERY_PATH
        try:
            response = self._pool.request(
                "GET", url, fields={"query": query.expr}, headers=self._headers(),
                timeout=urllib3.Timeout(total=self.settings.timeout), preload_content=True)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise FetchError(readings.UNREACHABLE, f"Prometheus at {self.settings.url} unreachable: {exc}") from None
        body: Any
        try:
            body = orjson.loads(response.data) if response.data else None
        except orjson.JSONDecodeError:
            body = None
        message = str(body.get("error") or "")[:_MAX_ERROR] if isinstance(body, Mapping) else ""
        if response.status in (401, 403):
            raise FetchError(readings.FORBIDDEN, f"Prometheus refused the request: HTTP {response.status}")
        if response.status >= 500 or response.status == 429:
            raise FetchError(readings.UNAVAILABLE, f"Prometheus answered HTTP {response.status} {message}".strip())
        if response.status >= 400:
            raise FetchError(readings.BAD_QUERY, f"queries.{field}: {message or f'HTTP {response.status}'}")
        if not isinstance(body, Mapping) or body.get("status") != "success" or not isinstance(body.get("data"), Mapping):
            raise FetchError(readings.BAD_REPLY, f"queries.{field}: not a Prometheus API reply")
        data = body["data"]
        if data.get("resultType") != "vector":
            raise FetchError(readings.BAD_QUERY, f"queries.{field}: returned a {data.get('resultType')}, "
                                                 "not an instant vector by node")
        result = data.get("result")
        if not isinstance(result, list):
            raise FetchError(readings.BAD_REPLY, f"queries.{field}: result is not a list")
        return result

    def fetch(self, nodes: Mapping[str, NodeView]) -> Fetch:
        fetch = Fetch()
        capacities: dict[str, Capacity] = {}
        values: dict[str, dict[str, float]] = {}
        stamps: dict[str, float] = {}
        fields = (("cpu", "cpu", self.settings.cpu), ("memory", "memory", self.settings.memory),
                  ("cpuStdev", "cpu", self.settings.cpu_stdev), ("memoryStdev", "memory", self.settings.memory_stdev))
        for field, resource, query in fields:
            if query is None:
                continue
            seen: set[str] = set()
            for series in self._query(query, field):
                try:
                    node, stamp, value = self._series(series, nodes)
                except Dropped as exc:
                    fetch.dropped[exc.reason] += 1
                    continue
                if node in seen:
                    fetch.dropped[readings.DUPLICATE] += 1  # the query is not aggregated by node
                    continue
                seen.add(node)
                capacity = capacities.get(node)
                if capacity is None:
                    capacity = capacities[node] = readings.node_capacity(nodes[node])
                values.setdefault(node, {})[field] = readings.convert(value, query.unit, resource, capacity)
                stamps[node] = max(stamps.get(node, 0.0), stamp)
        for node, figures in values.items():
            if "cpu" not in figures and "memory" not in figures:
                continue  # a deviation without a level says nothing
            fetch.readings.append(Reading(node, stamps[node], figures.get("cpu"), figures.get("memory"),
                                          figures.get("cpuStdev"), figures.get("memoryStdev"), self.settings.window))
        return fetch

    def _series(self, series: Any, nodes: Mapping[str, NodeView]) -> tuple[str, float, float]:
        if not isinstance(series, Mapping) or not isinstance(series.get("metric"), Mapping):
            raise Dropped(readings.MALFORMED)
        node = series["metric"].get(self.settings.node_label)
        if not isinstance(node, str) or not node:
            raise Dropped(readings.MALFORMED)
        if node not in nodes:
            raise Dropped(readings.UNKNOWN_NODE)
        pair = series.get("value")
        if not isinstance(pair, list) or len(pair) != 2:
            raise Dropped(readings.MALFORMED)
        try:
            stamp = float(pair[0])
        except (TypeError, ValueError):
            raise Dropped(readings.BAD_TIMESTAMP) from None
        return node, stamp, readings.number(pair[1])

