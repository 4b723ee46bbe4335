"""NodeAffinity's PreFilterResult: a pod whose required terms name nodes (`metadata.name In`) is
filtered on those nodes only, as kube-scheduler's findNodesThatFitPod does; the others carry the
absent nodes' status in the summary."""

from __future__ import annotations

import random
from typing import Any

from extender.cycle.pod import schedule_one
from extender.model.pods import PodView
from extender.policy.builtin.node_affinity import named_nodes
from extender.policy.defaults import default_policy
from extender.policy.engine import Engine
from tests.policy.builders import cluster_state, node_dict, placed

ENGINE = Engine(default_policy("standalone"))


def pinned(name: str, terms: list[dict[str, Any]], cpu: str = "1") -> PodView:
    spec = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": terms}}}}
    return PodView.from_dict(placed(name, "", cpu=cpu, spec=spec))


def name_in(*names: str) -> dict[str, Any]:
    return {"key": "metadata.name", "operator": "In", "values": list(names)}


def test_a_daemonset_pod_is_filtered_on_its_node_alone() -> None:
    state = cluster_state([node_dict(f"n{i}", cpu="2") for i in range(300)])
    result = schedule_one(ENGINE, state, pinned("ds", [{"matchFields": [name_in("n7")]}]), rng=random.Random(0),
                          start_index=41)
    assert result.node == "n7"
    assert result.evaluated == 1 and result.decision.total == 300
    assert result.next_start_index == 42  # (start + processed) % all nodes, as kube-scheduler


def test_the_summary_counts_the_nodes_the_result_left_out() -> None:
    state = cluster_state([node_dict(f"n{i}", cpu="2") for i in range(5)], [placed("big", "n1", cpu="1500m")])
    result = schedule_one(ENGINE, state, pinned("ds", [{"matchFields": [name_in("n1", "gone")]}]),
                          rng=random.Random(0))
    assert result.node is None
    assert result.decision.summary() == (
        "0/5 nodes are available: 1 Insufficient cpu, 4 node(s) didn't satisfy plugin(s) [NodeAffinity].")
    assert result.decision.refusing_plugins() == {"ResourceFit", "NodeAffinity"}


def test_conflicting_name_fields_refuse_every_node() -> None:
    state = cluster_state([node_dict(f"n{i}") for i in range(3)])
    pod = pinned("ds", [{"matchFields": [name_in("n0"), name_in("n1")]}])
    result = schedule_one(ENGINE, state, pod, rng=random.Random(0))
    assert result.node is None
    assert result.decision.summary() == "0/3 nodes are available: pod affinity terms conflict."


def test_a_term_without_a_name_field_leaves_every_node_in_play() -> None:
    by_label = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    by_name = {"matchFields": [name_in("n0")]}
    assert named_nodes(pinned("p", [by_name, by_label]).required_terms) is None
    assert named_nodes(pinned("p", [by_name, {"matchFields": [name_in("n1", "n2")]}]).required_terms) == {
        "n0", "n1", "n2"}
    nodes = [node_dict("n0"), node_dict("n1", extra={"zone": "a"}), node_dict("n2")]
    state = cluster_state(nodes)
    result = schedule_one(ENGINE, state, pinned("p", [by_name, by_label]), rng=random.Random(0))
    assert result.node in {"n0", "n1"} and result.decision.absent is None
    assert result.decision.failed["n2"].reasons == ("node(s) didn't match Pod's node affinity/selector",)
