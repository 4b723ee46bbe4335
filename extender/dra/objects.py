"""Read-only views of the resource.k8s.io/v1 objects the allocator reads: DeviceClass,
ResourceSlice (with its devices), ResourceClaim (requests, constraints, config, allocation),
and the per-node pools that `gather_pools` builds from the slices.

Each `parse(raw)` takes the object's JSON as the API server sends it and raises
`InvalidObject` with a `path: message` text when a field has the wrong type; absent optional
fields take the API server's defaults. Field names and defaults are those of
k8s.io/api@v0.36.3/resource/v1/types.go. Pure: dicts in, frozen views out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from fractions import Fraction
from functools import cached_property
from typing import Any, NamedTuple

from extender.dra import capacity as capacities
from extender.dra.capacity import DeviceCapacity, Quantity
from extender.dra.cel import CelDevice, cel_device
from extender.errors import InvalidObject
from extender.model.fields import Namespaced, as_list, as_object, as_str, object_name, object_parts
from extender.model.quantities import parse_quantity
from extender.model.selectors import NodeSelectorTerm, parse_node_selector_term

# types.go: ResourceClaimReservedForMaxSize, AllocationResultsMaxSize,
# FirstAvailableDeviceRequestMaxSize.
RESERVED_FOR_MAX_SIZE = 256
ALLOCATION_RESULTS_MAX_SIZE = 32
FIRST_AVAILABLE_MAX_SIZE = 8

EXACT_COUNT = "ExactCount"
ALL = "All"
FROM_CLASS = "FromClass"
FROM_CLAIM = "FromClaim"

# types.go DeviceTaintEffect: the effects that keep a device from being allocated
# (allocator_incubating.go taintPreventsAllocation); None and unknown effects do not.
NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
ALLOCATION_BLOCKING_EFFECTS = frozenset({NO_SCHEDULE, NO_EXECUTE})


class DeviceID(NamedTuple):
    """structured.DeviceID: a device is named by its driver, pool and name, never by its slice."""

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


def _int(raw: Any, where: str, default: int = 0) -> int:
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise InvalidObject(f"{where}: expected an integer")
    return raw


def _bool(raw: Any, where: str) -> bool:
    if raw is None:
        return False
    if not isinstance(raw, bool):
        raise InvalidObject(f"{where}: expected a boolean")
    return raw


def _objects(raw: Any, where: str) -> tuple[Mapping[str, Any], ...]:
    items = as_list(raw, where)
    return tuple(as_object(item, f"{where}[{i}]") for i, item in enumerate(items))


def _strings(raw: Any, where: str) -> tuple[str, ...]:
    items = as_list(raw, where)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise InvalidObject(f"{where}[{i}]: expected a string")
    return tuple(items)


def _timestamp(raw: Any, where: str) -> str | None:
    """An RFC 3339 time, kept as written (None when absent); refused when unreadable."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise InvalidObject(f"{where}: expected an RFC 3339 time")
    try:
        datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidObject(f"{where}: {raw!r} is not an RFC 3339 time") from None
    return raw


