"""NodeReady and SchedulingGates."""

from __future__ import annotations

import pytest

from extender.policy.builtin import NodeReady, SchedulingGates
from extender.policy.cluster_view import EMPTY_CLUSTER
from extender.policy.status import Code

from .builders import make_node, make_pod, reasons, run_filter, toleration

ALL = {"pressureConditions": ["MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"]}


@pytest.mark.parametrize(
    ("node", "pod", "expected"),
    [
        ({}, {}, ()),
        ({"ready": "False"}, {}, ("node(s) were not ready",)),
        ({"ready": "Unknown"}, {}, ("node(s) were not ready",)),
        ({"unschedulable": True}, {}, ("node(s) were unschedulable",)),
        # A pod tolerating the cordon taint may go on a cordoned node (kube-scheduler's NodeUnschedulable).
        (
            {"unschedulable": True},
            {"tolerations": [toleration("node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule")]},
            (),
        ),
        ({"unschedulable": True}, {"tolerations": [toleration(operator="Exists")]}, ()),
        # ...but a NoExecute-only toleration does not cover the NoSchedule cordon taint.
        (
            {"unschedulable": True},
            {"tolerations": [toleration("node.kubernetes.io/unschedulable", operator="Exists", effect="NoExecute")]},
            ("node(s) were unschedulable",),
        ),
        ({"conditions": {"MemoryPressure": "True"}}, {}, ("node(s) had memory pressure",)),
        ({"conditions": {"DiskPressure": "True"}}, {}, ("node(s) had disk pressure",)),
        ({"conditions": {"PIDPressure": "True"}}, {}, ("node(s) had pid pressure",)),
        ({"conditions": {"NetworkUnavailable": "True"}}, {}, ("node(s) had network unavailable",)),
        ({"conditions": {"MemoryPressure": "False", "DiskPressure": "Unknown"}}, {}, ()),
        (
            {"conditions": {"DiskPressure": "True"}},
            {"tolerations": [toleration("node.kubernetes.io/disk-pressure", operator="Exists", effect="NoSchedule")]},
            (),
        ),
        # Cordon is reported before NotReady, as kube-scheduler's NodeUnschedulable runs first.
        ({"unschedulable": True, "ready": "False"}, {}, ("node(s) were unschedulable",)),
    ],
)
def test_node_ready(node, pod, expected):
    result = run_filter(NodeReady.from_args(ALL), make_pod(**pod), make_node(**node))
    assert reasons(result) == expected
    if expected:
        assert result.code == Code.UNRESOLVABLE
        assert result.plugin == "NodeReady"
        assert result.detail


def test_node_ready_checks_only_the_configured_conditions():
    plugin = NodeReady.from_args({"pressureConditions": ["DiskPressure"]})
    assert run_filter(plugin, make_pod(), make_node(conditions={"MemoryPressure": "True"})) is None
    assert reasons(run_filter(plugin, make_pod(), make_node(conditions={"DiskPressure": "True"}))) == (
        "node(s) had disk pressure",
    )
    assert run_filter(NodeReady.from_args({}), make_pod(), make_node(conditions={"DiskPressure": "True"})) is None


def test_node_ready_accepts_custom_conditions():
    plugin = NodeReady.from_args({"pressureConditions": ["KernelDeadlock"]})
    result = run_filter(plugin, make_pod(), make_node(conditions={"KernelDeadlock": "True"}))
    assert reasons(result) == ("node(s) had condition KernelDeadlock",)


# Bad args: tests/policy/test_argument_messages.py (FROM_ARGS_CASES).


def test_scheduling_gates_refuse_every_node_at_prefilter():
    plugin = SchedulingGates.from_args({})
    assert plugin.prefilter(make_pod(), EMPTY_CLUSTER) is None
    status = plugin.prefilter(make_pod(gates=["example.com/quota", "other"]), EMPTY_CLUSTER)
    assert status.reasons == ("waiting for scheduling gates: [example.com/quota other]",)
    assert status.code == Code.UNRESOLVABLE
    assert plugin.filter(make_pod(gates=["g"]), make_node()) is not None
