"""The pod view: the few fields the policy reads, parsed once from a v1.Pod dict.

The same constructor serves webhook bodies, watch events and snapshot files, so a
pod means the same thing in every mode. Malformed fields raise `InvalidObject`
with the field's path; the view is frozen so it can be shared between threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.errors import InvalidObject
from extender.model.affinity import PodAffinity, parse_pod_affinity
from extender.model.fields import Namespaced, as_choice, controller_owner, object_name, object_parts
from extender.model.fields import as_list as _list
from extender.model.fields import as_object as _obj
from extender.model.fields import as_str as _str
from extender.model.fields import as_string_map as _map
from extender.model.podgroups import GroupKey, group_key_from_parts
from extender.model.ports import HostPort, host_ports
from extender.model.resources import Resources, pod_request_pair
from extender.model.selectors import NodeSelectorTerm, parse_node_selector_term
from extender.model.spread import SpreadConstraint, parse_spread_constraints
from extender.model.volumes import NO_VOLUMES, PodVolumes, parse_pod_volumes

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
TOLERATION_OPERATORS = ("Equal", "Exists")  # core/v1 TolerationOperator


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str  # "Equal" or "Exists"
    value: str
    effect: str  # "" means every effect

    def tolerates(self, key: str, value: str, effect: str) -> bool:
        """k8s `Toleration.ToleratesTaint`: effect, then key (empty + Exists = all), then value."""
        if self.effect and self.effect != effect:
            return False
        if self.key and self.key != key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == value


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    weight: int
    term: NodeSelectorTerm


# Pods repeat a handful of tolerations (the not-ready/unreachable pair on nearly every one):
# parsed once each, shared by every pod that carries them.
_TOLERATIONS: dict[tuple[Any, Any, Any, Any], Toleration] = {}
_TOLERATIONS_LIMIT = 10_000


def _tolerations(raw: Any) -> tuple[Toleration, ...]:
    if not raw:
        return ()
    known = _TOLERATIONS
    parsed = []
    try:
        for item in raw:
            # Exact dict entries, no per-field path strings: tolerationSeconds is not read.
            toleration = known.get((item.get("key"), item.get("operator"), item.get("value"), item.get("effect")))
            if toleration is None:
                return _tolerations_checked(raw)
            parsed.append(toleration)
    except (AttributeError, TypeError):  # not a list of objects, or an unhashable field
        return _tolerations_checked(raw)
    return tuple(parsed)


def _tolerations_checked(raw: Any) -> tuple[Toleration, ...]:
    """Every toleration validated, with the path of the first bad field; the valid ones are
    remembered under their raw fields for `_tolerations`."""
    parsed = []
    for i, item in enumerate(_list(raw, "spec.tolerations")):
        item = _obj(item, f"spec.tolerations[{i}]")
        operator = as_choice(item.get("operator"), f"spec.tolerations[{i}].operator", TOLERATION_OPERATORS, "Equal")
        toleration = Toleration(
            _str(item.get("key"), f"spec.tolerations[{i}].key"), operator,
            _str(item.get("value"), f"spec.tolerations[{i}].value"),
            _str(item.get("effect"), f"spec.tolerations[{i}].effect"),
        )
        fields = (item.get("key"), item.get("operator"), item.get("value"), item.get("effect"))
        # Only strings (and absent fields) as keys: 1 == True would share one entry for "1" and "True".
        if len(_TOLERATIONS) < _TOLERATIONS_LIMIT and all(f is None or type(f) is str for f in fields):
            _TOLERATIONS[fields] = toleration
        parsed.append(toleration)
    return tuple(parsed)


def _node_affinity(spec: Mapping[str, Any]) -> tuple[tuple[NodeSelectorTerm, ...] | None, tuple[PreferredTerm, ...]]:
    affinity = _obj(_obj(spec.get("affinity"), "spec.affinity").get("nodeAffinity"), "spec.affinity.nodeAffinity")
    where = "spec.affinity.nodeAffinity"
    required = None
    raw_required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if raw_required is not None:
        terms = _list(
            _obj(raw_required, f"{where}.requiredDuringSchedulingIgnoredDuringExecution").get("nodeSelectorTerms"),
            f"{where}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
        )
        required = tuple(
            parse_node_selector_term(
                term, f"{where}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]"
            )
            for i, term in enumerate(terms)
        )
    preferred = []
    for i, item in enumerate(_list(affinity.get("preferredDuringSchedulingIgnoredDuringExecution"), where)):
        path = f"{where}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        item = _obj(item, path)
        weight = item.get("weight", 0)
        if not isinstance(weight, int) or isinstance(weight, bool) or not 0 <= weight <= 100:
            raise InvalidObject(f"{path}.weight: expected an integer in 0..100")
        preferred.append(PreferredTerm(weight, parse_node_selector_term(item.get("preference"), f"{path}.preference")))
    return required, tuple(preferred)


@dataclass(frozen=True, slots=True)
class PodView(Namespaced):
    """What scheduling needs to know about a pod. `raw` is the original dict, untouched."""

    raw: Mapping[str, Any] = field(repr=False, compare=False)
    namespace: str
    name: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    scheduler_name: str
    node_name: str
    phase: str
    priority: int
    creation_timestamp: str
    deleting: bool
    scheduling_gates: tuple[str, ...]
    tolerations: tuple[Toleration, ...]
    node_selector: dict[str, str]
    required_terms: tuple[NodeSelectorTerm, ...] | None
    preferred_terms: tuple[PreferredTerm, ...]
    requests: Resources
    score_requests: Resources
    owner: tuple[str, str] | None
    affinity: PodAffinity | None = None
    spread: tuple[SpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    preemption_policy: str = "PreemptLowerPriority"
    nominated_node_name: str = ""
    start_time: str = ""
    volumes: PodVolumes = NO_VOLUMES  # claims and inline disks, for the volume plugins
    group: GroupKey | None = None  # the pod group it belongs to (docs/gangs.md); None for most pods

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @classmethod
    def from_dict(cls, raw: Any) -> PodView:
        """Build the view; raise InvalidObject naming the first bad field."""
        meta, spec, status = object_parts(raw, "pod")
        name = object_name(meta)
        priority = spec.get("priority") or 0
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise InvalidObject("spec.priority: expected an integer")
        owner = controller_owner(meta)
        gates = tuple(
            _str(_obj(g, f"spec.schedulingGates[{i}]").get("name"), f"spec.schedulingGates[{i}].name")
            for i, g in enumerate(_list(spec.get("schedulingGates"), "spec.schedulingGates"))
        )
        required, preferred = _node_affinity(spec)
        namespace = _str(meta.get("namespace"), "metadata.namespace") or "default"
        labels = _map(meta.get("labels"), "metadata.labels")
        creation = _str(meta.get("creationTimestamp"), "metadata.creationTimestamp")
        tolerations = _tolerations(spec.get("tolerations"))
        requests, score_requests = pod_request_pair(spec)
        return cls(
            raw=raw,
            namespace=namespace,
            name=name,
            uid=_str(meta.get("uid"), "metadata.uid"),
            labels=labels,
            annotations=_map(meta.get("annotations"), "metadata.annotations"),
            scheduler_name=_str(spec.get("schedulerName"), "spec.schedulerName") or "default-scheduler",
            node_name=_str(spec.get("nodeName"), "spec.nodeName"),
            phase=_str(status.get("phase"), "status.phase") or "Pending",
            priority=priority,
            creation_timestamp=creation,
            deleting=bool(meta.get("deletionTimestamp")),
            scheduling_gates=gates,
            tolerations=tolerations,
            node_selector=_map(spec.get("nodeSelector"), "spec.nodeSelector"),
            required_terms=required,
            preferred_terms=preferred,
            requests=requests,
            score_requests=score_requests,
            owner=owner,
            affinity=parse_pod_affinity(spec, namespace, labels),
            spread=parse_spread_constraints(spec, labels),
            host_ports=host_ports(spec),
            preemption_policy=_str(spec.get("preemptionPolicy"), "spec.preemptionPolicy") or "PreemptLowerPriority",
            nominated_node_name=_str(status.get("nominatedNodeName"), "status.nominatedNodeName"),
            start_time=_str(status.get("startTime"), "status.startTime"),
            volumes=parse_pod_volumes(spec, name),
            group=group_key_from_parts(namespace, spec, labels),
        )
