"""DeviceFit's DRA mode (`deviceClass` set): shared GPUs published as DRA devices with consumable capacity.

The same sharing as the annotation contract (extender.model.devices), described once in the
standard API: a node's shared GPUs are the devices of its ResourceSlices that the DeviceClass
selects, that allow multiple allocations and have a `memory` capacity (bytes; MiB here, as the
pods ask) and optionally `cores` (percent; 100 when absent). What each device has left is what
every DRA allocation, stored or in flight, has not consumed of it (`DraView.consumed`): a pod
of ours and a standard claim with a capacity request draw from one capacity.

A share is what DRA would record for the container's request: the MiB and percent asked,
rounded up by the device's `requestPolicy` (extender.dra.capacity), or the policy's default
(else the whole capacity) for what the container does not ask. A share the policy refuses
makes that device unusable for the pod, with the policy in the reason's detail.

At Reserve the devices are chosen as in annotation mode (binpack or spread) and recorded as a
claim of the pod's own: one request per GPU container (`container-<i>-request-<k>`, the names
dra_extended.py uses), an allocation with one share per chosen device, held in flight in the
DRA store, created, allocated and reserved at PreBind by the DRA extended-resource machinery
(CreateExtendedClaim, its undo DeleteExtendedClaim), and named in the pod's
`status.extendedResourceClaimStatus`. The Binding still carries the assignment annotation, so
a node side that reads it is unchanged. Pure: the writes are plain data.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Any

from extender.dra import capacity as capacities
from extender.dra.allocator import AllocationError, class_selects
from extender.dra.objects import (
    EXACT_COUNT,
    FROM_CLASS,
    Allocation,
    ConsumerRef,
    DeviceClass,
    DeviceID,
    DeviceResult,
    ResourceSlice,
    pinned_to,
)
from extender.dra.objects import Device as DraDevice
from extender.model.devices import (
    BINPACK,
    FULL_CORES,
    GPU,
    REASON_BAD_INVENTORY,
    REASON_NO_DEVICES,
    RESOURCES,
    Assignment,
    ContainerRequest,
    Device,
    DeviceRequest,
    Inventory,
    Shares,
    Shortfall,
    Use,
    choose,
    describe_devices,
)
from extender.model.nodes import NodeInfo, NodeView
from extender.model.pods import PodView
from extender.policy import names
from extender.policy.builtin import dra_extended
from extender.policy.claim_actions import CreateExtendedClaim, DeleteClaim, DeleteExtendedClaim
from extender.policy.dra_view import DraView, extended_key
from extender.policy.status import Code, Status

MIB = 1 << 20
MEMORY = "memory"
CORES = "cores"
_CAPACITIES = frozenset({MEMORY, CORES})

REASON_ONE_CLAIM = "pod asks for shared GPUs and for extended resources a DeviceClass serves"
REASON_CHANGED = "GPU shares were taken while reserving"
_DRA_OFF = "pod uses shared GPUs on DRA, but the API server does not serve resource.k8s.io/v1"


def _unresolvable(reason: str, detail: str | Callable[[], str] = "") -> Status:
    return Status(Code.UNRESOLVABLE, (reason,), detail, names.DEVICE_FIT)


# ---- the inventory: DRA devices as shared GPUs -------------------------------------------


@dataclass(frozen=True)
class SharedGpu:
    """One DRA device offered as a shared GPU: its view in the annotation contract's terms
    (`view`: shown id, type, MiB, percent, healthy, position) and the device it records shares on."""

    view: Device
    id: DeviceID
    device: DraDevice
    _shares: dict[tuple[int | None, int | None], tuple[tuple[int, int], dict[str, capacities.Quantity]] | str] = \
        field(default_factory=dict, compare=False, repr=False)

    @property
    def has_cores(self) -> bool:
        return CORES in self.device.capacities

    def share(self, container: ContainerRequest) -> tuple[tuple[int, int], dict[str, capacities.Quantity]] | str:
        """What DRA would record for the container's request on this device: (MiB, percent) and the
        consumedCapacity; or why the device cannot take it. Kept per amount asked (a filter asks
        for every node, and pods of one shape ask the same), in a table shared by the devices with
        the same capacities (_share_table); a refusal, which names the device, is not kept."""
        key = (container.memory, container.cores)
        known = self._shares.get(key)
        if known is None:
            known = self._consumed(container)
            if not isinstance(known, str):
                self._shares[key] = known
        return known

    def _consumed(self, container: ContainerRequest) -> tuple[tuple[int, int], dict[str, capacities.Quantity]] | str:
        memory_capacity = self.device.capacities[MEMORY]
        asked = memory_capacity.value if container.memory is None else capacities.parse(f"{container.memory}Mi", GPU)
        memory = memory_capacity.consumed(asked)
        if memory_capacity.violates(memory):
            return _outside(self.view.id, MEMORY, asked, memory, memory_capacity)
        consumed = {MEMORY: memory}
        mib = math.ceil(memory.value / MIB)
        if not self.has_cores:
            if container.cores:
                return f"{self.view.id}: publishes no cores capacity, so a compute share cannot be recorded on it"
            return (mib, FULL_CORES if container.cores is None else 0), consumed
        cores_capacity = self.device.capacities[CORES]
        asked = cores_capacity.value if container.cores is None else capacities.parse(str(container.cores), GPU)
        cores = cores_capacity.consumed(asked)
        if cores_capacity.violates(cores):
            return _outside(self.view.id, CORES, asked, cores, cores_capacity)
        consumed[CORES] = cores
        return (mib, math.ceil(cores.value)), consumed


def _outside(device: str, name: str, asked: capacities.Quantity, consumed: capacities.Quantity,
             capacity: capacities.DeviceCapacity) -> str:
    """Why the device's request policy refuses the share, in the words of its capacity."""
    if asked is capacity.value:
        what = f"all {consumed} of {name} (a whole device)"
    elif asked.value == consumed.value:
        what = f"{asked} of {name}"
    else:
        what = f"{asked} of {name} (rounded up to {consumed})"
    return f"{device}: {what} is outside its request policy ({capacity.policy})"