def _selectors(raw: Any, where: str) -> tuple[str, ...]:
    """CEL expressions of a `selectors` list; an entry without `cel` (a selector type this
    version does not know) becomes "", which the allocator refuses as the source does."""
    expressions = []
    for i, selector in enumerate(_objects(raw, where)):
        cel = as_object(selector.get("cel"), f"{where}[{i}].cel")
        expressions.append(as_str(cel.get("expression"), f"{where}[{i}].cel.expression"))
    return tuple(expressions)


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    """types.go DeviceTaint. `time_added` is kept as the API's RFC 3339 text: the allocator
    does not read it (only the eviction controller does, with tolerationSeconds)."""

    key: str
    value: str
    effect: str
    time_added: str | None = None

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"

    @property
    def blocks_allocation(self) -> bool:
        return self.effect in ALLOCATION_BLOCKING_EFFECTS

    @classmethod
    def parse(cls, raw: Any, where: str) -> DeviceTaint:
        spec = as_object(raw, where)
        added = spec.get("timeAdded")
        return cls(as_str(spec.get("key"), f"{where}.key"), as_str(spec.get("value"), f"{where}.value"),
                   as_str(spec.get("effect"), f"{where}.effect"),
                   None if added is None else as_str(added, f"{where}.timeAdded"))


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    """types.go DeviceToleration, on a request or subrequest; copied into each allocation
    result of that request (allocator_incubating.go: `Tolerations: ...tolerations()`)."""

    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: DeviceTaint) -> bool:
        """resourceclaim/devicetoleration.go ToleratesTaint: an empty effect or key matches any;
        Equal (or no operator) compares values, Exists matches any value, other operators nothing."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"

    def to_api(self) -> dict[str, Any]:
        """The JSON Go writes for the struct: every field omitempty."""
        out: dict[str, Any] = {}
        for name, value in (("key", self.key), ("operator", self.operator), ("value", self.value),
                            ("effect", self.effect)):
            if value:
                out[name] = value
        if self.toleration_seconds is not None:
            out["tolerationSeconds"] = self.toleration_seconds
        return out

    @classmethod
    def parse(cls, raw: Any, where: str) -> DeviceToleration:
        spec = as_object(raw, where)
        seconds = spec.get("tolerationSeconds")
        return cls(as_str(spec.get("key"), f"{where}.key"), as_str(spec.get("operator"), f"{where}.operator"),
                   as_str(spec.get("value"), f"{where}.value"), as_str(spec.get("effect"), f"{where}.effect"),
                   None if seconds is None else _int(seconds, f"{where}.tolerationSeconds"))


def _tolerations(raw: Any, where: str) -> tuple[DeviceToleration, ...]:
    return tuple(DeviceToleration.parse(item, f"{where}[{i}]") for i, item in enumerate(as_list(raw, where)))


def _counters(raw: Any, where: str) -> Mapping[str, Fraction]:
    """A `counters` map (name -> {value: quantity}) as exact numbers."""
    counters = as_object(raw, where)
    out = {}
    for name, counter in counters.items():
        value = as_object(counter, f"{where}.{name}").get("value")
        if value is None:
            raise InvalidObject(f"{where}.{name}.value: required")
        out[name] = parse_quantity(value)
    return out


@dataclass(frozen=True, slots=True)
class CounterSet:
    """A counter set's name and counters. Two types.go types have this shape: CounterSet, in a
    slice's sharedCounters (DRAPartitionableDevices), what the pool has; and
    DeviceCounterConsumption, in a device's consumesCounters, what the device takes from the
    set its `counterSet` names (`parse(..., name_field="counterSet")`)."""

    name: str
    counters: Mapping[str, Fraction]

    @classmethod
    def parse(cls, raw: Any, where: str, name_field: str = "name") -> CounterSet:
        spec = as_object(raw, where)
        return cls(as_str(spec.get(name_field), f"{where}.{name_field}"),
                   _counters(spec.get("counters"), f"{where}.counters"))


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """A core/v1 NodeSelector: its terms are ORed. `raw` is kept for the allocation result."""

    terms: tuple[NodeSelectorTerm, ...]
    raw: Mapping[str, Any]

    @classmethod
    def parse(cls, raw: Any, where: str) -> NodeSelector:
        selector = as_object(raw, where)
        terms = as_list(selector.get("nodeSelectorTerms"), f"{where}.nodeSelectorTerms")
        return cls(tuple(parse_node_selector_term(term, f"{where}.nodeSelectorTerms[{i}]")
                         for i, term in enumerate(terms)), selector)

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        return any(term.matches(labels, node_name) for term in self.terms)


def node_matches(node_name: str, labels: Mapping[str, str], target: str | None, all_nodes: bool,
                 selector: NodeSelector | None) -> bool:
    """structured/internal/stable/pools_stable.go NodeMatches: a node name wins over allNodes,
    which wins over a selector; none of them set matches no node."""
    if target:
        return node_name == target
    if all_nodes:
        return True
    if selector is not None:
        return selector.matches(node_name, labels)
    return False


@dataclass(frozen=True, slots=True)
class DeviceTaintRule:
    """resource.k8s.io/v1beta2 (or v1alpha3) DeviceTaintRule: one taint for the devices its
    selector names. A selector field left out matches any driver, pool or device; no selector
    at all matches every device, as the slice tracker applies it
    (dynamic-resource-allocation/resourceslice/tracker applyPatches; the CEL selectors and the
    class name are tombstoned since 1.35)."""

    name: str
    driver: str | None
    pool: str | None
    device: str | None
    taint: DeviceTaint

    @classmethod
    def parse(cls, raw: Any) -> DeviceTaintRule:
        meta, spec, _ = object_parts(raw, "DeviceTaintRule")
        selector = as_object(spec.get("deviceSelector"), "spec.deviceSelector")

        def field_of(name: str) -> str | None:
            value = selector.get(name)
            return None if value is None else as_str(value, f"spec.deviceSelector.{name}")

        return cls(object_name(meta), field_of("driver"), field_of("pool"), field_of("device"),
                   DeviceTaint.parse(spec.get("taint"), "spec.taint"))

    def selects_slice(self, slice_: ResourceSlice) -> bool:
        return (self.driver is None or self.driver == slice_.driver) and (self.pool is None or self.pool == slice_.pool)


def with_taint_rules(slice_: ResourceSlice, rules: Iterable[DeviceTaintRule]) -> ResourceSlice:
    """The slice with the rules' taints added to the devices they select (the same object when
    none applies), in the rules' order after the device's own taints, as the tracker patches it."""
    added: dict[int, list[DeviceTaint]] = {}
    for rule in rules:
        if not rule.selects_slice(slice_):
            continue
        for index, device in enumerate(slice_.devices):
            if rule.device is None or rule.device == device.name:
                added.setdefault(index, []).append(rule.taint)
    if not added:
        return slice_
    devices = tuple(replace(device, taints=(*device.taints, *added[i])) if i in added else device
                    for i, device in enumerate(slice_.devices))
    return replace(slice_, devices=devices)


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...]
    config: tuple[Mapping[str, Any], ...]
    extended_resource_name: str | None
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, raw: Any) -> DeviceClass:
        meta, spec, _ = object_parts(raw, "DeviceClass")
        extended = spec.get("extendedResourceName")
        return cls(
            name=object_name(meta),
            selectors=_selectors(spec.get("selectors"), "spec.selectors"),
            config=_objects(spec.get("config"), "spec.config"),
            extended_resource_name=None if extended is None else as_str(extended, "spec.extendedResourceName"),
            raw=raw,
        )


@dataclass(frozen=True)
class Device:
    """One device of a slice. Attributes and capacity stay in their API form; `cel` is the
    CEL view, built on first use and kept (devices are parsed once per slice update)."""

    name: str
    driver: str
    attributes: Mapping[str, Any]
    capacity: Mapping[str, Any]
    consumes_counters: tuple[CounterSet, ...] = ()  # DeviceCounterConsumption
    taints: tuple[DeviceTaint, ...] = ()
    # DRADeviceBindingConditions: the conditions a driver must set true on the claim's device
    # status before the pod is bound (and those that fail it); bindsToNode pins the claim to the node.
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    binds_to_node: bool = False
    allow_multiple_allocations: bool = False
    # `capacity` parsed (DRAConsumableCapacity): what requests consume of it, by capacity name.
    capacities: Mapping[str, DeviceCapacity] = field(default_factory=dict, compare=False, repr=False)
    # Where the device is, in a slice with perDeviceNodeSelection (the three are then exclusive).
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    # Selector verdicts on this device, by expression: True, False, or the CEL error. A device is
    # immutable (a changed slice is parsed anew), so a verdict holds for every pod and node that
    # meets the device again: each selector runs once per device, not once per pod per node.
    verdicts: dict[str, bool | ValueError] = field(default_factory=dict, compare=False, repr=False)

    @cached_property
    def cel(self) -> CelDevice:
        return cel_device(self.driver, self.attributes, self.capacity,
                          allow_multiple_allocations=self.allow_multiple_allocations)

    @cached_property
    def whole_capacity(self) -> bool:
        """No capacity has a request policy: a request that names none takes them whole."""
        return all(capacity.policy is None for capacity in self.capacities.values())

    @classmethod
    def parse(cls, raw: Any, driver: str, where: str) -> Device:
        device = as_object(raw, where)
        name = device.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidObject(f"{where}.name: required")
        node_name = device.get("nodeName")
        selector = device.get("nodeSelector")
        capacity = as_object(device.get("capacity"), f"{where}.capacity")
        return cls(
            name=name,
            driver=driver,
            attributes=as_object(device.get("attributes"), f"{where}.attributes"),
            capacity=capacity,
            capacities=capacities.parse_capacities(capacity, f"{where}.capacity") if capacity else {},
            consumes_counters=tuple(CounterSet.parse(item, f"{where}.consumesCounters[{i}]", "counterSet") for i, item
                                    in enumerate(as_list(device.get("consumesCounters"), f"{where}.consumesCounters"))),
            taints=tuple(DeviceTaint.parse(item, f"{where}.taints[{i}]")
                         for i, item in enumerate(as_list(device.get("taints"), f"{where}.taints"))),
            binding_conditions=_strings(device.get("bindingConditions"), f"{where}.bindingConditions"),
            binding_failure_conditions=_strings(device.get("bindingFailureConditions"),
                                                f"{where}.bindingFailureConditions"),
            binds_to_node=_bool(device.get("bindsToNode"), f"{where}.bindsToNode"),
            allow_multiple_allocations=_bool(device.get("allowMultipleAllocations"),
                                             f"{where}.allowMultipleAllocations"),
            node_name=None if node_name is None else as_str(node_name, f"{where}.nodeName") or None,
            node_selector=None if selector is None else NodeSelector.parse(selector, f"{where}.nodeSelector"),
            all_nodes=_bool(device.get("allNodes"), f"{where}.allNodes"),
        )

    def available_on(self, node_name: str, labels: Mapping[str, str]) -> bool:
        """For a device of a perDeviceNodeSelection slice: its own nodeName, allNodes or nodeSelector."""
        return node_matches(node_name, labels, self.node_name, self.all_nodes, self.node_selector)


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    node_name: str | None
    node_selector: NodeSelector | None
    all_nodes: bool
    devices: tuple[Device, ...]
    resource_version: str
    per_device_node_selection: bool = False
    shared_counters: tuple[CounterSet, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def parse(cls, raw: Any) -> ResourceSlice:
        meta, spec, _ = object_parts(raw, "ResourceSlice")
        driver = as_str(spec.get("driver"), "spec.driver")
        pool = as_object(spec.get("pool"), "spec.pool")
        node_name = spec.get("nodeName")
        selector = spec.get("nodeSelector")
        return cls(
            name=object_name(meta),
            driver=driver,
            pool=as_str(pool.get("name"), "spec.pool.name"),
            generation=_int(pool.get("generation"), "spec.pool.generation"),
            slice_count=_int(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount"),
            node_name=None if node_name is None else as_str(node_name, "spec.nodeName") or None,
            node_selector=None if selector is None else NodeSelector.parse(selector, "spec.nodeSelector"),
            all_nodes=_bool(spec.get("allNodes"), "spec.allNodes"),
            devices=tuple(Device.parse(device, driver, f"spec.devices[{i}]")
                          for i, device in enumerate(as_list(spec.get("devices"), "spec.devices"))),
            resource_version=as_str(meta.get("resourceVersion"), "metadata.resourceVersion"),
            per_device_node_selection=_bool(spec.get("perDeviceNodeSelection"), "spec.perDeviceNodeSelection"),
            shared_counters=tuple(CounterSet.parse(item, f"spec.sharedCounters[{i}]") for i, item
                                  in enumerate(as_list(spec.get("sharedCounters"), "spec.sharedCounters"))),
            raw=raw,
        )

    def available_on(self, node_name: str, labels: Mapping[str, str]) -> bool:
        """Whether the slice matters to the node (pools_incubating.go GatherPools): a slice of
        shared counters always does (its pool's devices may be anywhere); then nodeName,
        allNodes or nodeSelector; with perDeviceNodeSelection, any of its devices reaching
        the node. None of them set is a future extension: the slice is ignored."""
        if self.shared_counters:
            return True
        if self.node_name or self.all_nodes or self.node_selector is not None:
            return node_matches(node_name, labels, self.node_name, self.all_nodes, self.node_selector)
        if self.per_device_node_selection:
            return any(device.available_on(node_name, labels) for device in self.devices)
        return False


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """An ExactDeviceRequest or one DeviceSubRequest. `name` is what allocation results and
    config refer to ("req" or "req/sub"); `request` and `subrequest` are its two parts."""

    name: str
    device_class: str
    selectors: tuple[str, ...]
    allocation_mode: str
    count: int
    admin_access: bool
    tolerations: tuple[DeviceToleration, ...] = ()
    request: str = ""
    subrequest: str = ""
    # capacity.requests (DRAConsumableCapacity): the amount asked of each named capacity.
    capacity: Mapping[str, Quantity] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: Any, where: str, request: str, subrequest: str = "") -> DeviceRequest:
        spec = as_object(raw, where)
        # The API server defaults allocationMode to ExactCount and count to 1 for it.
        mode = as_str(spec.get("allocationMode"), f"{where}.allocationMode") or EXACT_COUNT
        return cls(
            name=f"{request}/{subrequest}" if subrequest else request,
            device_class=as_str(spec.get("deviceClassName"), f"{where}.deviceClassName"),
            selectors=_selectors(spec.get("selectors"), f"{where}.selectors"),
            allocation_mode=mode,
            count=_int(spec.get("count"), f"{where}.count", 1 if mode == EXACT_COUNT else 0),
            admin_access=_bool(spec.get("adminAccess"), f"{where}.adminAccess"),
            tolerations=_tolerations(spec.get("tolerations"), f"{where}.tolerations"),
            request=request,
            subrequest=subrequest,
            capacity=capacities.parse_requests(spec.get("capacity"), f"{where}.capacity"),
        )


@dataclass(frozen=True, slots=True)
class Request:
    """A claim's request: `exactly` one kind of device, or the `first_available` of several."""

    name: str
    exactly: DeviceRequest | None
    first_available: tuple[DeviceRequest, ...]

    def alternatives(self) -> tuple[DeviceRequest, ...]:
        return (self.exactly,) if self.exactly is not None else self.first_available

    @classmethod
    def parse(cls, raw: Any, where: str) -> Request:
        spec = as_object(raw, where)
        name = as_str(spec.get("name"), f"{where}.name")
        exactly = spec.get("exactly")
        subs = []
        for i, sub in enumerate(_objects(spec.get("firstAvailable"), f"{where}.firstAvailable")):
            sub_name = as_str(sub.get("name"), f"{where}.firstAvailable[{i}].name")
            subs.append(DeviceRequest.parse(sub, f"{where}.firstAvailable[{i}]", name, sub_name))
        return cls(name, None if exactly is None else DeviceRequest.parse(exactly, f"{where}.exactly", name),
                   tuple(subs))


@dataclass(frozen=True, slots=True)
class Constraint:
    """`requests` empty means every request of the claim; neither attribute set is a
    constraint type this version does not know."""

    requests: tuple[str, ...]
    match_attribute: str | None
    distinct_attribute: str | None

    @classmethod
    def parse(cls, raw: Any, where: str) -> Constraint:
        spec = as_object(raw, where)
        match = spec.get("matchAttribute")
        distinct = spec.get("distinctAttribute")
        return cls(_strings(spec.get("requests"), f"{where}.requests"),
                   None if match is None else as_str(match, f"{where}.matchAttribute"),
                   None if distinct is None else as_str(distinct, f"{where}.distinctAttribute"))


@dataclass(frozen=True, slots=True)
class DeviceResult:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool
    tolerations: tuple[DeviceToleration, ...] = ()
    # DRAConsumableCapacity: a share of a device that allows multiple allocations has a
    # share_id (a UUID the scheduler makes) and, when the device has capacities, what it consumes.
    share_id: str | None = None
    consumed: Mapping[str, Quantity] | None = None
    # DRADeviceBindingConditions: copied from the device; PreBind waits for them.
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()

    @property
    def id(self) -> DeviceID:
        return DeviceID(self.driver, self.pool, self.device)

    @property
    def exclusive(self) -> bool:
        """Whether the result holds its device for itself (allocateddevices.go
        foreachAllocatedDevice): admin access holds nothing, a share (a shareID) only capacity."""
        return not self.admin_access and self.share_id is None

    def to_api(self) -> dict[str, Any]:
        """DeviceRequestAllocationResult: adminAccess only when true, as the allocator sets it
        (allocator_incubating.go allocateDevice); the tolerations of the request (or of the
        chosen subrequest) are copied, as the allocator does whether or not they were needed;
        shareID and consumedCapacity (in their canonical text) only for a share."""
        out: dict[str, Any] = {"request": self.request, "driver": self.driver, "pool": self.pool,
                               "device": self.device}
        if self.admin_access:
            out["adminAccess"] = True
        if self.tolerations:
            out["tolerations"] = [t.to_api() for t in self.tolerations]
        if self.share_id is not None:
            out["shareID"] = self.share_id
        if self.consumed:
            out["consumedCapacity"] = {name: quantity.text for name, quantity in self.consumed.items()}
        if self.binding_conditions:
            out["bindingConditions"] = list(self.binding_conditions)
            out["bindingFailureConditions"] = list(self.binding_failure_conditions)
        return out

    @classmethod
    def parse(cls, raw: Any, where: str) -> DeviceResult:
        spec = as_object(raw, where)
        share_id = spec.get("shareID")
        consumed = spec.get("consumedCapacity")
        return cls(as_str(spec.get("request"), f"{where}.request"), as_str(spec.get("driver"), f"{where}.driver"),
                   as_str(spec.get("pool"), f"{where}.pool"), as_str(spec.get("device"), f"{where}.device"),
                   _bool(spec.get("adminAccess"), f"{where}.adminAccess"),
                   _tolerations(spec.get("tolerations"), f"{where}.tolerations"),
                   None if share_id is None else as_str(share_id, f"{where}.shareID"),
                   None if consumed is None else {
                       name: capacities.parse(value, f"{where}.consumedCapacity.{name}")
                       for name, value in as_object(consumed, f"{where}.consumedCapacity").items()},
                   _strings(spec.get("bindingConditions"), f"{where}.bindingConditions"),
                   _strings(spec.get("bindingFailureConditions"), f"{where}.bindingFailureConditions"))


@dataclass(frozen=True)
class Allocation:
    """A claim's status.allocation. `config` entries are in their API form (source,
    requests, opaque); `node_selector` is the raw NodeSelector (None: every node)."""

    results: tuple[DeviceResult, ...]
    config: tuple[Mapping[str, Any], ...] = ()
    node_selector: Mapping[str, Any] | None = None
    timestamp: str | None = None  # allocationTimestamp (RFC 3339), written at PreBind

    @property
    def binding_conditions(self) -> bool:
        """Whether a device of the allocation waits for binding conditions (hasBindingConditions)."""
        return any(result.binding_conditions for result in self.results)

    def to_api(self) -> dict[str, Any]:
        """The AllocationResult JSON as kube-scheduler writes it: `devices` always present (a
        struct), its `results` and `config` and the `nodeSelector` omitted when empty."""
        devices: dict[str, Any] = {}
        if self.results:
            devices["results"] = [result.to_api() for result in self.results]
        if self.config:
            devices["config"] = [dict(entry) for entry in self.config]
        out: dict[str, Any] = {"devices": devices}
        if self.node_selector is not None:
            out["nodeSelector"] = self.node_selector
        if self.timestamp is not None:
            out["allocationTimestamp"] = self.timestamp
        return out

    @classmethod
    def parse(cls, raw: Any, where: str = "status.allocation") -> Allocation:
        spec = as_object(raw, where)
        devices = as_object(spec.get("devices"), f"{where}.devices")
        selector = spec.get("nodeSelector")
        if selector is not None:
            NodeSelector.parse(selector, f"{where}.nodeSelector")  # refuse an unreadable one now
        return cls(tuple(DeviceResult.parse(r, f"{where}.devices.results[{i}]")
                         for i, r in enumerate(as_list(devices.get("results"), f"{where}.devices.results"))),
                   _objects(devices.get("config"), f"{where}.devices.config"),
                   None if selector is None else as_object(selector, f"{where}.nodeSelector"),
                   _timestamp(spec.get("allocationTimestamp"), f"{where}.allocationTimestamp"))

    @cached_property
    def _selector(self) -> NodeSelector | None:
        return None if self.node_selector is None else NodeSelector.parse(self.node_selector, "nodeSelector")

    def available_on(self, node_name: str, labels: Mapping[str, str]) -> bool:
        selector = self._selector
        return selector is None or selector.matches(node_name, labels)


def pinned_to(node_name: str) -> dict[str, Any]:
    """The node selector of an allocation bound to one node (createNodeSelector's metadata.name term)."""
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                     "values": [node_name]}]}]}


