"""The engine running the built-in plugins: first refusal wins, names stamped, summary, scoring."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from extender.policy.builtin import (
    LabelPreference,
    LeastAllocated,
    NodeReady,
    ResourceFit,
    TaintToleration,
)
from extender.policy.defaults import default_policy
from extender.policy.engine import Engine, PluginError, Policy, WeightedScorer
from extender.policy.plugins import Check
from extender.policy.status import Code, Status

from .builders import make_node, make_pod, taint


def cluster():
    return [
        make_node("ok"),
        make_node("small", cpu="500m"),
        make_node("tainted", taints=[taint("dedicated", "db")]),
        make_node("cordoned", unschedulable=True, cpu="500m"),  # also too small: the first refusal wins
        make_node("full", pods="1", running=[make_pod("x")], cpu="100m", memory="1Mi"),
    ]


def test_first_refusal_wins_and_plugin_names_are_stamped():
    decision = Engine(default_policy("standalone")).filter(make_pod(requests={"cpu": "1"}), cluster())
    assert [n.name for n in decision.feasible] == ["ok"]
    failed = {name: (s.plugin, s.reasons) for name, s in decision.failed.items()}
    assert failed == {
        "small": ("ResourceFit", ("Insufficient cpu",)),
        "tainted": ("TaintToleration", ("node(s) had untolerated taint(s)",)),
        "cordoned": ("NodeReady", ("node(s) were unschedulable",)),
        "full": ("ResourceFit", ("Too many pods", "Insufficient cpu")),
    }


def test_summary_counts_reasons_sorted_like_go():
    decision = Engine(default_policy("standalone")).filter(make_pod(requests={"cpu": "1"}), cluster()[1:])
    # Go's sort.Strings over "count reason": byte order, so "2 ..." after "1 ...", capitals first.
    assert decision.summary() == (
        "0/4 nodes are available: 1 Too many pods, 1 node(s) had untolerated taint(s), "
        "1 node(s) were unschedulable, 2 Insufficient cpu."
    )


def test_unresolvable_split():
    busy = make_node("busy", running=[make_pod("u", requests={"cpu": "3500m"})])
    decision = Engine(default_policy("standalone")).filter(make_pod(requests={"cpu": "1"}), [*cluster(), busy])
    # 1 cpu on a 500m (or 100m) node: no preemption can help; on the busy 4-cpu node it can.
    assert sorted(decision.unresolvable()) == ["cordoned", "full", "small", "tainted"]
    assert sorted(decision.resolvable()) == ["busy"]


def test_a_node_with_an_unreadable_field_is_refused_not_fatal():
    from extender.model.nodes import NodeInfo, NodeView

    bad = NodeInfo(NodeView.from_dict({"metadata": {"name": "bad"}, "status": {"allocatable": {"cpu": "lots"}}}))
    decision = Engine(default_policy("standalone")).filter(make_pod(), [bad, make_node("ok")])
    assert [n.name for n in decision.feasible] == ["ok"]
    assert decision.failed["bad"].code == Code.UNRESOLVABLE


def test_scores_are_normalized_weighted_and_averaged():
    label = LabelPreference.from_args({"label": "tier", "values": {"gold": 4, "silver": 2}})
    policy = Policy(scorers=(WeightedScorer(LeastAllocated(), 1), WeightedScorer(label, 3)))
    pod = make_pod(requests={"cpu": "1", "memory": "2Gi"})
    nodes = [
        make_node("gold", labels={"tier": "gold"}, running=[make_pod("u", requests={"cpu": "1", "memory": "2Gi"})]),
        make_node("silver", labels={"tier": "silver"}),
    ]
    decision = Engine(policy).decide(pod, nodes)
    assert decision.raw_scores == {"LeastAllocated": [50, 75], "LabelPreference": [4.0, 2.0]}
    assert decision.normalized_scores["LabelPreference"] == [100.0, 50.0]
    assert decision.totals == [(50 * 1 + 100 * 3) / 4, (75 * 1 + 50 * 3) / 4]
    assert [info.name for info, _ in decision.ranking()] == ["gold", "silver"]
    lines = decision.score_of(0)
    assert [(line.plugin, line.weighted) for line in lines] == [("LeastAllocated", 50), ("LabelPreference", 300)]


def test_a_column_equal_on_every_node_still_counts_in_the_totals():
    """A scorer giving every node one value is added once, not node by node: the totals stay
    the weighted average of every column."""
    label = LabelPreference.from_args({"label": "tier", "values": {"gold": 4}})
    policy = Policy(scorers=(WeightedScorer(LeastAllocated(), 1), WeightedScorer(label, 3)))
    pod = make_pod(requests={"cpu": "1", "memory": "2Gi"})
    nodes = [make_node("a", labels={"tier": "gold"},
                       running=[make_pod("u", requests={"cpu": "1", "memory": "2Gi"})]),
             make_node("b", labels={"tier": "gold"})]
    decision = Engine(policy).decide(pod, nodes)
    assert decision.normalized_scores["LabelPreference"] == [100.0, 100.0]
    assert decision.totals == [(50 * 1 + 100 * 3) / 4, (75 * 1 + 100 * 3) / 4]
    assert decision.ranking()[0][0].name == "b"


def test_default_standalone_prefers_the_emptier_node():
    pod = make_pod(requests={"cpu": "1", "memory": "1Gi"})
    nodes = [make_node("busy", running=[make_pod("u", requests={"cpu": "2", "memory": "4Gi"})]), make_node("idle")]
    decision = Engine(default_policy("standalone")).decide(pod, nodes)
    assert decision.ranking()[0][0].name == "idle"
    assert "PreferredNodeAffinity" not in decision.raw_scores  # skipped: the pod has no preferences


def _raise(error: Exception) -> Any:
    raise error


class AnswerFilter:
    """A filter plugin named ``name`` whose answer for any node is ``answer()`` (which may raise)."""

    def __init__(self, name: str, answer: Callable[[], Any]) -> None:
        self.name = name
        self._answer = answer

    def filter(self, pod, node):
        return self._answer()


class FixedScore:
    """A score plugin named ``name`` that gives every node ``value``."""

    def __init__(self, name: str, value: Any = 1) -> None:
        self.name = name
        self._value = value

    def score(self, pod, node):
        return self._value


class Normalizing(FixedScore):
    """A FixedScore whose normalize_scores is ``normalize`` (which may raise)."""

    def __init__(self, name: str, normalize: Callable[[list[float]], Any]) -> None:
        super().__init__(name)
        self._normalize = normalize

    def normalize_scores(self, scores):
        return self._normalize(scores)


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (Policy(filters=(AnswerFilter("Boom", lambda: _raise(RuntimeError("kaput"))),)), "filter Boom failed: kaput"),
        (Policy(filters=(AnswerFilter("WrongType", lambda: 42),)), "filter WrongType returned int"),
        (Policy(filters=(AnswerFilter("ErrorStatus", lambda: Status(Code.ERROR, ("backend down",))),)), "filter ErrorStatus failed: backend down"),
        (Policy(scorers=(WeightedScorer(FixedScore("NaNScore", float("nan")), 1),)), "scorer NaNScore returned nan"),
        (Policy(scorers=(WeightedScorer(Normalizing("OutOfRange", lambda scores: [150.0 for _ in scores]), 1),)), "scorer OutOfRange gave 150.0, outside 0..100"),
        (Policy(scorers=(WeightedScorer(FixedScore("NoneScore", None), 1),)), "scorer NoneScore returned None"),
        (Policy(scorers=(WeightedScorer(Normalizing("BrokenNormalize", lambda scores: _raise(ValueError("bad maths"))), 1),)), "scorer BrokenNormalize failed to normalize: bad maths"),
        (Policy(scorers=(WeightedScorer(Normalizing("ShortNormalize", lambda scores: []), 1),)), "scorer ShortNormalize normalized 1 scores into 0"),
    ],
)
def test_plugin_errors_fail_the_attempt(policy, message):
    with pytest.raises(PluginError, match=message):
        Engine(policy).decide(make_pod(), [make_node()])


def test_a_plain_string_reason_is_stamped_with_the_plugin_name():
    decision = Engine(Policy(filters=(NodeReady(), AnswerFilter("Custom", lambda: "custom: too hot")))).filter(make_pod(), [make_node()])
    status = decision.failed["n"]
    assert (status.plugin, status.reasons, status.code) == ("Custom", ("custom: too hot",), Code.UNSCHEDULABLE)


def test_plugins_skipped_by_prefilter_cost_nothing():
    policy = Policy(filters=(TaintToleration(), ResourceFit()))
    cycle = Engine(policy).prepare(make_pod(tolerations=[{"operator": "Exists"}]))
    assert [name for name, _ in cycle.checks] == ["ResourceFit"] and cycle.refuse_all is None


def test_gated_pod_is_refused_everywhere():
    decision = Engine(default_policy("standalone")).filter(make_pod(gates=["wait"]), cluster())
    assert decision.summary() == "0/5 nodes are available: waiting for scheduling gates: [wait]."


def test_remembered_scores_are_the_scores_as_nodes_change():
    """Score functions with a memo_key score again only the NodeInfos that changed: the totals
    must be those of an engine that remembers nothing, pod after pod."""
    policy = default_policy("standalone")
    remembering = Engine(policy)
    def prefer(zone: str) -> dict:
        return {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "preference": {
            "matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}}]}

    # Shapes alike but for one scorer's input, so a key that forgets an input shows.
    shapes = [dict(requests={"cpu": "100m", "memory": "128Mi"}), dict(requests={"cpu": "1", "memory": "1Gi"}),
              dict(requests={"cpu": "250m"}), dict(requests={"cpu": "250m"}, affinity=prefer("a")),
              dict(requests={"cpu": "250m"}, affinity=prefer("b")),
              dict(requests={"cpu": "250m"}, tolerations=[{"key": "spot", "operator": "Exists"}])]

    def make(name: str, running: list) -> object:
        i = int(name[1:])
        return make_node(name, cpu=str(2 + i % 3), memory=f"{4 + i}Gi", running=running,
                         labels={"zone": "ab"[i % 2]},
                         taints=[taint("spot", "yes", "PreferNoSchedule")] if i % 3 == 0 else None)

    nodes = {f"n{i}": make(f"n{i}", []) for i in range(8)}
    placed: dict[str, list] = {name: [] for name in nodes}
    for step in range(60):
        pod = make_pod(f"p{step}", **shapes[step % len(shapes)])
        infos = list(nodes.values())
        got = remembering.score(pod, infos)
        fresh = Engine(policy).score(pod, infos)
        assert got.totals == fresh.totals and got.raw_scores == fresh.raw_scores
        best = max(zip(got.totals, infos, strict=True), key=lambda pair: pair[0])[1].name
        placed[best].append(pod)  # the node's info is rebuilt, as the cluster state does on a bind
        nodes[best] = make(best, placed[best])
    assert any(remembering._memos.values())  # the allocation scorers did remember


def _verdicts(decision) -> dict[str, object]:
    return {**{info.name: None for info in decision.feasible},
            **{name: (s.plugin, s.reasons, s.code) for name, s in decision.failed.items()}}


class _Moody:
    """A filter that reads something besides the NodeInfo (no memo_key): it refuses the nodes
    named in `refused`, which the test changes between pods."""

    name = "Moody"
    refused: set[str] = set()

    def filter(self, pod, node):
        return "moody: not today" if node.name in self.refused else None


@pytest.mark.parametrize("filters", ["standalone", "ready-and-fit", "with-a-check-to-run-each-time"])
def test_remembered_verdicts_are_the_verdicts_as_nodes_change(filters: str):
    """The checks with a memo_key are judged again only on the NodeInfos that changed: pod
    after pod, with nodes filling up, cordoned, tainted, relabelled and going NotReady, the
    verdicts must be those of an engine that remembers nothing. (The short policy keeps checks
    that other checks' keys would otherwise cover; the last one has a check that must run on
    every node every time, between remembered ones.)"""
    import random

    from extender.policy.builtin.readiness import ALL_PRESSURE_CONDITIONS

    ready = NodeReady(pressure_conditions=ALL_PRESSURE_CONDITIONS)
    policy = {"standalone": default_policy("standalone"),
              "ready-and-fit": Policy(filters=(ready, ResourceFit())),
              "with-a-check-to-run-each-time": Policy(filters=(ready, _Moody(), ResourceFit(), TaintToleration()))
              }[filters]
    remembering = Engine(policy)
    rng = random.Random(3)

    def zones(*names: str) -> dict:
        return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": list(names)}]}]}}

    # Shapes alike but for one check's input, so a key that forgets an input shows.
    shapes = [dict(requests={"cpu": "1", "memory": "1Gi"}),
              dict(requests={"cpu": "1", "memory": "1Gi"}, affinity=zones("a", "b")),
              dict(requests={"cpu": "1", "memory": "1Gi"}, affinity=zones("c")),
              dict(requests={"cpu": "1", "memory": "1Gi"}, node_selector={"disk": "ssd"}),
              dict(requests={"cpu": "1", "memory": "1Gi"}, node_selector={"zone": "a"}),
              dict(requests={"cpu": "500m"}, node_selector={"disk": "ssd"}),
              dict(requests={"cpu": "2"}, tolerations=[{"key": "dedicated", "operator": "Exists"}]),
              dict(requests={"cpu": "2"}),
              dict(requests={"cpu": "100m"}, tolerations=[{"key": "node.kubernetes.io/unschedulable",
                                                            "operator": "Exists", "effect": "NoSchedule"}]),
              dict(requests={"cpu": "100m"})]
    shapes_of: dict[str, dict] = {f"n{i}": dict(cpu="4", memory="8Gi", pods="6", labels={
        "zone": "abc"[i % 3], **({"disk": "ssd"} if i % 2 else {})}) for i in range(8)}
    placed: dict[str, list] = {name: [] for name in shapes_of}
    nodes = {name: make_node(name, **shape) for name, shape in shapes_of.items()}
    remembered = 0
    for step in range(240):
        pod = make_pod(f"p{step}", **shapes[step % len(shapes)])
        _Moody.refused = set(rng.sample(sorted(nodes), 3))
        cycle = remembering.prepare(pod)
        remembered += cycle.memo is not None
        got = cycle.run(list(nodes.values()))
        assert _verdicts(got) == _verdicts(Engine(policy).filter(pod, list(nodes.values()))), step
        name = rng.choice(sorted(nodes))
        if got.feasible and step % 4:
            name = got.feasible[0].name
            placed[name].append(pod)
        else:  # the node itself changes
            shapes_of[name] = {**shapes_of[name], **rng.choice([
                {"unschedulable": True}, {"unschedulable": False}, {"ready": "False"}, {"ready": "True"},
                {"taints": [taint("dedicated", "db")]}, {"taints": None},
                {"labels": {"zone": rng.choice("abc")}}, {"labels": {"zone": "a", "disk": "ssd"}}])}
        nodes[name] = make_node(name, running=placed[name], **shapes_of[name])  # rebuilt, as the state does
    assert remembered > 200  # every pod but the first of each shape


def test_a_check_without_memo_key_runs_on_every_node_every_pod():
    """A check that reads more than its NodeInfo (no memo_key) must run on every node, every
    pod, while the remembered checks run once per NodeInfo."""
    calls: list[str] = []
    fits: list[str] = []

    class Counting:
        name = "Counting"

        def filter(self, pod, node):
            calls.append(node.name)
            return None

    class CountingFit(ResourceFit):
        def prefilter(self, pod, cluster):
            check = super().prefilter(pod, cluster)

            def counted(info):
                fits.append(info.name)
                return check(info)

            return Check(counted, memo_key=check.memo_key)

    engine = Engine(Policy(filters=(CountingFit(), Counting())))
    nodes = [make_node("a"), make_node("b")]
    for step in range(3):
        cycle = engine.prepare(make_pod(f"p{step}", requests={"cpu": "1"}))
        assert len(cycle.run(nodes).feasible) == 2
    assert calls == ["a", "b"] * 3
    assert fits == ["a", "b"] * 2  # the first pod of the shape, then the second filling the memo


def test_a_shape_s_first_pod_fills_no_verdict_memo():
    """Pods each of a shape of their own (kube-scheduler's SchedulingWithExtendedResource: pod i
    asks for foo.com/bar-i) would each fill a memo of every node that no later pod reads."""
    engine = Engine(default_policy("standalone"))
    nodes = [make_node(f"n{i}", extra={f"foo.com/bar-{i}": "1"}) for i in range(4)]
    for i in range(4):
        cycle = engine.prepare(make_pod(f"p{i}", requests={f"foo.com/bar-{i}": "1"}))
        assert cycle.memo is None and [info.name for info in cycle.run(nodes).feasible] == [f"n{i}"]
    assert not engine._verdicts
    again = engine.prepare(make_pod("again", requests={"foo.com/bar-2": "1"}))
    assert again.memo is not None and [info.name for info in again.run(nodes).feasible] == ["n2"]
