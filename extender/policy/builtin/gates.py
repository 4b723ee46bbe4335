"""SchedulingGates: a pod with `spec.schedulingGates` is not ready to be placed anywhere.

kube-scheduler keeps gated pods out of its queue (the SchedulingGates PreEnqueue
plugin) and the API server refuses to bind them. Our loop should never pick them, but
simulate and explain get pods from files, so the policy refuses them too: the check
runs once per pod and costs nothing per node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy import enqueue, names
from extender.policy.builtin.base import TakesNoArgs
from extender.policy.cluster_view import EMPTY_CLUSTER, ClusterView
from extender.policy.enqueue import EventHint
from extender.policy.plugins import FilterPlugin, PreFilterPlugin
from extender.policy.status import Code, Status

NAME = names.SCHEDULING_GATES


@dataclass(frozen=True)
class SchedulingGates(TakesNoArgs, PreFilterPlugin, FilterPlugin):
    """Refuse every node for a gated pod, with kube-scheduler's wording."""

    name: ClassVar[str] = NAME
    needs_pods: ClassVar[bool] = False  # reads the node alone (engine.Policy.needs_pods)

    def events_to_register(self) -> Sequence[EventHint]:
        """A node added (the gates themselves are lifted by the pod's own update)."""
        return (enqueue.NODE_ADDED,)

    def prefilter(self, pod: PodView, cluster: ClusterView) -> Status | None:
        if not pod.scheduling_gates:
            return None
        gates = " ".join(pod.scheduling_gates)
        # Same text as kube-scheduler's PreEnqueue status; unresolvable: only removing the gate helps.
        return Status(Code.UNRESOLVABLE, (f"waiting for scheduling gates: [{gates}]",), "", NAME)

    def filter(self, pod: PodView, node: NodeInfo) -> Status | None:
        return self.prefilter(pod, EMPTY_CLUSTER)
