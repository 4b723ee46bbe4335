"""ResourceFit: the pod's effective request must fit in what the node has left.

The same check as kube-scheduler's NodeResourcesFit filter: free = allocatable -
requested (the NodeInfo already counts assumed pods), the pod count against
`allocatable.pods`, every requested resource including hugepages and extended
resources, with the same reasons ("Insufficient cpu", "Too many pods") listed one
per missing resource. A request larger than the node's whole allocatable is
unresolvable, as in kube-scheduler >= 1.32: no preemption can make it fit.

An extended resource that a DeviceClass serves (DRAExtendedResource: its
`extendedResourceName`, or `deviceclass.resource.kubernetes.io/<class>`) is left to
DynamicResources on a node that does not advertise it in its allocatable
(noderesources/fit.go `shouldDelegateResourceToDRA`); a node that does is checked here, as
any device-plugin resource.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.model.quantities import format_units
from extender.policy import enqueue, names
from extender.policy.builtin import arguments
from extender.policy.builtin.base import PrefilteredFilter
from extender.policy.cluster_view import ClusterView
from extender.policy.enqueue import EventHint
from extender.policy.plugins import Check, NodeCheck
from extender.policy.status import Code, Status

REASON_TOO_MANY_PODS = "Too many pods"
IMPLICIT_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"  # resourceapi.ResourceDeviceClassPrefix
_FIRST = {"cpu": 0, "memory": 1, "ephemeral-storage": 2}


def is_extended_resource(name: str) -> bool:
    """k8s `IsExtendedResourceName`: a domain-prefixed name outside kubernetes.io."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def _order(name: str) -> tuple[int, str]:
    # kube-scheduler reports cpu, memory, ephemeral-storage, then the others.
    return _FIRST.get(name, 3), name


_ARGS = arguments.schema({
    "ignoredResources": arguments.strings(),
    "ignoredResourceGroups": arguments.strings(
        each=lambda group: f"{group!r} is a group, it must not contain '/'" if "/" in group else ""),
})


@dataclass(frozen=True)
class ResourceFit(PrefilteredFilter):
    """Args `ignoredResources` / `ignoredResourceGroups` skip extended resources, as in kube-scheduler."""

    name: ClassVar[str] = names.RESOURCE_FIT
    ignored_resources: frozenset[str] = frozenset()
    ignored_resource_groups: frozenset[str] = frozenset()

    def events_to_register(self) -> Sequence[EventHint]:
        """A node added or grown, a placed pod deleted or scaled down: each may free room."""
        return (enqueue.NODE_ADDED, enqueue.on(enqueue.NODES, enqueue.UPDATE_NODE_ALLOCATABLE),
                enqueue.on(enqueue.PODS, enqueue.DELETE, enqueue.UPDATE_POD_SCALE_DOWN))

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> ResourceFit:
        args = arguments.load(_ARGS, args)
        return cls(frozenset(args["ignoredResources"]), frozenset(args["ignoredResourceGroups"]))

    def _ignored(self, resource: str) -> bool:
        if not is_extended_resource(resource):
            return False
        return resource in self.ignored_resources or resource.split("/", 1)[0] in self.ignored_resource_groups

    def prefilter(self, pod: PodView, cluster: ClusterView) -> NodeCheck:
        wanted = tuple(
            (resource, amount)
            for resource, amount in sorted(pod.requests.items(), key=lambda item: _order(item[0]))
            if amount > 0 and resource != "pods" and not self._ignored(resource)
        )

        absent: dict[tuple[str, ...], Status] = {}  # the refusals of nodes without a wanted resource
        dra = cluster.dra()
        delegable = frozenset(resource for resource, _ in wanted
                              if is_dra_extended_resource(resource) and dra.extended_class(resource) is not None)
        if delegable:
            return _delegating_check(wanted, delegable)

        def check(info: NodeInfo) -> Status | None:
            allocatable = info.node.allocatable
            if info.pod_count >= allocatable.get("pods", 0):
                return _refusal(wanted, info)
            requested = info.requested
            for resource, amount in wanted:
                if amount > allocatable.get(resource, 0) - requested.get(resource, 0):
                    return _absent(wanted, info, absent) or _refusal(wanted, info)
            return None

        return Check(check, memo_key=wanted)  # all it reads of the pod (FilterCycle.run)


