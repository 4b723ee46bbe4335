"""NodeReady: only Ready, uncordoned nodes without refused pressure conditions take new pods.

kube-scheduler refuses a cordoned node (NodeUnschedulable) unless the pod tolerates
the `node.kubernetes.io/unschedulable:NoSchedule` taint, and avoids NotReady or
pressured nodes only through the taints the node lifecycle controller adds, which lag
the condition. This filter reads the conditions directly, so a node that just went
NotReady is refused at once. A pressure condition is forgiven for a pod that tolerates
the matching condition taint (as kube-scheduler would, once the taint is there), so
DaemonSet-like pods keep their behaviour. Every refusal is unresolvable: evicting pods
does not make a node Ready.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy import enqueue, names
from extender.policy.builtin import arguments
from extender.policy.builtin.base import PrefilteredFilter
from extender.policy.cluster_view import ClusterView
from extender.policy.enqueue import EventHint
from extender.policy.plugins import Check, NodeCheck
from extender.policy.status import Code, Status

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"

# Reasons worded as kube-scheduler's (NodeUnschedulable, and the old condition predicates).
REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_NOT_READY = "node(s) were not ready"
PRESSURE_REASONS = {
    "MemoryPressure": "node(s) had memory pressure",
    "DiskPressure": "node(s) had disk pressure",
    "PIDPressure": "node(s) had pid pressure",
    "NetworkUnavailable": "node(s) had network unavailable",
}
# The taint the node lifecycle controller adds for each condition (TaintNodesByCondition).
CONDITION_TAINTS = {
    "MemoryPressure": "node.kubernetes.io/memory-pressure",
    "DiskPressure": "node.kubernetes.io/disk-pressure",
    "PIDPressure": "node.kubernetes.io/pid-pressure",
    "NetworkUnavailable": "node.kubernetes.io/network-unavailable",
}
ALL_PRESSURE_CONDITIONS = tuple(PRESSURE_REASONS)


def _refusal(reason: str, detail: str) -> Status:
    # Built with the plugin name so the engine's stamping does not copy it per node.
    return Status(Code.UNRESOLVABLE, (reason,), detail, names.NODE_READY)


_NOT_READY = _refusal(REASON_NOT_READY, "the node's Ready condition is not True")
_CORDONED = _refusal(REASON_UNSCHEDULABLE, "the node is cordoned (spec.unschedulable)")


def _tolerates(pod: PodView, key: str) -> bool:
    return any(t.tolerates(key, "", "NoSchedule") for t in pod.tolerations)


_ARGS = arguments.schema({
    "pressureConditions": arguments.strings(each=lambda c: "Ready is always checked" if c == "Ready" else ""),
})


@dataclass(frozen=True)
class NodeReady(PrefilteredFilter):
    """Refuse NotReady and cordoned nodes, and nodes with any of `pressure_conditions` True."""

    name: ClassVar[str] = names.NODE_READY
    needs_pods: ClassVar[bool] = False  # reads the node alone (engine.Policy.needs_pods)
    pressure_conditions: tuple[str, ...] = ()
    _refusals: tuple[tuple[str, str, Status], ...] = field(init=False, repr=False, compare=False)

    def events_to_register(self) -> Sequence[EventHint]:
        """A node added, or one whose taints, spec.unschedulable or conditions changed."""
        return (enqueue.NODE_ADDED, enqueue.on(enqueue.NODES, enqueue.UPDATE_NODE_TAINT, enqueue.UPDATE_NODE_UNSCHEDULABLE,
                                                 enqueue.UPDATE_NODE_CONDITION))

    def __post_init__(self) -> None:
        refusals = []
        for condition in self.pressure_conditions:
            reason = PRESSURE_REASONS.get(condition, f"node(s) had condition {condition}")
            taint = CONDITION_TAINTS.get(condition, "")
            refusals.append((condition, taint, _refusal(reason, f"the node's {condition} condition is True")))
        object.__setattr__(self, "_refusals", tuple(refusals))

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> NodeReady:
        """Args: `pressureConditions: [MemoryPressure, ...]`, any condition type (True refuses)."""
        return cls(arguments.load(_ARGS, args)["pressureConditions"])

    def prefilter(self, pod: PodView, cluster: ClusterView) -> NodeCheck:
        cordon_ok = _tolerates(pod, UNSCHEDULABLE_TAINT)
        # Conditions whose taint the pod tolerates are not refusals for this pod.
        refusals = tuple(
            (condition, status)
            for condition, taint, status in self._refusals
            if not (taint and _tolerates(pod, taint))
        )

        def check(info: NodeInfo) -> Status | None:
            node = info.node
            if node.all_clear:
                return None
            conditions = node.conditions
            if node.unschedulable and not cordon_ok:
                return _CORDONED
            if conditions.get("Ready") != "True":
                return _NOT_READY
            for condition, status in refusals:
                if conditions.get(condition) == "True":
                    return status
            return None

        return Check(check, memo_key=(cordon_ok, tuple(c for c, _ in refusals)), passes_clear_nodes=True)