def consumed_capacity(allocations: Iterable[Allocation]) -> dict[DeviceID, dict[str, Fraction]]:
    """What the shares among `allocations` take of their devices: every device with a share
    (a result with a shareID, admin access aside), with the sum of their consumedCapacity by
    capacity name (empty when none reports any). This is kube-scheduler's AllocatedState
    (dra_manager.go GatherAllocatedState, allocateddevices.go): its shared device ids and
    AggregatedCapacity in one mapping, for `allocate(..., consumed=)`. A shared device is not
    in use: its id belongs in `in_use` only if some result holds it exclusively."""
    out: dict[DeviceID, dict[str, Fraction]] = {}
    for allocation in allocations:
        for result in allocation.results:
            if result.admin_access or result.share_id is None:
                continue
            total = out.setdefault(result.id, {})
            for name, quantity in (result.consumed or {}).items():
                total[name] = total.get(name, Fraction(0)) + quantity.value
    return out


@dataclass(frozen=True, slots=True)
class ConsumerRef:
    resource: str
    name: str
    uid: str
    api_group: str = ""


class OwnerRef(NamedTuple):
    kind: str
    name: str
    uid: str
    controller: bool


@dataclass(frozen=True, slots=True)
class ResourceClaim(Namespaced):
    namespace: str
    name: str
    uid: str
    resource_version: str
    deleting: bool
    finalizers: tuple[str, ...]
    owner_uids: tuple[OwnerRef, ...]
    requests: tuple[Request, ...]
    constraints: tuple[Constraint, ...]
    config: tuple[Mapping[str, Any], ...]
    allocation: Allocation | None
    reserved_for: tuple[ConsumerRef, ...]
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def reserved_for_pod(self, uid: str) -> bool:
        """resourceclaim.IsReservedForPod compares the UID only."""
        return any(ref.uid == uid for ref in self.reserved_for)

    def can_be_reserved(self) -> bool:
        return len(self.reserved_for) < RESERVED_FOR_MAX_SIZE

    @classmethod
    def parse(cls, raw: Any, previous: ResourceClaim | None = None) -> ResourceClaim:
        """`previous`: the version stored before this one. A claim's spec is immutable (the API
        server refuses a change: validation.go), so the requests of the same claim (same uid) are
        taken from it instead of parsed again: a claim is written three or four times in its
        life (created, allocated, reserved, released), and the spec is most of its parse."""
        meta, spec, status = object_parts(raw, "ResourceClaim")
        owners = []
        for i, ref in enumerate(_objects(meta.get("ownerReferences"), "metadata.ownerReferences")):
            where = f"metadata.ownerReferences[{i}]"
            owners.append(OwnerRef(as_str(ref.get("kind"), f"{where}.kind"), as_str(ref.get("name"), f"{where}.name"),
                                   as_str(ref.get("uid"), f"{where}.uid"), _bool(ref.get("controller"), f"{where}.controller")))
        reserved = []
        for i, ref in enumerate(_objects(status.get("reservedFor"), "status.reservedFor")):
            where = f"status.reservedFor[{i}]"
            reserved.append(ConsumerRef(as_str(ref.get("resource"), f"{where}.resource"),
                                        as_str(ref.get("name"), f"{where}.name"),
                                        as_str(ref.get("uid"), f"{where}.uid"),
                                        as_str(ref.get("apiGroup"), f"{where}.apiGroup")))
        allocation = status.get("allocation")
        uid = as_str(meta.get("uid"), "metadata.uid")
        if previous is not None and uid and previous.uid == uid:
            requests, constraints, config = previous.requests, previous.constraints, previous.config
        else:
            requests, constraints, config = _claim_spec(spec)
        return cls(
            namespace=as_str(meta.get("namespace"), "metadata.namespace"),
            name=object_name(meta),
            uid=uid,
            resource_version=as_str(meta.get("resourceVersion"), "metadata.resourceVersion"),
            deleting=meta.get("deletionTimestamp") is not None,
            finalizers=_strings(meta.get("finalizers"), "metadata.finalizers"),
            owner_uids=tuple(owners),
            requests=requests,
            constraints=constraints,
            config=config,
            allocation=None if allocation is None else Allocation.parse(allocation),
            reserved_for=tuple(reserved),
            raw=raw,
        )


