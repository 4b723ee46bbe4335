"""PodTopologySpread: DoNotSchedule as a filter, ScheduleAnyway and the system defaults as a scorer."""

from __future__ import annotations

import math

import pytest

from extender.errors import PolicyError
from extender.policy.builtin import PodTopologySpread, PreferredPodTopologySpread
from extender.policy.builtin.spread import REASON_MISSING_LABEL, REASON_NOT_MATCH
from extender.policy.cluster_view import PodChange
from extender.policy.status import Code

from .builders import (
    HOSTNAME,
    ZONE,
    cluster_scores,
    cluster_state,
    feasible,
    incoming,
    node_dict,
    placed,
    spread,
    taint,
    toleration,
    zoned_nodes,
)

FILTER = PodTopologySpread()
SCORER = PreferredPodTopologySpread()
WEB = {"app": "web"}


def web_pods(layout: dict[str, int]) -> list[dict]:
    """`layout` node -> how many app=web pods run there."""
    return [placed(f"web-{node}-{i}", node, labels=WEB) for node, count in layout.items() for i in range(count)]


def verdicts(answers: dict) -> dict[str, str]:
    return {node: "ok" if status is None else status.reason for node, status in answers.items()}


def test_skew_is_counted_against_the_emptiest_domain() -> None:
    state = cluster_state(zoned_nodes({"a": 1, "b": 1, "c": 1}), web_pods({"a-0": 2, "b-0": 1}))
    pod = incoming(labels=WEB, spec={"topologySpreadConstraints": [spread(labels=WEB)]})
    answers = feasible(FILTER, pod, state)
    # counts a=2 b=1 c=0, min 0, maxSkew 1: only c passes (b: 1+1-0 = 2 > 1)
    assert verdicts(answers) == {"a-0": REASON_NOT_MATCH, "b-0": REASON_NOT_MATCH, "c-0": "ok"}
    assert answers["a-0"].code == Code.UNSCHEDULABLE
    assert answers["a-0"].detail == ("topology.kubernetes.io/zone=a: 2 matching pod(s) + this pod, "
                                     "min 0 across domains, maxSkew 1")


def test_a_pod_that_does_not_match_its_own_selector_adds_nothing() -> None:
    state = cluster_state(zoned_nodes({"a": 1, "b": 1}), web_pods({"a-0": 1}))
    pod = incoming(labels={"app": "other"}, spec={"topologySpreadConstraints": [spread(labels=WEB)]})
    assert verdicts(feasible(FILTER, pod, state)) == {"a-0": "ok", "b-0": "ok"}


def test_nodes_without_the_key_are_unresolvable() -> None:
    state = cluster_state([node_dict("zoned", labels={ZONE: "a"}), node_dict("bare")])
    pod = incoming(labels=WEB, spec={"topologySpreadConstraints": [spread(labels=WEB)]})
    answers = feasible(FILTER, pod, state)
    assert answers["bare"].reason == REASON_MISSING_LABEL and answers["bare"].code == Code.UNRESOLVABLE
    assert answers["zoned"] is None


def test_min_domains_treats_the_minimum_as_zero_until_enough_domains_exist() -> None:
    state = cluster_state(zoned_nodes({"a": 1, "b": 1}), web_pods({"a-0": 1, "b-0": 1}))
    spec = {"topologySpreadConstraints": [spread(labels=WEB, minDomains=3)]}
    assert set(verdicts(feasible(FILTER, incoming(labels=WEB, spec=spec), state)).values()) == {REASON_NOT_MATCH}
    enough = {"topologySpreadConstraints": [spread(labels=WEB, minDomains=2)]}
    assert set(verdicts(feasible(FILTER, incoming(labels=WEB, spec=enough), state)).values()) == {"ok"}


def test_node_affinity_policy_honor_leaves_excluded_domains_out_of_the_minimum() -> None:
    state = cluster_state(zoned_nodes({"a": 1, "b": 1, "c": 1}), web_pods({"a-0": 1, "b-0": 1}))
    selector = {"nodeSelector": {}, "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a", "b"]}]}]}}}}
    honor = incoming(labels=WEB, spec={**selector, "topologySpreadConstraints": [spread(labels=WEB)]})
    # c is excluded: min over {a:1, b:1} is 1, so a and b pass (1+1-1 = 1)
    assert verdicts(feasible(FILTER, honor, state))["a-0"] == "ok"
    ignore = incoming(labels=WEB, spec={**selector, "topologySpreadConstraints": [
        spread(labels=WEB, nodeAffinityPolicy="Ignore")]})
    # c counts with 0: a and b now exceed the skew
    assert verdicts(feasible(FILTER, ignore, state))["a-0"] == REASON_NOT_MATCH


