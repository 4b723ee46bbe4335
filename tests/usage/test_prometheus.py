"""The PromQL source against a real Prometheus: values, garbage, bad queries, staleness, outage, recovery."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from extender.cluster.state import ClusterState
from extender.model.usage_samples import DOWN, UP
from extender.policy.usage_settings import PrometheusSettings, Query, UsageSettings
from extender.usage import readings
from extender.usage.polling import UsagePoller
from extender.usage.prometheus import PrometheusSource
from extender.usage.readings import Fetch, FetchError
from extender.usage.service import node_views
from extender.usage.store import UsageStore
from tests.helpers import Clock, wait_for

from .conftest import node
from .promserver import BINARY, MISSING_REASON, Exporter, PrometheusServer

pytestmark = pytest.mark.skipif(BINARY is None, reason=MISSING_REASON)

CPU = "test_node_cpu_ratio"
MEMORY = "test_node_memory_bytes"


@pytest.fixture(scope="module")
def exporter() -> Iterator[Exporter]:
    exporter = Exporter()
    yield exporter
    exporter.close()


@pytest.fixture(scope="module")
def prometheus(exporter: Exporter, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus"), exporter.address)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def state() -> ClusterState:
    state = ClusterState()
    state.replace_nodes([node("worker-1", cpu="4", memory="8Gi"), node("worker-2", cpu="2", memory="4Gi")])
    return state


def settings(prometheus: PrometheusServer, **queries: Query | None) -> PrometheusSettings:
    picked = {"cpu": Query(CPU, "ratio"), "memory": Query(MEMORY, "absolute"), **queries}
    return PrometheusSettings(url=prometheus.url, timeout=2.0, **picked)


def fetch_when(source: PrometheusSource, state: ClusterState, condition, what: str) -> Fetch:
    """Fetch until `condition(fetch)` holds (Prometheus scrapes once a second), at most 15 s."""
    def attempt():
        try:
            fetch = source.fetch(node_views(state))
        except FetchError:
            return None
        return fetch if condition(fetch) else None
    return wait_for(attempt, 15, what)


def test_values_garbage_and_staleness(prometheus, exporter, state):
    exporter.set(CPU, "worker-1", 0.25)
    exporter.set(CPU, "worker-2", 0.5)
    exporter.set(MEMORY, "worker-1", 2 * 2**30)
    exporter.set(CPU, "ghost", 0.9)  # no such node
    exporter.set(MEMORY, "worker-2", "NaN")  # garbage
    source = PrometheusSource(settings(prometheus, cpu_stdev=Query(f"stddev_over_time({CPU}[1m])")))
    try:
        fetch = fetch_when(source, state, lambda f: len(f.readings) == 2 and f.dropped[readings.UNKNOWN_NODE],
                           "both nodes and the ghost in Prometheus")
        by_node = {r.node: r for r in fetch.readings}
        assert by_node["worker-1"].cpu == pytest.approx(1000)  # 25% of 4 cores, in millicores
        assert by_node["worker-1"].memory == 2 * 2**30
        assert by_node["worker-2"].cpu == pytest.approx(1000)  # 50% of 2 cores
        assert by_node["worker-2"].memory is None
        assert by_node["worker-1"].cpu_stdev == pytest.approx(0.0)  # a constant series
        assert fetch.dropped[readings.NOT_A_NUMBER] >= 1
        # the exporter stops reporting worker-2: Prometheus marks the series stale at the next scrape
        clock = Clock(fetch.readings[0].timestamp)
        store = UsageStore("prometheus", UsageSettings(interval=1, max_age=10), clock=clock)
        store.publish(fetch.readings, {n: readings.node_capacity(v) for n, v in node_views(state).items()})
        exporter.set(CPU, "worker-2", None)
        exporter.set(MEMORY, "worker-2", None)
        later = fetch_when(source, state, lambda f: [r.node for r in f.readings] == ["worker-1"],
                           "worker-2's series to go stale")
        store.publish(later.readings, {n: readings.node_capacity(v) for n, v in node_views(state).items()})
        assert store.table().fresh("worker-2") is not None  # its last sample, not yet too old
        clock.advance(11)
        assert store.table().fresh("worker-2") is None
    finally:
        source.close()


def test_bad_queries_fail_the_fetch_with_prometheus_own_words(prometheus, state):
    source = PrometheusSource(settings(prometheus, cpu=Query("sum(", "ratio")))
    with pytest.raises(FetchError) as caught:
        source.fetch(node_views(state))
    assert caught.value.reason == readings.BAD_QUERY
    assert str(caught.value).startswith("queries.cpu: ") and "parse error" in str(caught.value)
    source = PrometheusSource(settings(prometheus, memory=Query("scalar(vector(1))", "ratio")))
    with pytest.raises(FetchError, match="queries.memory: returned a scalar, not an instant vector by node"):
        source.fetch(node_views(state))


def test_outage_and_recovery(prometheus, exporter, state, caplog):
    exporter.set(CPU, "worker-1", 0.5)
    source = PrometheusSource(settings(prometheus, memory=None))
    store = UsageStore("prometheus", UsageSettings(interval=1, max_age=60))
    poller = UsagePoller(store, source, lambda: node_views(state))
    up = {"source": "prometheus"}
    with caplog.at_level(logging.INFO, logger="extender.usage.polling"):
        wait_for(lambda: poller.fetch_once() and store.sample("worker-1") is not None
                   and store.sample("worker-1").cpu == pytest.approx(2000), 15, "a first sample")
        poller.refresh_metrics()
        assert REGISTRY.get_sample_value("extender_usage_source_up", up) == 1
        prometheus.stop()
        assert not poller.fetch_once()
        assert not poller.fetch_once()
        poller.refresh_metrics()
        assert store.state == DOWN and store.state_detail.startswith("Prometheus at ")
        assert REGISTRY.get_sample_value("extender_usage_source_up", up) == 0
        assert store.sample("worker-1") is not None  # kept: stale only after maxAge
        exporter.set(CPU, "worker-1", 0.75)
        prometheus.start()
        wait_for(lambda: poller.fetch_once() and store.sample("worker-1").cpu == pytest.approx(3000), 15,
                   "the new value after the restart")
        poller.refresh_metrics()
    source.close()
    assert store.state == UP
    assert REGISTRY.get_sample_value("extender_usage_source_up", up) == 1
    states = [r.getMessage().split(":")[0] for r in caplog.records]
    assert states == ["node usage source prometheus is up",
                      "node usage source prometheus is down (unreachable)",
                      "node usage source prometheus is back up"], states


def test_the_exporter_speaks_the_text_format(exporter):
    exporter.set("demo_metric", "n", 1.5)
    assert 'demo_metric{node="n"} 1.5' in exporter.render()
    exporter.set("demo_metric", "n", None)
    assert "demo_metric" not in exporter.render()


def test_settings_file_paths_are_used(tmp_path: Path, prometheus, exporter, state):
    """A bearer token is read from its file on every fetch (rotation); a missing file is a clear failure."""
    exporter.set(CPU, "worker-1", 0.1)
    token = tmp_path / "token"
    token.write_text("secret\n")
    source = PrometheusSource(PrometheusSettings(url=prometheus.url, cpu=Query(CPU), memory=None,
                                                 bearer_token_file=str(token)))
    fetch_when(source, state, lambda f: bool(f.readings), "a reading with a token")  # Prometheus ignores it
    token.unlink()
    with pytest.raises(FetchError, match="cannot read bearerTokenFile") as caught:
        source.fetch(node_views(state))
    assert caught.value.reason == readings.FORBIDDEN
    source.close()
