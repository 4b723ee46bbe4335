"""Dynamic Resource Allocation: `resource.k8s.io/v1` as kube-apiserver v1.36.3 serves it.

DeviceClass, ResourceSlice, ResourceClaim (with its `status` subresource) and
ResourceClaimTemplate. What the registry does to them (K = the Kubernetes v1.36.3 module):

* Decoding: unknown fields are dropped, and the object comes back in the shape Go's JSON
  encoder gives the v1 structs (k8s.io/api/resource/v1/types.go): a field without
  `omitempty` is always written (`spec.devices.requests: null`, `spec.pool.generation: 0`),
  a struct is never omitted (`status: {}`), map keys are sorted, quantities are canonical
  (`1024Mi` reads back `1Gi`). Fields of features that are
  off by default in 1.36 (DRAListTypeAttributes, DRANodeAllocatableResources) are dropped,
  as the strategies' dropDisabledFields do (K/pkg/registry/resource/*/strategy.go).
* Defaults (K/pkg/apis/resource/v1/defaults.go, zz_generated.defaults.go): a request's
  `allocationMode` ExactCount and then `count` 1, a toleration's `operator` Equal, a device
  taint's `timeAdded` now.
* Strategies: DeviceClass and ResourceSlice have `metadata.generation` (1, bumped on a spec
  change), claims and templates have none; a new claim's status is emptied; a claim update
  keeps the old status, a status update keeps the old spec and the old labels, annotations,
  finalizers and owner references (metav1.ResetObjectMetaForStatus).
* Validation (K/pkg/apis/resource/validation/validation.go), what matters to a scheduler:
  request names, `exactly` xor `firstAvailable`, allocation modes and counts, the spec of a
  claim or template immutable, `status.allocation` set once, `status.reservedFor` (at most
  256, unique by uid, only with an allocation, no new entries once deleting), a slice's
  pool, node selection and devices. CEL expressions are not compiled. An error's value is
  printed as json.Marshal prints the internal Go type (`{"Devices":{"Requests":[...`), as
  field.Invalid does with a struct.

Checked on the real binary: tests/fakeapi_tests/test_dra_kinds.py runs against both.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from decimal import ROUND_CEILING
from typing import Any

from .clock import now_rfc3339
from .quantities import parse_quantity
from .resources import ResourceType
from .status import ApiError, FieldError, GoLiteral
from .validation import (
    LABEL_MSG,
    SUBDOMAIN_MSG,
    is_dns_subdomain,
    qualified_name_errors,
    validate_metadata,
)

DEVICE_CLASSES = "deviceclasses"
RESOURCE_SLICES = "resourceslices"
RESOURCE_CLAIMS = "resourceclaims"
RESOURCE_CLAIM_TEMPLATES = "resourceclaimtemplates"
STORAGE_KINDS = frozenset({DEVICE_CLASSES, RESOURCE_SLICES, RESOURCE_CLAIMS, RESOURCE_CLAIM_TEMPLATES})

# K/pkg/apis/resource/types.go
RESERVED_FOR_MAX = 256  # ResourceClaimReservedForMaxSize
REQUESTS_MAX = 32  # DeviceRequestsMaxSize (= AllocationResultsMaxSize)
FIRST_AVAILABLE_MAX = 8  # FirstAvailableDeviceRequestMaxSize
SELECTORS_MAX = 32  # DeviceSelectorsMaxSize
CONSTRAINTS_MAX = 32  # DeviceConstraintsMaxSize
CONFIG_MAX = 32  # DeviceConfigMaxSize
SLICE_DEVICES_MAX = 128  # ResourceSliceMaxDevices
SLICE_DEVICES_MAX_ADVANCED = 64  # ResourceSliceMaxDevicesWithAdvancedFeatures (taints, counters)
ALLOCATION_MODES = ["All", "ExactCount"]
_REQUEST_REF_MSG = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"
_ONE_OF_NODES = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"

# ---------------------------------------------------------------------------------------------
# The v1 types as Go encodes them. A struct is a dict of field -> (type, omitempty); a type is
# a scalar code ("s" string, "i" int64, "b" bool, "q" quantity, "t" time, "raw" any JSON, a
# leading "*" for a pointer), a struct dict, ("*", struct), ("[]", type) or ("map", type).
# ---------------------------------------------------------------------------------------------

Schema = dict[str, tuple[Any, bool]]

_NODE_SELECTOR_REQUIREMENT: Schema = {"key": ("s", False), "operator": ("s", False), "values": (("[]", "s"), True)}
_NODE_SELECTOR_TERM: Schema = {"matchExpressions": (("[]", _NODE_SELECTOR_REQUIREMENT), True),
                               "matchFields": (("[]", _NODE_SELECTOR_REQUIREMENT), True)}
_NODE_SELECTOR: Schema = {"nodeSelectorTerms": (("[]", _NODE_SELECTOR_TERM), False)}
_TOLERATION: Schema = {"key": ("s", True), "operator": ("s", True), "value": ("s", True), "effect": ("s", True),
                       "tolerationSeconds": ("*i", True)}
_SELECTOR: Schema = {"cel": (("*", {"expression": ("s", False)}), True)}
_CAPACITY_REQUIREMENTS: Schema = {"requests": (("map", "q"), True)}
_OPAQUE: Schema = {"driver": ("s", False), "parameters": ("raw", False)}
_SUB_REQUEST: Schema = {
    "name": ("s", False), "deviceClassName": ("s", False), "selectors": (("[]", _SELECTOR), True),
    "allocationMode": ("s", True), "count": ("i", True), "tolerations": (("[]", _TOLERATION), True),
    "capacity": (("*", _CAPACITY_REQUIREMENTS), True),
}
_EXACT_REQUEST: Schema = {
    "deviceClassName": ("s", False), "selectors": (("[]", _SELECTOR), True), "allocationMode": ("s", True),
    "count": ("i", True), "adminAccess": ("*b", True), "tolerations": (("[]", _TOLERATION), True),
    "capacity": (("*", _CAPACITY_REQUIREMENTS), True),
}
_REQUEST: Schema = {"name": ("s", False), "exactly": (("*", _EXACT_REQUEST), True),
                    "firstAvailable": (("[]", _SUB_REQUEST), True)}
_CONSTRAINT: Schema = {"requests": (("[]", "s"), True), "matchAttribute": ("*s", True),
                       "distinctAttribute": ("*s", True)}
_CLAIM_CONFIG: Schema = {"requests": (("[]", "s"), True), "opaque": (("*", _OPAQUE), True)}
_CLAIM_SPEC: Schema = {"devices": ({
    "requests": (("[]", _REQUEST), False),
    "constraints": (("[]", _CONSTRAINT), True),
    "config": (("[]", _CLAIM_CONFIG), True),
}, False)}
_ALLOCATION_RESULT: Schema = {
    "devices": ({
        "results": (("[]", {
            "request": ("s", False), "driver": ("s", False), "pool": ("s", False), "device": ("s", False),
            "adminAccess": ("*b", True), "tolerations": (("[]", _TOLERATION), True),
            "bindingConditions": (("[]", "s"), True), "bindingFailureConditions": (("[]", "s"), True),
            "shareID": ("*s", True), "consumedCapacity": (("map", "q"), True),
        }), True),
        "config": (("[]", {"source": ("s", False), "requests": (("[]", "s"), True),
                           "opaque": (("*", _OPAQUE), True)}), True),
    }, True),
    "nodeSelector": (("*", _NODE_SELECTOR), True),
    "allocationTimestamp": ("*t", True),
}
_CLAIM_STATUS: Schema = {
    "allocation": (("*", _ALLOCATION_RESULT), True),
    "reservedFor": (("[]", {"apiGroup": ("s", True), "resource": ("s", False), "name": ("s", False),
                            "uid": ("s", False)}), True),
    "devices": (("[]", {
        "driver": ("s", False), "pool": ("s", False), "device": ("s", False), "shareID": ("*s", True),
        "conditions": (("[]", "raw"), False), "data": ("*raw", True),
        "networkData": (("*", {"interfaceName": ("s", True), "ips": (("[]", "s"), True),
                               "hardwareAddress": ("s", True)}), True),
    }), True),
}
_CLASS_SPEC: Schema = {
    "selectors": (("[]", _SELECTOR), True),
    "config": (("[]", {"opaque": (("*", _OPAQUE), True)}), True),
    "extendedResourceName": ("*s", True),
}
_COUNTERS = ("map", {"value": ("q", False)})
_ATTRIBUTE: Schema = {"int": ("*i", True), "bool": ("*b", True), "string": ("*s", True), "version": ("*s", True)}
_DEVICE: Schema = {
    "name": ("s", False),
    # DRAListTypeAttributes is off in 1.36: the list values (bools, ints, strings, versions) go.
    "attributes": (("map", _ATTRIBUTE), True),
    "capacity": (("map", {"value": ("q", False), "requestPolicy": (("*", {
        "default": ("*q", False), "validValues": (("[]", "q"), True),
        "validRange": (("*", {"min": ("*q", True), "max": ("*q", True), "step": ("*q", True)}), True),
    }), True)}), True),
    "consumesCounters": (("[]", {"counterSet": ("s", False), "counters": (_COUNTERS, True)}), True),
    "nodeName": ("*s", True), "nodeSelector": (("*", _NODE_SELECTOR), True), "allNodes": ("*b", True),
    "taints": (("[]", {"key": ("s", False), "value": ("s", True), "effect": ("s", False),
                       "timeAdded": ("*t", True)}), True),
    "bindsToNode": ("*b", True),
    "bindingConditions": (("[]", "s"), True), "bindingFailureConditions": (("[]", "s"), True),
    "allowMultipleAllocations": ("*b", True),
    # DRANodeAllocatableResources is off in 1.36: nodeAllocatableResourceMappings goes.
}
_SLICE_SPEC: Schema = {
    "driver": ("s", False),
    "pool": ({"name": ("s", False), "generation": ("i", False), "resourceSliceCount": ("i", False)}, False),
    "nodeName": ("*s", True), "nodeSelector": (("*", _NODE_SELECTOR), True), "allNodes": ("*b", True),
    "devices": (("[]", _DEVICE), True),
    "perDeviceNodeSelection": ("*b", True),
    "sharedCounters": (("[]", {"name": ("s", False), "counters": (_COUNTERS, True)}), True),
}
_TEMPLATE_SPEC: Schema = {"metadata": ("raw", True), "spec": (_CLAIM_SPEC, False)}

_ZERO = {"s": "", "i": 0, "b": False, "q": "0"}


def _encode(value: Any, typ: Any) -> Any:
    """`value` as the Go type `typ` would re-encode it (nil pointers and slices as None)."""
    if isinstance(typ, dict):
        return _encode_struct(value if isinstance(value, dict) else {}, typ)
    if isinstance(typ, tuple):
        shape, inner = typ
        if value is None:
            return None
        if shape == "*":
            return _encode_struct(value if isinstance(value, dict) else {}, inner)
        if shape == "[]":
            return [_encode(v, inner) for v in value] if isinstance(value, list) else value
        return {k: _encode(value[k], inner) for k in sorted(value)} if isinstance(value, dict) else value
    if value is None and not typ.startswith("*") and typ != "raw":
        return _ZERO.get(typ, "")
    return canonical_quantity(value) if typ in ("q", "*q") else value


def _omitted(value: Any, typ: Any) -> bool:
    """Go's `omitempty`: zero scalars, nil pointers, empty slices and maps; never a struct."""
    if isinstance(typ, dict):
        return False
    if value is None:
        return True
    if isinstance(typ, tuple):
        return typ[0] != "*" and not value
    return not typ.startswith("*") and typ != "raw" and value in ("", 0)  # False == 0


