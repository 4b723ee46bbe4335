"""The counts the cluster state keeps for InterPodAffinity (per domain) and PodTopologySpread (per
node) equal a recount, whatever happened.

A Hypothesis state machine drives one ClusterState through random sequences of pod adds,
updates (labels, node, phase), deletes, assumes, forgets, confirms, node label changes,
node deletes and re-adds, and full re-lists, asking for counters at random points (so they
are created mid-sequence and maintained from then on). After every step, every counter
asked for so far and every affinity group's counts must equal a count made from scratch
over the node infos, the way the plugin counted before (a pod counts in the domains of the
node it is on, when the state knows that node). The spread counters must equal what the spread
plugins counted before they read them: the placed pods matching the rule (its selector, or its
controller), terminating ones left out, per node name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from extender.cluster.state import ClusterState
from extender.model.affinity import AffinityTerm
from extender.model.selectors import EVERYTHING, NOTHING, LabelSelector, Requirement

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
NODES = ("n0", "n1", "n2", "n3")
NAMESPACES = ("ns1", "ns2")
PODS = tuple(f"{ns}/p{i}" for ns in NAMESPACES for i in range(5))


def _selector(*requirements: Requirement) -> LabelSelector:
    return LabelSelector(tuple(requirements))


APP_X = _selector(Requirement("app", "In", frozenset({"x"})))
APP_XY = _selector(Requirement("app", "In", frozenset({"x", "y"})))
NOT_Y = _selector(Requirement("app", "NotIn", frozenset({"y"})))
HAS_TIER = _selector(Requirement("tier", "Exists", frozenset()))


def _term(selector: LabelSelector, key: str, *namespaces: str) -> AffinityTerm:
    return AffinityTerm(frozenset(namespaces), NOTHING, selector, key)


# The selections asked for: one term, several terms ANDed, one or several keys.
QUERIES: tuple[tuple[tuple[AffinityTerm, ...], tuple[str, ...]], ...] = (
    ((_term(APP_X, HOST, "ns1"),), (HOST,)),
    ((_term(APP_XY, ZONE, "ns1", "ns2"),), (ZONE,)),
    ((_term(NOT_Y, ZONE, "ns2"),), (ZONE, HOST)),
    ((_term(EVERYTHING, ZONE, "ns1", "ns2"),), (ZONE,)),
    ((_term(APP_XY, ZONE, "ns1", "ns2"), _term(HAS_TIER, HOST, "ns1")), (ZONE, HOST)),
    ((_term(HAS_TIER, HOST, "ns2"), _term(APP_X, HOST, "ns2")), (HOST,)),
)

AFFINITIES: tuple[dict[str, Any] | None, ...] = (
    None,
    {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": HOST}]}},
    {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": ZONE, "namespaces": ["ns1", "ns2"]}]}},
    {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {}, "topologyKey": ZONE}]},
     "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
         {"weight": 5, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "y"}}, "topologyKey": HOST}}]}},
)


def node(name: str, zone: str | None, extra: str | None) -> dict[str, Any]:
    labels = {HOST: name}
    if zone is not None:
        labels[ZONE] = zone
    if extra is not None:
        labels["extra"] = extra
    return {"metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "64", "memory": "64Gi", "pods": "110"}}}


def pod(key: str, app: str | None, tier: bool, node_name: str, phase: str, affinity: int) -> dict[str, Any]:
    namespace, name = key.split("/")
    labels = {}
    if app is not None:
        labels["app"] = app
    if tier:
        labels["tier"] = "web"
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if node_name:
        spec["nodeName"] = node_name
    if AFFINITIES[affinity] is not None:
        spec["affinity"] = AFFINITIES[affinity]
    return {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{key}", "labels": labels},
            "spec": spec, "status": {"phase": phase}}


OWNER = ("ReplicaSet", "rs")
# (namespace, selector, controller): what a spread rule counts.
SPREAD_QUERIES: tuple[tuple[str, LabelSelector | None, tuple[str, str] | None], ...] = (
    ("ns1", APP_X, None),
    ("ns2", NOT_Y, None),
    ("ns1", EVERYTHING, None),
    ("ns1", None, OWNER),
    ("ns2", None, OWNER),
)


def spread_pod(raw: dict[str, Any], deleting: bool, owned: bool) -> dict[str, Any]:
    """`raw` terminating (deletionTimestamp) and/or controlled by OWNER."""
    meta = raw["metadata"]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if owned:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": OWNER[0], "name": OWNER[1], "uid": "u",
                                    "controller": True}]
    return raw


def respread(state: ClusterState, namespace: str, selector: LabelSelector | None,
             owner: tuple[str, str] | None) -> dict[str, int]:
    """What the spread plugins counted by walking pods: placed, selected, not terminating."""
    records = state.owned_pods(namespace, *owner) if owner is not None else \
        state.matching_pods((namespace,), selector) if selector is not None else []
    counts: dict[str, int] = {}
    for record in records:
        if not record.deleting:
            counts[record.node_name] = counts.get(record.node_name, 0) + 1
    return counts


zones = st.sampled_from([None, "a", "b", "c"])
extras = st.sampled_from([None, "1", "2"])
pods = st.builds(pod, st.sampled_from(PODS), st.sampled_from([None, "x", "y"]), st.booleans(),
                 st.sampled_from(["", *NODES, "gone"]), st.sampled_from(["Running", "Pending", "Succeeded"]),
                 st.integers(0, len(AFFINITIES) - 1))


def _count_once(counts: dict[str, dict[str, int]], keys: Iterable[str], labels: Mapping[str, str]) -> None:
    """One pod on a node with `labels`, counted in its domain of each key the node has."""
    for key in keys:
        value = labels.get(key)
        if value is not None:
            values = counts.setdefault(key, {})
            values[value] = values.get(value, 0) + 1


def recount(state: ClusterState, terms: tuple[AffinityTerm, ...], keys: tuple[str, ...]) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for info in state.all_node_infos():
        for record in info.pods:
            if all(record.namespace in t.namespaces and t.selector.matches(record.labels) for t in terms):
                _count_once(counts, keys, info.node.labels)
    return counts


def recount_groups(state: ClusterState) -> dict[Any, dict[str, dict[str, int]]]:
    groups: dict[Any, dict[str, dict[str, int]]] = {}
    for info in state.all_node_infos():
        for record in info.pods:
            if record.affinity is None:
                continue
            counts = groups.setdefault(record.affinity, {})
            terms = record.affinity
            keys = {t.topology_key for t in (*terms.required, *terms.required_anti)}
            keys |= {w.term.topology_key for w in (*terms.preferred, *terms.preferred_anti)}
            _count_once(counts, keys, info.node.labels)
    return groups


class StateCounts(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.state = ClusterState()
        self.state.replace_nodes([node(n, "a" if i % 2 else "b", None) for i, n in enumerate(NODES)])
        self.state.replace_pods([])
        self.asked: set[int] = set()
        self.spread_asked: set[int] = set()

    @rule(raw=pods)
    def upsert_pod(self, raw: dict[str, Any]) -> None:
        self.state.upsert_pod(raw)

    @rule(raw=pods, deleting=st.booleans(), owned=st.booleans())
    def upsert_spread_pod(self, raw: dict[str, Any], deleting: bool, owned: bool) -> None:
        self.state.upsert_pod(spread_pod(raw, deleting, owned))

    @rule(query=st.integers(0, len(SPREAD_QUERIES) - 1))
    def ask_spread(self, query: int) -> None:
        self.spread_asked.add(query)
        assert self.state.spread_counts(*SPREAD_QUERIES[query]) == respread(self.state, *SPREAD_QUERIES[query])

    @rule(key=st.sampled_from(PODS))
    def delete_pod(self, key: str) -> None:
        self.state.delete_pod(key)

    @rule(key=st.sampled_from(PODS), node_name=st.sampled_from(NODES))
    def assume(self, key: str, node_name: str) -> None:
        record = self.state.pod(key)
        if record is not None and not record.node_name:
            self.state.assume(key, node_name)

    @rule(key=st.sampled_from(PODS))
    def forget(self, key: str) -> None:
        self.state.forget(key)

    @rule(key=st.sampled_from(PODS), node_name=st.sampled_from(NODES))
    def confirm(self, key: str, node_name: str) -> None:
        if key in self.state.assumed_keys():
            self.state.confirm(key, node_name)

    @rule(name=st.sampled_from(NODES), zone=zones, extra=extras)
    def relabel_node(self, name: str, zone: str | None, extra: str | None) -> None:
        self.state.upsert_node(node(name, zone, extra))

    @rule(name=st.sampled_from(NODES))
    def delete_node(self, name: str) -> None:
        self.state.delete_node(name)

    @rule(data=st.data())
    def relist_nodes(self, data: st.DataObject) -> None:
        chosen = data.draw(st.lists(st.sampled_from(NODES), unique=True))
        self.state.replace_nodes([node(n, data.draw(zones), data.draw(extras)) for n in chosen])

    @rule(raws=st.lists(pods, max_size=6))
    def relist_pods(self, raws: list[dict[str, Any]]) -> None:
        self.state.replace_pods(raws)

    @rule(query=st.integers(0, len(QUERIES) - 1))
    def ask(self, query: int) -> None:
        self.asked.add(query)
        terms, keys = QUERIES[query]
        assert self.state.matching_counts(terms, keys) == recount(self.state, terms, keys)

    @invariant()
    def counters_equal_a_recount(self) -> None:
        for query in self.asked:
            terms, keys = QUERIES[query]
            assert self.state.matching_counts(terms, keys) == recount(self.state, terms, keys), QUERIES[query]

    @invariant()
    def spread_counters_equal_a_recount(self) -> None:
        for query in self.spread_asked:
            found = self.state.spread_counts(*SPREAD_QUERIES[query])
            assert found == respread(self.state, *SPREAD_QUERIES[query]), SPREAD_QUERIES[query]

    @invariant()
    def groups_equal_a_recount(self) -> None:
        found = {group.terms: {key: counts for key in (HOST, ZONE) if (counts := group.counts(key))}
                 for group in self.state.affinity_groups()}
        expected = recount_groups(self.state)
        # A group whose pods all sit on unknown nodes has no counts: compare the non-empty ones.
        assert {k: v for k, v in found.items() if v} == {k: v for k, v in expected.items() if v}


StateCounts.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None,
                                         suppress_health_check=[HealthCheck.too_slow])
test_incremental_counts_equal_a_recount = StateCounts.TestCase


def test_counters_not_asked_for_are_dropped_and_come_back_right(monkeypatch) -> None:
    """Each counter costs a selector match per pod event: beyond the cap, or unused for a while,
    it goes; asked for again, it is counted afresh."""
    from extender.cluster import podindex

    monkeypatch.setattr(podindex, "_MAX_SELECTORS", 2)
    monkeypatch.setattr(podindex, "_IDLE_READS", 3)
    state = ClusterState()
    state.replace_nodes([node(n, "a" if i % 2 else "b", None) for i, n in enumerate(NODES)])
    state.replace_pods([pod(key, "x", True, NODES[i % 4], "Running", 0) for i, key in enumerate(PODS)])
    for query in (0, 1, 2):
        terms, keys = QUERIES[query]
        assert state.matching_counts(terms, keys) == recount(state, terms, keys)
    assert len(state._index._selectors) == 2  # the cap: the oldest (query 0) went
    monkeypatch.setattr(podindex, "_MAX_SELECTORS", 10)
    for _ in range(4):
        state.matching_counts(*QUERIES[2])
    terms, keys = QUERIES[3]
    state.matching_counts(terms, keys)
    assert len(state._index._selectors) == 2  # query 1 idle for more than 3 reads: gone
    state.upsert_pod(pod("ns1/p0", "x", False, "n3", "Running", 0))
    state.delete_pod("ns2/p1")
    for terms, keys in QUERIES:
        assert state.matching_counts(terms, keys) == recount(state, terms, keys)


def test_unlabelled_pods_stay_found_when_a_namespace_mate_is_deleted() -> None:
    """The index keeps no label table for a namespace whose pods have no labels; deleting one
    of two such pods removed the table, and a selector matching everything then found none
    (hypothesis found it: StateCounts relist, delete, ask)."""
    state = ClusterState()
    state.replace_nodes([node("n0", "b", None)])
    state.replace_pods([pod("ns1/p0", None, False, "n0", "Running", 0), pod("ns1/p1", None, False, "n0", "Running", 0)])
    state.delete_pod("ns1/p0")
    terms, keys = QUERIES[3]  # every pod of ns1 and ns2, per zone
    assert state.matching_counts(terms, keys) == {ZONE: {"b": 1}}
    assert [r.key for r in state.matching_pods(("ns1",), terms[0].selector)] == ["ns1/p1"]
