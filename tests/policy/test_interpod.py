"""InterPodAffinity: required affinity, anti-affinity, symmetry and preferred terms, as kube-scheduler v1.36."""

from __future__ import annotations

import pytest

from extender.errors import PolicyError
from extender.model.nodes import NodeInfo
from extender.policy.builtin import InterPodAffinity, PreferredInterPodAffinity
from extender.policy.builtin.interpod import (
    REASON_AFFINITY,
    REASON_ANTI_AFFINITY,
    REASON_EXISTING_ANTI_AFFINITY,
)
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
    pod_affinity,
    term,
    zoned_nodes,
)

FILTER = InterPodAffinity()
SCORER = PreferredInterPodAffinity()


def verdicts(answers: dict) -> dict[str, str]:
    """node -> "ok" or the refusal's reason."""
    return {node: "ok" if status is None else status.reason for node, status in answers.items()}


def test_pods_without_terms_and_no_anti_affine_neighbours_skip_the_plugin() -> None:
    state = cluster_state(zoned_nodes({"a": 2}), [placed("web-1", "a-0", labels={"app": "web"})])
    assert FILTER.prefilter(incoming(labels={"app": "web"}), state) is None


def test_required_affinity_follows_the_matching_pod() -> None:
    state = cluster_state(zoned_nodes({"a": 3}), [placed("db", "a-1", labels={"app": "db"})])
    pod = incoming(labels={"app": "web"}, spec={"affinity": pod_affinity(required=[term({"app": "db"})])})
    answers = feasible(FILTER, pod, state)
    assert verdicts(answers) == {"a-0": REASON_AFFINITY, "a-1": "ok", "a-2": REASON_AFFINITY}
    assert answers["a-0"].code == Code.UNRESOLVABLE


def test_required_affinity_by_zone_accepts_every_node_of_the_zone() -> None:
    state = cluster_state(zoned_nodes({"a": 2, "b": 2}), [placed("db", "b-0", labels={"app": "db"})])
    pod = incoming(spec={"affinity": pod_affinity(required=[term({"app": "db"}, ZONE)])})
    assert [n for n, s in feasible(FILTER, pod, state).items() if s is None] == ["b-0", "b-1"]


def test_first_pod_of_a_group_matching_its_own_term_goes_anywhere() -> None:
    state = cluster_state(zoned_nodes({"a": 2}))
    own = incoming(labels={"app": "web"}, spec={"affinity": pod_affinity(required=[term({"app": "web"})])})
    assert verdicts(feasible(FILTER, own, state)) == {"a-0": "ok", "a-1": "ok"}
    other = incoming(labels={"app": "cache"}, spec={"affinity": pod_affinity(required=[term({"app": "web"})])})
    assert set(verdicts(feasible(FILTER, other, state)).values()) == {REASON_AFFINITY}


def test_first_pod_rule_needs_the_topology_label_on_the_node() -> None:
    nodes = [node_dict("labelled", labels={ZONE: "a"}), node_dict("bare")]
    state = cluster_state(nodes)
    pod = incoming(labels={"app": "web"}, spec={"affinity": pod_affinity(required=[term({"app": "web"}, ZONE)])})
    assert verdicts(feasible(FILTER, pod, state)) == {"labelled": "ok", "bare": REASON_AFFINITY}


def test_first_pod_rule_does_not_apply_once_a_matching_pod_exists_elsewhere() -> None:
    state = cluster_state(zoned_nodes({"a": 1, "b": 1}), [placed("web-0", "a-0", labels={"app": "web"})])
    pod = incoming(labels={"app": "web"}, spec={"affinity": pod_affinity(required=[term({"app": "web"}, ZONE)])})
    assert verdicts(feasible(FILTER, pod, state)) == {"a-0": "ok", "b-0": REASON_AFFINITY}


def test_several_affinity_terms_must_be_matched_by_the_same_pod() -> None:
    pods = [placed("db", "a-0", labels={"app": "db"}), placed("cache", "a-1", labels={"tier": "cache"}),
            placed("both", "a-2", labels={"app": "db", "tier": "cache"})]
    state = cluster_state(zoned_nodes({"a": 3}), pods)
    spec = {"affinity": pod_affinity(required=[term({"app": "db"}), term({"tier": "cache"})])}
    assert [n for n, s in feasible(FILTER, incoming(spec=spec), state).items() if s is None] == ["a-2"]


