"""Preemption's choices, as kube-scheduler v1.36's DefaultPreemption makes them."""

from __future__ import annotations

import random
from typing import Any

from extender.policy.defaults import default_policy
from extender.policy.engine import Engine
from extender.policy.preemption import (
    NEVER,
    NO_VICTIMS,
    NOT_HELPFUL,
    TERMINATING_ON_NOMINATED,
    Candidate,
    Outcome,
    candidates_to_find,
    pick,
    preempt,
)

from .builders import cluster_state, incoming, node_dict, placed, pod_affinity, term

ENGINE = Engine(default_policy("standalone"))


def run(state: Any, pod: Any, **kwargs: Any) -> Outcome:
    nodes = state.all_node_infos()
    decision = ENGINE.filter(pod, nodes, state)
    assert not decision.feasible, "the pod must fit nowhere for preemption to run"
    return preempt(ENGINE.prepare(pod, state), decision, nodes, state, state.disruption_budgets(),
                   rng=random.Random(0), **kwargs)


def victims(outcome: Outcome) -> tuple[str, tuple[str, ...]]:
    assert outcome.candidate is not None, outcome.message
    return outcome.candidate.node, tuple(v.name for v in outcome.candidate.victims)


def test_the_issue_scenario_evicts_the_low_priority_pod() -> None:
    state = cluster_state([node_dict("n", cpu="2")], [placed("low", "n", cpu="1500m", priority=100)])
    assert victims(run(state, incoming("high", cpu="1500m", priority=100000))) == ("n", ("low",))


def test_only_as_many_victims_as_needed_highest_priority_reprieved_first() -> None:
    pods = [placed("a", "n", cpu="1", priority=10), placed("b", "n", cpu="500m", priority=5),
            placed("c", "n", cpu="500m", priority=1)]
    state = cluster_state([node_dict("n", cpu="2")], pods)
    # All three go, then a (10) is reprieved (1 + 1 = 2 fits), b (5) no longer fits, c (1) neither.
    assert victims(run(state, incoming(cpu="1", priority=100))) == ("n", ("b", "c"))


def test_equal_and_higher_priority_pods_are_never_victims() -> None:
    pods = [placed("same", "n", cpu="1500m", priority=100), placed("higher", "m", cpu="1500m", priority=200)]
    state = cluster_state([node_dict("n", cpu="2"), node_dict("m", cpu="2")], pods)
    outcome = run(state, incoming(cpu="1500m", priority=100))
    assert outcome.candidate is None
    assert outcome.message == f"0/2 nodes are available: 2 {NO_VICTIMS}."


def test_preemption_policy_never_does_not_preempt() -> None:
    state = cluster_state([node_dict("n", cpu="2")], [placed("low", "n", cpu="1500m", priority=1)])
    pod = incoming(cpu="1500m", priority=100, spec={"preemptionPolicy": "Never"})
    assert run(state, pod).message == NEVER


def test_nodes_refused_unresolvably_are_not_candidates() -> None:
    nodes = [node_dict("tiny", cpu="1"), node_dict("tainted", cpu="4", taints=[{"key": "x", "effect": "NoSchedule"}]),
             node_dict("busy", cpu="2")]
    state = cluster_state(nodes, [placed("low", "busy", cpu="1500m", priority=1)])
    outcome = run(state, incoming(cpu="1500m", priority=100))
    assert victims(outcome) == ("busy", ("low",))
    assert {n: s.reason for n, s in outcome.statuses.items()} == {"tiny": NOT_HELPFUL, "tainted": NOT_HELPFUL}


def test_fewest_budget_violations_win() -> None:
    pods = [placed("guarded", "n1", cpu="1500m", priority=1, labels={"app": "db"}),
            placed("free", "n2", cpu="1500m", priority=50, labels={"app": "web"})]
    state = cluster_state([node_dict("n1", cpu="2"), node_dict("n2", cpu="2")], pods)
    state.budgets.replace([{"metadata": {"name": "db", "namespace": "default"},
                            "spec": {"selector": {"matchLabels": {"app": "db"}}},
                            "status": {"disruptionsAllowed": 0}}])
    outcome = run(state, incoming(cpu="1500m", priority=100))
    # Without the budget n1 would win (lower victim priority); the budget makes n1 violating.
    assert victims(outcome) == ("n2", ("free",))
    assert {c.node: c.pdb_violations for c in outcome.candidates} == {"n1": 1, "n2": 0}


def test_budget_violating_victims_are_reprieved_first() -> None:
    pods = [placed("guarded", "n", cpu="1", priority=1, labels={"app": "db"}),
            placed("other", "n", cpu="1", priority=5, labels={"app": "web"})]
    state = cluster_state([node_dict("n", cpu="2")], pods)
    state.budgets.replace([{"metadata": {"name": "db", "namespace": "default"},
                            "spec": {"selector": {"matchLabels": {"app": "db"}}},
                            "status": {"disruptionsAllowed": 0}}])
    # Either one's eviction makes room; the PDB-protected one is tried first, so it stays.
    assert victims(run(state, incoming(cpu="1", priority=100))) == ("n", ("other",))


