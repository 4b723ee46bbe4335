"""simulate on tests/explain/fixtures/small.yaml, against placements worked out by hand.

The cluster (requested / allocatable before the run):
    a: 2000m/4000m cpu, 4Gi/8Gi       b: 500m/4000m, 1Gi/8Gi       c: 0/2000m, 0/4Gi
Pending: p1 (priority 100, 1000m, 2Gi), p2 (500m, 1Gi), p3 (1500m, 1Gi), big (3000m, 1Gi),
gated (has a scheduling gate). Queue order: p1 (priority), then by age gated, p2, p3, big;
gated is never attempted. Every pod requests cpu and memory, so the scores below are the
plain formulas (integer division per resource, then the integer mean of cpu and memory):
    LeastAllocated = (allocatable - requested_with_pod) * 100 // allocatable
    MostAllocated  = requested_with_pod * 100 // allocatable
"""

from __future__ import annotations

import json

import pytest

from extender.cluster.snapshot import Snapshot
from extender.errors import ExtenderError
from extender.policy.defaults import default_policy
from extender.policy.loading import load_policy_file
from extender.simulation.simulating import (
    Comparison,
    SimulationResult,
    compare,
    read_pods,
    render_table,
    simulate,
    to_json,
)
from tests.explain.conftest import EXTRA, LEAST, MOST

GI = 2**30
GATED = ("default/gated", "waiting for scheduling gates: [example.com/wait]")
BIG_NOWHERE = ("0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: "
               "1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.")


def _placements(result: SimulationResult) -> list[tuple[str, str]]:
    return [(p.pod, p.node) for p in result.placements]


def test_spreading_by_hand(small: Snapshot) -> None:
    result = simulate(small, load_policy_file(LEAST))
    # p1 (1000m, 2Gi):  a (25, 25) = 25    b (2500/4000 -> 62, 5/8 -> 62) = 62    c (50, 50) = 50   -> b
    # p2 (500m, 1Gi):   a (37, 37) = 37    b (50, 50) = 50                         c (75, 75) = 75   -> c
    # p3 (1500m, 1Gi):  a (12, 37) = 24    b (25, 50) = 37    c (cpu full: 0, 50) = 25              -> b
    # big (3000m):      free cpu a 2000m, b 1000m, c 1500m                          -> unschedulable
    assert _placements(result) == [("default/p1", "b"), ("default/p2", "c"), ("default/p3", "b")]
    assert [(p.pod, p.score, p.feasible) for p in result.placements] == [
        ("default/p1", 62, 3), ("default/p2", 75, 3), ("default/p3", 37, 3),
    ]
    assert [(u.pod, u.reason) for u in result.unschedulable] == [GATED, ("default/big", BIG_NOWHERE)]
    usage = {n.node: n for n in result.nodes}
    assert usage["a"].before == usage["a"].after == {"cpu": 2000, "memory": 4 * GI, "pods": 1}
    assert usage["b"].before == {"cpu": 500, "memory": 1 * GI, "pods": 1}
    assert usage["b"].after == {"cpu": 3000, "memory": 4 * GI, "pods": 3}
    assert usage["c"].before == {"cpu": 0, "memory": 0, "pods": 0}
    assert usage["c"].after == {"cpu": 500, "memory": 1 * GI, "pods": 1}
    assert usage["c"].allocatable == {"cpu": 2000, "memory": 4 * GI, "pods": 110}
    assert usage["b"].fraction("cpu", "after") == 0.75


def test_bin_packing_by_hand(small: Snapshot) -> None:
    result = simulate(small, load_policy_file(MOST))
    # p1: a (3000/4000 -> 75, 6/8 -> 75) = 75    b (37, 37) = 37    c (50, 50) = 50        -> a
    # p2: a (87, 87) = 87                         b (25, 25) = 25    c (25, 25) = 25        -> a
    # p3: a has 500m left: refused                b (50, 25) = 37    c (75, 25) = 50        -> c
    # big: free cpu a 500m, b 3500m, c 500m: b is the only fit (and is not scored)         -> b
    assert _placements(result) == [("default/p1", "a"), ("default/p2", "a"), ("default/p3", "c"),
                                   ("default/big", "b")]
    assert [p.score for p in result.placements] == [75, 87, 50, None]
    assert [(u.pod, u.reason) for u in result.unschedulable] == [GATED]


def test_queue_order_is_priority_then_age(small: Snapshot) -> None:
    # The file lists p3, p2, p1, big, gated; p1 has priority 100, gated is the oldest, p2 is older than p3. Had p3 gone before p2,
    # it would have landed on c ((25, 75) = 50 beats b's (25, 50) = 37): the order matters.
    result = simulate(small, load_policy_file(LEAST))
    assert result.pods == ["default/p1", "default/gated", "default/p2", "default/p3", "default/big"]