def test_node_taints_policy_honor_leaves_untolerated_nodes_out() -> None:
    nodes = zoned_nodes({"a": 1, "b": 1}) + [node_dict("c-0", labels={ZONE: "c"}, taints=[taint("gpu")])]
    state = cluster_state(nodes, web_pods({"a-0": 1, "b-0": 1}))
    honor = incoming(labels=WEB, spec={"topologySpreadConstraints": [spread(labels=WEB, nodeTaintsPolicy="Honor")]})
    assert verdicts(feasible(FILTER, honor, state))["a-0"] == "ok"
    ignored = incoming(labels=WEB, spec={"topologySpreadConstraints": [spread(labels=WEB)]})
    assert verdicts(feasible(FILTER, ignored, state))["a-0"] == REASON_NOT_MATCH
    tolerant = incoming(labels=WEB, spec={"tolerations": [toleration("gpu", operator="Exists")],
                                          "topologySpreadConstraints": [spread(labels=WEB, nodeTaintsPolicy="Honor")]})
    assert verdicts(feasible(FILTER, tolerant, state))["a-0"] == REASON_NOT_MATCH


def test_match_label_keys_count_only_the_same_revision() -> None:
    pods = [placed(f"old-{i}", "a-0", labels={**WEB, "pod-template-hash": "v1"}) for i in range(3)]
    state = cluster_state(zoned_nodes({"a": 1, "b": 1}), pods)
    spec = {"topologySpreadConstraints": [spread(labels=WEB, matchLabelKeys=["pod-template-hash"])]}
    pod = incoming(labels={**WEB, "pod-template-hash": "v2"}, spec=spec)
    assert verdicts(feasible(FILTER, pod, state)) == {"a-0": "ok", "b-0": "ok"}
    same = incoming(labels={**WEB, "pod-template-hash": "v1"}, spec=spec)
    assert verdicts(feasible(FILTER, same, state)) == {"a-0": REASON_NOT_MATCH, "b-0": "ok"}


def test_terminating_pods_and_other_namespaces_do_not_count() -> None:
    pods = [placed("dying", "a-0", labels=WEB, deleting=True), placed("elsewhere", "a-0", namespace="x", labels=WEB)]
    state = cluster_state(zoned_nodes({"a": 1, "b": 1}), pods)
    pod = incoming(labels=WEB, spec={"topologySpreadConstraints": [spread(labels=WEB)]})
    assert verdicts(feasible(FILTER, pod, state)) == {"a-0": "ok", "b-0": "ok"}


def test_an_empty_selector_counts_nothing_but_the_pod_matches_it() -> None:
    state = cluster_state(zoned_nodes({"a": 1, "b": 1}), web_pods({"a-0": 3}))
    pod = incoming(labels=WEB, spec={"topologySpreadConstraints": [spread(labels={}, max_skew=1)]})
    assert verdicts(feasible(FILTER, pod, state)) == {"a-0": "ok", "b-0": "ok"}


def test_schedule_anyway_constraints_do_not_filter() -> None:
    state = cluster_state(zoned_nodes({"a": 1, "b": 1}), web_pods({"a-0": 5}))
    pod = incoming(labels=WEB, spec={"topologySpreadConstraints": [spread(labels=WEB, when="ScheduleAnyway")]})
    assert FILTER.prefilter(pod, state) is None


def test_removed_pods_update_the_counts() -> None:
    state = cluster_state(zoned_nodes({"a": 1, "b": 1}), web_pods({"a-0": 2}))
    pod = incoming(labels=WEB, spec={"topologySpreadConstraints": [spread(labels=WEB)]})
    check = FILTER.prefilter(pod, state)
    node = state.node_info("a-0")
    assert check(node).reason == REASON_NOT_MATCH
    changes = [PodChange(p, node.node, -1) for p in state.pods_on("a-0")]
    assert check.updated(changes)(node.without({p.key for p in state.pods_on("a-0")})) is None


def test_seven_replicas_over_three_zones_end_up_three_two_two() -> None:
    import random

    from extender.cycle.pod import schedule_one
    from extender.policy.defaults import default_policy
    from extender.policy.engine import Engine

    state = cluster_state(zoned_nodes({"a": 2, "b": 2, "c": 2}))
    engine = Engine(default_policy("standalone"))
    rng = random.Random(3)
    for i in range(7):
        pod = incoming(f"web-{i}", labels=WEB, spec={"topologySpreadConstraints": [spread(labels=WEB)]})
        result = schedule_one(engine, state, pod, rng=rng)
        assert result.node is not None
        state.assume(pod.key, result.node, uid=pod.uid, view=pod)
    per_zone = {}
    for info in state.all_node_infos():
        zone = info.node.labels[ZONE]
        per_zone[zone] = per_zone.get(zone, 0) + info.pod_count
    assert sorted(per_zone.values()) == [2, 2, 3]


