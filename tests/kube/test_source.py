"""KubeSource against the API server: lists, watch events, and every way a watch breaks."""

from __future__ import annotations

import time
from typing import Any

import pytest

from extender.cluster.state import ClusterState
from extender.kube.client import build_api_client
from extender.kube.source import KubeSource
from tests.fakeapi.fixtures import fake_only
from tests.helpers import FAST_WATCH, wait_for

NODE_LIST = r"^/api/v1/nodes\?(?!.*watch=true)"
POD_LIST = r"^/api/v1/pods\?(?!.*watch=true)"


def _cpu(state: ClusterState, node: str) -> int:
    info = state.node_info(node)
    return info.requested.get("cpu", 0) if info else -1


def synced_on_one_pod(kube: Any, make_source: Any) -> tuple[ClusterState, KubeSource]:
    """Node n1 (4 cpu) running pod a (100m), and a started source that has listed them."""
    kube.create_node("n1", cpu="4")
    kube.create_pod("a", cpu="100m", node_name="n1")
    state = ClusterState()
    source = make_source(state)
    assert source.wait_synced(5)
    return state, source


def _lists(fake, resource: str) -> list:
    return [r for r in fake.requests_matching("GET", rf"^/api/v1/{resource}$") if r.query.get("watch") != "true"]


def _watches(fake, resource: str) -> list:
    return [r for r in fake.requests_matching("GET", rf"^/api/v1/{resource}$") if r.query.get("watch") == "true"]


# ---- initial list -------------------------------------------------------------------------------


def test_initial_list_loads_nodes_and_pods(apiserver, make_source) -> None:
    kube = apiserver.client
    kube.create_node("n1", cpu="4")
    kube.create_node("n2", cpu="2")
    kube.create_pod("a", cpu="500m", node_name="n1")
    kube.create_pod("b", cpu="250m", node_name="n1")
    kube.create_pod("pending", cpu="1")
    state = ClusterState()
    assert not state.ready
    source = make_source(state)
    assert source.wait_synced(5)
    assert state.ready and state.node_count() == 2 and state.pod_count() == 3
    assert _cpu(state, "n1") == 750 and _cpu(state, "n2") == 0
    assert state.node_info("n1").node.ready


def test_list_is_paginated(apiserver, make_source) -> None:
    for i in range(5):
        apiserver.client.create_node(f"n{i}")
    state = ClusterState()
    source = make_source(state, page_size=2)
    assert source.wait_synced(5)
    assert state.node_count() == 5
    if apiserver.fake is not None:
        pages = _lists(apiserver.fake, "nodes")
        assert [p.query.get("limit") for p in pages] == ["2", "2", "2"]
        assert "continue" not in pages[0].query and pages[1].query["continue"]


@fake_only("holds the pod list back 0.6 s in the server (the fake's delay())")
def test_ready_only_after_both_lists(apiserver, make_source) -> None:
    apiserver.client.create_node("n1")
    apiserver.fake.delay(0.6, path_regex=POD_LIST, count=1)
    state = ClusterState()
    source = make_source(state)
    wait_for(lambda: state.nodes_synced, message="node list")
    assert not state.pods_synced and not state.ready
    assert not source.wait_synced(0.05)
    assert source.wait_synced(5) and state.ready


# ---- watch events -------------------------------------------------------------------------------


def test_node_added_updated_deleted(apiserver, make_source) -> None:
    kube = apiserver.client
    state = ClusterState()
    assert make_source(state).wait_synced(5)
    kube.create_node("n1", cpu="4")
    wait_for(lambda: state.node_info("n1") and state.node_info("n1").node.allocatable.get("cpu") == 4000,
             message="node added with status")
    kube.cordon_node("n1")
    wait_for(lambda: state.node_info("n1").node.unschedulable, message="node cordoned")
    kube.delete_node("n1")
    wait_for(lambda: state.node_info("n1") is None, message="node deleted")


def test_pod_bound_accounted_then_released(apiserver, make_source) -> None:
    kube = apiserver.client
    kube.create_node("n1", cpu="4")
    state = ClusterState()
    assert make_source(state).wait_synced(5)
    pod = kube.create_pod("p", cpu="300m")
    wait_for(lambda: state.pod("default/p"), message="pending pod")
    assert _cpu(state, "n1") == 0
    assert kube.bind_pod("p", "n1", uid=pod["metadata"]["uid"]).status_code == 201
    wait_for(lambda: _cpu(state, "n1") == 300, message="bound pod counted")
    kube.set_pod_phase("p", "Succeeded")  # leaves the field selector: the watch sends DELETED
    wait_for(lambda: _cpu(state, "n1") == 0, message="terminal pod released")
    assert state.pod("default/p") is None
    kube.create_pod("q", cpu="200m", node_name="n1")
    wait_for(lambda: _cpu(state, "n1") == 200, message="second pod")
    kube.delete_pod("q", grace_period_seconds=0)
    wait_for(lambda: state.pod("default/q") is None and _cpu(state, "n1") == 0, message="deleted pod released")


