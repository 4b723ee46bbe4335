"""Shared devices (fractional GPUs): the annotation contract, pod requests and device arithmetic.

The node side and the scheduler side meet in three places, all under one prefix
(docs/devices.md is the contract for the people who write the node agent):

* the node publishes its devices in the annotation `extender.example/gpu-devices`:
  `{"devices": [{"id", "type", "memory" (MiB), "cores" (percent), "healthy"}]}`;
* a pod asks through extended resources that kube-scheduler is told to ignore
  (`managedResources` with `ignoredByScheduler: true`): `extender.example/gpu` (devices
  per container), `extender.example/gpu-memory` (MiB per device), `extender.example/gpu-cores`
  (percent of one device's compute, per device), and may require or avoid device types
  with the annotations `extender.example/gpu-type` / `extender.example/gpu-type-avoid`;
* at bind time the chosen devices go on the pod in `extender.example/gpu-assignment`,
  through the Binding (the API server copies it onto the pod in the same request).

Usage is never stored apart from the pods: a device's use is the sum of the assignments
of the pods bound to its node, so it survives restarts and every replica derives the same.
Everything here is pure: parsing, and the arithmetic of who uses how much of which device.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from extender.errors import InvalidObject
from extender.model.quantities import to_units

PREFIX = "extender.example"
GPU = f"{PREFIX}/gpu"
GPU_MEMORY = f"{PREFIX}/gpu-memory"
GPU_CORES = f"{PREFIX}/gpu-cores"
RESOURCES = (GPU, GPU_MEMORY, GPU_CORES)

INVENTORY_ANNOTATION = f"{PREFIX}/gpu-devices"
ASSIGNMENT_ANNOTATION = f"{PREFIX}/gpu-assignment"
TYPE_ANNOTATION = f"{PREFIX}/gpu-type"
AVOID_TYPE_ANNOTATION = f"{PREFIX}/gpu-type-avoid"

FULL_CORES = 100
MAX_DEVICES = 256  # per node: more is a broken agent, not a machine
MAX_MEMORY_MIB = 1 << 24  # 16 TiB in MiB: anything larger was written in bytes ("8Gi")
MAX_ID_LENGTH = 128

# How long a ledger entry protects a share after its bind: every process's watch must have
# seen the bound pod (and its assignment) by then. Also how long departures are remembered.
LEDGER_TTL_SECONDS = 60.0

BINPACK = "binpack"
SPREAD = "spread"
STRATEGIES = (BINPACK, SPREAD)


# ---- the node's inventory ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Device:
    id: str
    type: str
    memory: int  # MiB
    cores: int  # percent of the device's compute that may be shared out, 1..100
    healthy: bool = True
    index: int = 0  # position in the inventory: the tie-break, so choices are reproducible


@dataclass(frozen=True, slots=True)
class Inventory:
    """A node's devices, or why its annotation cannot be used (`error`)."""

    devices: tuple[Device, ...] = ()
    error: str = ""

    def capacity(self, device_id: str) -> tuple[int, int]:
        for device in self.devices:
            if device.id == device_id:
                return device.memory, device.cores
        return 0, 0


