"""NodeDeclaredFeatures: the cases of kube-scheduler v1.36.3's nodedeclaredfeatures_test.go that
apply here, and the inference of each feature of component-helpers v0.36.3 (each feature's
*_test.go), through the pod specs the API would hand us."""

from __future__ import annotations

from typing import Any

import pytest

from extender.errors import PolicyError
from extender.model.nodes import NodeInfo, NodeView
from extender.model.pods import PodView
from extender.policy import builtin
from extender.policy.builtin import NodeDeclaredFeatures
from extender.policy.builtin.node_features import (
    REASON,
    REGISTRY,
    VERSION,
    Feature,
    required_features,
)
from extender.policy.cluster_view import EMPTY_CLUSTER
from extender.policy.defaults import default_policy
from extender.policy.engine import Engine
from extender.policy.loading import load_policy
from extender.policy.status import Code

from .builders import node_dict, run_filter

PLUGIN = NodeDeclaredFeatures()
RESTART_ALL = "RestartAllContainersOnContainerExits"
USERNS_HOST_NETWORK = "UserNamespacesHostNetworkSupport"


def pod_view(spec: dict[str, Any]) -> PodView:
    spec = {"containers": [{"name": "c", "image": "image"}], **spec}
    return PodView.from_dict({"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": spec})


def node(name: str = "node-1", features: list[str] | None = None, **kwargs: Any) -> NodeInfo:
    raw = node_dict(name, **kwargs)
    if features is not None:
        raw["status"]["declaredFeatures"] = features
    return NodeInfo(NodeView.from_dict(raw))


def restart_all_container(name: str = "container") -> dict[str, Any]:
    """containerWithRestartAllContainersAction() of restart_all_containers_test.go."""
    return {"name": name, "image": "image", "restartPolicy": "Never", "restartPolicyRules": [
        {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [1]}}]}


NEEDS_RESTART_ALL = {"containers": [restart_all_container()]}
NEEDS_BOTH = {"containers": [restart_all_container()], "hostNetwork": True, "hostUsers": False}


# ---- inference, feature by feature (component-helpers' features/*/..._test.go) -------------------

@pytest.mark.parametrize(("spec", "needed"), [
    # restart_all_containers_test.go TestInferForScheduling
    ({"initContainers": [restart_all_container()], "containers": [{"name": "name", "image": "image"}]}, True),
    ({"initContainers": [{"name": "name", "image": "image"}], "containers": [restart_all_container()]}, True),
    ({"initContainers": [{"name": "name", "image": "image"}], "containers": [{"name": "name2", "image": "image"}]},
     False),
    # another action is no RestartAllContainers
    ({"containers": [{"name": "c", "restartPolicy": "Never", "restartPolicyRules": [
        {"action": "Restart", "exitCodes": {"operator": "In", "values": [1]}}]}]}, False),
], ids=["init container with rules", "regular container with rules", "no rules", "another action"])
def test_restart_all_containers_inference(spec: dict[str, Any], needed: bool) -> None:
    assert (RESTART_ALL in required_features(spec)) is needed


@pytest.mark.parametrize(("spec", "needed"), [
    ({"hostNetwork": True, "hostUsers": False}, True),
    ({"hostNetwork": True, "hostUsers": True}, False),
    ({"hostNetwork": True}, False),  # hostUsers unset: the host's user namespace
    ({"hostUsers": False}, False),
    ({}, False),
])
def test_user_namespaces_host_network_inference(spec: dict[str, Any], needed: bool) -> None:
    """user_namespaces_host_network.go: hostNetwork with hostUsers set to false."""
    assert (USERNS_HOST_NETWORK in required_features(spec)) is needed


