"""Raw resource.k8s.io/v1 objects for the DRA tests, named after the helpers of
k8s.io/dynamic-resource-allocation@v0.36.3/structured/internal/allocatortesting so that the
ported cases read like the originals."""

from __future__ import annotations

from typing import Any

from extender.dra.objects import DeviceClass, ResourceClaim, ResourceSlice

DRIVER_A, DRIVER_B = "driver-a", "driver-b"
CLASS_A, CLASS_B = "class-a", "class-b"
NODE_1, NODE_2 = "node-1", "node-2"
LABELS = {NODE_1: {"region": "region-1", "planet": "earth"}, NODE_2: {"region": "region-2", "planet": "earth"}}
ALL_NODES = object()
PER_DEVICE = object()  # a slice with perDeviceNodeSelection: each device says where it is


def device(name: str, capacity: dict[str, str] | None = None, attributes: dict[str, Any] | None = None,
           **extra: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {"name": name, **extra}
    if capacity:
        raw["capacity"] = {key: {"value": value} for key, value in capacity.items()}
    if attributes:
        raw["attributes"] = attributes
    return raw


def raw_slice(name: str, where: Any, pool: str, driver: str, *devices: dict[str, Any], count: int = 1,
              generation: int = 1) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": driver, "pool": {"name": pool, "generation": generation,
                                                       "resourceSliceCount": count}}
    if where is ALL_NODES:
        spec["allNodes"] = True
    elif where is PER_DEVICE:
        spec["perDeviceNodeSelection"] = True
    elif isinstance(where, dict):
        spec["nodeSelector"] = where
    else:
        spec["nodeName"] = where
    if devices:
        spec["devices"] = list(devices)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name, "resourceVersion": "1"}, "spec": spec}


def slice_(name: str, where: Any, pool: str, driver: str, *devices: dict[str, Any], count: int = 1,
           generation: int = 1) -> ResourceSlice:
    return ResourceSlice.parse(raw_slice(name, where, pool, driver, *devices, count=count, generation=generation))


def one_device(name: str, where: Any, pool: str, driver: str, **kwargs: Any) -> ResourceSlice:
    return slice_(name, where, pool, driver, device("device-1"), **kwargs)


def opaque(driver: str, attribute: str) -> dict[str, Any]:
    """deviceConfiguration: {attribute: attribute + "Value"} for the driver."""
    return {"opaque": {"driver": driver, "parameters": {attribute: attribute + "Value"}}}


def device_class(name: str, driver: str, config_attribute: str | None = None,
                 selector: str | None = None) -> DeviceClass:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": selector or f'device.driver == "{driver}"'}}]}
    if config_attribute:
        spec["config"] = [opaque(driver, config_attribute)]
    return DeviceClass.parse({"metadata": {"name": name}, "spec": spec})


def cel(expression: str) -> dict[str, Any]:
    return {"cel": {"expression": expression}}


def memory_at_least(quantity: str, driver: str = DRIVER_A) -> dict[str, Any]:
    return cel(f'device.capacity["{driver}"].memory.compareTo(quantity("{quantity}")) >= 0')


def _device_request(cls: str, count: int, selectors: tuple[dict[str, Any], ...], mode: str, *,
                    admin: bool | None = None, tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """What an ExactDeviceRequest and a DeviceSubRequest share (adminAccess is the former's only)."""
    spec: dict[str, Any] = {"deviceClassName": cls, "allocationMode": mode}
    if mode == "ExactCount":
        spec["count"] = count
    if selectors:
        spec["selectors"] = list(selectors)
    if admin is not None:
        spec["adminAccess"] = admin
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return spec


def exact(name: str, cls: str, count: int = 1, *selectors: dict[str, Any], mode: str = "ExactCount",
          admin: bool | None = None, tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"name": name, "exactly": _device_request(cls, count, selectors, mode, admin=admin, tolerations=tolerations)}


def all_of(name: str, cls: str, *selectors: dict[str, Any], admin: bool | None = None) -> dict[str, Any]:
    return exact(name, cls, 0, *selectors, mode="All", admin=admin)


def sub(name: str, cls: str, count: int = 1, *selectors: dict[str, Any], mode: str = "ExactCount",
        tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"name": name, **_device_request(cls, count, selectors, mode, tolerations=tolerations)}


def first_available(name: str, *subs: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "firstAvailable": list(subs)}


def raw_claim(name: str, *requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None,
              config: list[dict[str, Any]] | None = None, namespace: str = "") -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints is not None:
        devices["constraints"] = constraints
    if config is not None:
        devices["config"] = config
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
            "spec": {"devices": devices}}


