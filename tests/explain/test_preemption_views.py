"""Preemption as simulate and explain show it: the same choice as the live scheduler, victims named."""

from __future__ import annotations

import json

from extender.cluster.snapshot import Snapshot
from extender.explain.explanation import explain_pod, render_table, to_json
from extender.policy.defaults import default_policy
from extender.policy.engine import Engine
from extender.simulation.simulating import render_result, simulate
from extender.simulation.simulating import to_json as simulation_json
from tests.policy.builders import cluster_state, incoming, node_dict, placed


def snapshot() -> Snapshot:
    return Snapshot(
        nodes=[node_dict("n1", cpu="2"), node_dict("n2", cpu="2")],
        pods=[placed("batch", "n1", cpu="1500m", priority=10), placed("web", "n2", cpu="1500m", priority=500),
              placed("urgent", "", cpu="1500m", priority=1000)],
    )


def test_simulate_preempts_the_least_important_pod_and_places_the_preemptor() -> None:
    result = simulate(snapshot(), default_policy("standalone"))
    assert [(p.pod, p.node, p.victims) for p in result.placements] == [("default/urgent", "n1", ("default/batch",))]
    assert "PREEMPTED" in render_result(result) and "default/batch" in render_result(result)
    assert simulation_json(result)["placements"][0]["preempted"] == ["default/batch"]
    after = {n.node: n.after["pods"] for n in result.nodes}
    assert after == {"n1": 1, "n2": 1}


def test_simulate_does_not_preempt_for_a_pod_that_may_not() -> None:
    shot = snapshot()
    shot.pods[2]["spec"]["preemptionPolicy"] = "Never"
    result = simulate(shot, default_policy("standalone"))
    assert result.placements == ()
    assert result.unschedulable[0].reason.endswith("preemption: not eligible due to preemptionPolicy=Never.")


def test_explain_lists_every_candidate_and_why_the_others_are_not() -> None:
    state = cluster_state([node_dict("n1", cpu="2"), node_dict("n2", cpu="2"), node_dict("tiny", cpu="1")],
                          [placed("batch", "n1", cpu="1500m", priority=10),
                           placed("web", "n2", cpu="1500m", priority=500)])
    pod = incoming("urgent", cpu="1500m", priority=1000)
    explanation = explain_pod(Engine(default_policy("standalone")), pod, state.all_node_infos(), cluster=state)
    preemption = explanation.preemption
    assert preemption is not None and preemption.node == "n1"
    assert dict((node, victims) for node, victims, _ in preemption.victims) == {
        "n1": ("default/batch",), "n2": ("default/web",)}
    assert dict(preemption.not_candidates) == {"tiny": "Preemption is not helpful for scheduling"}
    text = render_table(explanation)
    assert "Preemption: would nominate n1 and evict default/batch." in text
    assert "tiny: not a candidate: Preemption is not helpful for scheduling" in text
    body = json.loads(json.dumps(to_json(explanation)))
    assert body["preemption"]["node"] == "n1"
    assert {c["node"] for c in body["preemption"]["candidates"]} == {"n1", "n2"}


def test_explain_says_nothing_of_preemption_when_a_node_fits() -> None:
    state = cluster_state([node_dict("n1", cpu="4")])
    explanation = explain_pod(Engine(default_policy("standalone")), incoming(), state.all_node_infos(), cluster=state)
    assert explanation.preemption is None and "preemption" not in to_json(explanation)
