"""The usage store: publishing, staleness, the observed deviation, and recent placements.

Placements reach the store the way they do in production, through the ClusterState's pod
hook: a pod the scheduler assumes, a bind the watch confirms, a pod created bound, a
forgotten assumption, a deletion, a re-list.
"""

from __future__ import annotations

import math

import pytest

from extender.cluster.state import ClusterState
from extender.model.usage_samples import STDEV_OBSERVED, STDEV_WINDOW, UP
from extender.policy.usage_settings import UsageSettings
from extender.usage.readings import Capacity, Reading
from extender.usage.store import UsageStore
from tests.helpers import Clock

from .conftest import node, pod

CAPACITY = {"a": Capacity(4000, 8 * 2**30), "b": Capacity(2000, 4 * 2**30)}
MI = 2**20


@pytest.fixture
def state() -> ClusterState:
    state = ClusterState()
    state.replace_nodes([node("a"), node("b", cpu="2", memory="4Gi")])
    state.replace_pods([pod("running", node_name="a", phase="Running"), pod("waiting")])
    return state


@pytest.fixture
def store(state: ClusterState, clock: Clock) -> UsageStore:
    store = UsageStore("test", UsageSettings(interval=10, max_age=30, reporting_lag=20), clock=clock)
    state.add_pod_hook(store.on_pod_change)
    state.set_usage_provider(store.table)
    return store


def test_published_samples_carry_capacity_and_expiry(store: UsageStore, state: ClusterState, clock: Clock):
    assert store.publish([Reading("a", clock.now - 5, cpu=1000, memory=2 * 2**30, window=20)], CAPACITY) == 1
    table = state.node_usage()
    sample = table.samples["a"]
    assert (sample.cpu_capacity, sample.memory_capacity, sample.window) == (4000, 8 * 2**30, 20)
    assert sample.expires == clock.now - 5 + 30
    assert table.fresh("a") is sample and table.fresh("b") is None
    assert sample.cpu_percent() == 25.0 and sample.memory_percent() == 25.0
    clock.advance(26)
    assert state.node_usage().fresh("a") is None  # stale: older than maxAge
    assert "stale: 31s old, over the 30s limit" in state.node_usage().describe("a")


def test_nodes_missing_from_a_fetch_keep_their_sample_and_deleted_nodes_lose_it(store: UsageStore, clock: Clock):
    store.publish([Reading("a", clock.now, cpu=100), Reading("b", clock.now, cpu=200)], CAPACITY)
    clock.advance(10)
    store.publish([Reading("b", clock.now, cpu=300)], CAPACITY)
    assert store.sample("a").cpu == 100  # kept until it goes stale
    store.publish([Reading("b", clock.now, cpu=300)], {"b": CAPACITY["b"]})
    assert store.sample("a") is None  # the node left the cluster


def test_an_older_reading_does_not_replace_a_newer_one(store: UsageStore, clock: Clock):
    store.publish([Reading("a", clock.now, cpu=100)], CAPACITY)
    store.publish([Reading("a", clock.now - 5, cpu=900)], CAPACITY)
    assert store.sample("a").cpu == 100


def test_observed_deviation_when_the_source_gives_none(store: UsageStore, clock: Clock):
    alpha = store.settings.smoothing
    store.publish([Reading("a", clock.now, cpu=100)], CAPACITY)
    first = store.sample("a")
    assert (first.cpu_stdev, first.memory_stdev, first.stdev_kind) == (0.0, None, STDEV_OBSERVED)
    store.publish([Reading("a", clock.now, cpu=100)], CAPACITY)  # the same sample again: no new information
    assert store.sample("a").cpu_stdev == 0.0
    clock.advance(10)
    store.publish([Reading("a", clock.now, cpu=300)], CAPACITY)
    diff = 300 - 100
    variance = (1 - alpha) * (0 + diff * alpha * diff)
    assert store.sample("a").cpu_stdev == pytest.approx(math.sqrt(variance))
    assert store.sample("a").cpu == 300  # the level is the latest reading, as Trimaran's "Latest"


def test_window_deviation_from_the_source_wins(store: UsageStore, clock: Clock):
    store.publish([Reading("a", clock.now, cpu=100, cpu_stdev=40)], CAPACITY)
    assert (store.sample("a").cpu_stdev, store.sample("a").stdev_kind) == (40, STDEV_WINDOW)


