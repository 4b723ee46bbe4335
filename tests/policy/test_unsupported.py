"""UnsupportedConstraints: every rule it refused has a plugin now; naming one in its args says which."""

from __future__ import annotations

from typing import Any

import pytest

from extender.errors import PolicyError
from extender.model.nodes import NodeInfo, NodeView
from extender.model.pods import PodView
from extender.policy.builtin.unsupported import UnsupportedConstraints
from extender.policy.cluster_view import EMPTY_CLUSTER
from extender.policy.defaults import default_policy
from extender.policy.engine import Engine
from extender.policy.status import Code

NODE = NodeInfo(NodeView.from_dict({"metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
                                    "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                                               "conditions": [{"type": "Ready", "status": "True"}]}}))
TERM = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
CLAIMS = {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}]}


def pod(**spec: Any) -> PodView:
    return PodView.from_dict({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}], **spec}})


def test_dynamic_resource_claims_are_dynamic_resources_business() -> None:
    """The claim of a template is not made yet: the pod waits with kube-scheduler's words."""
    decision = Engine(default_policy("standalone")).filter(pod(**CLAIMS), [NODE])
    status = decision.failed["n1"]
    assert status.code == Code.UNRESOLVABLE and status.plugin == "DynamicResources"
    assert status.reason == 'pod "default/p": ResourceClaim not created yet'


@pytest.mark.parametrize("spec", [
    {},
    {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [TERM]}}},
    {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                    "labelSelector": {}}]},
    {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}]},
    {"resourceClaims": []},
    CLAIMS,
])
def test_constraints_with_plugins_of_their_own_pass(spec: dict[str, Any]) -> None:
    assert UnsupportedConstraints().prefilter(pod(**spec), EMPTY_CLUSTER) is None


def test_checks_can_be_emptied() -> None:
    assert UnsupportedConstraints.from_args({"checks": []}).prefilter(pod(**CLAIMS), EMPTY_CLUSTER) is None


def test_unknown_check_names_its_path() -> None:
    with pytest.raises(PolicyError, match=r"checks\[0\]: 'volumes' is not a check this plugin knows"):
        UnsupportedConstraints.from_args({"checks": ["volumes"]})


def test_a_check_that_has_a_plugin_now_says_which() -> None:
    with pytest.raises(PolicyError, match=r"checks\[0\]: 'hostPorts' is evaluated by the NodePorts plugin"):
        UnsupportedConstraints.from_args({"checks": ["hostPorts"]})
    with pytest.raises(PolicyError, match=r"checks\[0\]: 'resourceClaims' is evaluated by the DynamicResources plugin"):
        UnsupportedConstraints.from_args({"checks": ["resourceClaims"]})