# ---- broken watches -----------------------------------------------------------------------------------


@fake_only(
    "cuts the watch streams of the shared server, abruptly and halfway through an event; a restarted "
    "kube-apiserver cuts them for real in tests/reliability/test_real_faults.py"
)
@pytest.mark.parametrize("mid_event", [False, True], ids=["abrupt", "mid-event"])
def test_reconnect_after_dropped_watch(apiserver, make_source, mid_event: bool) -> None:
    kube, fake = apiserver.client, apiserver.fake
    state, source = synced_on_one_pod(kube, make_source)
    watches = len(source.reflectors)  # nodes, pods, namespaces and the storage kinds
    assert fake.wait_for_watches(watches)
    assert fake.drop_watches(mid_event=mid_event) == watches
    kube.create_pod("b", cpu="200m", node_name="n1")
    wait_for(lambda: _cpu(state, "n1") == 300, message="event after reconnect")
    kube.create_pod("c", cpu="400m", node_name="n1")
    wait_for(lambda: _cpu(state, "n1") == 700, message="later event")
    time.sleep(0.1)
    assert _cpu(state, "n1") == 700 and state.pod_count() == 3  # each pod counted once
    assert len(_lists(fake, "pods")) == 1  # resumed, not re-listed
    assert source.pods.restarts.get("truncated", 0) >= 1
    assert source.pods.malformed_events == 0


@fake_only(
    "needs a resumed watch to get 410: a real kube-apiserver serves it from the watch cache, which etcd "
    "compaction does not shorten; tests/reliability/test_real_faults.py gets a real 410 on a private "
    "control plane"
)
@pytest.mark.parametrize("how", ["error-event", "http-410"])
def test_410_gone_relists(apiserver, make_source, how: str) -> None:
    kube, fake = apiserver.client, apiserver.fake
    state, source = synced_on_one_pod(kube, make_source)
    assert fake.wait_for_watches(2)
    pod_watch = r"^/api/v1/pods\?.*watch=true"
    if how == "error-event":
        # Reconnect late, after a change and a compaction: our resourceVersion fell out of the window.
        fake.delay(1.5, path_regex=pod_watch, count=1)  # longer than a create and a compaction on a busy machine
        fake.drop_watches()
        kube.create_pod("b", cpu="200m", node_name="n1")
        fake.compact()
    else:
        fake.fail_next(1, status=410, path_regex=pod_watch)
        fake.drop_watches()
        kube.create_pod("b", cpu="200m", node_name="n1")
    wait_for(lambda: len(_lists(fake, "pods")) == 2, message="re-list")
    wait_for(lambda: _cpu(state, "n1") == 300 and state.pod_count() == 2, message="state converged")
    assert source.pods.restarts.get("gone", 0) >= 1 and source.pods.lists == 2


@fake_only("needs bookmarks every 50 ms; a real kube-apiserver sends them about once a minute")
def test_bookmark_moves_the_resource_version(apiserver, make_source) -> None:
    kube, fake = apiserver.client, apiserver.fake
    fake.configure(bookmark_interval=0.05)
    state = ClusterState()
    source = make_source(state)
    assert source.wait_synced(5) and fake.wait_for_watches(2)
    listed = int(source.pods.resource_version)
    kube.create_namespace("elsewhere")  # moves the global RV; no pod event
    wait_for(lambda: int(source.pods.resource_version) > listed, message="bookmark")
    bookmarked = source.pods.resource_version
    assert bookmarked == str(fake.resource_version)
    fake.drop_watches()
    wait_for(lambda: len(_watches(fake, "pods")) == 2, message="reconnect")
    assert _watches(fake, "pods")[-1].query["resourceVersion"] == bookmarked
    assert _watches(fake, "pods")[0].query["allowWatchBookmarks"] == "true"


