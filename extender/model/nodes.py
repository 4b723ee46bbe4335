"""The node view and the node's scheduling info (the node plus what is already placed on it).

`NodeView` is parsed once per node object; `NodeInfo` pairs it with the summed
requests of the node's pods. Both are immutable: the cluster state replaces a
NodeInfo instead of editing it, so a request thread never sees a half update.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from extender.errors import InvalidObject
from extender.model.fields import as_list as _list
from extender.model.fields import as_object as _obj
from extender.model.fields import as_str as _str
from extender.model.fields import as_string_map as _map
from extender.model.fields import object_name
from extender.model.ports import HostPort
from extender.model.resources import Resources, add_into, parse_resource_list

if TYPE_CHECKING:
    from extender.model.records import PodRecord


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{{{self.key}: {self.value}}}" if self.value else f"{{{self.key}}}"


@dataclass(frozen=True, slots=True)
class NodeView:
    """What scheduling reads from a node. `error` marks a node that cannot be used, and why."""

    raw: Mapping[str, Any] = field(repr=False, compare=False)
    name: str
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    conditions: dict[str, str]
    allocatable: Resources
    error: str = ""
    # status.declaredFeatures (NodeDeclaredFeatures), parsed here once per node update: the
    # filter's per-node check is then one frozenset subset test. Empty for nearly every node.
    declared_features: frozenset[str] = frozenset()
    # Ready, schedulable, and no other condition True: nothing for NodeReady to look at,
    # which is nearly every node, every time (it is read for each node of every filter call).
    all_clear: bool = field(init=False, compare=False)

    def __post_init__(self) -> None:
        conditions = self.conditions
        clear = (not self.unschedulable and conditions.get("Ready") == "True"
                 and not any(status == "True" for kind, status in conditions.items() if kind != "Ready"))
        object.__setattr__(self, "all_clear", clear)

    @property
    def ready(self) -> bool:
        return self.conditions.get("Ready") == "True"

    @classmethod
    def from_dict(cls, raw: Any) -> NodeView:
        """Build the view. A node whose name is unreadable raises; any other bad field
        yields a view with `error` set, so one broken node never hides the others."""
        if not isinstance(raw, Mapping):
            raise InvalidObject("node: expected an object")
        meta = _obj(raw.get("metadata"), "metadata")
        name = object_name(meta)
        try:
            spec = _obj(raw.get("spec"), "spec")
            status = _obj(raw.get("status"), "status")
            taints = []
            for i, item in enumerate(_list(spec.get("taints"), "spec.taints")):
                item = _obj(item, f"spec.taints[{i}]")
                taints.append(Taint(_str(item.get("key"), f"spec.taints[{i}].key"),
                                    _str(item.get("value"), f"spec.taints[{i}].value"),
                                    _str(item.get("effect"), f"spec.taints[{i}].effect")))
            conditions = {}
            for i, item in enumerate(_list(status.get("conditions"), "status.conditions")):
                item = _obj(item, f"status.conditions[{i}]")
                conditions[_str(item.get("type"), f"status.conditions[{i}].type")] = _str(
                    item.get("status"), f"status.conditions[{i}].status")
            return cls(
                raw=raw,
                name=name,
                labels=_map(meta.get("labels"), "metadata.labels"),
                taints=tuple(taints),
                unschedulable=bool(spec.get("unschedulable")),
                conditions=conditions,
                allocatable=parse_resource_list(status.get("allocatable"), "status.allocatable"),
                declared_features=_declared_features(status.get("declaredFeatures")),
            )
        except InvalidObject as exc:
            return cls(raw, name, {}, (), True, {}, {}, error=f"node {name} is unusable: {exc}")


_NO_FEATURES: frozenset[str] = frozenset()


def _declared_features(raw: Any) -> frozenset[str]:
    """status.declaredFeatures as a set: the API server keeps it sorted and unique, and the
    filter asks only "does the node declare all of these"."""
    if not raw:
        return _NO_FEATURES
    where = "status.declaredFeatures"
    return frozenset(_str(item, f"{where}[{i}]") for i, item in enumerate(_list(raw, where)))


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A node with the pods on it (assumed pods included) and what they add up to.

    `pods` holds the records themselves (for preemption, which removes some of them, and
    for explain); the sums are precomputed because every filter reads them for every node.
    """

    node: NodeView
    requested: Resources = field(default_factory=dict)
    score_requested: Resources = field(default_factory=dict)
    pod_count: int = 0
    pods: tuple[PodRecord, ...] = field(default=(), repr=False)
    host_ports: tuple[HostPort, ...] = ()
    # The node's name as a plain attribute: the engine reads it for every node of every pod.
    name: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.node.name)

    @classmethod
    def build(cls, node: NodeView, pods: Iterable[PodRecord]) -> NodeInfo:
        """The info of `node` running exactly `pods`."""
        kept = tuple(pods)
        requested: Resources = {}
        score_requested: Resources = {}
        ports: list[HostPort] = []
        for pod in kept:
            add_into(requested, pod.requests)
            add_into(score_requested, pod.score_requests)
            if pod.host_ports:
                ports.extend(pod.host_ports)
        return cls(node, requested, score_requested, len(kept), kept, tuple(ports))

    def without(self, keys: Collection[str]) -> NodeInfo:
        """This node with the pods of `keys` gone (what preemption's dry run evaluates)."""
        return NodeInfo.build(self.node, (p for p in self.pods if p.key not in keys))

    def adding(self, pod: PodRecord) -> NodeInfo:
        """This node with one more pod, its sums updated rather than rebuilt (kube-scheduler's
        NodeInfo.AddPod): preemption's reprieve loop asks it once per victim, and rebuilding made
        that loop quadratic in the pods of the node."""
        requested = dict(self.requested)
        add_into(requested, pod.requests)
        score_requested = dict(self.score_requested)
        add_into(score_requested, pod.score_requests)
        ports = self.host_ports + pod.host_ports if pod.host_ports else self.host_ports
        return NodeInfo(self.node, requested, score_requested, self.pod_count + 1, (*self.pods, pod), ports)

    def plus(self, extra: Iterable[PodRecord]) -> NodeInfo:
        """This node with `extra` pods added (nominated pods, reprieved victims)."""
        return NodeInfo.build(self.node, (*self.pods, *extra))

    def free(self, resource: str) -> int:
        if resource == "pods":
            return self.node.allocatable.get("pods", 0) - self.pod_count
        return self.node.allocatable.get(resource, 0) - self.requested.get(resource, 0)