def test_assumed_pod_counts_until_a_sample_taken_after_the_reporting_lag(store, state, clock):
    store.publish([Reading("a", clock.now, cpu=1000, memory=2 * 2**30)], CAPACITY)
    clock.advance(1)
    state.assume("default/waiting", "a")  # the standalone scheduler's choice, bind in flight
    sample = store.sample("a")
    assert (sample.recent_cpu, sample.recent_memory, sample.recent_pods) == (500, 1024 * MI, 1)
    assert sample.cpu_percent() == pytest.approx(37.5)
    # the watch confirms the bind: the same placement, counted once
    state.upsert_pod(pod("waiting", node_name="a"))
    assert store.sample("a").recent_pods == 1
    # a sample taken 10s after the placement may not show the pod yet: still counted
    clock.advance(10)
    store.publish([Reading("a", clock.now, cpu=1100)], CAPACITY)
    assert store.sample("a").recent_pods == 1
    # 21s after it (> reportingLag 20s): the measurement includes it now
    clock.advance(11)
    store.publish([Reading("a", clock.now, cpu=1500)], CAPACITY)
    assert store.sample("a").recent_pods == 0


def test_forgotten_assumption_and_deleted_pod_stop_counting(store, state, clock):
    store.publish([Reading("a", clock.now, cpu=1000)], CAPACITY)
    state.assume("default/waiting", "a")
    state.forget("default/waiting")  # the bind failed
    assert store.sample("a").recent_pods == 0
    state.upsert_pod(pod("fresh", node_name="a"))  # created bound (a DaemonSet-style pod)
    assert store.sample("a").recent_cpu == 500
    state.delete_pod("default/fresh")
    assert store.sample("a").recent_cpu == 0


def test_a_pod_moving_nodes_and_a_relist(store, state, clock):
    store.publish([Reading("a", clock.now, cpu=0), Reading("b", clock.now, cpu=0)], CAPACITY)
    state.assume("default/waiting", "a")
    state.forget("default/waiting")
    state.assume("default/waiting", "b")
    assert (store.sample("a").recent_pods, store.sample("b").recent_pods) == (0, 1)
    state.replace_pods([pod("running", node_name="a", phase="Running")])  # re-list: "waiting" is gone
    assert store.sample("b").recent_pods == 0


def test_best_effort_pods_count_kube_schedulers_defaults(store, state, clock):
    store.publish([Reading("a", clock.now, cpu=0)], CAPACITY)
    state.upsert_pod(pod("empty", cpu=None, memory=None, node_name="a"))
    assert (store.sample("a").recent_cpu, store.sample("a").recent_memory) == (100, 200 * MI)


def test_placements_already_running_and_finished_pods_do_not_count(store, state, clock):
    store.publish([Reading("a", clock.now, cpu=0)], CAPACITY)
    state.upsert_pod(pod("running", node_name="a", phase="Running"))  # a status update, not a placement
    assert store.sample("a").recent_pods == 0
    state.upsert_pod(pod("done", node_name="a", phase="Succeeded"))
    assert store.sample("a").recent_pods == 0


def test_placements_before_any_sample_count_once_one_arrives_and_old_ones_are_pruned(store, state, clock):
    state.assume("default/waiting", "a")
    assert store.sample("a") is None
    clock.advance(5)
    store.publish([Reading("a", clock.now, cpu=0)], CAPACITY)
    assert store.sample("a").recent_pods == 1
    clock.advance(100)  # beyond maxAge + reportingLag: can never count again
    store.prune()
    store.publish([Reading("a", clock.now - 40, cpu=0)], CAPACITY)
    assert store.sample("a").recent_pods == 0


def test_table_state_and_counts(store: UsageStore, clock: Clock):
    assert store.table().state == "starting"
    store.set_state(UP)
    store.publish([Reading("a", clock.now - 3, cpu=1), Reading("b", clock.now - 40, cpu=1)], CAPACITY)
    assert store.table().state == "up"
    assert store.fresh_count() == 1
    assert store.newest_timestamp() == clock.now - 3
    store.set_state("down", "unreachable")
    assert store.table().state == "down: unreachable"