def _claim_spec(spec: Mapping[str, Any]) -> tuple[tuple[Request, ...], tuple[Constraint, ...],
                                                    tuple[Mapping[str, Any], ...]]:
    devices = as_object(spec.get("devices"), "spec.devices")
    requests = tuple(Request.parse(r, f"spec.devices.requests[{i}]")
                     for i, r in enumerate(as_list(devices.get("requests"), "spec.devices.requests")))
    constraints = tuple(Constraint.parse(c, f"spec.devices.constraints[{i}]")
                        for i, c in enumerate(as_list(devices.get("constraints"), "spec.devices.constraints")))
    return requests, constraints, _objects(devices.get("config"), "spec.devices.config")


@dataclass(frozen=True)
class Pool:
    """The slices of one pool that a node can reach. An incomplete pool (not every slice of
    its newest generation published) has no slices; an invalid one says why in `invalid`.

    With partitionable devices (pools_incubating.go buildPool): `slices` holds the slices of
    devices, `counter_sets` the pool's shared counters by name (from its sharedCounters
    slices), and `elsewhere` the pool's device slices of that generation that do not reach
    the node: their devices cannot be picked here but, once allocated, still consume the
    pool's counters.
    """

    driver: str
    name: str
    generation: int
    slices: tuple[ResourceSlice, ...]
    incomplete: bool = False
    invalid: str = ""
    counter_sets: Mapping[str, CounterSet] = field(default_factory=dict)
    elsewhere: tuple[ResourceSlice, ...] = ()

    def __str__(self) -> str:
        return f"{self.driver}/{self.name}"

    @cached_property
    def devices(self) -> tuple[tuple[DeviceID, Device, ResourceSlice], ...]:
        """Every device of the pool with its id and slice, in visiting order (built once per pool)."""
        return tuple((DeviceID(self.driver, self.name, device.name), device, slice_)
                     for slice_ in self.slices for device in slice_.devices)

    @cached_property
    def binding_conditions(self) -> bool:
        """Whether a device of the pool has binding conditions (poolHasBindingConditions)."""
        return any(device.binding_conditions for slice_ in self.slices for device in slice_.devices)

    @cached_property
    def consumers(self) -> tuple[tuple[DeviceID, Device], ...]:
        """Every device of the pool that consumes counters, reaching the node or not: those in
        use are subtracted from the counter sets (allocator_incubating.go checkAvailableCounters)."""
        return tuple((DeviceID(self.driver, self.name, device.name), device)
                     for slice_ in (*self.slices, *self.elsewhere) for device in slice_.devices
                     if device.consumes_counters)