def test_anti_affinity_keeps_replicas_apart_and_preemption_may_help() -> None:
    state = cluster_state(zoned_nodes({"a": 3}), [placed("web-0", "a-0", labels={"app": "web"})])
    pod = incoming(labels={"app": "web"}, spec={"affinity": pod_affinity(anti=[term({"app": "web"})])})
    answers = feasible(FILTER, pod, state)
    assert verdicts(answers) == {"a-0": REASON_ANTI_AFFINITY, "a-1": "ok", "a-2": "ok"}
    assert answers["a-0"].code == Code.UNSCHEDULABLE
    assert "anti-affinity with default/web-0 on a-0" in answers["a-0"].detail


def test_existing_pods_anti_affinity_is_symmetric() -> None:
    guard = placed("guard", "a-0", labels={"app": "guard"},
                   spec={"affinity": pod_affinity(anti=[term({"app": "web"}, ZONE)])})
    state = cluster_state(zoned_nodes({"a": 2, "b": 1}), [guard])
    answers = feasible(FILTER, incoming(labels={"app": "web"}), state)
    assert verdicts(answers) == {"a-0": REASON_EXISTING_ANTI_AFFINITY, "a-1": REASON_EXISTING_ANTI_AFFINITY,
                                 "b-0": "ok"}
    assert "the anti-affinity of default/guard on a-0" in answers["a-1"].detail
    assert FILTER.prefilter(incoming(labels={"app": "db"}), state) is None


def test_terms_look_in_the_pods_namespace_unless_told_otherwise() -> None:
    state = cluster_state(zoned_nodes({"a": 2}), [placed("db", "a-0", namespace="data", labels={"app": "db"})])
    same_namespace = incoming(spec={"affinity": pod_affinity(required=[term({"app": "db"})])})
    assert set(verdicts(feasible(FILTER, same_namespace, state)).values()) == {REASON_AFFINITY}
    listed = incoming(spec={"affinity": pod_affinity(required=[term({"app": "db"}, namespaces=["data"])])})
    assert verdicts(feasible(FILTER, listed, state))["a-0"] == "ok"


def test_namespace_selector_picks_namespaces_by_their_labels() -> None:
    pods = [placed("db", "a-0", namespace="data", labels={"app": "db"}),
            placed("db", "a-1", namespace="scratch", labels={"app": "db"})]
    state = cluster_state(zoned_nodes({"a": 3}), pods,
                          namespaces={"data": {"team": "x"}, "scratch": {"team": "y"}, "default": {}})
    selected = term({"app": "db"}, namespaceSelector={"matchLabels": {"team": "x"}})
    pod = incoming(spec={"affinity": pod_affinity(anti=[selected])})
    assert verdicts(feasible(FILTER, pod, state)) == {"a-0": REASON_ANTI_AFFINITY, "a-1": "ok", "a-2": "ok"}
    everywhere = incoming(spec={"affinity": pod_affinity(anti=[term({"app": "db"}, namespaceSelector={})])})
    assert [n for n, s in feasible(FILTER, everywhere, state).items() if s is None] == ["a-2"]


def test_an_existing_pods_namespace_selector_is_matched_against_the_incoming_pods_namespace() -> None:
    guard = placed("guard", "a-0", namespace="ops", labels={"app": "guard"}, spec={"affinity": pod_affinity(
        anti=[term({"app": "web"}, namespaceSelector={"matchLabels": {"env": "prod"}})])})
    state = cluster_state(zoned_nodes({"a": 2}), [guard], namespaces={"prod": {"env": "prod"}, "dev": {"env": "dev"}})
    prod = incoming(namespace="prod", labels={"app": "web"})
    assert verdicts(feasible(FILTER, prod, state))["a-0"] == REASON_EXISTING_ANTI_AFFINITY
    assert FILTER.prefilter(incoming(namespace="dev", labels={"app": "web"}), state) is None


