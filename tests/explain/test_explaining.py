"""explain on the shipped snapshot (config/snapshot.yaml), row by row, with the built-in standalone policy.

The cluster: node-1..3 (4 cpu, 8Gi; node-1 runs coredns 100m/70Mi and web 1500m/2Gi,
node-2 runs web 1500m/2Gi, node-3 only a Succeeded pod, which holds nothing), gpu-1
(16 cpu, 64Gi, tainted dedicated=gpu:NoSchedule, running trainer-0 4 cpu/16Gi), node-4
(cordoned), node-5 (NotReady). The standalone policy's filters run in the order
SchedulingGates, NodeReady, TaintToleration, NodeAffinity, ResourceFit, NodeLabels, and a
node shows the first one that refused it.
"""

from __future__ import annotations

import json

import pytest

from extender.cluster.snapshot import Snapshot
from extender.cluster.state import ClusterState
from extender.explain.explanation import (
    FEASIBLE,
    UNRESOLVABLE,
    Explanation,
    explain_pod,
    render_table,
    to_json,
)
from extender.model.nodes import NodeInfo, NodeView
from extender.model.pods import PodView
from extender.policy.engine import Engine

CORDONED = ("unresolvable", "NodeReady", "node(s) were unschedulable", "the node is cordoned (spec.unschedulable)")
NOT_READY = ("unresolvable", "NodeReady", "node(s) were not ready", "the node's Ready condition is not True")
GPU_TAINT = ("unresolvable", "TaintToleration", "node(s) had untolerated taint(s)",
             "untolerated taint {dedicated: gpu} (effect NoSchedule)")


def _pod(snapshot: Snapshot, key: str) -> PodView:
    for raw in snapshot.pods:
        view = PodView.from_dict(raw)
        if view.key == key:
            return view
    raise KeyError(key)


def _explain(snapshot: Snapshot, state: ClusterState, engine: Engine, key: str) -> Explanation:
    return explain_pod(engine, _pod(snapshot, key), state.all_node_infos())


def _refusal(explanation: Explanation, node: str) -> tuple[str, str, str, str]:
    row = explanation.row(node)
    return row.verdict, row.plugin, row.reason, row.detail


def test_huge_is_refused_everywhere(shipped, shipped_state, standalone) -> None:
    # default/huge asks for 12 cpu: more than any 4-cpu node has at all, so ResourceFit says
    # unresolvable; gpu-1 (16 cpu, 12 free) is refused earlier by its taint, node-4 and node-5
    # earlier still by NodeReady.
    explanation = _explain(shipped, shipped_state, standalone, "default/huge")
    assert [row.node for row in explanation.rows] == ["node-1", "node-2", "node-3", "gpu-1", "node-4", "node-5"]
    insufficient = ("unresolvable", "ResourceFit", "Insufficient cpu")
    assert _refusal(explanation, "node-1") == (*insufficient, "Insufficient cpu (requested 12, free 2400m)")
    assert _refusal(explanation, "node-2") == (*insufficient, "Insufficient cpu (requested 12, free 2500m)")
    assert _refusal(explanation, "node-3") == (*insufficient, "Insufficient cpu (requested 12, free 4)")
    assert _refusal(explanation, "gpu-1") == GPU_TAINT
    assert _refusal(explanation, "node-4") == CORDONED
    assert _refusal(explanation, "node-5") == NOT_READY
    assert all(row.scores == () and row.total is None and row.rank is None for row in explanation.rows)
    assert explanation.best == []
    assert explanation.summary == (
        "0/6 nodes are available: 1 node(s) had untolerated taint(s), 1 node(s) were not ready, "
        "1 node(s) were unschedulable, 3 Insufficient cpu."
    )


def test_trainer_fits_only_gpu_1(shipped, shipped_state, standalone) -> None:
    # ml/trainer-1 tolerates the gpu taint and selects accelerator=nvidia-a100, which only gpu-1 has.
    explanation = _explain(shipped, shipped_state, standalone, "ml/trainer-1")
    selector = ("unresolvable", "NodeAffinity", "node(s) didn't match Pod's node affinity/selector", "")
    for node in ("node-1", "node-2", "node-3"):
        assert _refusal(explanation, node) == selector
    assert _refusal(explanation, "node-4") == CORDONED
    assert _refusal(explanation, "node-5") == NOT_READY
    gpu = explanation.rows[0]
    assert (gpu.node, gpu.verdict, gpu.rank, gpu.plugin, gpu.reason) == ("gpu-1", FEASIBLE, 1, "", "")
    # gpu-1 after the pod: cpu 4+4 of 16, memory 16+16Gi of 64Gi.
    # LeastAllocated ((16-8)/16 = 50, (64-32)/64 = 50) -> 50; BalancedAllocation (0.5 vs 0.5) -> 100;
    # TaintPreferNoSchedule: no PreferNoSchedule taint, raw 0, reversed -> 100.
    # Total (50*1 + 100*1 + 100*3) / 5 = 90; wire int(90 * 10 / 100 + 0.5) = 9.
    assert [(c.plugin, c.raw, c.normalized, c.weight, c.weighted) for c in gpu.scores] == [
        ("LeastAllocated", 50, 50, 1, 50),
        ("BalancedAllocation", 100, 100, 1, 100),
        ("TaintPreferNoSchedule", 0, 100, 3, 300),
    ]
    assert (gpu.total, gpu.wire_score) == (90, 9)
    assert explanation.best == ["gpu-1"]