@dataclass(frozen=True)
class DraInventory:
    """A node's shared GPUs on DRA; `skipped`: devices of the class that are not shared GPUs, and
    why; `error`: why none can be used (a CEL error in the class's selectors)."""

    gpus: tuple[SharedGpu, ...] = ()
    skipped: tuple[str, ...] = ()
    error: str = ""

    @cached_property
    def devices(self) -> tuple[Device, ...]:
        return tuple(gpu.view for gpu in self.gpus)

    @cached_property
    def by_id(self) -> dict[str, SharedGpu]:
        return {gpu.view.id: gpu for gpu in self.gpus}

    def needs(self, container: ContainerRequest, device: Device) -> tuple[int, int] | str:
        """model.devices.Needs: the share rounded by the device's policy."""
        share = self.by_id[device.id].share(container)
        return share if isinstance(share, str) else share[0]

    def use(self, dra: DraView) -> dict[str, Use]:
        """What every DRA allocation holds of these devices, in MiB and percent rounded up (so the
        free amounts shown and compared are never more than DRA has left)."""
        consumed, sharers = dra.consumed(), dra.sharers()
        use = {}
        for gpu in self.gpus:
            taken = consumed.get(gpu.id)
            if taken is not None:
                use[gpu.view.id] = Use(math.ceil(taken.get(MEMORY, Fraction(0)) / MIB),
                                       math.ceil(taken.get(CORES, Fraction(0))), sharers.get(gpu.id, 0))
        return use

    def describe(self, dra: DraView) -> str:
        text = describe_devices(self.devices, self.use(dra))
        return f"{text}; not shared GPUs: {'; '.join(self.skipped)}" if self.skipped else text


def _string_attribute(device: DraDevice, name: str) -> str:
    """A string attribute, by its bare name or qualified with the driver's domain."""
    value = device.attributes.get(name) or device.attributes.get(f"{device.driver}/{name}")
    found = value.get("string") if isinstance(value, Mapping) else None
    return found if isinstance(found, str) else ""


def _not_shared(device: DraDevice) -> str:
    """Why a device of the class is not a shared GPU here ("" when it is one)."""
    if not device.allow_multiple_allocations:
        return "does not allow multiple allocations"
    if MEMORY not in device.capacities:
        return "has no memory capacity"
    others = sorted(set(device.capacities) - _CAPACITIES)
    if others:
        return f"has capacities besides memory and cores ({', '.join(others)}), which shares would take whole"
    if device.consumes_counters:
        return "consumes shared counters (a partition of a device)"
    if device.binding_conditions:
        return "has binding conditions"
    if device.capacities[MEMORY].value.value < MIB:
        return "has less than 1Mi of memory"
    if CORES in device.capacities:
        cores = device.capacities[CORES].value.value
        if cores.denominator != 1 or not 1 <= cores <= FULL_CORES:
            return f"cores capacity {device.capacities[CORES].value} is not a percentage from 1 to {FULL_CORES}"
    return ""