def test_match_label_keys_limit_the_term_to_the_pods_own_revision() -> None:
    pods = [placed("old", "a-0", labels={"app": "web", "pod-template-hash": "v1"}),
            placed("new", "a-1", labels={"app": "web", "pod-template-hash": "v2"})]
    state = cluster_state(zoned_nodes({"a": 3}), pods)
    spec = {"affinity": pod_affinity(anti=[term({"app": "web"}, matchLabelKeys=["pod-template-hash"])])}
    pod = incoming(labels={"app": "web", "pod-template-hash": "v2"}, spec=spec)
    assert verdicts(feasible(FILTER, pod, state)) == {"a-0": "ok", "a-1": REASON_ANTI_AFFINITY, "a-2": "ok"}


def test_mismatch_label_keys_exclude_the_pods_own_tenant() -> None:
    pods = [placed("mine", "a-0", labels={"tenant": "t1"}), placed("theirs", "a-1", labels={"tenant": "t2"})]
    state = cluster_state(zoned_nodes({"a": 3}), pods)
    spec = {"affinity": pod_affinity(anti=[term({}, mismatchLabelKeys=["tenant"])])}
    pod = incoming(labels={"tenant": "t1"}, spec=spec)
    assert verdicts(feasible(FILTER, pod, state)) == {"a-0": "ok", "a-1": REASON_ANTI_AFFINITY, "a-2": "ok"}


def test_a_term_without_label_selector_matches_no_pod() -> None:
    state = cluster_state(zoned_nodes({"a": 2}), [placed("any", "a-0", labels={"app": "x"})])
    pod = incoming(spec={"affinity": pod_affinity(anti=[term(None)])})
    assert set(verdicts(feasible(FILTER, pod, state)).values()) == {"ok"}


def test_terminating_pods_still_count() -> None:
    state = cluster_state(zoned_nodes({"a": 2}), [placed("web-0", "a-0", labels={"app": "web"}, deleting=True)])
    pod = incoming(labels={"app": "web"}, spec={"affinity": pod_affinity(anti=[term({"app": "web"})])})
    assert verdicts(feasible(FILTER, pod, state))["a-0"] == REASON_ANTI_AFFINITY


def test_assumed_pods_count_at_once() -> None:
    state = cluster_state(zoned_nodes({"a": 2}))
    spec = {"affinity": pod_affinity(anti=[term({"app": "web"})])}
    first = incoming("web-0", labels={"app": "web"}, spec=spec)
    state.assume(first.key, "a-0", uid=first.uid, view=first)
    second = incoming("web-1", labels={"app": "web"}, spec=spec)
    assert verdicts(feasible(FILTER, second, state)) == {"a-0": REASON_ANTI_AFFINITY, "a-1": "ok"}
    state.forget(first.key)
    assert verdicts(feasible(FILTER, second, state)) == {"a-0": "ok", "a-1": "ok"}


def test_removing_a_pod_updates_every_count_like_kube_schedulers_remove_pod() -> None:
    guard = placed("guard", "a-0", labels={"app": "guard"},
                   spec={"affinity": pod_affinity(anti=[term({"app": "web"})])})
    web = placed("web-0", "a-1", labels={"app": "web"})
    state = cluster_state(zoned_nodes({"a": 2}), [guard, web])
    pod = incoming(labels={"app": "web"}, spec={"affinity": pod_affinity(anti=[term({"app": "web"})])})
    check = FILTER.prefilter(pod, state)
    infos = {i.name: i for i in state.all_node_infos()}
    assert check(infos["a-0"]).reason == REASON_EXISTING_ANTI_AFFINITY
    assert check(infos["a-1"]).reason == REASON_ANTI_AFFINITY
    removed = check.updated([PodChange(p, infos[p.node_name].node, -1) for p in state.pods_on("a-0")])
    assert removed(infos["a-0"].without({"default/guard"})) is None
    back = removed.updated([PodChange(state.pod("default/guard"), infos["a-0"].node, 1)])
    assert back(infos["a-0"]).reason == REASON_EXISTING_ANTI_AFFINITY


def test_affinity_counts_update_when_the_matched_pod_is_removed() -> None:
    state = cluster_state(zoned_nodes({"a": 2}), [placed("db", "a-0", labels={"app": "db"})])
    pod = incoming(labels={"app": "web"}, spec={"affinity": pod_affinity(required=[term({"app": "db"})])})
    check = FILTER.prefilter(pod, state)
    node = state.node_info("a-0")
    assert check(node) is None
    assert check.updated([PodChange(state.pod("default/db"), node.node, -1)])(node).reason == REASON_AFFINITY


