"""Shared GPUs asked for through the pod's own ResourceClaim: DeviceFit's claim model.

The third way to ask for shared GPUs (docs/devices.md, "A pod's own claim"), beside the
extended resources on the annotation inventory and on DRA devices (`deviceClass`): the pod
names one ResourceClaim (`resourceClaimName`, or a template's claim), with one ExactCount
request of `count` devices of a DeviceClass whose devices are shared GPUs (dra_devices.py:
`allowMultipleAllocations`, a `memory` capacity, optionally `cores`), asking per device
`capacity.requests: {memory: <MiB>Mi, cores: "<percent>"}` (no capacity: whole devices), and
optionally selectors for the GPU type.

The GPU-sharing policies read such a pod and a node as they read the annotation model: the
pod's shape (CPU, milli per GPU, count, accepted models) and the node's GPUs (each device's
free share, the smaller of free memory and free compute, from every DRA allocation's
consumedCapacity). The accepted models are read from selectors of the form this module writes
(`type_selector`: `device.attributes["<domain>"].productName.lowerAscii().contains("t4") || ...`,
the `extender.example/gpu-type` annotation's substring match); any other selector still
selects devices, but the shape then accepts every model.

DeviceFit places the claim when the policy does not list DynamicResources (policy/loading.py):
Filter checks that the node's shared GPUs of the class that the request's selectors select
can take `count` shares; Reserve picks the GPUs with DeviceFit's strategy (binpack, spread,
random, fgd: the same choice as for the annotation model), then runs the structured allocator
(extender/dra/allocator.py, kube-scheduler v1.36's consumable-capacity semantics: each share
rounded by the device's requestPolicy, a new shareID and its consumedCapacity) with those GPUs
tried first, holds the allocation in flight and binds the claim at PreBind (BindClaim, as
DynamicResources does). The Binding carries the assignment annotation too. With DynamicResources
in the policy, it allocates the claim itself (the first devices that fit, as kube-scheduler).
"""

from __future__ import annotations

import math
import re
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from extender.dra.allocator import AllocationError, Unallocatable, allocate, request_selects
from extender.dra.objects import (
    EXACT_COUNT,
    Allocation,
    ConsumerRef,
    DeviceClass,
    DeviceID,
    Pool,
    ResourceClaim,
)
from extender.dra.objects import DeviceRequest as ClaimRequest
from extender.model.devices import (
    ASSIGNMENT_ANNOTATION,
    FULL_CORES,
    REASON_BAD_INVENTORY,
    REASON_NO_DEVICES,
    Assignment,
    ContainerRequest,
    DeviceRequest,
    Inventory,
    Shares,
    Shortfall,
    Use,
    choose,
)
from extender.model.gpushare import GpuNode, PodShape, device_shape, gpu_node
from extender.model.nodes import NodeInfo, NodeView
from extender.model.pods import PodView
from extender.policy import names
from extender.policy.builtin import dra_devices
from extender.policy.builtin.device_requests import pod_device_request
from extender.policy.builtin.dynamic_resources import Waiting, pod_claims
from extender.policy.claim_actions import BindClaim
from extender.policy.dra_view import DraView
from extender.policy.reservations import Reservation
from extender.policy.status import Code, Status

MIB = dra_devices.MIB
REASON_NOT_PLACED = "pod's resource claims are not one shared-GPU claim DeviceFit places"
REASON_CHANGED = dra_devices.REASON_CHANGED
_ALLOWED_CAPACITIES = frozenset({dra_devices.MEMORY, dra_devices.CORES})
_TYPE_TERM = re.compile(r'device\.attributes\["[^"\\]+"\]\.productName\.lowerAscii\(\)\.contains\("([^"\\]*)"\)')


def _unresolvable(reason: str, detail: str | Callable[[], str] = "") -> Status:
    return Status(Code.UNRESOLVABLE, (reason,), detail, names.DEVICE_FIT)


def type_selector(domain: str, types: Sequence[str]) -> str:
    """The CEL selector of devices whose `productName` contains one of `types` (case-insensitive),
    the annotation model's `extender.example/gpu-type` rule; `selector_types` reads it back."""
    attribute = f'device.attributes["{domain}"].productName.lowerAscii()'
    return " || ".join(f'{attribute}.contains("{t.lower()}")' for t in types)


def selector_types(expression: str) -> tuple[str, ...] | None:
    """The models a `type_selector` expression accepts; None for any other expression."""
    terms = [term.strip() for term in expression.split("||")]
    found = [_TYPE_TERM.fullmatch(term) for term in terms]
    if not terms or not all(found):
        return None
    return tuple(match.group(1) for match in found if match is not None)


