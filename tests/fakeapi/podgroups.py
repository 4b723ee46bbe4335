"""Pod groups: kube-scheduler v1.36's `scheduling.k8s.io/v1alpha2` and Coscheduling's CRD.

What kube-apiserver v1.36.3 does to them, checked on the real binary with
`--feature-gates=GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true
--runtime-config=scheduling.k8s.io/v1alpha2=true` (docs/gangs.md; tests/gangs/test_podgroup_api.py
runs the same checks against this fake and the real server):

* v1alpha2 PodGroup: `spec.schedulingPolicy` is a union of `basic` and `gang` (exactly one),
  `gang.minCount` required and at least 1 (0 reads as unset), at most one topology constraint
  with a key; `spec` immutable; unknown fields dropped; `disruptionMode` defaults to `Pod`,
  `podGroupTemplateRef` is null when absent; no `metadata.generation`; the
  `scheduling.k8s.io/podgroup-protection` finalizer (so a deleted group stays, being deleted,
  until a controller lets it go); a template reference to a missing Workload is refused by
  admission (403). The fake serves it as with every gate on; Workloads are stored unchecked.
* Coscheduling PodGroup (the CRD in deploy/components/podgroup-crd): the CRD's structural
  schema: unknown fields pruned, integers and quantity strings checked with the apiextensions
  wording, `minMember` at least 1; no strategic merge patch (415), as for every custom resource.
"""

from __future__ import annotations

import re
from typing import Any

from .resources import ResourceType
from .status import ApiError, FieldError, GoLiteral
from .store import Store
from .validation import validate_metadata

V1ALPHA2_STORAGE = "podgroups"
WORKLOAD_STORAGE = "workloads"
COSCHEDULING_STORAGE = "coschedulingpodgroups"
STORAGE_KINDS = frozenset({V1ALPHA2_STORAGE, WORKLOAD_STORAGE, COSCHEDULING_STORAGE})
PROTECTION_FINALIZER = "scheduling.k8s.io/podgroup-protection"
_V1ALPHA2_SPEC = ("podGroupTemplateRef", "schedulingPolicy", "schedulingConstraints", "resourceClaims",
                  "disruptionMode", "priorityClassName", "priority")
