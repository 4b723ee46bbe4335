"""The filter verb's screen: with checks that pass every all-clear node, only the other nodes
are looked at (ClusterState.screen), and the answer is the full filter's, node for node."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.cluster.memory_binder import MemoryBinder
from extender.cluster.state import ClusterState
from extender.model.pods import PodView
from extender.policy.defaults import default_policy
from extender.policy.engine import Engine
from extender.policy.loading import load_policy
from extender.policy.reloading import FixedPolicy
from extender.webhook import verbs
from extender.webhook.nodeviews import NodeViewCache
from extender.webhook.runtime import Runtime
from tests.policy.builders import node_dict, pod_dict, toleration

UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
MEMORY_PRESSURE = "node.kubernetes.io/memory-pressure"


def _state(nodes: list[dict[str, Any]]) -> ClusterState:
    state = ClusterState()
    state.replace_nodes(nodes)
    state.replace_pods([])
    return state


def _filter(state: ClusterState, engine: Engine, pod: dict[str, Any], names: list[str]) -> dict[str, Any]:
    runtime = Runtime(state, None, MemoryBinder(state), FixedPolicy(engine.policy))
    body = {"Pod": pod, "Nodes": None, "NodeNames": names}
    return verbs.filter_verb(runtime, NodeViewCache(), body).reply


def test_the_screen_follows_node_changes() -> None:
    state = _state([node_dict("a"), node_dict("b", ready="False"), node_dict("c", unschedulable=True)])
    assert state.screen(["a", "b", "c", "x"]) == (["b", "c"], ["x"])
    assert state.screen(["a"]) == ([], [])
    state.upsert_node(node_dict("b"))  # Ready again
    state.upsert_node(node_dict("a", conditions={"DiskPressure": "True"}))
    assert state.screen(["c", "b", "a"]) == (["c", "a"], [])
    state.delete_node("c")
    assert state.screen(["a", "b", "c"]) == (["a"], ["c"])
    broken = node_dict("d")
    broken["status"]["conditions"] = "not a list"  # kept, but unusable: never screened out
    state.upsert_node(broken)
    assert state.screen(["d"]) == (["d"], [])
    state.replace_nodes([node_dict("e"), node_dict("a")])  # a re-list: b and d are gone
    assert state.screen(["e", "b", "a", "d"]) == ([], ["b", "d"])


def test_a_policy_with_other_checks_takes_the_full_path() -> None:
    state = _state([node_dict("a", taints=[{"key": "k", "value": "", "effect": "NoSchedule"}])])
    taints = Engine(load_policy("apiVersion: extender/v1alpha1\nkind: Policy\n"
                                "filters: [{name: NodeReady}, {name: TaintToleration}]\n"))
    assert not taints.prepare(PodView.from_dict(pod_dict("p")), state).passes_clear_nodes
    reply = _filter(state, taints, pod_dict("p"), ["a"])
    assert reply["NodeNames"] == [] and "a" in reply["FailedAndUnresolvableNodes"]  # the taint was checked


_NODE = st.fixed_dictionaries({
    "ready": st.sampled_from(["True", "False", "Unknown"]),
    "unschedulable": st.booleans(),
    "conditions": st.dictionaries(st.sampled_from(["MemoryPressure", "DiskPressure", "PIDPressure",
                                                   "NetworkUnavailable", "Custom"]),
                                  st.sampled_from(["True", "False"]), max_size=3),
})


@settings(max_examples=150, deadline=None)
@given(nodes=st.lists(_NODE, min_size=1, max_size=12),
       tolerations=st.lists(st.sampled_from([UNSCHEDULABLE, MEMORY_PRESSURE]), unique=True),
       picks=st.lists(st.integers(0, 15), max_size=20))
def test_the_screened_answer_is_the_full_filters(nodes: list[dict[str, Any]], tolerations: list[str],
                                                 picks: list[int]) -> None:
    state = _state([node_dict(f"n{i}", **shape) for i, shape in enumerate(nodes)])
    names = [f"n{i}" for i in picks]  # some unknown (>= len(nodes)), repeats allowed, any order
    pod = pod_dict("p", tolerations=[toleration(key, effect="NoSchedule", operator="Exists")
                                     for key in tolerations])
    engine = Engine(default_policy("webhook"))
    assert engine.prepare(PodView.from_dict(pod), state).passes_clear_nodes
    reply = _filter(state, engine, pod, names)
    infos, unknown = state.node_infos(names)
    full = engine.filter(PodView.from_dict(pod), infos, state)
    refused = {**reply["FailedNodes"], **reply["FailedAndUnresolvableNodes"]}
    assert refused == {**{name: s.reason for name, s in full.failed.items()},
                       **{name: verbs.unknown_node_status().reason for name in unknown}}
    assert reply["NodeNames"] == [n for n in names if n not in refused]