def names_claims(pod: PodView) -> bool:
    """Whether the pod names any resource claim (cheap: every pod is asked)."""
    spec = pod.raw.get("spec") if isinstance(pod.raw, Mapping) else None
    return isinstance(spec, Mapping) and bool(spec.get("resourceClaims"))


@dataclass(frozen=True)
class ClaimGpus:
    """A pod's shared-GPU claim, read: the claim, its request, the class, the same request in the
    annotation model's terms (one container, as DeviceFit chooses with), and the pod's shape."""

    claim: ResourceClaim
    request: ClaimRequest
    device_class: DeviceClass
    gpus: DeviceRequest
    shape: PodShape

    @property
    def memo_key(self) -> tuple[Any, ...]:
        """All DeviceFit's check reads of the pod (the node's DRA use is part of its NodeInfo)."""
        return (names.DEVICE_FIT, "claim", self.device_class.name, self.request.selectors, self.gpus)


def _container(pod: PodView, claim_ref: str) -> str:
    """The first container that uses the claim (its assignment entry), else the claim's name in the pod."""
    spec = pod.raw.get("spec") or {}
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        if not isinstance(container, Mapping):
            continue
        claims = (container.get("resources") or {}).get("claims") or []
        if any(isinstance(c, Mapping) and c.get("name") == claim_ref for c in claims):
            return str(container.get("name") or claim_ref)
    return claim_ref


def _amount(request: ClaimRequest, name: str, unit: int) -> int | None:
    quantity = request.capacity.get(name)
    return None if quantity is None else math.ceil(quantity.value / unit)


def pod_claim_gpus(pod: PodView, dra: DraView) -> ClaimGpus | Status | None:
    """The pod's shared-GPU claim to allocate; a Status (unresolvable) when its claims are not one
    that DeviceFit places, saying why; None when there is none to place: the pod names no claim,
    or claims this process does not see (DRA off, claims not watched: a webhook, whose claims
    kube-scheduler allocates), or its claim is allocated already (by DynamicResources, or
    kube-scheduler): DeviceFit then leaves the pod's claims alone, as it always has."""
    if not names_claims(pod) or not dra.enabled:
        return None
    found = pod_claims(pod, dra)
    if isinstance(found, Waiting):
        return None
    if any(c.allocation is not None or dra.pending_allocation(c.uid) is not None for c in found):
        return None
    if len(found) != 1:
        return _unresolvable(REASON_NOT_PLACED, f"the pod names {len(found)} claims; DeviceFit places one "
                             "(list DynamicResources in the policy to allocate others)")
    claim = found[0]
    where = f"claim {claim.key}"
    request = claim.requests[0].exactly if len(claim.requests) == 1 else None
    why = ""
    if request is None or claim.constraints:
        why = "has not exactly one request with `exactly` and no constraints"
    elif request.allocation_mode != EXACT_COUNT or request.admin_access:
        why = f"request {request.name}: DeviceFit places ExactCount requests without adminAccess"
    elif set(request.capacity) - _ALLOWED_CAPACITIES:
        why = f"request {request.name}: asks for capacities besides memory and cores"
    elif not 1 <= request.count <= 256:
        why = f"request {request.name}: count {request.count} is not from 1 to 256"
    if why or request is None:
        return _unresolvable(REASON_NOT_PLACED, f"{where} {why}")
    device_class = dra.device_class(request.device_class)
    if device_class is None:
        return _unresolvable(f"request {request.name}: device class {request.device_class} does not exist")
    if pod_device_request(pod) is not None:
        return _unresolvable(REASON_NOT_PLACED, "the pod asks for shared GPUs both through extended resources "
                             f"and through {where}")
    cores = _amount(request, dra_devices.CORES, 1)
    if cores is not None and cores > FULL_CORES:
        return _unresolvable(REASON_NOT_PLACED, f"{where}: cores {cores} is more than a whole GPU (100)")
    types: tuple[str, ...] = ()
    for expression in request.selectors:
        read = selector_types(expression)
        if read is not None:
            types = read if not types else tuple(t for t in types if t in read)
    ref = next((str(r.get("name")) for r in (pod.raw.get("spec") or {}).get("resourceClaims") or ()
                if isinstance(r, Mapping)), "gpu")
    container = ContainerRequest(_container(pod, ref), request.count, _amount(request, dra_devices.MEMORY, MIB), cores)
    gpus = DeviceRequest((container,), types)
    shape = device_shape(gpus, pod.requests.get("cpu", 0))
    assert shape is not None  # one container
    return ClaimGpus(claim, request, device_class, gpus, shape)