def _encode_struct(obj: dict[str, Any], schema: Schema) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, (typ, omitempty) in schema.items():
        value = _encode(obj.get(name), typ)
        if not (omitempty and _omitted(value, typ)):
            out[name] = value
    return out


_BINARY = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def canonical_quantity(text: Any) -> Any:
    """resource.Quantity's String() after decoding (apimachinery/pkg/api/resource/quantity.go):
    `1024Mi` reads back `1Gi`, `1000m` reads back `1`. Values are rounded up to the nano unit.
    What does not parse is returned unchanged (the real server refuses it while decoding)."""
    if not isinstance(text, str):
        return text
    try:
        value = parse_quantity(text)
    except ValueError:
        return text
    value = (value * 10**9).to_integral_value(rounding=ROUND_CEILING) / 10**9
    stripped = text.strip()
    binary = stripped.endswith("i")
    exponent_form = "e" in stripped.lower() and not binary
    if binary and -1024 < value < 1024 or binary and value != value.to_integral_value():
        binary = False
    sign, magnitude = ("-" if value < 0 else ""), abs(value)
    if binary:
        number, power = int(magnitude), 0
        while number and number % 1024 == 0 and power < 6:
            number, power = number // 1024, power + 1
        return f"{sign}{number}{_BINARY[power]}"
    number, power = magnitude * 10**9, -9  # an integer count of nano units
    number = number.to_integral_value()
    while number and number % 1000 == 0 and power < 18:
        number, power = number // 1000, power + 3
    if number == 0:
        return "0"
    if exponent_form:
        return f"{sign}{int(number)}" + (f"e{power}" if power else "")
    return f"{sign}{int(number)}{_DECIMAL[power]}"