@pytest.mark.parametrize("status", [500, 429])
@fake_only("injects 500 and 429 replies to lists, which a real server does not give on demand")
def test_list_errors_back_off_and_recover(apiserver, make_source, status: int) -> None:
    kube, fake = apiserver.client, apiserver.fake
    kube.create_node("n1")
    failures = 4 if status == 500 else 2
    fake.fail_next(failures, status=status, path_regex=NODE_LIST, retry_after=1)
    state = ClusterState()
    source = make_source(state)
    assert source.wait_synced(10)
    assert state.node_count() == 1
    times = [r.time for r in _lists(fake, "nodes")]
    assert len(times) == failures + 1
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    if status == 500:
        assert gaps[-1] > gaps[0]  # exponential: 25-50 ms first, 200-400 ms last
    else:
        assert min(gaps) >= 0.4  # Retry-After: 1 s, capped at max_backoff (0.5 s here)
    assert source.nodes.restarts.get("error") == failures


@fake_only("injects 500 replies to watches, which a real server does not give on demand")
def test_watch_errors_back_off_and_recover(apiserver, make_source) -> None:
    kube, fake = apiserver.client, apiserver.fake
    state = ClusterState()
    source = make_source(state)
    assert source.wait_synced(5) and fake.wait_for_watches(2)
    fake.fail_next(3, status=500, path_regex=r"^/api/v1/nodes\?.*watch=true")
    fake.drop_watches()
    kube.create_node("n1")
    wait_for(lambda: state.node_info("n1"), message="node after failed watches")
    assert source.nodes.lists == 1 and source.nodes.restarts.get("error") == 3


# ---- API server down ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["same-rv", "compacted", "reset-rv"])
def test_apiserver_down_and_back(fake_apiserver, mode: str) -> None:
    """Down for 1.5 s while a pod is deleted behind the client's back, then back: with its
    history (the watch resumes and replays the deletion), with history compacted like a
    restarted watch cache (410: re-list), or with resourceVersions renumbered like an etcd
    restore (our version is from the future: "too large", re-list)."""
    kube, fake = fake_apiserver.client, fake_apiserver.fake
    fake.configure(too_large_rv_wait=0.2)
    kube.create_node("n1", cpu="4")
    kube.create_pod("a", cpu="100m", node_name="n1")
    kube.create_pod("b", cpu="100m", node_name="n1")
    client = build_api_client(kubeconfig=str(fake_apiserver.kubeconfig))
    state = ClusterState()
    source = KubeSource(state, client, housekeeping_interval=0.05, **FAST_WATCH)
    source.start()
    try:
        assert source.wait_synced(5) and fake.wait_for_watches(2)
        # What FakeApiServer.restart does, with a change made while the server is down.
        fake.stop()
        fake.store.delete("pods", "default", "a")
        if mode == "compacted":
            fake.store.compact()
        elif mode == "reset-rv":
            fake.store.reset_resource_versions()
        time.sleep(1.5)
        fake.start()
        wait_for(lambda: state.pod("default/a") is None and _cpu(state, "n1") == 100, timeout=10,
                 message="the deletion made during the outage")
        kube.create_pod("c", cpu="400m", node_name="n1")
        kube.create_node("n2")
        wait_for(lambda: _cpu(state, "n1") == 500 and state.node_info("n2") and state.pod_count() == 2,
                 timeout=5, message="state converged after the outage")
        assert state.ready
        assert sorted(p.key for p in state.pods_on("n1")) == ["default/b", "default/c"]
        # Unreachable means possibly restored from a backup: every mode lists again.
        assert source.pods.lists > 1
        assert source.pods.restarts.get("error", 0) >= 1  # connection refused while down
    finally:
        source.stop()
        client.close()


# ---- assumed pods ---------------------------------------------------------------------------------------


def test_unconfirmed_assumption_expires(apiserver, make_source) -> None:
    kube = apiserver.client
    kube.create_node("n1", cpu="4")
    kube.create_pod("p", cpu="300m")
    state = ClusterState(assume_ttl=0.3)
    assert make_source(state).wait_synced(5)
    wait_for(lambda: state.pod("default/p"), message="pod")
    state.assume("default/p", "n1")  # a bind the watch never confirms
    assert _cpu(state, "n1") == 300 and state.assumed_keys() == ["default/p"]
    wait_for(lambda: not state.assumed_keys(), timeout=3, message="expiry by housekeeping")
    assert _cpu(state, "n1") == 0 and state.pod("default/p").node_name == ""


def test_housekeeping_publishes_cache_metrics(apiserver, make_source) -> None:
    from extender import metrics

    apiserver.client.create_node("n1")
    state = ClusterState()
    assert make_source(state).wait_synced(5)
    wait_for(lambda: metrics.CACHE_SYNCED._value.get() == 1
             and metrics.CACHE_OBJECTS.labels(kind="node")._value.get() == 1, message="cache gauges")
    assert abs(metrics.CACHE_LAST_EVENT._value.get() - time.time()) < 60
