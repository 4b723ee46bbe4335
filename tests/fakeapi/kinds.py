"""Per-kind create and update rules (the registry "strategies"), one entry point for the REST layer.

Pods and events have their own modules; nodes, namespaces and leases are small enough
to live here. Each function validates, defaults and reports errors the way the
matching pkg/registry strategy and pkg/apis/*/validation code do.
"""

from __future__ import annotations

from typing import Any

from . import events, pods, storage
from .resources import ResourceType
from .status import ApiError, FieldError
from .validation import check_times, validate_metadata

_TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]


def _node_errors(node: dict[str, Any]) -> list[FieldError]:
    errs = validate_metadata(node, namespaced=False)
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate((node.get("spec") or {}).get("taints") or []):
        path = f"spec.taints[{i}]"
        if not isinstance(taint, dict):
            errs.append(FieldError("Invalid", path, str(taint), "must be an object"))
            continue
        if not taint.get("key"):
            errs.append(FieldError("Required", f"{path}.key"))
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
                    "Duplicate",
                    path,
                    f"{pair[0]}:{pair[1]}",
                    "taints must be unique by key and effect pair",
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
    rt: ResourceType, obj: dict[str, Any], priority_classes: dict[str, int], store: Any = None
) -> dict[str, Any]:
    """Validate and default a new object in its storage form (events already converted)."""
    _check_times(rt, obj)
    if rt.storage in storage.STORAGE_KINDS:
        return storage.prepare_create(rt, obj, store)
    if rt.storage == "pods":
        return pods.prepare_create(obj, priority_classes)
    if rt.storage == "events":
        events.validate(obj, rt.group)
        return obj
    if rt.storage == "nodes":
        _raise(rt, obj, _node_errors(obj))
    elif rt.storage == "namespaces":
        _raise(rt, obj, validate_metadata(obj, namespaced=False, name_check="label"))
        obj.setdefault("spec", {})["finalizers"] = ["kubernetes"]
        obj["status"] = {"phase": "Active"}
    elif rt.storage == "leases":
        _raise(rt, obj, _lease_errors(obj))
    return obj


def validate_update(
    rt: ResourceType, new: dict[str, Any], old: dict[str, Any], subresource: str
) -> None:
    """Validate an update in storage form; ``subresource`` is "status" for status writes."""
    _check_times(rt, new)
    if rt.storage in storage.STORAGE_KINDS:
        storage.validate_update(rt, new, old, subresource)
    elif rt.storage == "pods":
        if subresource != "status":
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
