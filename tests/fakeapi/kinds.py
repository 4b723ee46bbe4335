"""Per-kind create and update rules (the registry "strategies"), one entry point for the REST layer.

Pods and events have their own modules; nodes, namespaces and leases are small enough
to live here. Each function validates, defaults and reports errors the way the
matching pkg/registry strategy and pkg/apis/*/validation code do.
"""

from __future__ import annotations

import json
from typing import Any

from . import dra, events, podgroups, pods, storage
from .resources import ResourceType
from .status import ApiError, FieldError, GoLiteral
from .validation import check_times, qualified_name_errors, validate_metadata

_TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
#: The taint the NodeTaint admission plugin (TaintNodesByCondition) puts on every new node;
#: the node lifecycle controller removes it once the node reports Ready. envtest runs no
#: controller, so on a real server it stays until someone removes it.
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


def add_not_ready_taint(node: dict[str, Any]) -> None:
    """plugin/pkg/admission/nodetaint: taint a node at creation, unless it already has it."""
    spec = node.setdefault("spec", {})
    taints = spec.get("taints") or []
    if not any(
        isinstance(t, dict) and t.get("key") == NOT_READY_TAINT["key"] and t.get("effect") == "NoSchedule"
        for t in taints
    ):
        spec["taints"] = [*taints, dict(NOT_READY_TAINT)]


def _go_taint(taint: dict[str, Any]) -> GoLiteral:
    """How field.Duplicate prints a core.Taint value (the Go struct, JSON-encoded)."""
    key, value, effect = (json.dumps(taint.get(k) or "") for k in ("key", "value", "effect"))
    added = json.dumps(taint.get("timeAdded"))
    return GoLiteral(f'{{"Key":{key},"Value":{value},"Effect":{effect},"TimeAdded":{added}}}')


def _node_errors(node: dict[str, Any]) -> list[FieldError]:
    errs = validate_metadata(node, namespaced=False)
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate((node.get("spec") or {}).get("taints") or []):
        # ValidateNode validates spec.taints under the path "metadata.taints" (sic).
        path = f"metadata.taints[{i}]"
        if not isinstance(taint, dict):
            errs.append(FieldError("Invalid", path, str(taint), "must be an object"))
            continue
        errs += qualified_name_errors(taint.get("key") or "", f"{path}.key")
        effect = taint.get("effect")
        if not effect:
            errs.append(FieldError("Required", f"{path}.effect"))
        elif effect not in _TAINT_EFFECTS:
            errs.append(
                FieldError("NotSupported", f"{path}.effect", effect, supported=_TAINT_EFFECTS)
            )
        pair = (taint.get("key") or "", effect or "")
        if pair in seen:
            errs.append(
                FieldError(
                    "Duplicate", path, _go_taint(taint), "taints must be unique by key and effect pair"
                )
            )
        seen.add(pair)
    return errs


def _lease_errors(lease: dict[str, Any]) -> list[FieldError]:
    errs = validate_metadata(lease, namespaced=True)
    spec = lease.get("spec") or {}
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and duration <= 0:
        errs.append(
            FieldError("Invalid", "spec.leaseDurationSeconds", duration, "must be greater than 0")
        )
    transitions = spec.get("leaseTransitions")
    if transitions is not None and transitions < 0:
        errs.append(
            FieldError(
                "Invalid",
                "spec.leaseTransitions",
                transitions,
                "must be greater than or equal to 0",
            )
        )
    return errs


def _priority_class_errors(pc: dict[str, Any]) -> list[FieldError]:
    errs = validate_metadata(pc, namespaced=False)
    value = pc.get("value")
    if value is None:
        errs.append(FieldError("Required", "value"))
    elif isinstance(value, bool) or not isinstance(value, int) or value > 1_000_000_000:
        # Values above one billion are reserved for the system classes.
        errs.append(FieldError("Invalid", "value", value, "must be an integer no greater than 1000000000"))
    policy = pc.get("preemptionPolicy")
    if policy not in (None, "PreemptLowerPriority", "Never"):
        errs.append(FieldError("NotSupported", "preemptionPolicy", policy,
                               supported=["Never", "PreemptLowerPriority"]))
    return errs


def _check_times(rt: ResourceType, obj: dict[str, Any]) -> None:
    if rt.storage == "pods":
        pods.check_pod_times(obj)
    elif rt.storage == "nodes":
        check_times("Node", "v1", obj, condition_lists=("status.conditions",))
    elif rt.storage == "leases":
        check_times("Lease", "v1", obj, micro_times=("spec.acquireTime", "spec.renewTime"))


def _raise(rt: ResourceType, obj: dict[str, Any], errs: list[FieldError]) -> None:
    if errs:
        raise ApiError.invalid(rt.kind, (obj.get("metadata") or {}).get("name", ""), errs, rt.group)


def prepare_create(
    rt: ResourceType, obj: dict[str, Any], priority_classes: dict[str, dict[str, Any]], store: Any = None
) -> dict[str, Any]:
    """Validate and default a new object in its storage form (events already converted)."""
    _check_times(rt, obj)
    if rt.storage in storage.STORAGE_KINDS:
        return storage.prepare_create(rt, obj, store)
    if rt.storage in podgroups.STORAGE_KINDS:
        return podgroups.prepare_create(rt, obj, store)
    if rt.storage in dra.STORAGE_KINDS:
        return dra.prepare_create(rt, obj)
    if rt.storage == "pods":
        return pods.prepare_create(obj, priority_classes)
    if rt.storage == "events":
        events.validate(obj, rt.group)
        return obj
    if rt.storage == "nodes":
        add_not_ready_taint(obj)  # admission runs before validation
        _raise(rt, obj, _node_errors(obj))
    elif rt.storage == "namespaces":
        _raise(rt, obj, validate_metadata(obj, namespaced=False, name_check="label"))
        obj.setdefault("spec", {})["finalizers"] = ["kubernetes"]
        obj["status"] = {"phase": "Active"}
    elif rt.storage == "leases":
        _raise(rt, obj, _lease_errors(obj))
    elif rt.storage == "priorityclasses":
        _raise(rt, obj, _priority_class_errors(obj))
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
    elif rt.storage == "poddisruptionbudgets":
        _raise(rt, obj, validate_metadata(obj, namespaced=True))
        obj["status"] = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
    return obj


def validate_update(
    rt: ResourceType, new: dict[str, Any], old: dict[str, Any], subresource: str
) -> None:
    """Validate an update in storage form; ``subresource`` is "status" for status writes."""
    _check_times(rt, new)
    if rt.storage in storage.STORAGE_KINDS:
        storage.validate_update(rt, new, old, subresource)
    elif rt.storage in podgroups.STORAGE_KINDS:
        podgroups.validate_update(rt, new, old, subresource)
    elif rt.storage in dra.STORAGE_KINDS:
        dra.validate_update(rt, new, old, subresource)
    elif rt.storage == "pods":
        if subresource == "resize":
            pods.validate_resize(new, old)
        elif subresource != "status":
            pods.apply_spec_defaults(new.setdefault("spec", {}))
            pods.validate_update(new, old)
    elif rt.storage == "events":
        events.validate(new, rt.group, creating=False)
    elif rt.storage == "nodes":
        _raise(rt, new, _node_errors(new))
    elif rt.storage == "leases":
        _raise(rt, new, _lease_errors(new))
    elif rt.storage == "namespaces":
        _raise(rt, new, validate_metadata(new, namespaced=False, name_check="label"))