def test_small_pod_scores_on_each_feasible_node(shipped, shipped_state, standalone) -> None:
    # default/pod-cache-true asks 100m and 64Mi. With the pod added:
    #   node-1: cpu 1700m/4000m, mem 2182Mi/8192Mi -> LeastAllocated (57 + 73) // 2 = 65,
    #           Balanced |0.425 - 0.266| / 2 = 0.079 -> 92;         total (65 + 92 + 300) / 5 = 91.4
    #   node-2: cpu 1600m, mem 2112Mi -> (60 + 74) // 2 = 67, Balanced 92;  total 91.8
    #   node-3: cpu  100m, mem   64Mi -> (97 + 99) // 2 = 98, Balanced 99;  total 99.4
    explanation = _explain(shipped, shipped_state, standalone, "default/pod-cache-true")
    feasible = [row for row in explanation.rows if row.verdict == FEASIBLE]
    assert [(r.node, r.rank, round(r.total, 1), r.wire_score) for r in feasible] == [
        ("node-3", 1, 99.4, 10), ("node-2", 2, 91.8, 9), ("node-1", 3, 91.4, 9),
    ]
    by_node = {r.node: {c.plugin: (c.raw, c.normalized) for c in r.scores} for r in feasible}
    assert by_node["node-1"] == {"LeastAllocated": (65, 65), "BalancedAllocation": (92, 92),
                                 "TaintPreferNoSchedule": (0, 100)}
    assert by_node["node-2"]["LeastAllocated"] == (67, 67)
    assert by_node["node-3"]["LeastAllocated"] == (98, 98)
    assert by_node["node-3"]["BalancedAllocation"] == (99, 99)
    assert _refusal(explanation, "gpu-1") == GPU_TAINT
    assert [r.node for r in explanation.rows[3:]] == ["gpu-1", "node-4", "node-5"]
    assert explanation.summary == ("3/6 nodes are available: 1 node(s) had untolerated taint(s), "
                                   "1 node(s) were not ready, 1 node(s) were unschedulable.")


def test_json_form(shipped, shipped_state, standalone) -> None:
    body = to_json(_explain(shipped, shipped_state, standalone, "ml/trainer-1"))
    assert json.loads(json.dumps(body)) == body
    assert body["pod"] == "ml/trainer-1" and body["policy"] == "<built-in standalone>"
    assert body["best"] == ["gpu-1"]
    assert body["scorers"] == [{"plugin": "LeastAllocated", "weight": 1},
                               {"plugin": "BalancedAllocation", "weight": 1},
                               {"plugin": "TaintPreferNoSchedule", "weight": 3}]
    assert body["nodes"][0] == {
        "node": "gpu-1", "verdict": "feasible", "rank": 1, "total": 90, "wireScore": 9,
        "scores": [
            {"plugin": "LeastAllocated", "raw": 50, "normalized": 50, "weight": 1, "weighted": 50},
            {"plugin": "BalancedAllocation", "raw": 100, "normalized": 100, "weight": 1, "weighted": 100},
            {"plugin": "TaintPreferNoSchedule", "raw": 0, "normalized": 100, "weight": 3, "weighted": 300},
        ],
    }
    assert body["nodes"][-1] == {"node": "node-5", "verdict": "unresolvable", "plugin": "NodeReady",
                                 "reason": "node(s) were not ready",
                                 "detail": "the node's Ready condition is not True"}


def test_table_has_a_line_per_node_and_the_details(shipped, shipped_state, standalone) -> None:
    text = render_table(_explain(shipped, shipped_state, standalone, "default/pod-cache-true"))
    lines = text.splitlines()
    assert lines[0].startswith("Pod default/pod-cache-true") and "<built-in standalone>" in lines[0]
    assert lines[1].startswith("3/6 nodes are available")
    header = next(line for line in lines if line.startswith("RANK"))
    assert header.split() == ["RANK", "NODE", "VERDICT", "TOTAL", "WIRE", "LeastAllocated", "x1",
                              "BalancedAllocation", "x1", "TaintPreferNoSchedule", "x3", "FILTER", "REASON"]
    node3 = next(line for line in lines if line.startswith("1 ") and "node-3" in line).split()
    assert node3[:8] == ["1", "node-3", "feasible", "99.4", "10", "98", "99", "100"]
    assert "  gpu-1: TaintToleration: untolerated taint {dedicated: gpu} (effect NoSchedule)" in lines
    assert "  node-4: NodeReady: the node is cordoned (spec.unschedulable)" in lines


def test_equal_totals_share_the_first_rank() -> None:
    # Two identical empty nodes: the scheduler picks either (at random), so both are "best".
    def node(name: str) -> NodeInfo:
        return NodeInfo(NodeView.from_dict({"metadata": {"name": name}, "status": {
            "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"},
            "conditions": [{"type": "Ready", "status": "True"}]}}))

    from extender.policy.defaults import default_policy

    pod = PodView.from_dict({"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}})
    explanation = explain_pod(Engine(default_policy("standalone")), pod, [node("x"), node("y")])
    assert [(r.node, r.rank) for r in explanation.rows] == [("x", 1), ("y", 1)]
    assert explanation.best == ["x", "y"]
    assert "Best: x, y" in render_table(explanation)


def test_unknown_candidates_are_refused_like_the_webhook_does(shipped, shipped_state, standalone) -> None:
    infos, unknown = shipped_state.node_infos(["node-1", "ghost"])
    explanation = explain_pod(standalone, _pod(shipped, "default/pod-cache-true"), infos, unknown=unknown)
    assert [(r.node, r.verdict) for r in explanation.rows] == [("node-1", FEASIBLE), ("ghost", UNRESOLVABLE)]
    assert explanation.row("ghost").reason == "node(s) were unknown to the extender"
    assert explanation.summary.startswith("1/2 nodes are available")


def test_row_lookup_of_a_missing_node_raises(shipped, shipped_state, standalone) -> None:
    with pytest.raises(KeyError):
        _explain(shipped, shipped_state, standalone, "default/huge").row("nowhere")