# ---- a node's shared GPUs of a class -------------------------------------------------------

@dataclass
class _Remembered:
    """What this module remembers of one DRA store (the cluster state's): dropped with it, so a
    process running one replay after another does not keep the states of the earlier ones."""

    inventories: dict[tuple[str, str], tuple[Sequence[Pool], DeviceClass, dra_devices.DraInventory, Inventory]] = \
        field(default_factory=dict)
    states: _PerNodeInfo = field(default_factory=lambda: _PerNodeInfo())
    verdicts: _PerNodeInfo = field(default_factory=lambda: _PerNodeInfo())


_remembered: weakref.WeakKeyDictionary[Any, _Remembered] = weakref.WeakKeyDictionary()
_remembered_lock = threading.Lock()
_INVENTORIES_KEPT = 50_000


def _of(dra: DraView) -> _Remembered:
    known = _remembered.get(dra)
    if known is None:
        with _remembered_lock:
            known = _remembered.setdefault(dra, _Remembered())
    return known


def node_gpus(dra: DraView, device_class: DeviceClass, node: NodeView) -> tuple[dra_devices.DraInventory, Inventory]:
    """The node's shared GPUs of the class (dra_devices.inventory), and the same devices as an
    annotation-model Inventory; kept while the node's pools (the store's cached list) and the
    class are the same objects, so the policies' per-node reads cost a look-up."""
    pools = dra.pools_for(node.name, node.labels)
    key = (node.name, device_class.name)
    inventories = _of(dra).inventories
    known = inventories.get(key)
    if known is not None and known[0] is pools and known[1] is device_class:
        return known[2], known[3]
    found = dra_devices.inventory(dra, device_class, node)
    inventory = Inventory(found.devices, found.error)
    if len(inventories) >= _INVENTORIES_KEPT:
        inventories.clear()
    inventories[key] = (pools, device_class, found, inventory)
    return found, inventory


class _PerNodeInfo:
    """Results remembered per (key, node) while the node's NodeInfo is the same object: the cluster
    state builds a node's NodeInfo again when its pods or its DRA shares or slices change
    (ClusterState._devices_changed), so a result read from the NodeInfo and the node's DRA state
    holds while it does. Bounded; shared by the threads of a process (a lost entry is recomputed)."""

    def __init__(self, limit: int = 100_000) -> None:
        self._values: dict[tuple[Any, str], tuple[NodeInfo, Any]] = {}
        self._limit = limit

    def get(self, key: Any, info: NodeInfo, compute: Callable[[], Any]) -> Any:
        entry = (key, info.name)
        known = self._values.get(entry)
        if known is not None and known[0] is info:
            return known[1]
        value = compute()
        if len(self._values) >= self._limit:
            self._values.clear()
        self._values[entry] = (info, value)
        return value



# Every device: the shared GPUs of a node whatever class a pod would ask for them by.
ANY_CLASS = DeviceClass("", (), (), None, {})


def node_state(info: NodeInfo, dra: DraView, class_name: str | None) -> GpuNode:
    """The node as the GPU-sharing policies read it, from its DRA devices of the class (None:
    every shared GPU of the node, for a pod that asks for none)."""
    if class_name is None:
        device_class: DeviceClass | None = ANY_CLASS if dra.enabled else None
    else:
        device_class = dra.device_class(class_name) if dra.enabled else None
    if device_class is None:
        return gpu_node(None, {}, info.free("cpu"))
    known_class = device_class

    def compute() -> GpuNode:
        found, inventory = node_gpus(dra, known_class, info.node)
        return gpu_node(inventory, found.use(dra), info.free("cpu"))

    return _of(dra).states.get(class_name, info, compute)  # type: ignore[no-any-return]  # the memo returns what compute made: a GpuNode


def _selected(gpus: ClaimGpus, found: dra_devices.DraInventory) -> dra_devices.DraInventory | Status:
    """The node's GPUs that the request's selectors select (all of them without selectors)."""
    if found.error:
        return _unresolvable(REASON_BAD_INVENTORY, found.error)
    if not gpus.request.selectors:
        return found
    owner = f"claim {gpus.claim.key}, request {gpus.request.name}"
    try:
        kept = tuple(gpu for gpu in found.gpus if request_selects(owner, gpus.request.selectors, gpu.device))
    except AllocationError as exc:
        return Status(Code.ERROR, (str(exc),), "", names.DEVICE_FIT)
    return found if len(kept) == len(found.gpus) else dra_devices.DraInventory(kept, found.skipped)