def test_filter_without_a_cluster_sees_no_pods() -> None:
    pod = incoming(labels={"app": "web"}, spec={"affinity": pod_affinity(required=[term({"app": "web"})])})
    node = NodeInfo.build(cluster_state([node_dict("n")]).node_info("n").node, ())
    assert FILTER.filter(pod, node) is None  # first pod of its group


# ---- scoring ------------------------------------------------------------------------------


def scores(pod, state, plugin=SCORER) -> dict[str, float]:
    return cluster_scores(plugin, pod, state)


def test_preferred_affinity_weights_are_summed_per_domain_and_min_max_normalised() -> None:
    pods = [placed("db", "a-0", labels={"app": "db"}), placed("cache", "b-0", labels={"app": "cache"})]
    state = cluster_state(zoned_nodes({"a": 1, "b": 1, "c": 1}), pods)
    spec = {"affinity": pod_affinity(preferred=[(80, term({"app": "db"}, ZONE)), (20, term({"app": "cache"}, ZONE))])}
    # raw: a=80, b=20, c=0 -> 100 * (s - 0) / 80, truncated
    assert scores(incoming(spec=spec), state) == {"a-0": 100, "b-0": 25, "c-0": 0}


def test_preferred_anti_affinity_subtracts() -> None:
    state = cluster_state(zoned_nodes({"a": 1, "b": 1}), [placed("web", "a-0", labels={"app": "web"})])
    spec = {"affinity": pod_affinity(preferred_anti=[(10, term({"app": "web"}))])}
    assert scores(incoming(labels={"app": "web"}, spec=spec), state) == {"a-0": 0, "b-0": 100}


def test_existing_pods_preferred_and_hard_terms_attract_the_incoming_pod() -> None:
    friendly = placed("friendly", "a-0", labels={"app": "x"},
                      spec={"affinity": pod_affinity(preferred=[(5, term({"app": "web"}))])})
    needy = placed("needy", "b-0", labels={"app": "y"}, spec={"affinity": pod_affinity(required=[term({"app": "web"})])})
    state = cluster_state(zoned_nodes({"a": 1, "b": 1, "c": 1}), [friendly, needy])
    pod = incoming(labels={"app": "web"})
    assert scores(pod, state) == {"a-0": 100, "b-0": 20, "c-0": 0}  # raw 5, 1 (hard weight 1), 0
    heavy = PreferredInterPodAffinity.from_args({"hardPodAffinityWeight": 10})
    assert scores(pod, state, heavy) == {"a-0": 50, "b-0": 100, "c-0": 0}
    only_own = PreferredInterPodAffinity.from_args({"ignorePreferredTermsOfExistingPods": True,
                                                    "hardPodAffinityWeight": 0})
    assert only_own.prescore(pod, state, state.all_node_infos()) is None


def test_scorer_skips_when_nothing_matches() -> None:
    state = cluster_state(zoned_nodes({"a": 2}))
    spec = {"affinity": pod_affinity(preferred=[(10, term({"app": "db"}))])}
    assert SCORER.prescore(incoming(spec=spec), state, state.all_node_infos()) is None


@pytest.mark.parametrize(("args", "message"), [
    ({"hardPodAffinityWeight": 101}, r"hardPodAffinityWeight: must be an integer from 0 to 100"),
    ({"ignorePreferredTermsOfExistingPods": "yes"}, r"ignorePreferredTermsOfExistingPods: expected true or false"),
    ({"typo": 1}, r"typo: unknown argument"),
])
def test_scorer_args_are_validated(args, message) -> None:
    with pytest.raises(PolicyError, match=message):
        PreferredInterPodAffinity.from_args(args)


def test_hostname_is_just_another_topology_key() -> None:
    state = cluster_state([node_dict("n1"), node_dict("n2")], [placed("db", "n2", labels={"app": "db"})])
    pod = incoming(spec={"affinity": pod_affinity(required=[term({"app": "db"}, HOSTNAME)])})
    assert verdicts(feasible(FILTER, pod, state)) == {"n1": REASON_AFFINITY, "n2": "ok"}