def _shared_gpu(device_id: DeviceID, device: DraDevice, index: int, shown: set[str]) -> SharedGpu:
    name = _string_attribute(device, "uuid") or device.name
    if name in shown:  # two pools or drivers may name their devices alike
        name = str(device_id)
    shown.add(name)
    kind = _string_attribute(device, "productName") or _string_attribute(device, "type")
    cores = device.capacities.get(CORES)
    view = Device(name, kind, math.floor(device.capacities[MEMORY].value.value / MIB),
                  FULL_CORES if cores is None else int(cores.value.value),
                  not any(taint.blocks_allocation for taint in device.taints), index)
    return SharedGpu(view, device_id, device, _share_table(device))


# Devices with the same memory and cores capacities (and policies) consume the same for a share:
# one table of shares for all of them (thousands of identical GPUs in a large cluster).
_SHARE_TABLES: dict[tuple[Any, Any], dict[Any, Any]] = {}
_SHARE_TABLES_KEPT = 10_000


def _share_table(device: DraDevice) -> dict[Any, Any]:
    key = (device.capacities[MEMORY], device.capacities.get(CORES))
    table = _SHARE_TABLES.get(key)
    if table is None:
        if len(_SHARE_TABLES) >= _SHARE_TABLES_KEPT:
            _SHARE_TABLES.clear()
        table = _SHARE_TABLES[key] = {}
    return table


def _reaches(slice_: ResourceSlice, device: DraDevice, node: NodeView) -> bool:
    return not slice_.per_device_node_selection or device.available_on(node.name, node.labels)


def inventory(dra: DraView, device_class: DeviceClass, node: NodeView) -> DraInventory:
    """The shared GPUs of the node: the devices of its pools (complete and valid ones, as the
    allocator uses) that the class selects and that can hold shares."""
    gpus: list[SharedGpu] = []
    skipped: list[str] = []
    shown: set[str] = set()
    for pool in dra.pools_for(node.name, node.labels):
        if pool.incomplete or pool.invalid:
            skipped.append(f"resource pool {pool} is {'invalid: ' + pool.invalid if pool.invalid else 'incomplete'}")
            continue
        for device_id, device, slice_ in pool.devices:
            try:
                if not _reaches(slice_, device, node) or not class_selects(device_class, device):
                    continue
            except AllocationError as exc:
                return DraInventory(error=str(exc))
            why = _not_shared(device)
            if why:
                skipped.append(f"{device_id} {why}")
            else:
                gpus.append(_shared_gpu(device_id, device, len(gpus), shown))
    return DraInventory(tuple(gpus), tuple(skipped))


# ---- DeviceFit's checks ------------------------------------------------------------------


def _shortfall_status(shortfall: Shortfall, found: DraInventory) -> Status:
    code = Code.UNRESOLVABLE if shortfall.final else Code.UNSCHEDULABLE
    if not found.skipped:
        return Status(code, shortfall.reasons, shortfall.note, names.DEVICE_FIT)
    return Status(code, shortfall.reasons, lambda: f"{shortfall.note()}; not shared GPUs: {'; '.join(found.skipped)}",
                  names.DEVICE_FIT)


@dataclass(frozen=True)
class DraShares:
    """One pod's shared-GPU request in DRA mode, against the cluster's DRA objects as they are."""

    pod: PodView
    request: DeviceRequest
    dra: DraView
    device_class: DeviceClass
    strategy: str = BINPACK

    def node_inventory(self, info: NodeInfo) -> DraInventory | Status:
        found = inventory(self.dra, self.device_class, info.node)
        if found.error:
            return _unresolvable(REASON_BAD_INVENTORY, found.error)
        if not found.gpus:
            return _unresolvable(REASON_NO_DEVICES, lambda: _no_gpus(self.device_class, found))
        return found

    @cached_property
    def served(self) -> dict[str, int]:
        """The pod's extended resources that DeviceClasses serve (DRAExtendedResource)."""
        return dra_extended.served(self.pod, self.dra)

    def one_claim(self, info: NodeInfo) -> Status | None:
        """kube-scheduler's pod status names one extended-resource claim: a node that must serve
        other extended resources of the pod through DRA would need a second one."""
        others = sorted(dra_extended.on_node(self.served, info.node.allocatable)) if self.served else ()
        if not others:
            return None
        return _unresolvable(REASON_ONE_CLAIM, f"{', '.join(others)} would need an extended-resource claim of "
                             "their own beside the shared GPUs' (a pod's status names one): request them through a "
                             "ResourceClaim, or from nodes that advertise them")

    def choose(self, info: NodeInfo, chooser: Chooser | None = None
               ) -> tuple[DraInventory, tuple[tuple[str, Shares], ...]] | Status:
        """The devices for the pod on the node; `chooser` (DeviceFit's `random` or `fgd`, at
        Reserve) picks them first, where every share it picks is one the device's policy allows."""
        refused = self.one_claim(info)
        if refused is not None:
            return refused
        found = self.node_inventory(info)
        if isinstance(found, Status):
            return found
        use = found.use(self.dra)
        if chooser is not None:
            picked = chooser(self.pod, self.request, info, Inventory(found.devices), use)
            if picked is not None and all(not isinstance(found.needs(container, found.by_id[d].view), str)
                                          for container, (_, shares) in zip(self.request.containers, picked,
                                                                            strict=True)
                                          for d, _, _ in shares):
                return found, _rounded(picked, self.request, found)
        result = choose(found.devices, use, self.request, self.strategy, found.needs)
        return _shortfall_status(result, found) if isinstance(result, Shortfall) else (found, result)

    def __call__(self, info: NodeInfo) -> Status | None:
        result = self.choose(info)
        return result if isinstance(result, Status) else None


