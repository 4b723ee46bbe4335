"""The pure scheduling cycle: node sampling, choice, tie-breaking, the failure summary."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from extender.cluster.state import ClusterState
from extender.cycle.pod import nodes_to_find, schedule_one
from extender.model.pods import PodView
from extender.policy.defaults import default_policy
from extender.policy.engine import Engine


def node(name: str, *, cpu: str = "4", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def pending(name: str = "p", *, cpu: str = "100m", selector: dict[str, str] | None = None) -> PodView:
    spec: dict[str, Any] = {"schedulerName": "extender-scheduler",
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if selector:
        spec["nodeSelector"] = selector
    return PodView.from_dict({"metadata": {"name": name, "namespace": "default", "uid": f"u-{name}"},
                              "spec": spec})


def cluster(count: int, **options: Any) -> ClusterState:
    state = ClusterState()
    state.replace_nodes([node(f"n{i:04d}", **options) for i in range(count)])
    state.replace_pods([])
    return state


@pytest.fixture
def engine() -> Engine:
    return Engine(default_policy("standalone"))


@pytest.mark.parametrize(("total", "percentage", "expected"), [
    (50, 0, 50),          # small clusters: every node
    (99, 10, 99),
    (100, 0, 100),        # 49% of 100 is under the 100-node floor
    (500, 0, 230),        # adaptive: 50 - 500/125 = 46%
    (1000, 0, 420),       # 42%
    (6000, 0, 300),       # 50 - 48 = 2% -> raised to 5%
    (1000, 10, 100),
    (1000, 100, 1000),
    (300, 20, 100),       # 60 raised to the 100-node floor
])
def test_nodes_to_find_matches_kube_scheduler(total: int, percentage: int, expected: int) -> None:
    assert nodes_to_find(total, percentage) == expected


def test_sampling_limits_the_nodes_evaluated(engine: Engine) -> None:
    state = cluster(500)
    result = schedule_one(engine, state, pending(), rng=random.Random(1))
    assert result.node is not None
    assert result.evaluated == 230
    assert len(result.decision.feasible) == 230
    assert len(result.decision.scored) == 230
    limited = schedule_one(engine, state, pending(), rng=random.Random(1), percentage_of_nodes_to_score=25)
    assert limited.evaluated == 125


def test_search_resumes_where_the_last_one_stopped(engine: Engine) -> None:
    state = cluster(500)
    first = schedule_one(engine, state, pending(), rng=random.Random(1))
    second = schedule_one(engine, state, pending(), rng=random.Random(1), start_index=first.next_start_index)
    assert first.next_start_index == 230
    assert second.next_start_index == 460
    first_names = {info.name for info in first.decision.feasible}
    second_names = {info.name for info in second.decision.feasible}
    assert not first_names & second_names


def test_sampling_wraps_around(engine: Engine) -> None:
    state = cluster(500)
    result = schedule_one(engine, state, pending(), rng=random.Random(1), start_index=400)
    assert result.evaluated == 230
    assert result.next_start_index == 130
    assert {"n0499", "n0000", "n0129"} <= {info.name for info in result.decision.feasible}


def test_sampling_keeps_searching_past_infeasible_nodes(engine: Engine) -> None:
    state = cluster(500)
    # Only the last 10 nodes carry the label: all 500 must be looked at to find them.
    for i in range(490, 500):
        state.upsert_node(node(f"n{i:04d}", labels={"pool": "gpu"}))
    result = schedule_one(engine, state, pending(selector={"pool": "gpu"}), rng=random.Random(1))
    assert result.node is not None and int(result.node[1:]) >= 490
    assert result.evaluated == 500
    assert len(result.decision.feasible) == 10


def test_unschedulable_summary_counts_every_node(engine: Engine) -> None:
    state = cluster(300, cpu="1")
    result = schedule_one(engine, state, pending(cpu="2"), rng=random.Random(1))
    assert result.node is None
    assert result.evaluated == 300
    assert result.decision.summary() == "0/300 nodes are available: 300 Insufficient cpu."


def test_empty_cluster(engine: Engine) -> None:
    result = schedule_one(engine, ClusterState(), pending(), rng=random.Random(1))
    assert result.node is None
    assert result.decision.summary() == "0/0 nodes are available."


def test_best_node_wins(engine: Engine) -> None:
    state = cluster(3)
    state.assume("default/busy-0", "n0000", view=pending("busy-0", cpu="3"))
    state.assume("default/busy-1", "n0001", view=pending("busy-1", cpu="2"))
    result = schedule_one(engine, state, pending(), rng=random.Random(1))
    assert result.node == "n0002"  # least allocated


def test_ties_are_broken_at_random(engine: Engine) -> None:
    state = cluster(4)
    picks = Counter(schedule_one(engine, state, pending(), rng=random.Random(seed)).node for seed in range(200))
    assert set(picks) == {"n0000", "n0001", "n0002", "n0003"}
    assert min(picks.values()) > 20


def test_cycle_is_pure(engine: Engine) -> None:
    state = cluster(3)
    before = [(info.name, info.requested, info.pod_count) for info in state.all_node_infos()]
    schedule_one(engine, state, pending(), rng=random.Random(1))
    assert [(info.name, info.requested, info.pod_count) for info in state.all_node_infos()] == before
    assert state.assumed_keys() == []