_GO_NAMES = {"uid": "UID", "apiGroup": "APIGroup", "shareID": "ShareID", "cel": "CEL", "int": "IntValue",
             "bool": "BoolValue", "string": "StringValue", "version": "VersionValue", "ints": "IntValues",
             "bools": "BoolValues", "strings": "StringValues", "versions": "VersionValues"}


def _go_json(value: Any, typ: Any) -> str:
    """How field.Invalid prints a struct: json.Marshal of the internal Go type, whose fields have
    no JSON tags (capitalized names, every field, nil as null, map keys sorted, HTML escaped)."""
    if isinstance(typ, tuple) and typ[0] == "*":
        return "null" if value is None else _go_json(value, typ[1])
    if isinstance(typ, dict):
        value = _dict(value)
        parts = [f'"{_GO_NAMES.get(n, n[:1].upper() + n[1:])}":{_go_json(value.get(n), t)}' for n, (t, _) in typ.items()]
        return "{" + ",".join(parts) + "}"
    if isinstance(typ, tuple):
        if value is None:
            return "null"
        if typ[0] == "[]":
            return "[" + ",".join(_go_json(v, typ[1]) for v in value) + "]"
        return "{" + ",".join(f"{_go_string(k)}:{_go_json(value[k], typ[1])}" for k in sorted(value)) + "}"
    if value is None:
        return "null" if typ.startswith("*") or typ == "raw" else json.dumps(_ZERO.get(typ, ""))
    if isinstance(value, str):
        return _go_string(value)
    return json.dumps(value, separators=(",", ":"))


