"""The metrics.k8s.io source against the API server: values, garbage, and every way it is missing.

A real kube-apiserver (envtest) has no metrics-server, so there only the "not served"
path runs; the value tests need the fake's NodeMetrics and skip there, saying why.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from prometheus_client import REGISTRY

from extender.cluster.state import ClusterState
from extender.model.usage_samples import DOWN, UP
from extender.policy.usage_settings import UsageSettings
from extender.usage import readings
from extender.usage.metrics_api import MetricsApiSource, parse_node_metrics
from extender.usage.polling import UsagePoller
from extender.usage.readings import FetchError
from extender.usage.service import node_views
from extender.usage.store import UsageStore
from tests.fakeapi import skip_unless_fake

from .conftest import node

NODE_METRICS = (
    "serves NodeMetrics from the fake's metrics.k8s.io; a real control plane here has no "
    "metrics-server (the not-served path runs on both)"
)

pytestmark = pytest.mark.apiserver


@pytest.fixture
def nodes(kube: Any) -> dict[str, Any]:
    kube.create_node("worker-1", cpu="4", memory="8Gi")
    kube.create_node("worker-2", cpu="2", memory="4Gi")
    state = ClusterState()
    state.replace_nodes(kube.list_nodes())
    return node_views(state)


def test_no_metrics_server_means_not_served(api_client: Any, nodes: dict[str, Any]):
    """True of envtest and of any cluster without metrics-server: the API is not registered (404)."""
    with pytest.raises(FetchError) as caught:
        MetricsApiSource(api_client).fetch(nodes)
    assert caught.value.reason == readings.NOT_SERVED
    assert "is metrics-server installed?" in str(caught.value)


def test_node_metrics_become_readings(apiserver: Any, api_client: Any, nodes: dict[str, Any]):
    fake = skip_unless_fake(apiserver, NODE_METRICS)
    fake.serve_node_metrics()
    fake.set_node_metrics("worker-1", cpu="1234567890n", memory="2Gi", timestamp="2023-11-14T22:13:20Z",
                          window="20.5s")
    fake.set_node_metrics("worker-2", cpu="250m", memory="1Gi", timestamp="2023-11-14T22:13:25Z")
    fetch = MetricsApiSource(api_client).fetch(nodes)
    by_node = {r.node: r for r in fetch.readings}
    assert by_node["worker-1"].cpu == pytest.approx(1234.56789)
    assert by_node["worker-1"].memory == 2 * 2**30
    assert by_node["worker-1"].timestamp == 1_700_000_000.0
    assert by_node["worker-1"].window == 20.5
    assert by_node["worker-2"].cpu == 250.0
    assert not fetch.dropped


def test_garbage_is_dropped_with_a_count(apiserver: Any, api_client: Any, nodes: dict[str, Any]):
    fake = skip_unless_fake(apiserver, NODE_METRICS)
    fake.serve_node_metrics()
    fake.set_node_metrics("worker-1", cpu="-5m", memory="1Gi")  # negative
    fake.set_node_metrics("worker-2", cpu="lots", memory="1Gi")  # not a quantity
    fake.set_node_metrics("ghost", cpu="1", memory="1Gi")  # no such node
    fetch = MetricsApiSource(api_client).fetch(nodes)
    assert fetch.readings == []
    assert fetch.dropped == {readings.NEGATIVE: 1, readings.BAD_QUANTITY: 1, readings.UNKNOWN_NODE: 1}


def test_parse_node_metrics_refuses_malformed_items():
    from extender.model.nodes import NodeView

    nodes = {"n": NodeView.from_dict(node("n"))}
    items = [
        {"metadata": {"name": "n"}, "timestamp": "not a time", "usage": {"cpu": "1"}},
        {"metadata": {}, "timestamp": "2023-11-14T22:13:20Z", "usage": {"cpu": "1"}},
        {"metadata": {"name": "n"}, "timestamp": "2023-11-14T22:13:20Z", "usage": {}},
        {"metadata": {"name": "n"}, "timestamp": "2023-11-14T22:13:20Z", "window": "soon", "usage": {"cpu": "1"}},
        "junk",
        {"metadata": {"name": "n"}, "timestamp": "2023-11-14T22:13:20Z", "usage": {"memory": "1Gi"}},
        {"metadata": {"name": "n"}, "timestamp": "2023-11-14T22:13:21Z", "usage": {"memory": "2Gi"}},
    ]
    fetch = parse_node_metrics(items, nodes)
    assert [(r.cpu, r.memory) for r in fetch.readings] == [(None, 2**30)]
    assert fetch.dropped == {readings.BAD_TIMESTAMP: 1, readings.MALFORMED: 4, readings.DUPLICATE: 1}
    with pytest.raises(FetchError, match="without an items list"):
        parse_node_metrics(None, nodes)


def test_unavailable_and_forbidden(apiserver: Any, api_client: Any, nodes: dict[str, Any]):
    fake = skip_unless_fake(apiserver, NODE_METRICS)
    fake.serve_node_metrics("unavailable")  # registered, metrics-server down: the aggregator's 503
    with pytest.raises(FetchError) as caught:
        MetricsApiSource(api_client).fetch(nodes)
    assert caught.value.reason == readings.UNAVAILABLE
    assert "503" in str(caught.value) and "service unavailable" in str(caught.value)
    fake.serve_node_metrics()
    fake.deny(verb="list", resource="nodes", group="metrics.k8s.io")
    with pytest.raises(FetchError) as caught:
        MetricsApiSource(api_client).fetch(nodes)
    assert caught.value.reason == readings.FORBIDDEN


def _metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_outage_and_recovery_log_once_per_change(apiserver: Any, api_client: Any, nodes: dict[str, Any],
                                                 caplog: pytest.LogCaptureFixture):
    fake = skip_unless_fake(apiserver, NODE_METRICS)
    fake.serve_node_metrics()
    fake.set_node_metrics("worker-1", cpu="1", memory="1Gi")
    store = UsageStore("metrics-server", UsageSettings())
    poller = UsagePoller(store, MetricsApiSource(api_client), lambda: nodes)
    failures = _metric("extender_usage_fetch_failures_total", source="metrics-server", reason="unavailable")
    with caplog.at_level(logging.INFO, logger="extender.usage.polling"):
        assert poller.fetch_once()
        assert store.state == UP and store.sample("worker-1").cpu == 1000
        fake.serve_node_metrics("unavailable")
        assert not poller.fetch_once()
        assert not poller.fetch_once()  # still down: no second log line
        assert store.state == DOWN
        assert store.sample("worker-1").cpu == 1000  # the old sample stays until it goes stale
        poller.refresh_metrics()
        assert _metric("extender_usage_source_up", source="metrics-server") == 0
        fake.serve_node_metrics()
        fake.set_node_metrics("worker-1", cpu="3", memory="1Gi")
        assert poller.fetch_once()
        poller.refresh_metrics()
    assert store.state == UP and store.sample("worker-1").cpu == 3000
    assert _metric("extender_usage_source_up", source="metrics-server") == 1
    assert _metric("extender_usage_fetch_failures_total", source="metrics-server",
                   reason="unavailable") == failures + 2
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3, messages
    assert messages[0].startswith("node usage source metrics-server is up: 1 node(s) with a sample")
    assert messages[1].startswith("node usage source metrics-server is down (unavailable)")
    assert messages[2].startswith("node usage source metrics-server is back up")