def _integer(raw: Any, where: str, minimum: int, maximum: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not minimum <= raw <= maximum:
        raise InvalidObject(f"{where}: expected an integer from {minimum} to {maximum}")
    return raw


def _device(raw: Any, index: int) -> Device:
    where = f"devices[{index}]"
    if not isinstance(raw, Mapping):
        raise InvalidObject(f"{where}: expected an object")
    device_id = raw.get("id")
    if not isinstance(device_id, str) or not device_id or len(device_id) > MAX_ID_LENGTH:
        raise InvalidObject(f"{where}.id: expected a non-empty string of at most {MAX_ID_LENGTH} characters")
    kind = raw.get("type", "")
    if not isinstance(kind, str):
        raise InvalidObject(f"{where}.type: expected a string")
    healthy = raw.get("healthy", True)
    if not isinstance(healthy, bool):
        raise InvalidObject(f"{where}.healthy: expected true or false")
    return Device(
        id=device_id,
        type=kind,
        memory=_integer(raw.get("memory"), f"{where}.memory (MiB)", 1, MAX_MEMORY_MIB),
        cores=_integer(raw.get("cores", FULL_CORES), f"{where}.cores (percent)", 1, FULL_CORES),
        healthy=healthy,
        index=index,
    )


def parse_inventory(text: str) -> Inventory:
    """Read the node annotation; a bad one gives an Inventory with `error` set, never an exception."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return Inventory(error=f"{INVENTORY_ANNOTATION} is not JSON: {exc}")
    try:
        if not isinstance(doc, Mapping):
            raise InvalidObject("expected an object with a devices list")
        version = doc.get("version", 1)
        if version != 1:
            raise InvalidObject(f"version: {version!r} is not supported (expected 1)")
        raw_devices = doc.get("devices")
        if not isinstance(raw_devices, list):
            raise InvalidObject("devices: expected a list")
        if len(raw_devices) > MAX_DEVICES:
            raise InvalidObject(f"devices: {len(raw_devices)} devices, at most {MAX_DEVICES} are supported")
        devices = tuple(_device(item, index) for index, item in enumerate(raw_devices))
        seen: set[str] = set()
        for device in devices:
            if device.id in seen:
                raise InvalidObject(f"devices: id {device.id!r} appears twice")
            seen.add(device.id)
    except InvalidObject as exc:
        return Inventory(error=f"{INVENTORY_ANNOTATION}: {exc}")
    return Inventory(devices)


_inventories: dict[str, Inventory] = {}
_INVENTORY_CACHE = 4096


def node_inventory(annotations: Any) -> Inventory | None:
    """The inventory a node's annotations publish, or None when it publishes none.

    Node objects are re-read on every heartbeat (and sent whole in NodeList requests),
    while their inventories rarely change: parsed once per distinct annotation text.
    """
    if not isinstance(annotations, Mapping):
        return None
    text = annotations.get(INVENTORY_ANNOTATION)
    if text is None:
        return None
    if not isinstance(text, str):
        return Inventory(error=f"{INVENTORY_ANNOTATION}: expected a string")
    found = _inventories.get(text)
    if found is None:
        found = parse_inventory(text)
        if len(_inventories) >= _INVENTORY_CACHE:
            _inventories.clear()
        _inventories[text] = found
    return found


def raw_annotations(obj: Mapping[str, Any]) -> Any:
    meta = obj.get("metadata")
    return meta.get("annotations") if isinstance(meta, Mapping) else None


# ---- what a pod asks for -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContainerRequest:
    """`count` distinct devices, each giving `memory` MiB (None: all of it) and `cores` percent
    (None: all of it; only with memory None)."""

    container: str
    count: int
    memory: int | None
    cores: int | None

    def describe(self) -> str:
        memory = "all memory" if self.memory is None else f"{self.memory} MiB"
        cores = "all cores" if self.cores is None else f"{self.cores}% cores"
        return f"container {self.container}: {self.count} GPU(s) with {memory} and {cores} each"


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    containers: tuple[ContainerRequest, ...]
    types: tuple[str, ...] = ()  # lower-cased; a device's type must contain one of them
    avoid: tuple[str, ...] = ()  # lower-cased; a device's type must contain none of them

    def accepts(self, device: Device) -> bool:
        kind = device.type.lower()
        if self.types and not any(t in kind for t in self.types):
            return False
        return not any(t in kind for t in self.avoid)


def requests_devices(requests: Mapping[str, int]) -> bool:
    """Cheap test on the pod's effective requests: does it ask for any device resource?"""
    return GPU in requests or GPU_MEMORY in requests or GPU_CORES in requests


def _amount(resources: Mapping[str, Any], name: str, where: str) -> int | None:
    """The container's request for `name` (its limit when no request: extended resources
    must have request == limit, and the API server defaults the request to the limit)."""
    for part in ("requests", "limits"):
        values = resources.get(part)
        if isinstance(values, Mapping) and name in values:
            try:
                return to_units(name, values[name])
            except InvalidObject as exc:
                raise InvalidObject(f"{where}.resources.{part}.{name}: {exc}") from None
    return None


def _container_request(container: Any, where: str) -> ContainerRequest | None:
    if not isinstance(container, Mapping):
        raise InvalidObject(f"{where}: expected a container object")
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return None
    count = _amount(resources, GPU, where)
    memory = _amount(resources, GPU_MEMORY, where)
    cores = _amount(resources, GPU_CORES, where)
    if not count and not memory and not cores:
        return None
    name = container.get("name")
    name = name if isinstance(name, str) and name else where
    if count is None:
        count = 1  # memory or cores alone: a share of one device
    if not 1 <= count <= MAX_DEVICES:
        raise InvalidObject(f"{where}: {GPU} must be from 1 to {MAX_DEVICES}, not {count}")
    if memory is not None and memory <= 0:
        memory = None
    if memory is not None and memory > MAX_MEMORY_MIB:
        raise InvalidObject(f"{where}: {GPU_MEMORY} is in MiB per device; {memory} MiB is more than any "
                            "device has (was it written in bytes, like 8Gi?)")
    if cores is not None and not 0 <= cores <= FULL_CORES:
        raise InvalidObject(f"{where}: {GPU_CORES} is a percentage of one device, from 0 to {FULL_CORES}, "
                            f"not {cores}")
    if cores is None and memory is not None:
        cores = 0  # a memory share alone does not reserve compute (time-sliced)
    return ContainerRequest(name, count, memory, cores)


def _types(annotations: Mapping[str, Any], key: str) -> tuple[str, ...]:
    raw = annotations.get(key)
    if not isinstance(raw, str):
        return ()
    return tuple(dict.fromkeys(part.strip().lower() for part in raw.split(",") if part.strip()))


def device_request(spec: Mapping[str, Any], annotations: Mapping[str, Any]) -> DeviceRequest | None:
    """What the pod asks for, per container; None when it asks for no device.

    App containers and sidecars (restartable init containers) run together, so their
    requests add up. A plain init container runs alone before them and would need its
    devices only for a while: its device requests are refused rather than guessed at.
    Raises InvalidObject naming the container and the value.
    """
    containers: list[ContainerRequest] = []
    for field_name in ("initContainers", "containers"):
        items = spec.get(field_name)
        if not isinstance(items, list):
            continue
        for index, container in enumerate(items):
            where = f"spec.{field_name}[{index}]"
            request = _container_request(container, where)
            if request is None:
                continue
            if field_name == "initContainers" and container.get("restartPolicy") != "Always":
                raise InvalidObject(f"{where}: GPU requests on init containers are not supported "
                                    "(put them on an app container or a sidecar)")
            containers.append(request)
    if not containers:
        return None
    return DeviceRequest(tuple(containers), _types(annotations, TYPE_ANNOTATION),
                         _types(annotations, AVOID_TYPE_ANNOTATION))


# ---- usage -------------------------------------------------------------------------------


class Use(NamedTuple):
    """What the pods on a device hold of it."""

    memory: int = 0
    cores: int = 0
    pods: int = 0


NO_USE = Use()
Share = tuple[str, int, int]  # (device id, MiB, cores percent)
Shares = tuple[Share, ...]


def add_shares(totals: dict[str, Use], shares: Iterable[Share], sign: int = 1) -> None:
    for device_id, memory, cores in shares:
        used = totals.get(device_id, NO_USE)
        totals[device_id] = Use(used.memory + sign * memory, used.cores + sign * cores, used.pods + sign)


@dataclass(frozen=True)
class NodeDeviceUse:
    """A node's device use as one process sees it: immutable, replaced whole on each change.

    `holders` are the pods holding shares (by UID): bound ones, from their assignment, and
    the ones this process is binding (claims). `gone` are pods that left the node (deleted,
    finished); `released` the claims this process gave up, with the wall-clock time it did.
    The last two let the cross-process ledger drop entries that no longer hold anything.
    """

    totals: Mapping[str, Use] = field(default_factory=dict)
    holders: Mapping[str, Shares] = field(default_factory=dict)
    gone: frozenset[str] = frozenset()
    released: Mapping[str, float] = field(default_factory=dict)

    def used(self, device_id: str) -> Use:
        return self.totals.get(device_id, NO_USE)


EMPTY_USE = NodeDeviceUse()


# ---- the assignment written at bind time -------------------------------------------------


@dataclass(frozen=True, slots=True)
class Assignment:
    """Which devices each container got, and how much of each."""

    node: str
    containers: tuple[tuple[str, Shares], ...]

    def shares(self) -> Shares:
        """Per device, summed over containers (two containers may share one device)."""
        totals: dict[str, list[int]] = {}
        for _, shares in self.containers:
            for device_id, memory, cores in shares:
                entry = totals.setdefault(device_id, [0, 0])
                entry[0] += memory
                entry[1] += cores
        return tuple((device_id, memory, cores) for device_id, (memory, cores) in totals.items())

    def to_annotation(self) -> str:
        body = {"node": self.node, "containers": {
            name: [{"id": d, "memory": m, "cores": c} for d, m, c in shares] for name, shares in self.containers}}
        return json.dumps(body, separators=(",", ":"))


def parse_assignment(text: Any) -> Assignment:
    """Read a pod's assignment annotation; raises InvalidObject naming what is wrong."""
    if not isinstance(text, str):
        raise InvalidObject(f"{ASSIGNMENT_ANNOTATION}: expected a string")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidObject(f"{ASSIGNMENT_ANNOTATION}: not JSON: {exc}") from None
    if not isinstance(doc, Mapping) or not isinstance(doc.get("node"), str) \
            or not isinstance(doc.get("containers"), Mapping):
        raise InvalidObject(f"{ASSIGNMENT_ANNOTATION}: expected {{node, containers}}")
    containers = []
    for name, items in doc["containers"].items():
        if not isinstance(items, list):
            raise InvalidObject(f"{ASSIGNMENT_ANNOTATION}: containers.{name}: expected a list")
        shares = []
        for index, item in enumerate(items):
            where = f"{ASSIGNMENT_ANNOTATION}: containers.{name}[{index}]"
            if not isinstance(item, Mapping) or not isinstance(item.get("id"), str) or not item["id"]:
                raise InvalidObject(f"{where}: expected {{id, memory, cores}}")
            shares.append((item["id"], _integer(item.get("memory"), f"{where}.memory", 0, MAX_MEMORY_MIB),
                           _integer(item.get("cores"), f"{where}.cores", 0, FULL_CORES)))
        containers.append((str(name), tuple(shares)))
    return Assignment(doc["node"], tuple(containers))


def assigned_shares(annotations: Any, node_name: str) -> Shares | None:
    """The shares a bound pod holds on `node_name`, from its annotation; None when it has none.

    An assignment made for another node (a pod recreated from a copy of a bound one) holds
    nothing here. Raises InvalidObject for an unreadable annotation.
    """
    if not isinstance(annotations, Mapping) or ASSIGNMENT_ANNOTATION not in annotations:
        return None
    assignment = parse_assignment(annotations[ASSIGNMENT_ANNOTATION])
    if assignment.node != node_name:
        return None
    return assignment.shares()


# ---- choosing devices --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Shortfall:
    """Why a node cannot give the pod its devices. `final`: not even with every device free.

    `note` writes the per-device numbers on demand: a refusal can happen on hundreds of
    nodes per request, and only explain and the logs read them.
    """

    reasons: tuple[str, ...]
    final: bool
    note: Callable[[], str]

    @property
    def detail(self) -> str:
        return self.note()


REASON_NO_DEVICES = "node(s) had no shared GPUs"
REASON_BAD_INVENTORY = "node(s) had an unreadable GPU inventory"
REASON_TOO_FEW = "node(s) had too few GPUs"
REASON_TYPE = "node(s) had too few GPUs of the requested type"
REASON_UNHEALTHY = "node(s) had too few healthy GPUs"
REASON_TOO_SMALL = "node(s) had too few GPUs large enough for the request"
REASON_POLICY = "node(s) had too few GPUs whose request policy allows the share"
REASON_MEMORY = "Insufficient GPU memory"
REASON_CORES = "Insufficient GPU cores"

# What a container's share takes of one device: (MiB, cores percent), or why the device cannot
# take it at all (a DRA device's request policy refusing the amount). The default, `whole_needs`,
# is the annotation contract's: the amounts asked, or the whole device for what is not asked.
Needs = Callable[[ContainerRequest, Device], tuple[int, int] | str]


def whole_needs(request: ContainerRequest, device: Device) -> tuple[int, int]:
    memory = device.memory if request.memory is None else request.memory
    cores = device.cores if request.cores is None else request.cores
    return memory, cores


def _fits_whole(needs: Needs, container: ContainerRequest, device: Device) -> bool:
    needed = needs(container, device)
    return not isinstance(needed, str) and needed[0] <= device.memory and needed[1] <= device.cores


def _static_shortfall(devices: Sequence[Device], request: DeviceRequest, container: ContainerRequest,
                      use: Mapping[str, Use], needs: Needs) -> Shortfall | None:
    """The shortfall that no amount of freeing would fix, checked in the order a user reads it."""
    def note(what: str) -> Callable[[], str]:
        return lambda: f"{container.describe()}; {what}; devices: {describe_devices(devices, use)}"

    if not devices:
        return Shortfall((REASON_NO_DEVICES,), True, lambda: "the node's inventory lists no devices")
    if len(devices) < container.count:
        return Shortfall((REASON_TOO_FEW,), True, note(f"the node has {len(devices)}"))
    typed = [d for d in devices if request.accepts(d)]
    if len(typed) < container.count:
        return Shortfall((REASON_TYPE,), True, note(f"{len(typed)} of {len(devices)} GPUs match the type rules"))
    healthy = [d for d in typed if d.healthy]
    if len(healthy) < container.count:
        return Shortfall((REASON_UNHEALTHY,), True, note(f"{len(healthy)} matching GPUs are healthy"))
    refused = [(d, needed) for d in healthy for needed in (needs(container, d),) if isinstance(needed, str)]
    if len(healthy) - len(refused) < container.count:
        why = "; ".join(needed for _, needed in refused)
        return Shortfall((REASON_POLICY,), True, note(f"{len(healthy) - len(refused)} healthy GPUs allow it ({why})"))
    large = [d for d in healthy if _fits_whole(needs, container, d)]
    if len(large) < container.count:
        return Shortfall((REASON_TOO_SMALL,), True, note(f"{len(large)} healthy GPUs are that large"))
    return None


def _room_note(container: ContainerRequest, room: int, devices: Sequence[Device],
               use: Mapping[str, Use]) -> Callable[[], str]:
    snapshot = dict(use)
    return lambda: f"{container.describe()}; {room} GPU(s) have room: {describe_devices(devices, snapshot)}"


def describe_devices(devices: Sequence[Device], use: Mapping[str, Use]) -> str:
    """"GPU-a (A100) 30720/40960 MiB, 70/100% cores free, 2 pods; GPU-b unhealthy" (explain, reasons)."""
    parts = []
    for device in devices:
        used = use.get(device.id, NO_USE)
        kind = f" ({device.type})" if device.type else ""
        state = "" if device.healthy else ", unhealthy"
        parts.append(f"{device.id}{kind} {device.memory - used.memory}/{device.memory} MiB, "
                     f"{device.cores - used.cores}/{device.cores}% cores free, {used.pods} pod(s){state}")
    return "; ".join(parts) if parts else "no devices"


def choose(devices: Sequence[Device], use: Mapping[str, Use], request: DeviceRequest,
           strategy: str = BINPACK, needs: Needs | None = None) -> tuple[tuple[str, Shares], ...] | Shortfall:
    """The devices each container gets on this node, or why there are not enough.

    Containers are served in order, each from the devices with room left after the ones
    before it. `binpack` takes the fullest devices that still fit (whole devices stay free
    for exclusive requests); `spread` the emptiest (less interference between pods).
    Ties go to the device listed first, so a choice is reproducible. `needs` says what a
    share takes of each device when that is not simply the amounts asked (`whole_needs`):
    DRA devices round them by their request policies.
    """
    used: Mapping[str, Use] = use  # copied before the first container's shares are added
    typed = bool(request.types or request.avoid)
    candidates = [d for d in devices if d.healthy and (not typed or request.accepts(d))]
    chosen: list[tuple[str, Shares]] = []
    for container in request.containers:
        fitting = []
        wanted_memory, wanted_cores = container.memory, container.cores
        for device in candidates:
            if needs is None:  # inlined whole_needs: this loop runs for every device of every node
                memory = device.memory if wanted_memory is None else wanted_memory
                cores = device.cores if wanted_cores is None else wanted_cores
            else:
                needed = needs(container, device)
                if isinstance(needed, str):
                    continue
                memory, cores = needed
            taken = used.get(device.id)
            if taken is None:
                free_memory, free_cores = device.memory, device.cores
            else:
                free_memory, free_cores = device.memory - taken.memory, device.cores - taken.cores
            if memory <= free_memory and cores <= free_cores:
                fitting.append((free_memory - memory, free_cores - cores, device.index, device, memory, cores))
        if len(fitting) < container.count:
            static = _static_shortfall(devices, request, container, used, needs or whole_needs)
            if static is not None:
                return static
            return Shortfall(_taken_reasons(candidates, used, container, needs or whole_needs) or (REASON_MEMORY,),
                             False,
                             _room_note(container, len(fitting), devices, used))
        if container.count == 1:  # the usual case: the best one, no sort
            best = max(fitting, key=_emptiest) if strategy == SPREAD else min(fitting, key=_fullest)
            shares: Shares = ((best[3].id, best[4], best[5]),)
        else:
            fitting.sort(key=_emptiest_first if strategy == SPREAD else _fullest)
            shares = tuple((f[3].id, f[4], f[5]) for f in fitting[:container.count])
        chosen.append((container.container, shares))
        if len(chosen) < len(request.containers):
            used = dict(used)
            add_shares(used, shares)
    return tuple(chosen)


def _fullest(fit: tuple[Any, ...]) -> tuple[int, int, int]:
    return fit[0], fit[1], fit[2]  # least left after the share, then the first listed


def _emptiest(fit: tuple[Any, ...]) -> tuple[int, int, int]:
    return fit[0], fit[1], -fit[2]  # for max(): most left, then the first listed


def _emptiest_first(fit: tuple[Any, ...]) -> tuple[int, int, int]:
    return -fit[0], -fit[1], fit[2]


def _taken_reasons(candidates: Sequence[Device], used: Mapping[str, Use],
                   container: ContainerRequest, needs: Needs) -> tuple[str, ...]:
    """Which of memory and cores the devices lack (the slow path, for refusals only)."""
    memory = cores = False
    for device in candidates:
        needed = needs(container, device)
        if isinstance(needed, str):
            continue
        need_memory, need_cores = needed
        taken = used.get(device.id, NO_USE)
        memory = memory or need_memory > device.memory - taken.memory
        cores = cores or need_cores > device.cores - taken.cores
    return tuple(r for r, short in ((REASON_MEMORY, memory), (REASON_CORES, cores)) if short)


def shortage(capacity: Mapping[str, tuple[int, int]], use: Mapping[str, Use], shares: Iterable[Share]) -> str:
    """Which device lacks room for `shares` on top of `use`, and by what; "" when they fit."""
    for device_id, memory, cores in shares:
        total_memory, total_cores = capacity.get(device_id, (0, 0))
        used = use.get(device_id, NO_USE)
        if used.memory + memory > total_memory or used.cores + cores > total_cores:
            # No "%": kube-scheduler uses a bind error as a format string in its event.
            return (f"device {device_id}: {memory} MiB and {cores} percent of compute wanted, "
                    f"{max(0, total_memory - used.memory)} MiB and {max(0, total_cores - used.cores)} percent free")
    return ""


def utilisation(devices: Sequence[Device], use: Mapping[str, Use],
                added: Mapping[str, tuple[int, int]] | None = None) -> tuple[float, float]:
    """Fractions 0..1 of memory and cores in use (their average) on the node's healthy devices,
    and on the devices `added` to (MiB, cores each), with those shares on top; one pass, as a
    scorer runs it for every node."""
    added = added or {}
    total_memory = total_cores = used_memory = used_cores = 0  # the node's
    added_memory = added_cores = added_used_memory = added_used_cores = 0  # the devices added to
    for device in devices:
        if not device.healthy:
            continue
        taken = use.get(device.id)
        memory, cores = (taken.memory, taken.cores) if taken is not None else (0, 0)
        extra = added.get(device.id)
        if extra is not None:
            memory, cores = memory + extra[0], cores + extra[1]
        memory = memory if memory < device.memory else device.memory
        cores = cores if cores < device.cores else device.cores
        total_memory += device.memory
        total_cores += device.cores
        used_memory += memory
        used_cores += cores
        if extra is not None:
            added_memory += device.memory
            added_cores += device.cores
            added_used_memory += memory
            added_used_cores += cores
    node = (used_memory / total_memory + used_cores / total_cores) / 2 if total_memory else 0.0
    chosen = (added_used_memory / added_memory + added_used_cores / added_cores) / 2 if added_memory else 0.0
    return node, chosen


# ---- the bind-time action ----------------------------------------------------------------


@dataclass(frozen=True)
class LedgerClaim:
    """PreBind work (see extender.policy.reservations): before the Binding, record `shares` in
    the node's ledger, which every process binding device pods checks and writes with
    optimistic concurrency, so two processes can never hand out the same share.

    `use` is what this process counted on the node when it claimed (the pod included):
    the ledger adds only what this process has not seen yet. When the ledger shows the
    chosen shares taken, `rechoose(the ledger's other entries, by UID)` may move the claim to
    other devices of the same node (updating the assignment the Binding will carry), judging
    by those entries and this process's current claims: it returns the new shares and their
    capacity, or None when nothing fits.
    """

    node: str
    pod: str  # namespace/name, for people reading the ledger
    ident: str  # the pod's UID
    shares: Shares
    capacity: Mapping[str, tuple[int, int]]
    use: NodeDeviceUse
    rechoose: Callable[[Mapping[str, Shares]], tuple[Shares, Mapping[str, tuple[int, int]]] | None] | None = \
        field(default=None, compare=False, repr=False)