def _go_string(text: str) -> str:
    return json.dumps(text).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _normalize(obj: dict[str, Any], spec: Schema | None, status: Schema | None = None) -> None:
    """Drop unknown top-level fields and re-encode spec (and status) in place."""
    for key in [k for k in obj if k not in ("apiVersion", "kind", "metadata", "spec", "status")]:
        del obj[key]
    if spec is not None:
        obj["spec"] = _encode_struct(obj.get("spec") if isinstance(obj.get("spec"), dict) else {}, spec)
    if status is not None:
        obj["status"] = _encode_struct(obj.get("status") if isinstance(obj.get("status"), dict) else {}, status)
    else:
        obj.pop("status", None)


# ---------------------------------------------------------------------------------------------
# Defaults
# ---------------------------------------------------------------------------------------------


def _default_request(request: dict[str, Any]) -> None:
    """SetDefaults_ExactDeviceRequest / SetDefaults_DeviceSubRequest, and the tolerations'."""
    if not request.get("allocationMode"):
        request["allocationMode"] = "ExactCount"
    if request["allocationMode"] == "ExactCount" and not request.get("count"):
        request["count"] = 1
    for toleration in request.get("tolerations") or []:
        if isinstance(toleration, dict) and not toleration.get("operator"):
            toleration["operator"] = "Equal"


def _default_claim_spec(spec: dict[str, Any]) -> None:
    for request in ((spec.get("devices") or {}).get("requests") or []):
        if not isinstance(request, dict):
            continue
        if isinstance(request.get("exactly"), dict):
            _default_request(request["exactly"])
        for sub in request.get("firstAvailable") or []:
            if isinstance(sub, dict):
                _default_request(sub)


def _default_slice_spec(spec: dict[str, Any]) -> None:
    for device in spec.get("devices") or []:
        for taint in (device or {}).get("taints") or []:
            if isinstance(taint, dict) and not taint.get("timeAdded"):
                taint["timeAdded"] = now_rfc3339()


# ---------------------------------------------------------------------------------------------
# Validation helpers (the wording of field.Error and of validation.go's helpers)
# ---------------------------------------------------------------------------------------------

Errors = list[FieldError]


def _too_many(path: str, items: list[Any], limit: int) -> FieldError:
    return FieldError("TooMany", path, len(items), f"must have at most {limit} items")


def _label_errors(name: str, path: str) -> Errors:
    """ValidateDNS1123Label: one error per message of IsDNS1123Label."""
    errs = []
    if len(name) > 63:
        errs.append(FieldError("Invalid", path, name, "must be no more than 63 characters"))
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name):
        errs.append(FieldError("Invalid", path, name, LABEL_MSG))
    return errs


def _subdomain_errors(name: str, path: str, value: str | None = None) -> Errors:
    errs = []
    if len(name) > 253:
        errs.append(FieldError("Invalid", path, value if value is not None else name,
                               "must be no more than 253 characters"))
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", name):
        errs.append(FieldError("Invalid", path, value if value is not None else name, SUBDOMAIN_MSG))
    return errs


def _driver_errors(driver: Any, path: str) -> Errors:
    """ValidateCSIDriverName: required, at most 63 characters, a DNS subdomain in lower case."""
    if not driver:
        return [FieldError("Required", path)]
    errs = []
    if len(driver) > 63:
        errs.append(FieldError("Invalid", path, driver, "must be no more than 63 characters"))
    return errs + _subdomain_errors(driver.lower(), path, driver)


def _pool_name_errors(name: Any, path: str) -> Errors:
    if not name:
        return [FieldError("Required", path)]
    return [e for part in name.split("/") for e in _subdomain_errors(part, path)]