def _no_gpus(device_class: DeviceClass, found: DraInventory) -> str:
    base = f"no device of the node's ResourceSlices is a shared GPU of device class {device_class.name}"
    return f"{base}: {'; '.join(found.skipped)}" if found.skipped else base


def prepare(pod: PodView, request: DeviceRequest, dra: DraView, class_name: str, strategy: str
            ) -> DraShares | Status:
    """PreFilter: the pod's check, or why no node can take it (DRA off, no such class, or a claim
    left by an earlier attempt, which PostFilter deletes)."""
    if not dra.enabled:
        return _unresolvable(_DRA_OFF)
    device_class = dra.device_class(class_name)
    if device_class is None:
        return _unresolvable(f"device class {class_name} does not exist",
                             "DeviceFit's deviceClass names a DeviceClass the cluster does not have")
    if dra.extended_claim_of(pod.uid) is not None:
        return _unresolvable(dra_extended.STALE, "a claim of an earlier attempt is deleted before the next one")
    return DraShares(pod, request, dra, device_class, strategy)


def stale_claim(pod: PodView, dra: DraView) -> DeleteClaim | None:
    """PostFilter: the claim an earlier attempt made for the pod's shares, to delete; None when
    there is none or when DynamicResources deletes it (the pod also asks for served resources)."""
    if not dra.enabled or dra_extended.served(pod, dra):
        return None
    stale = dra.extended_claim_of(pod.uid)
    return None if stale is None else DeleteClaim(stale.namespace, stale.name, stale.uid)


# ---- Reserve: the claim that records the shares ------------------------------------------


@dataclass(frozen=True)
class SharesClaim:
    """The claim's requests, allocation and request mappings for the chosen devices."""

    requests: tuple[dict[str, Any], ...]
    allocation: Allocation
    mappings: tuple[dict[str, str], ...]


def _container_positions(pod: PodView) -> dict[str, tuple[int, Mapping[str, Any]]]:
    """Container name -> (index among init containers then containers, its resources), the
    numbering of dra_extended.py's request names."""
    spec = pod.raw.get("spec") or {}
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    return {str(c.get("name") or ""): (i, c.get("resources") or {}) for i, c in enumerate(containers)
            if isinstance(c, Mapping)}


def _asked_resources(resources: Mapping[str, Any]) -> list[str]:
    """The container's requests by name, sorted (a request's index is its resource's place here,
    as in dra_extended.py); its limits when the GPU resources are only there (the API server
    copies them into requests, a pod file may not)."""
    for part in ("requests", "limits"):
        values = resources.get(part)
        if isinstance(values, Mapping) and any(name in values for name in RESOURCES):
            return sorted(str(name) for name in values)
    return []


def _whole(name: str, gpus: Sequence[SharedGpu]) -> str | None:
    """The largest of the devices' `name` capacities, as a request for all of it (None: none has it)."""
    values = [gpu.device.capacities[name].value for gpu in gpus if name in gpu.device.capacities]
    return max(values, key=lambda quantity: quantity.value).text if values else None