def is_dra_extended_resource(name: str) -> bool:
    """IsDRAExtendedResourceName: an extended resource, or a class's implicit one."""
    return is_extended_resource(name) or name.startswith(IMPLICIT_EXTENDED_PREFIX)


def _delegating_check(wanted: tuple[tuple[str, int], ...], delegable: frozenset[str]) -> NodeCheck:
    """The check for a pod with extended resources a DeviceClass serves: on each node, those the
    node does not advertise are DynamicResources' to allocate, the others are checked here."""

    def check(info: NodeInfo) -> Status | None:
        allocatable = info.node.allocatable
        kept = tuple(item for item in wanted if item[0] not in delegable or allocatable.get(item[0], 0) > 0)
        if info.pod_count >= allocatable.get("pods", 0):
            return _refusal(kept, info)
        requested = info.requested
        for resource, amount in kept:
            if amount > allocatable.get(resource, 0) - requested.get(resource, 0):
                return _refusal(kept, info)
        return None

    return Check(check, memo_key=(wanted, delegable))  # all it reads of the pod (FilterCycle.run)


_INSUFFICIENT: dict[str, str] = {}


def _absent(wanted: tuple[tuple[str, int], ...], info: NodeInfo, known: dict[tuple[str, ...], Status]
            ) -> Status | None:
    """The refusal of a node that has none of the resources it lacks (allocatable and requested
    0: an extended resource, a GPU on a CPU node), or None. Its reasons and numbers are the
    same on every such node, so one Status serves them all: a pod that fits a handful of
    nodes out of thousands is refused by every other one."""
    allocatable = info.node.allocatable
    requested = info.requested
    missing = []
    for resource, amount in wanted:
        total = allocatable.get(resource, 0)
        used = requested.get(resource, 0)
        if amount > total - used:
            if total or used:
                return None
            missing.append(resource)
    key = tuple(missing)
    status = known.get(key)
    if status is None:
        status = known[key] = _refusal(wanted, info)
    return status


def _refusal(wanted: tuple[tuple[str, int], ...], info: NodeInfo) -> Status:
    """The slow path, for refused nodes only: every missing resource; the numbers on demand."""
    allocatable = info.node.allocatable
    requested = info.requested
    reasons: list[str] = []
    code = Code.UNSCHEDULABLE
    if info.pod_count >= allocatable.get("pods", 0):
        reasons.append(REASON_TOO_MANY_PODS)
    for resource, amount in wanted:
        total = allocatable.get(resource, 0)
        if amount > total - requested.get(resource, 0):
            reason = _INSUFFICIENT.get(resource)
            if reason is None:
                reason = _INSUFFICIENT.setdefault(resource, f"Insufficient {resource}")
            reasons.append(reason)
            if amount > total:
                code = Code.UNRESOLVABLE
    return Status(code, tuple(reasons), partial(_detail, wanted, info), names.RESOURCE_FIT)


def _detail(wanted: tuple[tuple[str, int], ...], info: NodeInfo) -> str:
    """What explain and the logs show: "Insufficient cpu (requested 500m, free 200m)"."""
    allocatable = info.node.allocatable
    details: list[str] = []
    allowed = allocatable.get("pods", 0)
    if info.pod_count >= allowed:
        details.append(f"Too many pods (allowed {allowed}, already {info.pod_count})")
    for resource, amount in wanted:
        free = allocatable.get(resource, 0) - info.requested.get(resource, 0)
        if amount > free:
            details.append(f"Insufficient {resource} (requested {format_units(resource, amount)}, "
                           f"free {format_units(resource, free)})")
    return "; ".join(details)