def test_pods_already_disrupted_do_not_count_against_their_budget() -> None:
    pods = [placed("guarded", "n", cpu="1500m", priority=1, labels={"app": "db"})]
    state = cluster_state([node_dict("n", cpu="2")], pods)
    state.budgets.replace([{"metadata": {"name": "db", "namespace": "default"},
                            "spec": {"selector": {"matchLabels": {"app": "db"}}},
                            "status": {"disruptionsAllowed": 0, "disruptedPods": {"guarded": "2026-01-01T00:00:00Z"}}}])
    assert run(state, incoming(cpu="1500m", priority=100)).candidates[0].pdb_violations == 0


def _candidate(node: str, *victims: tuple[int, str], violations: int = 0) -> Candidate:
    from extender.model.records import PodRecord

    records = tuple(PodRecord(f"default/{node}-{i}", "", node, "s", "Running", False, False, {}, {},
                              priority=priority, start_time=started) for i, (priority, started) in enumerate(victims))
    return Candidate(node, records, violations)


T1, T2 = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"


def test_node_choice_follows_kube_schedulers_order() -> None:
    assert pick([_candidate("a", (1, T1), violations=1), _candidate("b", (9, T1))]).node == "b"
    assert pick([_candidate("a", (5, T1)), _candidate("b", (3, T1), (3, T1))]).node == "b"  # lowest top priority
    assert pick([_candidate("a", (3, T1), (2, T1)), _candidate("b", (3, T1), (1, T1))]).node == "b"  # smallest sum
    assert pick([_candidate("a", (3, T1), (0, T1), (0, T1)), _candidate("b", (3, T1), (0, T1))]).node == "b"
    assert pick([_candidate("a", (3, T1), (3, T1)), _candidate("b", (3, T2), (3, T1))]).node == "a"  # ties on sum:
    assert pick([_candidate("a", (3, T1)), _candidate("b", (3, T2))]).node == "b"  # latest start wins
    assert pick([_candidate("a", (3, T2)), _candidate("b", (3, ""))]).node == "b"  # not started = now
    assert pick([_candidate("a", (3, T1)), _candidate("b", (3, T1))]).node == "a"


def test_enough_candidates_is_ten_percent_but_at_least_a_hundred() -> None:
    assert [candidates_to_find(n) for n in (5, 100, 999, 1500, 5000)] == [5, 100, 100, 150, 500]


def test_victims_are_also_found_for_inter_pod_rules() -> None:
    pods = [placed("web-low", "n1", labels={"app": "web"}, priority=1),
            placed("web-high", "n2", labels={"app": "web"}, priority=1000)]
    state = cluster_state([node_dict("n1"), node_dict("n2")], pods)
    pod = incoming(labels={"app": "web"}, priority=100, spec={"affinity": pod_affinity(anti=[term({"app": "web"})])})
    outcome = run(state, pod)
    assert victims(outcome) == ("n1", ("web-low",))
    assert outcome.statuses["n2"].reason == NO_VICTIMS


def test_a_terminating_victim_on_the_nominated_node_means_wait() -> None:
    dying = placed("dying", "n", cpu="1500m", priority=1, deleting=True, status={"conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]})
    state = cluster_state([node_dict("n", cpu="2")], [dying])
    assert run(state, incoming(cpu="1500m", priority=100), nominated="n").message == TERMINATING_ON_NOMINATED
    assert run(state, incoming(cpu="1500m", priority=100)).candidate is not None  # not nominated: may preempt


def test_nominated_pods_hold_their_room_against_lower_priority_pods() -> None:
    state = cluster_state([node_dict("n", cpu="2")])
    state.nominator.tracking = True
    state.nominator.nominate(incoming("waiting", cpu="1500m", priority=100), "n")
    lower, higher = incoming("lower", cpu="1", priority=10), incoming("higher", cpu="1", priority=1000)
    node = state.node_info("n")
    assert ENGINE.prepare(lower, state).status(node).reasons == ("Insufficient cpu",)
    assert ENGINE.prepare(higher, state).status(node) is None
    state.nominator.clear("default/waiting")
    assert ENGINE.prepare(lower, state).status(node) is None


def test_a_remembered_shape_still_counts_the_pods_nominated_to_a_node() -> None:
    """The verdict memo serves the nodes without nominations; a nominated node is judged with
    its nominated pods, whatever the memo holds for it."""
    engine = Engine(default_policy("standalone"))
    state = cluster_state([node_dict(f"n{i}", cpu="2") for i in range(3)])
    nodes = state.all_node_infos()
    for name in ("first", "second"):  # the second pod of a shape gets the memo
        assert [n.name for n in engine.filter(incoming(name, cpu="1", priority=10), nodes, state).feasible] == [
            "n0", "n1", "n2"]
    state.nominator.tracking = True
    state.nominator.nominate(incoming("waiting", cpu="1500m", priority=100), "n1")
    cycle = engine.prepare(incoming("third", cpu="1", priority=10), state)
    assert cycle.memo is not None
    decision = cycle.run(nodes)
    assert [n.name for n in decision.feasible] == ["n0", "n2"]
    assert decision.failed["n1"].reasons == ("Insufficient cpu",)
    higher = engine.filter(incoming("higher", cpu="1", priority=1000), nodes, state)
    assert [n.name for n in higher.feasible] == ["n0", "n1", "n2"]
