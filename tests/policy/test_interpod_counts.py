"""InterPodAffinity on maintained counts decides and scores as a walk over every placed pod does.

The plugin reads per-domain counts the cluster state keeps up to date (matching_counts,
the affinity groups' counts). Here random clusters, changed after the counters exist, are
judged by a reference that walks every placed pod for every node, written from
kube-scheduler's filtering.go and scoring.go: each node's verdict, the verdict with one pod
removed (preemption's RemovePod), and each node's raw score must be the same.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.model.affinity import AffinityTerm
from extender.model.pods import PodView
from extender.policy.builtin import interpod
from extender.policy.builtin.interpod import (
    REASON_AFFINITY,
    REASON_ANTI_AFFINITY,
    REASON_EXISTING_ANTI_AFFINITY,
    InterPodAffinity,
    PreferredInterPodAffinity,
    resolve_namespaces,
)
from extender.policy.cluster_view import PodChange

from .builders import HOSTNAME, ZONE, cluster_state, incoming, node_dict, placed, pod_affinity, term

FILTER = InterPodAffinity()
SCORER = PreferredInterPodAffinity(hard_pod_affinity_weight=3)
NODES = [node_dict("a-0", labels={ZONE: "a"}), node_dict("a-1", labels={ZONE: "a"}),
         node_dict("b-0", labels={ZONE: "b"}), node_dict("bare")]
NAMESPACES = {"ns1": {"team": "a"}, "ns2": {"team": "b"}}

TERMS = [
    term({"app": "web"}),
    term({"app": "web"}, ZONE),
    term({"app": "db"}, ZONE, namespaces=["ns1", "ns2"]),
    term({"app": "web"}, ZONE, namespaceSelector={"matchLabels": {"team": "b"}}),
    term({}, HOSTNAME, namespaceSelector={}),
    term(None, ZONE),
    term({"tier": "x"}),
]
AFFINITIES = [
    None,
    pod_affinity(anti=[TERMS[0]]),
    pod_affinity(anti=[TERMS[1], TERMS[3]]),
    pod_affinity(required=[TERMS[2]]),
    pod_affinity(required=[TERMS[1], TERMS[6]], anti=[TERMS[2]]),
    pod_affinity(required=[TERMS[1], TERMS[1]], anti=[TERMS[0], TERMS[0]]),
    pod_affinity(preferred=[(5, TERMS[1]), (2, TERMS[4])], preferred_anti=[(7, TERMS[0])]),
    pod_affinity(required=[TERMS[5]], preferred_anti=[(1, TERMS[3])]),
]


@st.composite
def pod_specs(draw: Any) -> tuple[str, str, dict[str, str], int]:
    namespace = draw(st.sampled_from(sorted(NAMESPACES)))
    labels = draw(st.sampled_from([{}, {"app": "web"}, {"app": "db"}, {"app": "web", "tier": "x"}]))
    return namespace, draw(st.sampled_from(["a-0", "a-1", "b-0", "bare", "gone"])), labels, \
        draw(st.integers(0, len(AFFINITIES) - 1))


def as_pod(name: str, spec: tuple[str, str, dict[str, str], int]) -> dict[str, Any]:
    namespace, node, labels, affinity = spec
    body = {"affinity": AFFINITIES[affinity]} if AFFINITIES[affinity] else None
    return placed(name, node, namespace=namespace, labels=labels, spec=body)


def placed_pods(state: Any, without: str = "", added: tuple[Any, ...] = ()) -> list[tuple[Any, dict[str, str]]]:
    """(record, its node's labels) for every pod that counts, on a node the state knows; `added`:
    (record, node) pairs counted as well (preemption's AddPod of nominated pods)."""
    found = [(r, info.node.labels) for info in state.all_node_infos() for r in info.pods if r.key != without]
    return found + [(r, state.node_info(node).node.labels) for r, node in added]


def same_domain(key: str, here: dict[str, str], there: dict[str, str]) -> bool:
    return key in here and there.get(key) == here[key]


def matches_all(terms: tuple[AffinityTerm, ...], record: Any) -> bool:
    return bool(terms) and all(t.matches(record.namespace, record.labels) for t in terms)


def reference_verdict(pod: PodView, state: Any, labels: dict[str, str], without: str = "",
                      added: tuple[Any, ...] = ()) -> str:
    """filtering.go, one node, by walking every placed pod."""
    terms = pod.affinity
    required = tuple(resolve_namespaces(t, state) for t in terms.required) if terms else ()
    anti = tuple(resolve_namespaces(t, state) for t in terms.required_anti) if terms else ()
    ns_labels = state.namespace_labels(pod.namespace)
    pods = placed_pods(state, without, added)
    if required:
        if any(t.topology_key not in labels for t in required):
            return REASON_AFFINITY
        found = all(any(matches_all(required, r) and same_domain(t.topology_key, labels, where) for r, where in pods)
                    for t in required)
        anywhere = any(matches_all(required, r) and any(t.topology_key in where for t in required)
                       for r, where in pods)
        if not found and (anywhere or not matches_all(required, pod)):
            return REASON_AFFINITY
    if any(t.matches(r.namespace, r.labels) and same_domain(t.topology_key, labels, where)
           for t in anti for r, where in pods):
        return REASON_ANTI_AFFINITY
    if any(t.matches(pod.namespace, pod.labels, ns_labels) and same_domain(t.topology_key, labels, where)
           for r, where in pods if r.affinity for t in r.affinity.required_anti):
        return REASON_EXISTING_ANTI_AFFINITY
    return "ok"


def reference_scores(pod: PodView, state: Any) -> dict[str, int] | None:
    """scoring.go's raw score per node (None: PreScore skips), by walking every placed pod."""
    terms = pod.affinity
    ns_labels = state.namespace_labels(pod.namespace)
    added: list[tuple[str, str, int]] = []  # (key, value, weight) for every match on a node with the key
    for record, where in placed_pods(state):
        weighted = []
        if terms:
            weighted += [(resolve_namespaces(w.term, state), w.weight, record.namespace, record.labels, None)
                         for w in terms.preferred]
            weighted += [(resolve_namespaces(w.term, state), -w.weight, record.namespace, record.labels, None)
                         for w in terms.preferred_anti]
        if record.affinity:
            theirs = record.affinity
            weighted += [(t, SCORER.hard_pod_affinity_weight, pod.namespace, pod.labels, ns_labels)
                         for t in theirs.required]
            weighted += [(w.term, w.weight, pod.namespace, pod.labels, ns_labels) for w in theirs.preferred]
            weighted += [(w.term, -w.weight, pod.namespace, pod.labels, ns_labels) for w in theirs.preferred_anti]
        for t, weight, namespace, labels, namespace_labels in weighted:
            if t.matches(namespace, labels, namespace_labels) and t.topology_key in where:
                added.append((t.topology_key, where[t.topology_key], weight))
    if not added:
        return None
    return {info.name: sum(w for k, v, w in added if info.node.labels.get(k) == v) for info in state.all_node_infos()}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=st.lists(pod_specs(), max_size=8), later=st.lists(pod_specs(), max_size=4),
       deleted=st.sets(st.integers(0, 7), max_size=3), new=pod_specs(), removed=st.integers(0, 11),
       nominated=st.sampled_from(["a-0", "a-1", "b-0", "bare"]))
def test_counts_decide_and_score_as_a_walk_over_every_pod(first, later, deleted, new, removed, nominated) -> None:
    state = cluster_state(NODES, [as_pod(f"p{i}", s) for i, s in enumerate(first)], NAMESPACES)
    namespace, _, labels, affinity = new
    pod = incoming("new", namespace=namespace, labels=labels,
                   spec={"affinity": AFFINITIES[affinity]} if AFFINITIES[affinity] else None)
    # Ask once so that the counters exist, then change the cluster under them.
    FILTER.prefilter(pod, state)
    SCORER.prescore(pod, state, state.all_node_infos())
    for i, spec in enumerate(later):
        state.upsert_pod(as_pod(f"q{i}", spec))
    for i in deleted:
        state.delete_pod(f"{first[i][0]}/p{i}" if i < len(first) else "ns1/none")

    infos = state.all_node_infos()
    check = FILTER.prefilter(pod, state)
    got = {i.name: "ok" if check is None or (s := check(i)) is None else s.reason for i in infos}
    assert got == {i.name: reference_verdict(pod, state, i.node.labels) for i in infos}

    pods = placed_pods(state)
    if check is not None and pods:
        record, _ = pods[removed % len(pods)]
        node = state.node_info(record.node_name)
        fewer = check.updated([PodChange(record, node.node, -1)])
        got = {i.name: "ok" if (s := fewer(i)) is None else s.reason for i in infos}
        assert got == {i.name: reference_verdict(pod, state, i.node.labels, without=record.key) for i in infos}
        # A nominated copy of it on another node (AddPod), on top of the removal.
        copy = replace(record, key=record.key + "-nominated", node_name=nominated)
        more = fewer.updated([PodChange(copy, state.node_info(nominated).node, 1)])
        got = {i.name: "ok" if (s := more(i)) is None else s.reason for i in infos}
        assert got == {i.name: reference_verdict(pod, state, i.node.labels, without=record.key,
                                                 added=((copy, nominated),)) for i in infos}

    expected = reference_scores(pod, state)
    for merge_over in (interpod._MERGE_OVER, 0):  # terms on one key looked up one by one, or summed up front
        default, interpod._MERGE_OVER = interpod._MERGE_OVER, merge_over
        try:
            score = SCORER.prescore(pod, state, infos)
        finally:
            interpod._MERGE_OVER = default
        assert (score is None) == (expected is None)
        if score is not None:
            assert {i.name: score(i) for i in infos} == expected


def test_removing_a_pod_takes_it_from_every_key_of_the_required_terms() -> None:
    """Two pods match both required terms (zone and hostname): without one of them, its host
    has no match left while its zone still has."""
    both = {"app": "web", "tier": "x"}
    state = cluster_state(NODES, [placed("w0", "a-0", labels=both), placed("w1", "a-1", labels=both)])
    pod = incoming(labels={"app": "client"}, spec={"affinity": pod_affinity(required=[TERMS[1], TERMS[6]])})
    check = FILTER.prefilter(pod, state)
    a0, a1 = state.node_info("a-0"), state.node_info("a-1")
    fewer = check.updated([PodChange(state.pod("default/w0"), a0.node, -1)])
    assert fewer(a0).reason == REASON_AFFINITY
    assert fewer(a1) is None
    assert reference_verdict(pod, state, a0.node.labels, without="default/w0") == REASON_AFFINITY