def _capacity_requests(container: ContainerRequest, gpus: Sequence[SharedGpu]) -> dict[str, str]:
    """The request's capacity.requests. Named even where the container asks for a whole device or
    no compute: a request naming no amount would take the policy's default (else all of it), so a
    whole device asks for all of its capacity and a memory share alone for 0 cores."""
    wanted: dict[str, str] = {}
    memory = _whole(MEMORY, gpus) if container.memory is None else f"{container.memory}Mi"
    if memory is not None:
        wanted[MEMORY] = memory
    cores = _whole(CORES, gpus) if container.cores is None else str(container.cores)
    if cores is not None and (container.cores or any(gpu.has_cores for gpu in gpus)):
        wanted[CORES] = cores
    return wanted


def shares_claim(pod: PodView, request: DeviceRequest, chosen: tuple[tuple[str, Shares], ...],
                 found: DraInventory, device_class: DeviceClass, node_name: str) -> SharesClaim:
    positions = _container_positions(pod)
    requests: list[dict[str, Any]] = []
    results: list[DeviceResult] = []
    mappings: list[dict[str, str]] = []
    for container, (name, shares) in zip(request.containers, chosen, strict=True):
        index, resources = positions.get(name, (len(positions), {}))
        asked = _asked_resources(resources)
        ours = [r for r in asked if r in RESOURCES]
        request_name = f"container-{index}-request-{asked.index(ours[0]) if ours else 0}"
        gpus = [found.by_id[device_id] for device_id, _, _ in shares]
        exactly: dict[str, Any] = {"deviceClassName": device_class.name, "allocationMode": EXACT_COUNT,
                                   "count": container.count}
        wanted = _capacity_requests(container, gpus)
        if wanted:
            exactly["capacity"] = {"requests": wanted}
        requests.append({"name": request_name, "exactly": exactly})
        for gpu in gpus:
            share = gpu.share(container)
            assert not isinstance(share, str), "choose() took a device that refuses the share"
            results.append(DeviceResult(request_name, gpu.id.driver, gpu.id.pool, gpu.id.device, False, (),
                                        str(uuid.uuid4()), share[1]))
        mappings += [{"containerName": name, "resourceName": r, "requestName": request_name} for r in ours]
    request_names = [r["name"] for r in requests]
    config = tuple({"source": FROM_CLASS, "requests": list(request_names), **entry} for entry in device_class.config)
    return SharesClaim(tuple(requests), Allocation(tuple(results), config, pinned_to(node_name)), tuple(mappings))


@dataclass(frozen=True)
class DraReservation:
    """What Reserve returns in DRA mode, for DeviceFit to wrap in a Reservation."""

    annotations: dict[str, str]
    actions: tuple[Any, ...]
    undo: tuple[Any, ...]
    release: Callable[[], None]


def _rounded(picked: tuple[tuple[str, Shares], ...], request: DeviceRequest, found: DraInventory
             ) -> tuple[tuple[str, Shares], ...]:
    """A chooser's shares as the devices' request policies round them (what DRA records)."""
    out = []
    for container, (name, shares) in zip(request.containers, picked, strict=True):
        rounded = []
        for device_id, _, _ in shares:
            needs = found.needs(container, found.by_id[device_id].view)
            assert not isinstance(needs, str)  # checked by the caller
            rounded.append((device_id, *needs))
        out.append((name, tuple(rounded)))
    return tuple(out)


# (pod, request, node, inventory, use) -> the chosen shares, or None: gpu_choice.Chooser.choose.
Chooser = Callable[[PodView, DeviceRequest, NodeInfo, Inventory, Mapping[str, Use]],
                   "tuple[tuple[str, Shares], ...] | None"]


def reserve(shares: DraShares, info: NodeInfo, annotation: str, chooser: Chooser | None = None
            ) -> DraReservation | Status:
    """Choose the devices on the node, hold their shares in flight in the DRA store (the next pod
    sees them taken), and describe the claim PreBind creates, allocates and reserves."""
    result = shares.choose(info, chooser)
    if isinstance(result, Status):
        return result
    found, chosen = result
    pod, dra = shares.pod, shares.dra
    claim = shares_claim(pod, shares.request, chosen, found, shares.device_class, info.name)
    try:
        dra.assume_extended(pod.uid, claim.allocation)
    except ValueError as exc:
        return Status(Code.UNSCHEDULABLE, (REASON_CHANGED,), str(exc), names.DEVICE_FIT)
    pod_ref = ConsumerRef("pods", pod.name, pod.uid)
    create = CreateExtendedClaim(pod.namespace, pod_ref, claim.requests, claim.allocation, claim.mappings)
    return DraReservation({annotation: Assignment(info.name, chosen).to_annotation()}, (create,),
                          (DeleteExtendedClaim(pod.namespace, pod.uid),),
                          lambda: dra.release_allocation(extended_key(pod.uid)))