def _duplicates(items: list[Any], key: Callable[[Any], Any], path: str) -> Errors:
    seen: set[Any] = set()
    errs = []
    for i, item in enumerate(items):
        k = key(item)
        if k in seen:
            errs.append(FieldError("Duplicate", f"{path}[{i}]", k))
        seen.add(k)
    return errs


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# ---------------------------------------------------------------------------------------------
# Claims and templates
# ---------------------------------------------------------------------------------------------


def _request_names(spec: dict[str, Any]) -> dict[str, set[str]]:
    """gatherRequestNames: each request's name, with its subrequests' names."""
    names: dict[str, set[str]] = {}
    for request in _list(_dict(spec.get("devices")).get("requests")):
        request = _dict(request)
        names[request.get("name") or ""] = {_dict(s).get("name") or "" for s in _list(request.get("firstAvailable"))}
    return names


def _request_ref_errors(ref: Any, path: str, names: dict[str, set[str]]) -> Errors:
    """validateRequestNameRef: `request` or `request/subrequest`, naming one in the claim."""
    ref = ref if isinstance(ref, str) else ""
    parts = ref.split("/")
    if len(parts) > 2:
        return [FieldError("Invalid", path, ref, _REQUEST_REF_MSG)]
    errs = [e for part in parts for e in _label_errors(part, path)]
    known = parts[0] in names and (len(parts) == 1 or parts[1] in names[parts[0]])
    if not known:
        errs.append(FieldError("Invalid", path, ref, _REQUEST_REF_MSG))
    return errs


def _allocation_mode_errors(request: dict[str, Any], path: str) -> Errors:
    mode, count = request.get("allocationMode"), request.get("count") or 0
    if mode == "All":
        if count != 0:
            return [FieldError("Invalid", f"{path}.count", count, "must not be specified when allocationMode is 'All'")]
    elif mode == "ExactCount":
        if not _is_int(count) or count <= 0:
            return [FieldError("Invalid", f"{path}.count", count, "must be greater than zero")]
    else:
        return [FieldError("NotSupported", f"{path}.allocationMode", mode or "", supported=ALLOCATION_MODES)]
    return []


def _selector_errors(selectors: Any, path: str) -> Errors:
    selectors = _list(selectors)
    if len(selectors) > SELECTORS_MAX:
        return [_too_many(path, selectors, SELECTORS_MAX)]
    return [FieldError("Required", f"{path}[{i}].cel") for i, s in enumerate(selectors) if not _dict(s).get("cel")]


def _class_name_errors(name: Any, path: str) -> Errors:
    if not name:
        return [FieldError("Required", path)]
    return _subdomain_errors(name, path)


def _exact_request_errors(request: dict[str, Any], path: str) -> Errors:
    return (_class_name_errors(request.get("deviceClassName"), f"{path}.deviceClassName")
            + _selector_errors(request.get("selectors"), f"{path}.selectors")
            + _allocation_mode_errors(request, path))


def _request_errors(request: dict[str, Any], path: str) -> Errors:
    """validateDeviceRequest: a DNS-label name, then exactly one of `exactly` and `firstAvailable`."""
    errs = _label_errors(request.get("name") or "", f"{path}.name")
    exactly, first = request.get("exactly"), _list(request.get("firstAvailable"))
    if exactly is None and not first:
        errs.append(FieldError("Required", path, detail="exactly one of `exactly` or `firstAvailable` is required"))
    elif exactly is not None and first:
        errs.append(FieldError("Invalid", path, None,
                               "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"))
    elif first:
        sub_path = f"{path}.firstAvailable"
        if len(first) > FIRST_AVAILABLE_MAX:
            return errs + [_too_many(sub_path, first, FIRST_AVAILABLE_MAX)]
        for i, sub in enumerate(first):
            sub = _dict(sub)
            errs += _label_errors(sub.get("name") or "", f"{sub_path}[{i}].name")
            errs += _exact_request_errors(sub, f"{sub_path}[{i}]")
        errs += _duplicates(first, lambda s: _dict(s).get("name") or "", sub_path)
    else:
        errs += _exact_request_errors(_dict(exactly), f"{path}.exactly")
    return errs