# ---- scoring ------------------------------------------------------------------------------


def scores(pod, state, nodes=None, plugin=SCORER) -> dict[str, float]:
    return cluster_scores(plugin, pod, state, nodes)


def test_score_follows_kube_schedulers_formula() -> None:
    state = cluster_state(zoned_nodes({"a": 1, "b": 1, "c": 1}), web_pods({"a-0": 3, "b-0": 1}))
    pod = incoming(labels=WEB, spec={"topologySpreadConstraints": [spread(labels=WEB, when="ScheduleAnyway",
                                                                            max_skew=2)]})
    weight = math.log(3 + 2)
    raw = {z: math.floor(count * weight + 1 + 0.5) for z, count in {"a": 3, "b": 1, "c": 0}.items()}
    high, low = max(raw.values()), min(raw.values())
    expected = {f"{z}-0": 100 * (high + low - s) // high for z, s in raw.items()}
    assert scores(pod, state) == expected
    assert expected["c-0"] == 100 and expected["a-0"] < expected["b-0"] < 100


def test_hostname_constraints_count_the_nodes_own_pods() -> None:
    nodes = [node_dict(f"n{i}") for i in range(3)]
    state = cluster_state(nodes, web_pods({"n0": 2, "n1": 1}))
    pod = incoming(labels=WEB, spec={"topologySpreadConstraints": [spread(HOSTNAME, labels=WEB,
                                                                            when="ScheduleAnyway")]})
    result = scores(pod, state)
    assert result["n2"] == 100 and result["n0"] < result["n1"] < 100


def test_nodes_without_the_key_are_ignored_with_explicit_constraints() -> None:
    state = cluster_state([node_dict("zoned", labels={ZONE: "a"}), node_dict("bare")], web_pods({"zoned": 1}))
    pod = incoming(labels=WEB, spec={"topologySpreadConstraints": [spread(labels=WEB, when="ScheduleAnyway")]})
    assert scores(pod, state) == {"zoned": 100, "bare": 0}


def test_system_defaults_spread_the_pods_of_a_replicaset() -> None:
    owner = ("ReplicaSet", "web-abc")
    pods = [placed(f"web-{i}", "a-0", labels=WEB, owner=owner) for i in range(3)]
    pods.append(placed("stranger", "b-0", labels=WEB))  # same labels, no owner: not counted
    state = cluster_state(zoned_nodes({"a": 1, "b": 1}), pods)
    result = scores(incoming(labels=WEB, owner=owner), state)
    assert result["b-0"] == 100 and result["a-0"] < 100
    assert scores(incoming(labels=WEB), state) == {}  # no controller: no default constraints
    assert scores(incoming(labels=WEB, owner=("Job", "batch")), state) == {}


def test_system_defaults_keep_nodes_without_a_zone() -> None:
    owner = ("ReplicaSet", "web-abc")
    state = cluster_state([node_dict("zoned", labels={ZONE: "a"}), node_dict("bare")],
                          [placed("web-0", "zoned", labels=WEB, owner=owner)])
    result = scores(incoming(labels=WEB, owner=owner), state)
    assert result["bare"] == 100 and 0 < result["zoned"] < 100


def test_list_defaulting_uses_the_configured_constraints() -> None:
    plugin = PreferredPodTopologySpread.from_args({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"}]})
    owner = ("StatefulSet", "db")
    state = cluster_state(zoned_nodes({"a": 1, "b": 1}), [placed("db-0", "a-0", owner=owner)])
    assert scores(incoming(owner=owner), state, plugin=plugin) == {"a-0": 0, "b-0": 100}
    hard = PodTopologySpread.from_args({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]})
    two = cluster_state(zoned_nodes({"a": 1, "b": 1}), [placed(f"db-{i}", "a-0", owner=owner) for i in range(2)])
    assert verdicts(feasible(hard, incoming(owner=owner), two)) == {"a-0": REASON_NOT_MATCH, "b-0": "ok"}


@pytest.mark.parametrize(("args", "message"), [
    ({"defaultingType": "Maybe"}, "defaultingType: must be System or List"),
    ({"defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE}]}, "must be empty when defaultingType is System"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 0, "topologyKey": ZONE}]},
     r"defaultConstraints\[0\]\.maxSkew"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "labelSelector": {}}]},
     r"defaultConstraints\[0\]\.labelSelector: unknown argument"),
])
def test_args_are_validated(args, message) -> None:
    with pytest.raises(PolicyError, match=message):
        PodTopologySpread.from_args(args)
