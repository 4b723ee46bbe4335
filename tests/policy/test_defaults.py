"""The shipped policy files are the built-in defaults, commented."""

from __future__ import annotations

from pathlib import Path

import pytest

from extender.errors import PolicyError
from extender.policy import builtin
from extender.policy.builtin import NodeReady
from extender.policy.defaults import default_policy
from extender.policy.engine import Policy
from extender.policy.loading import load_policy, load_policy_file
from tests.policy.builders import make_node, make_pod, run_filter, run_scores, taint, toleration

CONFIG = Path(__file__).resolve().parents[2] / "config"
HEADER = "apiVersion: extender/v1alpha1\nkind: Policy\n"


@pytest.mark.parametrize(("file", "mode"), [("policy.yaml", "standalone"), ("policy-webhook.yaml", "webhook")])
def test_config_file_loads_to_the_default(file, mode):
    loaded = load_policy_file(CONFIG / file)
    default = default_policy(mode)
    assert loaded.filters == default.filters
    assert loaded.scorers == default.scorers


def test_standalone_runs_every_built_in_filter():
    """All but UnsupportedConstraints, which has nothing left to check (kept for policy files that list it)."""
    names = default_policy("standalone").filter_names
    assert sorted(names) == sorted(plugin.name for plugin in builtin.FILTERS if plugin.name != "UnsupportedConstraints")


def test_webhook_does_not_repeat_kube_scheduler():
    policy = default_policy("webhook")
    assert policy.filter_names == ["NodeReady", "NodeLabels"]
    assert policy.scorers == ()


def test_unknown_mode():
    with pytest.raises(PolicyError, match="unknown mode 'simulate'"):
        default_policy("simulate")


# The built-ins that read only the node and the pod being placed: the default webhook
# policy is made of them, so a webhook that does not bind watches no pods.
NODE_ONLY = {"NodeReady", "NodeLabels", "LabelPreference", "TaintToleration", "TaintPreferNoSchedule",
             "NodeAffinity", "PreferredNodeAffinity", "SchedulingGates", "UnsupportedConstraints",
             "NodeDeclaredFeatures", "GpuRandom"}

NODE_ONLY_ARGS = {"LabelPreference": {"label": "pool", "values": {"a": 10}},
                  "NodeLabels": {"rules": [{"require": [{"label": "pool", "values": ["a"]}]}]},
                  "NodeReady": {"pressureConditions": ["MemoryPressure"]}}


def test_which_built_ins_need_the_placed_pods():
    plugins = (*builtin.FILTERS, *builtin.SCORERS, *builtin.OPT_IN_FILTERS, *builtin.OPT_IN_SCORERS)
    assert {p.name for p in plugins if not getattr(p, "needs_pods", True)} == NODE_ONLY


@pytest.mark.parametrize("plugin", [p for p in (*builtin.FILTERS, *builtin.SCORERS) if p.name in NODE_ONLY],
                         ids=lambda p: p.name)
def test_node_only_built_ins_answer_the_same_whatever_runs_on_the_node(plugin):
    """The mark is true: a node with 50 pods on it gets the same answer as the empty node."""
    instance = plugin.from_args(NODE_ONLY_ARGS.get(plugin.name, {}))
    pod = make_pod("p", requests={"cpu": "1"}, tolerations=[toleration("dedicated", "x", "NoSchedule")],
                   node_selector={"pool": "a"})
    crowd = [make_pod(f"r{i}", requests={"cpu": "50m", "memory": "64Mi"}, labels={"app": "web"}) for i in range(50)]
    for kwargs in ({"labels": {"pool": "a"}}, {"labels": {"pool": "b"}, "taints": [taint("dedicated", "x")]},
                   {"ready": "False"}, {"unschedulable": True}):
        empty, busy = make_node("n", **kwargs), make_node("n", running=crowd, **kwargs)
        if hasattr(instance, "filter"):
            assert run_filter(instance, pod, empty) == run_filter(instance, pod, busy)
        else:
            assert run_scores(instance, pod, [empty]) == run_scores(instance, pod, [busy])


def test_a_policy_needs_pods_when_any_plugin_may_read_them():
    assert not default_policy("webhook").needs_pods
    assert default_policy("standalone").needs_pods
    node_only = load_policy(HEADER + "filters: [{name: NodeReady}, {name: TaintToleration}]\n"
                            "scores: [{name: LabelPreference, args: {label: pool, values: {a: 1}}}]\n")
    assert not node_only.needs_pods
    with_fit = load_policy(HEADER + "filters: [{name: NodeReady}, {name: ResourceFit}]\n")
    assert with_fit.needs_pods


def test_a_plugin_that_does_not_say_is_assumed_to_read_pods():
    class ThirdParty:
        name = "ThirdParty"

        def filter(self, pod, node):
            return None

    assert Policy(filters=(NodeReady(), ThirdParty())).needs_pods