def test_extra_pods_queue_last_and_are_placed(small: Snapshot) -> None:
    extra = read_pods(EXTRA)
    result = simulate(small, load_policy_file(LEAST), extra_pods=extra)
    # After the spreading run: a 2000m/4Gi, b 3000m/4Gi, c 500m/1Gi. extra-1 (250m, 512Mi):
    #   a (1750/4000 -> 43, 3584Mi/8192Mi -> 43) = 43   b (18, 43) = 30   c (1250/2000 -> 62, 62) = 62 -> c
    assert _placements(result)[-1] == ("default/extra-1", "c")
    assert result.pods[-2:] == ["default/big", "default/extra-1"]  # no creationTimestamp: after every pod
    assert _placements(result)[:3] == [("default/p1", "b"), ("default/p2", "c"), ("default/p3", "b")]
    assert {n.node: n.after["pods"] for n in result.nodes} == {"a": 1, "b": 3, "c": 2}


def test_the_snapshot_itself_is_left_alone(small: Snapshot) -> None:
    before = json.dumps(small.pods, sort_keys=True)
    first = simulate(small, load_policy_file(LEAST))
    assert json.dumps(small.pods, sort_keys=True) == before
    assert simulate(small, load_policy_file(LEAST)) == first


def test_extra_pod_names_must_be_new(small: Snapshot) -> None:
    clash = {"metadata": {"name": "p1", "namespace": "default"}, "spec": {"containers": [{"name": "c"}]}}
    with pytest.raises(ExtenderError, match="default/p1 is already in the snapshot"):
        simulate(small, load_policy_file(LEAST), extra_pods=[clash])
    with pytest.raises(ExtenderError, match="extra pod #0: metadata.name"):
        simulate(small, load_policy_file(LEAST), extra_pods=[{"metadata": {}}])


def _twins() -> Snapshot:
    node = {"kind": "Node", "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                                       "conditions": [{"type": "Ready", "status": "True"}]}}
    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}
    return Snapshot(nodes=[{**node, "metadata": {"name": "x"}}, {**node, "metadata": {"name": "y"}}], pods=[pod])


def test_ties_follow_the_seed() -> None:
    # x and y are identical: every policy ties them, and the seeded random choice decides.
    snapshot, policy = _twins(), default_policy("standalone")
    by_seed = {seed: simulate(snapshot, policy, seed=seed).node_of("default/p") for seed in range(20)}
    assert set(by_seed.values()) == {"x", "y"}
    assert all(simulate(snapshot, policy, seed=seed).node_of("default/p") == node for seed, node in by_seed.items())


def test_shipped_snapshot_with_the_standalone_default(shipped: Snapshot) -> None:
    result = simulate(shipped, default_policy("standalone"))
    # Both small pods spread to node-3 (empty), trainer-1 can only go to gpu-1, huge fits nowhere.
    assert _placements(result) == [("default/pod-cache-true", "node-3"), ("default/pod-cache-false", "node-3"),
                                   ("ml/trainer-1", "gpu-1")]
    assert [u.pod for u in result.unschedulable] == ["default/huge"]
    assert result.unschedulable[0].reason.startswith("0/6 nodes are available:")
    assert {n.node: n.notes for n in result.nodes}["node-4"] == ("cordoned",)
    assert "NotReady" in {n.node: n.notes for n in result.nodes}["node-5"]


def test_two_policies_compared(small: Snapshot) -> None:
    comparison = compare(small, [load_policy_file(LEAST), load_policy_file(MOST)])
    assert isinstance(comparison, Comparison) and len(comparison.results) == 2
    assert [(d.pod, d.nodes) for d in comparison.differences] == [
        ("default/p1", ("b", "a")), ("default/p2", ("c", "a")), ("default/p3", ("b", "c")),
        ("default/big", (None, "b")),
    ]
    text = render_table(comparison)
    assert "4 pod(s) placed differently:" in text
    assert "default/big  (unschedulable)  b" in text


def test_same_policy_twice_has_no_differences(small: Snapshot) -> None:
    comparison = compare(small, [load_policy_file(LEAST), load_policy_file(LEAST)])
    assert comparison.differences == ()
    assert "Every pod lands on the same node" in render_table(comparison)


def test_json_output(small: Snapshot) -> None:
    body = to_json(simulate(small, load_policy_file(LEAST), seed=7))
    assert json.loads(json.dumps(body)) == body
    assert body["seed"] == 7 and body["policy"].endswith("least.yaml")
    assert body["placements"][0] == {"pod": "default/p1", "node": "b", "score": 62, "priority": 100,
                                     "feasibleNodes": 3}
    assert body["unschedulable"][1] == {"pod": "default/big", "reason": BIG_NOWHERE, "priority": 0}
    assert body["nodes"][1] == {"node": "b", "notes": [], "allocatable": {"cpu": 4000, "memory": 8 * GI, "pods": 110},
                                "before": {"cpu": 500, "memory": GI, "pods": 1},
                                "after": {"cpu": 3000, "memory": 4 * GI, "pods": 3}}
    both = to_json(compare(small, [load_policy_file(LEAST), load_policy_file(MOST)]))
    assert len(both["policies"]) == 2
    assert both["differences"][-1] == {"pod": "default/big", "nodes": [None, "b"]}


def test_table_output(small: Snapshot) -> None:
    text = render_table(simulate(small, load_policy_file(LEAST)))
    assert "Placed 3/5 pods, 2 unschedulable." in text
    assert "default/p1  b     62.0   100" in text
    assert "b     12% -> 75% (3/4)    12% -> 50% (4Gi/8Gi)  1% -> 3% (3/110)" in text
    assert "default/big    0/3 nodes are available: 3 Insufficient cpu." in text