def _claim_spec_errors(spec: dict[str, Any], path: str) -> Errors:
    """validateDeviceClaim: requests (at most 32, unique names), constraints and config."""
    devices = _dict(spec.get("devices"))
    requests = _list(devices.get("requests"))
    req_path = f"{path}.devices.requests"
    errs: Errors
    if len(requests) > REQUESTS_MAX:
        errs = [_too_many(req_path, requests, REQUESTS_MAX)]
    else:
        errs = [e for i, r in enumerate(requests) for e in _request_errors(_dict(r), f"{req_path}[{i}]")]
        errs += _duplicates(requests, lambda r: _dict(r).get("name") or "", req_path)
    names = _request_names(spec)
    for section, limit in (("constraints", CONSTRAINTS_MAX), ("config", CONFIG_MAX)):
        items = _list(devices.get(section))
        sec_path = f"{path}.devices.{section}"
        if len(items) > limit:
            errs.append(_too_many(sec_path, items, limit))
            continue
        for i, item in enumerate(items):
            item = _dict(item)
            refs = _list(item.get("requests"))
            errs += [e for j, ref in enumerate(refs) for e in _request_ref_errors(ref, f"{sec_path}[{i}].requests[{j}]",
                                                                                   names)]
            errs += _duplicates(refs, lambda r: r, f"{sec_path}[{i}].requests")
            if section == "constraints" and item.get("matchAttribute") is None and item.get("distinctAttribute") is None:
                # DRAConsumableCapacity (beta, on in 1.36) words it this way (sic).
                errs.append(FieldError("Required", f"{sec_path}[{i}]", detail='exactly one of "matchAttribute" or '
                                       '"distinctAttribute" is required, but multiple fields are set'))
            if section == "config" and item.get("opaque") is None:
                errs.append(FieldError("Required", f"{sec_path}[{i}].opaque"))
    return errs


def _immutable(path: str, new: Any, old: Any, typ: Any) -> Errors:
    """ValidateImmutableField: the new value printed as the internal Go type."""
    return [] if new == old else [FieldError("Invalid", path, GoLiteral(_go_json(new, typ)), "field is immutable")]


def _claim_status_errors(new: dict[str, Any], old: dict[str, Any]) -> Errors:
    """validateResourceClaimStatusUpdate."""
    status, old_status = _dict(new.get("status")), _dict(old.get("status"))
    reserved = _list(status.get("reservedFor"))
    errs: Errors = []
    if len(reserved) > RESERVED_FOR_MAX:
        errs.append(_too_many("status.reservedFor", reserved, RESERVED_FOR_MAX))
    else:
        for i, ref in enumerate(reserved):
            ref = _dict(ref)
            errs += [FieldError("Required", f"status.reservedFor[{i}].{k}") for k in ("resource", "name", "uid")
                     if not ref.get(k)]
        errs += _duplicates(reserved, lambda r: _dict(r).get("uid") or "", "status.reservedFor")
    allocation, old_allocation = status.get("allocation"), old_status.get("allocation")
    if reserved:
        if allocation is None:
            errs.append(FieldError("Forbidden", "status.reservedFor",
                                   detail="may not be specified when `allocated` is not set"))
        elif (new.get("metadata") or {}).get("deletionTimestamp"):
            before = {_dict(r).get("uid") for r in _list(old_status.get("reservedFor"))}
            if any(_dict(r).get("uid") not in before for r in reserved):
                errs.append(FieldError("Forbidden", "status.reservedFor", detail="new entries may not be added while "
                                       "`deallocationRequested` or `deletionTimestamp` are set"))
    if allocation is not None and old_allocation is not None:
        errs += _immutable("status.allocation", allocation, old_allocation, ("*", _ALLOCATION_RESULT))
    elif allocation is not None:
        errs += _allocation_errors(_dict(allocation), _request_names(_dict(new.get("spec"))))
    return errs


def _allocation_errors(allocation: dict[str, Any], names: dict[str, set[str]]) -> Errors:
    """validateAllocationResult for a new allocation: each result names a request, a driver, a
    pool and a device."""
    results = _list(_dict(allocation.get("devices")).get("results"))
    path = "status.allocation.devices.results"
    if len(results) > REQUESTS_MAX:
        return [_too_many(path, results, REQUESTS_MAX)]
    errs: Errors = []
    for i, result in enumerate(results):
        result = _dict(result)
        errs += _request_ref_errors(result.get("request"), f"{path}[{i}].request", names)
        errs += _driver_errors(result.get("driver"), f"{path}[{i}].driver")
        errs += _pool_name_errors(result.get("pool"), f"{path}[{i}].pool")
        errs += _label_errors(result.get("device") or "", f"{path}[{i}].device")
    return errs


def _reset_metadata_for_status(new: dict[str, Any], old: dict[str, Any]) -> None:
    """metav1.ResetObjectMetaForStatus: a status write changes no labels, annotations,
    finalizers or owner references."""
    meta, old_meta = new["metadata"], old["metadata"]
    for key in ("labels", "annotations", "finalizers", "ownerReferences"):
        if key in old_meta:
            meta[key] = old_meta[key]
        else:
            meta.pop(key, None)