_COSCHEDULING_SPEC = ("minMember", "minResources", "scheduleTimeoutSeconds")
_COSCHEDULING_STATUS = ("phase", "occupiedBy", "running", "succeeded", "failed", "scheduleStartTime")
QUANTITY_PATTERN = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
                    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _json_type(value: Any) -> str:
    """The JSON type name apiextensions' validation messages use."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), "null")


def _raise(rt: ResourceType, obj: dict[str, Any], errs: list[FieldError]) -> None:
    if errs:
        raise ApiError.invalid(rt.kind, (obj.get("metadata") or {}).get("name", ""), errs, rt.group)


def _policy_errors(spec: dict[str, Any]) -> list[FieldError]:
    policy = spec.get("schedulingPolicy")
    policy = policy if isinstance(policy, dict) else {}
    present = [k for k in ("basic", "gang") if policy.get(k) is not None]
    if not present:
        return [FieldError("Invalid", "spec.schedulingPolicy", "", "must specify one of: `basic`, `gang`")]
    if len(present) > 1:
        return [FieldError("Invalid", "spec.schedulingPolicy", "{basic, gang}",
                           "must specify exactly one of: `basic`, `gang`")]
    if present == ["gang"]:
        count = (policy["gang"] or {}).get("minCount")
        if not count:
            return [FieldError("Required", "spec.schedulingPolicy.gang.minCount")]
        if _is_int(count) and count < 1:
            return [FieldError("Invalid", "spec.schedulingPolicy.gang.minCount", count,
                               "must be greater than or equal to 1")]
    return []


def _constraint_errors(spec: dict[str, Any]) -> list[FieldError]:
    topology = (spec.get("schedulingConstraints") or {}).get("topology") or []
    if len(topology) > 1:
        return [FieldError("TooMany", "spec.schedulingConstraints.topology", len(topology),
                           "must have at most 1 item")]
    return [FieldError("Required", f"spec.schedulingConstraints.topology[{i}].key")
            for i, item in enumerate(topology) if not (item or {}).get("key")]


def _prepare_v1alpha2(rt: ResourceType, obj: dict[str, Any], store: Store) -> None:
    spec = {k: v for k, v in (obj.get("spec") or {}).items() if k in _V1ALPHA2_SPEC}
    spec.setdefault("podGroupTemplateRef", None)
    spec.setdefault("disruptionMode", "Pod")
    obj["spec"] = spec
    obj["status"] = {}
    meta = obj["metadata"]
    meta.pop("generation", None)
    finalizers = meta.setdefault("finalizers", [])
    if PROTECTION_FINALIZER not in finalizers:
        finalizers.append(PROTECTION_FINALIZER)
    _raise(rt, obj, validate_metadata(obj, namespaced=True) + _policy_errors(spec) + _constraint_errors(spec))
    workload = ((spec.get("podGroupTemplateRef") or {}).get("workload") or {}).get("workloadName")
    if workload and store.get(WORKLOAD_STORAGE, meta.get("namespace") or "", workload) is None:
        raise ApiError.forbidden(rt.plural, meta.get("name", ""), f'PodGroup rejected: Workload "{workload}" not found',
                                 rt.group)


def _schema_errors(spec: dict[str, Any]) -> list[FieldError]:
    """The CRD's openAPIV3Schema for spec, with apiextensions' wording."""
    errs: list[FieldError] = []
    for name in ("minMember", "scheduleTimeoutSeconds"):
        value = spec.get(name)
        path = f"spec.{name}"
        if value is None:
            continue
        if not _is_int(value):
            kind = _json_type(value)
            errs.append(FieldError("Invalid", path, GoLiteral(f'"{kind}"'),
                                   f'{path} in body must be of type integer: "{kind}"'))
        elif name == "minMember" and value < 1:
            errs.append(FieldError("Invalid", path, value, f"{path} in body should be greater than or equal to 1"))
    resources = spec.get("minResources")
    if resources is not None and not isinstance(resources, dict):
        kind = _json_type(resources)
        errs.append(FieldError("Invalid", "spec.minResources", GoLiteral(f'"{kind}"'),
                               f'spec.minResources in body must be of type object: "{kind}"'))
        resources = None
    for name, quantity in (resources or {}).items():
        path = f"spec.minResources.{name}"
        if isinstance(quantity, str) and not re.match(QUANTITY_PATTERN, quantity):
            errs.append(FieldError("Invalid", path, quantity, f"{path} in body should match '{QUANTITY_PATTERN}'"))
    return errs


def _prune_coscheduling(obj: dict[str, Any]) -> None:
    """Structural pruning: fields the schema does not name are dropped without an error."""
    if isinstance(obj.get("spec"), dict):
        obj["spec"] = {k: v for k, v in obj["spec"].items() if k in _COSCHEDULING_SPEC}
    if isinstance(obj.get("status"), dict):
        obj["status"] = {k: v for k, v in obj["status"].items() if k in _COSCHEDULING_STATUS}


def prepare_create(rt: ResourceType, obj: dict[str, Any], store: Store) -> dict[str, Any]:
    """Defaults, admission and validation of a new pod group or workload (store lock held)."""
    if rt.storage == V1ALPHA2_STORAGE:
        _prepare_v1alpha2(rt, obj, store)
    elif rt.storage == COSCHEDULING_STORAGE:
        obj.pop("status", None)
        _prune_coscheduling(obj)
        _raise(rt, obj, validate_metadata(obj, namespaced=True) + _schema_errors(obj.get("spec") or {}))
    else:
        _raise(rt, obj, validate_metadata(obj, namespaced=True))
    return obj


def validate_update(rt: ResourceType, new: dict[str, Any], old: dict[str, Any], subresource: str) -> None:
    if rt.storage == COSCHEDULING_STORAGE:
        _prune_coscheduling(new)
        _raise(rt, new, _schema_errors(new.get("spec") or {}))
    elif rt.storage == V1ALPHA2_STORAGE and subresource != "status":
        spec = {k: v for k, v in (new.get("spec") or {}).items() if k in _V1ALPHA2_SPEC}
        spec.setdefault("podGroupTemplateRef", None)
        spec.setdefault("disruptionMode", "Pod")
        new["spec"] = spec
        old_spec = old.get("spec") or {}
        errs = [FieldError("Invalid", f"spec.{name}", GoLiteral("null"), "field is immutable")
                for name in _V1ALPHA2_SPEC if spec.get(name) != old_spec.get(name)]
        _raise(rt, new, errs)
