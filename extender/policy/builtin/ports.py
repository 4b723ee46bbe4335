"""NodePorts: a pod's host ports must be free on the node (kube-scheduler's NodePorts filter).

The wanted ports come from the app containers and sidecar init containers
(extender.model.ports); the node's used ports are the NodeInfo's, kept by the cluster
state for placed and assumed pods, so two pods scheduled back to back see each other.
A clash is Unschedulable (evicting the pod that holds the port may help), with
kube-scheduler's reason; the detail names the port.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.model.ports import HostPort, conflict
from extender.model.records import PodRecord
from extender.policy import enqueue, names
from extender.policy.builtin.base import PrefilteredFilter, TakesNoArgs
from extender.policy.cluster_view import ClusterView
from extender.policy.enqueue import EventHint
from extender.policy.plugins import Check, NodeCheck
from extender.policy.status import Code, Status

REASON = "node(s) didn't have free ports for the requested pod ports"


def _refusal(port: HostPort) -> Status:
    detail = f"host port {port.ip}:{port.port}/{port.protocol} is in use"
    return Status(Code.UNSCHEDULABLE, (REASON,), detail, names.NODE_PORTS)


def _freed_port(pod: PodView, deleted: PodRecord) -> bool:
    """NodePorts.isSchedulableAfterPodDeleted: the deleted pod held one of the ports."""
    used = deleted.host_ports
    return bool(used) and any(conflict(wanted, used) for wanted in pod.host_ports)


_EVENTS = (enqueue.NODE_ADDED, enqueue.on(enqueue.PODS, enqueue.DELETE, hint=_freed_port))


@dataclass(frozen=True)
class NodePorts(TakesNoArgs, PrefilteredFilter):
    """No args."""

    name: ClassVar[str] = names.NODE_PORTS

    def events_to_register(self) -> Sequence[EventHint]:
        """A node added, or a placed pod deleted that held one of the pod's host ports."""
        return _EVENTS

    def prefilter(self, pod: PodView, cluster: ClusterView) -> NodeCheck | None:
        wanted = pod.host_ports
        if not wanted:
            return None

        def check(info: NodeInfo) -> Status | None:
            used = info.host_ports
            if used:
                for port in wanted:
                    if conflict(port, used):
                        return _refusal(port)
            return None

        return Check(check, memo_key=wanted)  # all it reads of the pod (FilterCycle.run)