def _on_node(gpus: ClaimGpus, dra: DraView, info: NodeInfo) -> dra_devices.DraInventory | Status:
    found = _selected(gpus, node_gpus(dra, gpus.device_class, info.node)[0])
    if isinstance(found, Status):
        return found
    if not found.gpus:
        return _unresolvable(REASON_NO_DEVICES, lambda: f"no shared GPU of device class {gpus.device_class.name} on "
                             f"the node is selected by claim {gpus.claim.key}")
    return found


def _shortfall(shortfall: Shortfall) -> Status:
    code = Code.UNRESOLVABLE if shortfall.final else Code.UNSCHEDULABLE
    return Status(code, shortfall.reasons, shortfall.note, names.DEVICE_FIT)


@dataclass(frozen=True)
class ClaimCheck:
    """DeviceFit's Filter for a pod's shared-GPU claim: can the node's selected GPUs take the shares?"""

    gpus: ClaimGpus
    dra: DraView
    strategy: str

    def __call__(self, info: NodeInfo) -> Status | None:
        return _of(self.dra).verdicts.get((self.gpus.memo_key, self.strategy), info,  # type: ignore[no-any-return]  # the memo returns what the check made: a Status or None
                                          lambda: self._verdict(info))

    def _verdict(self, info: NodeInfo) -> Status | None:
        found = _on_node(self.gpus, self.dra, info)
        if isinstance(found, Status):
            return found
        result = choose(found.devices, found.use(self.dra), self.gpus.gpus, self.strategy, found.needs)
        return _shortfall(result) if isinstance(result, Shortfall) else None


# (pod, request in the annotation model's terms, node, inventory, use) -> the chosen shares, or None
# for the strategy's plain choice: gpu_choice.Chooser.choose.
Chooser = Callable[[PodView, DeviceRequest, NodeInfo, Inventory, Mapping[str, Use]],
                   "tuple[tuple[str, Shares], ...] | None"]


def reserve(gpus: ClaimGpus, pod: PodView, info: NodeInfo, dra: DraView, strategy: str,
            chooser: Chooser | None = None) -> Reservation | Status:
    """Choose the GPUs, allocate the claim with them first, hold the allocation in flight and
    describe its PreBind (BindClaim) and the assignment annotation."""
    found = _on_node(gpus, dra, info)
    if isinstance(found, Status):
        return found
    use = found.use(dra)
    picked = None if chooser is None else chooser(pod, gpus.gpus, info, Inventory(found.devices), use)
    chosen = choose(found.devices, use, gpus.gpus, strategy, found.needs) if picked is None else picked
    if isinstance(chosen, Shortfall):
        return _shortfall(chosen)
    prefer = [found.by_id[device_id].id for _, shares in chosen for device_id, _, _ in shares]
    node = info.node
    try:
        result = allocate([gpus.claim], node.name, node.labels, dra.pools_for(node.name, node.labels),
                          dra.device_class, dra.in_use(), consumed=dra.consumed(), prefer=prefer)
    except AllocationError as exc:
        return Status(Code.ERROR, (str(exc),), "", names.DEVICE_FIT)
    if isinstance(result, Unallocatable):
        return Status(Code.UNSCHEDULABLE, (REASON_CHANGED,), lambda: "; ".join(result.reasons), names.DEVICE_FIT)
    allocation = result.allocations[0]
    try:
        dra.assume_allocation(gpus.claim, allocation)
    except ValueError as exc:
        return Status(Code.UNSCHEDULABLE, (REASON_CHANGED,), str(exc), names.DEVICE_FIT)
    bind = BindClaim.of(gpus.claim, ConsumerRef("pods", pod.name, pod.uid), allocation)
    annotations = {ASSIGNMENT_ANNOTATION: _assignment(gpus, allocation, found, node.name).to_annotation()}
    uid = gpus.claim.uid
    return Reservation(names.DEVICE_FIT, annotations, (bind,), lambda: dra.release_allocation(uid), (bind.undo(),))


def _assignment(gpus: ClaimGpus, allocation: Allocation, found: dra_devices.DraInventory, node: str) -> Assignment:
    """The assignment annotation of what the allocation gives: each device's shown id and the MiB
    and percent its share takes (rounded up, as the request policy consumes them)."""
    by_device: dict[DeviceID, dra_devices.SharedGpu] = {gpu.id: gpu for gpu in found.gpus}
    container = gpus.gpus.containers[0]
    shares = []
    for result in allocation.results:
        gpu = by_device[result.id]
        share = gpu.share(container)
        memory, cores = (0, 0) if isinstance(share, str) else share[0]
        shares.append((gpu.view.id, memory, cores))
    return Assignment(node, ((container.container, tuple(shares)),))