def claim(name: str, *requests: dict[str, Any], **kwargs: Any) -> ResourceClaim:
    return ResourceClaim.parse(raw_claim(name, *requests, **kwargs))


def node_label_selector(key: str, *values: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}]}


def local_node_selector(node: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}


def taint(key: str, value: str, effect: str) -> dict[str, Any]:
    return {"key": key, "value": value, "effect": effect}


def toleration(key: str = "", operator: str = "", value: str = "", effect: str = "") -> dict[str, Any]:
    """A DeviceToleration as the API server stores it (empty fields omitted)."""
    raw = {"key": key, "operator": operator, "value": value, "effect": effect}
    return {name: field for name, field in raw.items() if field}


def counters(**values: str) -> dict[str, Any]:
    return {name: {"value": value} for name, value in values.items()}


def counter_set(name: str, **values: str) -> dict[str, Any]:
    return {"name": name, "counters": counters(**values)}


def consumes(counter_set_name: str, **values: str) -> dict[str, Any]:
    return {"counterSet": counter_set_name, "counters": counters(**values)}


def counter_slice(name: str, where: Any, pool: str, driver: str, *sets: dict[str, Any], count: int = 1,
                  generation: int = 1) -> ResourceSlice:
    """sliceWithCounterSets: a slice of sharedCounters and no devices."""
    raw = raw_slice(name, where, pool, driver, count=count, generation=generation)
    raw["spec"]["sharedCounters"] = list(sets)
    return ResourceSlice.parse(raw)


def multi(raw: dict[str, Any]) -> dict[str, Any]:
    """withAllowMultipleAllocations."""
    return {**raw, "allowMultipleAllocations": True}


def policy_range(raw: dict[str, Any], *names: str, value: str, default: str = "2", minimum: str = "2",
                 step: str | None = "2", maximum: str | None = "4") -> dict[str, Any]:
    """withCapacityRequestPolicyRange: each named capacity of `value`, default 2, range 2..4 step 2."""
    limits = {"min": minimum}
    if step is not None:
        limits["step"] = step
    if maximum is not None:
        limits["max"] = maximum
    policy = {"default": default, "validRange": limits}
    return {**raw, "capacity": {**raw.get("capacity", {}),
                                **{name: {"value": value, "requestPolicy": policy} for name in names}}}


def policy_values(raw: dict[str, Any], name: str, value: str, default: str, *more: str) -> dict[str, Any]:
    """withCapacityRequestPolicyValidValues: the default is the smallest valid value."""
    policy = {"default": default, "validValues": [default, *more]}
    return {**raw, "capacity": {**raw.get("capacity", {}), name: {"value": value, "requestPolicy": policy}}}


def with_capacity(request: dict[str, Any], requests: dict[str, str]) -> dict[str, Any]:
    """withCapacityRequest on a request (its `exactly`) or on a subrequest."""
    if "exactly" in request:
        return {**request, "exactly": {**request["exactly"], "capacity": {"requests": requests}}}
    return {**request, "capacity": {"requests": requests}}


def multi_class(name: str, driver: str, allowed: bool) -> DeviceClass:
    """classWithAllowMultipleAllocations: the driver's devices that do (or do not) allow them."""
    return device_class(name, driver, selector=f'device.driver == "{driver}" && '
                                               f"device.allowMultipleAllocations == {str(allowed).lower()}")