# ---------------------------------------------------------------------------------------------
# Device classes and slices
# ---------------------------------------------------------------------------------------------


def _class_errors(spec: dict[str, Any]) -> Errors:
    errs = _selector_errors(spec.get("selectors"), "spec.selectors")
    config = _list(spec.get("config"))
    if len(config) > CONFIG_MAX:
        errs.append(_too_many("spec.config", config, CONFIG_MAX))
    else:
        errs += [FieldError("Required", f"spec.config[{i}].opaque") for i, c in enumerate(config)
                 if _dict(c).get("opaque") is None]
    name = spec.get("extendedResourceName")
    if name is not None and not _is_extended_resource_name(name):
        errs.append(FieldError("Invalid", "spec.extendedResourceName", name, "must be a valid extended resource name"))
    return errs


def _is_extended_resource_name(name: str) -> bool:
    """v1helper.IsExtendedResourceName: a prefixed name outside kubernetes.io, not `requests.*`,
    that stays a qualified name with `requests.` in front."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return not qualified_name_errors("requests." + name, "")


def _node_selection_errors(spec: dict[str, Any]) -> Errors:
    errs: Errors = []
    chosen = []
    node_name = spec.get("nodeName")
    if node_name is not None:
        if node_name:
            chosen.append("`nodeName`")
            if not is_dns_subdomain(node_name):
                errs.append(FieldError("Invalid", "spec.nodeName", node_name, SUBDOMAIN_MSG))
        else:
            errs.append(FieldError("Invalid", "spec.nodeName", "", "must be either unset or set to a non-empty string"))
    selector = spec.get("nodeSelector")
    if selector is not None:
        chosen.append("`nodeSelector`")
        terms = _dict(selector).get("nodeSelectorTerms")
        path = "spec.nodeSelector.nodeSelectorTerms"
        if not terms:  # corevalidation.ValidateNodeSelector
            errs.append(FieldError("Required", path, detail="must have at least one node selector term"))
        if len(_list(terms)) != 1:
            errs.append(FieldError("Invalid", path, GoLiteral(_go_json(terms, ("[]", _NODE_SELECTOR_TERM))),
                                   "must have exactly one node selector term"))
    for flag in ("allNodes", "perDeviceNodeSelection"):
        value = spec.get(flag)
        if value is not None:
            if value is True:
                chosen.append(f"`{flag}`")
            else:
                errs.append(FieldError("Invalid", f"spec.{flag}", value, "must be either unset or set to true"))
    if not chosen:
        errs.append(FieldError("Required", "spec", detail=_ONE_OF_NODES))
    elif len(chosen) > 1:
        errs.append(FieldError("Invalid", "spec", "{" + ", ".join(chosen) + "}",
                               f"{_ONE_OF_NODES}, but multiple fields are set"))
    return errs


def _attribute_errors(device: dict[str, Any], path: str) -> Errors:
    errs: Errors = []
    for key in sorted(_dict(device.get("attributes"))):
        attribute = _dict(device["attributes"][key])
        if not any(attribute.get(k) is not None for k in ("int", "bool", "string", "version")):
            errs.append(FieldError("Invalid", f"{path}.attributes[{key}]", "", "exactly one value must be specified"))
        elif sum(attribute.get(k) is not None for k in ("int", "bool", "string", "version")) > 1:
            internal = {**_ATTRIBUTE, **{k: (("[]", "raw"), True) for k in ("ints", "bools", "strings", "versions")}}
            errs.append(FieldError("Invalid", f"{path}.attributes[{key}]", GoLiteral(_go_json(attribute, internal)),
                                   "exactly one value must be specified"))
    return errs


def _slice_errors(spec: dict[str, Any], old_spec: dict[str, Any] | None) -> Errors:
    """validateResourceSliceSpec."""
    pool = _dict(spec.get("pool"))
    errs = _driver_errors(spec.get("driver"), "spec.driver") + _pool_name_errors(pool.get("name"), "spec.pool.name")
    count, generation = pool.get("resourceSliceCount") or 0, pool.get("generation") or 0
    if not _is_int(count) or count <= 0:
        errs.append(FieldError("Invalid", "spec.pool.resourceSliceCount", count, "must be greater than zero"))
    if _is_int(generation) and generation < 0:
        errs.append(FieldError("Invalid", "spec.pool.generation", generation, "must be greater than or equal to zero"))
    if old_spec is not None:
        old_pool = _dict(old_spec.get("pool"))
        for path, new_value, old_value in (("spec.pool.name", pool.get("name"), old_pool.get("name")),
                                           ("spec.driver", spec.get("driver"), old_spec.get("driver")),
                                           ("spec.nodeName", spec.get("nodeName"), old_spec.get("nodeName"))):
            if new_value != old_value:
                errs.append(FieldError("Invalid", path, new_value, "field is immutable"))
    errs += _node_selection_errors(spec)
    devices = _list(spec.get("devices"))
    if spec.get("sharedCounters") is not None and spec.get("devices") is not None:
        errs.append(FieldError("Invalid", "spec", "", "only one of `sharedCounters` or `devices` is allowed"))
    advanced = any(_dict(d).get("taints") or _dict(d).get("consumesCounters") for d in devices)
    limit = SLICE_DEVICES_MAX_ADVANCED if advanced else SLICE_DEVICES_MAX
    if len(devices) > limit:
        return errs + [_too_many("spec.devices", devices, limit)]
    for i, device in enumerate(devices):
        device = _dict(device)
        errs += _label_errors(device.get("name") or "", f"spec.devices[{i}].name")
        errs += _attribute_errors(device, f"spec.devices[{i}]")
        if spec.get("perDeviceNodeSelection") is not True and any(
                device.get(k) is not None for k in ("nodeName", "nodeSelector", "allNodes")):
            errs.append(FieldError("Invalid", f"spec.devices[{i}]", None, "`nodeName`, `nodeSelector` and `allNodes` "
                                   "can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec"))
    return errs + _duplicates(devices, lambda d: _dict(d).get("name") or "", "spec.devices")


# ---------------------------------------------------------------------------------------------
# Entry points for kinds.py
# ---------------------------------------------------------------------------------------------


def _raise(rt: ResourceType, obj: dict[str, Any], errs: Errors) -> None:
    if errs:
        raise ApiError.invalid(rt.kind, (obj.get("metadata") or {}).get("name", ""), errs, rt.group)


def _decode(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Prune, apply the v1 defaults and re-encode, as decoding into the v1 struct does."""
    spec = _dict(obj.get("spec"))
    if rt.storage == RESOURCE_CLAIMS:
        _default_claim_spec(spec)
        _normalize(obj, _CLAIM_SPEC, _CLAIM_STATUS)
    elif rt.storage == RESOURCE_CLAIM_TEMPLATES:
        _default_claim_spec(_dict(spec.get("spec")))
        _normalize(obj, _TEMPLATE_SPEC)
    elif rt.storage == RESOURCE_SLICES:
        _default_slice_spec(spec)
        _normalize(obj, _SLICE_SPEC)
    else:
        _normalize(obj, _CLASS_SPEC)