@pytest.mark.parametrize("spec", [
    {},
    {"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}},  # pod-level resources
    {"initContainers": [{"name": "init-1", "resources": {"requests": {"cpu": "100m"}}}]},
    {"initContainers": [{"name": "sidecar", "restartPolicy": "Always"}]},
], ids=["empty", "pod-level resources", "init container", "sidecar"])
def test_update_only_and_proxy_features_are_never_inferred_for_scheduling(spec: dict[str, Any]) -> None:
    """InPlacePodLevelResourcesVerticalScaling, InPlacePodVerticalScalingInitContainers and
    ExtendWebSocketsToKubelet: InferForScheduling is always false in their tests."""
    assert required_features({"containers": [{"name": "c"}], **spec}) == frozenset()


def test_the_registry_is_component_helpers_v0_36_3() -> None:
    """features/registry.go AllFeatures, sorted as ndf.New sorts them; none has a MaxVersion yet."""
    assert [f.name for f in REGISTRY] == [
        "ExtendWebSocketsToKubelet", "InPlacePodLevelResourcesVerticalScaling",
        "InPlacePodVerticalScalingInitContainers", RESTART_ALL, USERNS_HOST_NETWORK]
    assert all(f.max_version is None for f in REGISTRY)
    assert VERSION == (1, 36, 3)


def test_malformed_specs_need_nothing() -> None:
    assert required_features({"containers": "x", "initContainers": [None, {"restartPolicyRules": {}}],
                              "hostNetwork": "true", "hostUsers": "false"}) == frozenset()


# ---- InferForPodScheduling's version rule (TestPreFilter's registry cases) ----------------------

def _always(spec: Any) -> bool:
    return True


def _never(spec: Any) -> bool:
    return False


@pytest.mark.parametrize(("registry", "version", "expected"), [
    ([Feature("TestFeature1", _always), Feature("TestFeature2", _never)], (1, 35, 0), {"TestFeature1"}),
    ([Feature("TestFeature1", _always, (1, 38, 0)), Feature("TestFeature2", _always, (1, 38, 0))], (1, 35, 0),
     {"TestFeature1", "TestFeature2"}),
    ([Feature("TestFeature1", _never), Feature("TestFeature2", _never)], (1, 35, 0), set()),
    # version > MaxVersion: every node has it by then, so it is not required
    ([Feature("TestFeature1", _always, (1, 33, 0)), Feature("TestFeature2", _never)], (1, 34, 0), set()),
    # version == MaxVersion: still required (GreaterThan, not GreaterOrEqual)
    ([Feature("TestFeature1", _always, (1, 36, 3))], (1, 36, 3), {"TestFeature1"}),
], ids=["feature requirements", "multiple", "no requirements", "past max version", "at max version"])
def test_inference_skips_features_past_their_max_version(registry: list[Feature], version: tuple[int, int, int],
                                                         expected: set[str]) -> None:
    assert required_features({}, registry, version) == expected


# ---- PreFilter / Filter (nodedeclaredfeatures_test.go TestPreFilter, TestFilter) ----------------

def test_pods_needing_no_feature_skip_the_plugin() -> None:
    """PreFilter returns Skip: no per-node check at all, whatever the nodes declare."""
    assert PLUGIN.prefilter(pod_view({}), EMPTY_CLUSTER) is None
    assert PLUGIN.filter(pod_view({}), node(features=[])) is None


@pytest.mark.parametrize(("declared", "passes"), [
    ([RESTART_ALL, USERNS_HOST_NETWORK], True),  # node matches requirements
    ([USERNS_HOST_NETWORK], False),  # node does not match requirements
    (None, False),  # node has no declared features
    ([], False),
    (["ExtendWebSocketsToKubelet", RESTART_ALL, "SomethingNewer"], True),  # a superset, unknown names too
])
def test_a_node_passes_only_if_it_declares_every_required_feature(declared: list[str] | None,
                                                                    passes: bool) -> None:
    result = run_filter(PLUGIN, pod_view(NEEDS_RESTART_ALL), node(features=declared))
    if passes:
        assert result is None
    else:
        assert result.code == Code.UNRESOLVABLE and result.reasons == (REASON,)
        assert result.plugin == "NodeDeclaredFeatures"
        assert RESTART_ALL in result.detail


def test_some_but_not_all_required_features_is_a_refusal_naming_the_missing_one() -> None:
    result = run_filter(PLUGIN, pod_view(NEEDS_BOTH), node(features=[RESTART_ALL]))
    assert result.code == Code.UNRESOLVABLE and result.reason == "node(s) didn't match Pod's required features"
    assert USERNS_HOST_NETWORK in result.detail and RESTART_ALL not in result.detail
    assert run_filter(PLUGIN, pod_view(NEEDS_BOTH), node(features=[RESTART_ALL, USERNS_HOST_NETWORK])) is None


def test_declared_features_are_read_once_into_the_view() -> None:
    view = node(features=["B", "A"]).node
    assert view.declared_features == frozenset({"A", "B"}) and not view.error
    assert NodeView.from_dict(node_dict("n")).declared_features == frozenset()
    broken = node_dict("n")
    broken["status"]["declaredFeatures"] = "A"
    assert "status.declaredFeatures" in NodeView.from_dict(broken).error


# ---- the policy: opt-in, and run by the engine ---------------------------------------------------

def test_in_the_default_standalone_policy_after_dynamic_resources_as_kube_scheduler_v1_36() -> None:
    """default_plugins.go applyFeatureGates: the gate (beta, on in 1.36) appends the plugin, and
    DynamicResources goes before DefaultPreemption, so it filters after DynamicResources."""
    assert NodeDeclaredFeatures in builtin.FILTERS and NodeDeclaredFeatures not in builtin.OPT_IN_FILTERS
    names = list(default_policy("standalone").filter_names)
    assert names.index("NodeDeclaredFeatures") == names.index("DynamicResources") + 1
    assert "NodeDeclaredFeatures" not in default_policy("webhook").filter_names


def test_listed_in_a_policy_file_it_refuses_through_the_engine() -> None:
    policy = load_policy("apiVersion: extender/v1alpha1\nkind: Policy\nfilters:\n"
                         "  - name: NodeDeclaredFeatures\n")
    engine = Engine(policy)
    nodes = [node("old", features=[]), node("new", features=[RESTART_ALL])]
    decision = engine.filter(pod_view(NEEDS_RESTART_ALL), nodes)
    assert [n.name for n in decision.feasible] == ["new"]
    assert decision.failed["old"].reasons == (REASON,) and decision.failed["old"].code == Code.UNRESOLVABLE
    assert [n.name for n in engine.filter(pod_view({}), nodes).feasible] == ["old", "new"]


def test_takes_no_args() -> None:
    with pytest.raises(PolicyError):
        NodeDeclaredFeatures.from_args({"features": ["A"]})