PoolCache = dict[tuple[str, str, int, tuple[int, ...], tuple[int, ...]],
                  tuple[tuple[ResourceSlice, ...], Pool]]


def gather_pools(slices: Iterable[ResourceSlice], node_name: str, labels: Mapping[str, str], *,
                 all_slices: Iterable[ResourceSlice] | None = None, built: PoolCache | None = None) -> list[Pool]:
    """The pools whose devices this node can reach (pools_incubating.go GatherPools, with
    DRAPartitionableDevices on as in kube-scheduler v1.36).

    A slice counts for the node when `ResourceSlice.available_on` says so (slices of shared
    counters always do). Per pool, only the newest generation among the node's slices
    counts; the pool is complete when that generation has `resourceSliceCount` slices. When
    the node sees fewer, every slice of the pool is consulted (`all_slices`, default `slices`;
    pass the whole cluster's when `slices` is a pre-filtered subset): a newer generation
    elsewhere makes the node's slices obsolete and the pool is dropped; otherwise the count
    over all slices of that generation decides, and the other slices become the pool's
    `elsewhere`. A pool is invalid when its device slices repeat a device name, its counter
    sets repeat a name, or a device consumes a counter set or counter the pool does not have.

    Pools are sorted by (driver, pool) and slices by name, as pools_incubating.go does, so
    that the first fit is reproducible; pools with devices that have binding conditions come
    last (they delay the pod's bind), in the same order among themselves.

    `built`: pools already made from the same slice objects, shared between the nodes that reach
    them (a pool of nodeSelector or allNodes slices is one object, not one per node); the
    caller empties it when slices change.
    """
    slices = list(slices)
    pools: dict[tuple[str, str], list[ResourceSlice]] = {}
    for slice_ in slices:
        if not slice_.available_on(node_name, labels):
            continue
        key = (slice_.driver, slice_.pool)
        current = pools.get(key)
        if current is None or slice_.generation > current[0].generation:
            pools[key] = [slice_]
        elif slice_.generation == current[0].generation:
            current.append(slice_)

    by_pool: dict[tuple[str, str], list[ResourceSlice]] | None = None
    result = []
    for (driver, name), found in sorted(pools.items()):
        generation, wanted = found[0].generation, found[0].slice_count
        others: list[ResourceSlice] = []
        if len(found) != wanted:
            if by_pool is None:
                by_pool = {}
                for slice_ in (slices if all_slices is None else all_slices):
                    by_pool.setdefault((slice_.driver, slice_.pool), []).append(slice_)
            pool_slices = by_pool.get((driver, name), [])
            if any(s.generation > generation for s in pool_slices):
                continue
            current = [s for s in pool_slices if s.generation == generation]
            if len(current) != wanted:
                result.append(Pool(driver, name, generation, (), incomplete=True))
                continue
            seen = {s.name for s in found}
            rest = [s for s in current if s.name not in seen]
            # Slices of shared counters reach every node; a caller whose `slices` left one out
            # (filed under the node it names) gets it back here, as the source always has it.
            found = [*found, *(s for s in rest if s.shared_counters)]
            others = sorted((s for s in rest if not s.shared_counters), key=lambda s: s.name)
        found = sorted(found, key=lambda s: s.name)
        result.append(_build_pool(driver, name, generation, found, others) if built is None
                      else _shared_pool(built, driver, name, generation, found, others))
    if any(pool.binding_conditions for pool in result):
        result.sort(key=lambda pool: pool.binding_conditions)  # stable: the sorted order stays within each part
    return result