def _create_errors(rt: ResourceType, obj: dict[str, Any]) -> Errors:
    spec = obj["spec"]
    if rt.storage == RESOURCE_CLAIMS:
        return validate_metadata(obj, namespaced=True) + _claim_spec_errors(spec, "spec")
    if rt.storage == RESOURCE_CLAIM_TEMPLATES:
        return validate_metadata(obj, namespaced=True) + _claim_spec_errors(spec["spec"], "spec.spec")
    if rt.storage == RESOURCE_SLICES:
        return validate_metadata(obj, namespaced=False) + _slice_errors(spec, None)
    return validate_metadata(obj, namespaced=False) + _class_errors(spec)


def prepare_create(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """Decode, default, run PrepareForCreate and validate a new object (store lock held)."""
    _decode(rt, obj)
    if rt.storage in (RESOURCE_CLAIMS, RESOURCE_CLAIM_TEMPLATES):
        obj["metadata"].pop("generation", None)  # their strategies keep no generation
    if rt.storage == RESOURCE_CLAIMS:
        obj["status"] = {}
    _raise(rt, obj, _create_errors(rt, obj))
    return obj


def validate_update(rt: ResourceType, new: dict[str, Any], old: dict[str, Any], subresource: str) -> None:
    """Decode and validate an update; api.py has already kept the old status (or, for a status
    write, the old spec)."""
    _decode(rt, new)
    if rt.storage == RESOURCE_CLAIMS and subresource == "status":
        _reset_metadata_for_status(new, old)
        _raise(rt, new, _claim_status_errors(new, old))
    elif rt.storage == RESOURCE_CLAIMS:
        _raise(rt, new, validate_metadata(new, namespaced=True) + _immutable("spec", new["spec"], old.get("spec"),
                                                                           _CLAIM_SPEC))
    elif rt.storage == RESOURCE_CLAIM_TEMPLATES:
        _raise(rt, new, _create_errors(rt, new) + _immutable("spec", new["spec"], old.get("spec"), _TEMPLATE_SPEC))
    elif rt.storage == RESOURCE_SLICES:
        _raise(rt, new, validate_metadata(new, namespaced=False) + _slice_errors(new["spec"], _dict(old.get("spec"))))
    else:
        _raise(rt, new, _create_errors(rt, new))
