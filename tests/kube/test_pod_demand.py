"""Pods watched on demand: a source told not to watch them holds none, yet is ready; starting
the watch later lists them before it returns, while the state stays ready."""

from __future__ import annotations

from typing import Any

import pytest

from extender.cluster.state import ClusterState
from tests.helpers import wait_for


def _cpu(state: ClusterState, node: str) -> int:
    info = state.node_info(node)
    return info.requested.get("cpu", 0) if info else -1


@pytest.fixture
def placed(apiserver: Any) -> Any:
    """A node with one pod (500m) on it; the API server's client, to add more."""
    kube = apiserver.client
    kube.create_node("n1", cpu="4")
    kube.create_pod("placed", cpu="500m", node_name="n1")
    return kube


def test_without_the_pod_watch_the_state_is_ready_and_holds_no_pods(apiserver, placed, make_source) -> None:
    state = ClusterState()
    source = make_source(state, watch_pods=False)
    assert source.wait_synced(10)
    assert state.ready and state.node_count() == 1
    assert state.pod_count() == 0 and _cpu(state, "n1") == 0
    assert not source.pods_watched and source.pods not in source.reflectors
    if apiserver.fake is not None:
        assert not apiserver.fake.requests_matching("GET", r"^/api/v1/pods$")


def test_starting_the_pod_watch_lists_them_then_follows(placed, make_source) -> None:
    state = ClusterState()
    source = make_source(state, watch_pods=False)
    assert source.wait_synced(10)
    assert source.start_pod_watch()
    # Listed before it returned, and the state never stopped being ready.
    assert state.ready and state.pod_count() == 1 and _cpu(state, "n1") == 500
    assert source.pods_watched and source.pods in source.reflectors
    placed.create_pod("second", cpu="250m", node_name="n1")
    wait_for(lambda: _cpu(state, "n1") == 750, 10, "the watch to deliver the second pod")
    assert source.start_pod_watch()  # again: already watching, nothing new started
    assert state.pod_count() == 2


def test_a_pod_watch_asked_for_before_start_starts_with_the_rest(placed, make_source) -> None:
    state = ClusterState()
    source = make_source(state, start=False, watch_pods=False)
    assert state.pods_synced  # nothing to wait for, yet
    assert source.start_pod_watch()
    assert not state.ready  # now the state waits for the pods' list
    source.start()
    assert source.wait_synced(10)
    assert state.ready and _cpu(state, "n1") == 500