def _shared_pool(built: PoolCache, driver: str, name: str, generation: int, found: list[ResourceSlice],
                 others: list[ResourceSlice]) -> Pool:
    """The pool of these very slice objects, made once: the entry keeps the slices, so their
    ids in the key cannot be reused by other objects while it lives."""
    key = (driver, name, generation, tuple(map(id, found)), tuple(map(id, others)))
    entry = built.get(key)
    if entry is None:
        entry = built[key] = ((*found, *others), _build_pool(driver, name, generation, found, others))
    return entry[1]


def _build_pool(driver: str, name: str, generation: int, found: list[ResourceSlice],
                others: list[ResourceSlice]) -> Pool:
    """pools_incubating.go buildPool: device slices and counter sets apart, then validated."""
    device_slices = tuple(s for s in found if not s.shared_counters)
    invalid = _duplicate_device(device_slices)
    counter_sets: dict[str, CounterSet] = {}
    for slice_ in found:
        for counter_set in slice_.shared_counters:
            if not invalid and counter_set.name in counter_sets:
                invalid = f"duplicate counter set name {counter_set.name}"
            counter_sets.setdefault(counter_set.name, counter_set)
    invalid = invalid or _unknown_counter(counter_sets, device_slices) or _unknown_counter(counter_sets, others)
    if invalid:
        return Pool(driver, name, generation, device_slices, invalid=invalid)
    return Pool(driver, name, generation, device_slices, counter_sets=counter_sets, elsewhere=tuple(others))


def _duplicate_device(slices: Iterable[ResourceSlice]) -> str:
    seen: set[str] = set()
    for slice_ in slices:
        for device in slice_.devices:
            if device.name in seen:
                return f"duplicate device name {device.name}"
            seen.add(device.name)
    return ""


def _unknown_counter(counter_sets: Mapping[str, CounterSet], slices: Iterable[ResourceSlice]) -> str:
    """validateDeviceCounterConsumption: every consumed counter set and counter exists in the pool."""
    for slice_ in slices:
        for device in slice_.devices:
            for consumption in device.consumes_counters:
                counter_set = counter_sets.get(consumption.name)
                if counter_set is None:
                    return f"counter set {consumption.name} not found"
                for counter in consumption.counters:
                    if counter not in counter_set.counters:
                        return f"counter {counter} not found in counter set {counter_set.name}"
    return ""
