"""UnsupportedConstraints: a pod whose hard rules the engine cannot check is refused everywhere, with the rule named."""

from __future__ import annotations

from typing import Any

import pytest

from extender.errors import PolicyError
from extender.model.nodes import NodeInfo, NodeView
from extender.model.pods import PodView
from extender.policy.builtin.unsupported import UnsupportedConstraints
from extender.policy.defaults import default_policy
from extender.policy.engine import Engine
from extender.policy.status import Code

NODE = NodeInfo(NodeView.from_dict({"metadata": {"name": "n1"}, "status": {
    "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
    "conditions": [{"type": "Ready", "status": "True"}]}}))
TERM = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}


def pod(**spec: Any) -> PodView:
    return PodView.from_dict({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}], **spec}})


@pytest.mark.parametrize(("spec", "needle"), [
    ({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [TERM]}}}, "inter-pod affinity"),
    ({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [TERM]}}},
     "anti-affinity"),
    ({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                     "labelSelector": {}}]}, "topology spread"),
    ({"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}]}, "host ports"),
])
def test_unsupported_hard_constraints_refuse_every_node(spec: dict[str, Any], needle: str) -> None:
    decision = Engine(default_policy("standalone")).filter(pod(**spec), [NODE])
    status = decision.failed["n1"]
    assert status.code == Code.UNRESOLVABLE and status.plugin == "UnsupportedConstraints"
    assert needle in status.reason


@pytest.mark.parametrize("spec", [
    {},
    {"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": TERM}]}}},
    {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]},
    {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]},
])
def test_soft_or_absent_constraints_pass(spec: dict[str, Any]) -> None:
    assert UnsupportedConstraints().prefilter(pod(**spec)) is None


def test_checks_can_be_narrowed() -> None:
    plugin = UnsupportedConstraints.from_args({"checks": ["hostPorts"]})
    assert plugin.prefilter(pod(affinity={"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [TERM]}})) is None


def test_unknown_check_names_its_path() -> None:
    with pytest.raises(PolicyError, match=r"checks\[1\]: 'volumes' is not one of"):
        UnsupportedConstraints.from_args({"checks": ["hostPorts", "volumes"]})
