"""The structured-parameters allocator: which devices of a node's pools satisfy a pod's
pending claims, as kube-scheduler's DynamicResources Filter decides it.

The facts, and the order of the search (which is what makes us pick the same device where
several fit), are those of the implementation kube-scheduler v1.36 runs,
k8s.io/dynamic-resource-allocation@v0.36.3/structured/internal/incubating/allocator_incubating.go,
with admin access, prioritized list, device taints, partitionable devices, consumable
capacity and binding conditions (a device's conditions are copied into its result, and a
device that binds to its node pins the claim there; its pool comes last, see gather_pools):

- every request of every claim is checked up front (class, selectors present, count mode,
  "All" devices listed, the 32-results limit, constraint types); problems there are errors;
- then a depth-first search: claims in order, their requests in order, for each wanted
  device the pools' devices in order (pool, slice, device), with backtracking on failure;
  the next device of the same request is looked for only after the previous one (the
  incubating allocator's startLocation: combinations, not permutations). A firstAvailable
  request tries its subrequests in order and takes the first one with which everything that
  follows can also be allocated;
- a device is allocatable when it is not in use (admin access: unless in use by the same
  claim), the class selectors then the request selectors are true, it reaches the node (a
  perDeviceNodeSelection slice names each device's nodes), every counter it consumes has
  room left in its pool's counter set, each of its NoSchedule/NoExecute taints is tolerated
  by the request, every constraint of the claim accepts it (matchAttribute: one value;
  distinctAttribute: each its own), and the capacity the request asks of it fits (below);
- consumable capacity (DRAConsumableCapacity): the amount a request consumes of each
  capacity of a device is what it asks rounded up by the capacity's requestPolicy (its
  default, or the whole capacity, when it asks nothing); the policy must allow it and every
  device's shares together stay within its value. A device with allowMultipleAllocations is
  never in use: several claims, and several requests of one search, take shares of it, each
  result with a new shareID and its consumedCapacity; a device without takes it whole.

A CEL compile or runtime error aborts the whole call (an error, not "unschedulable"), as
does a class that does not exist.

The result of one call is either a `NodeAllocation` (one `Allocation` per claim) or an
`Unallocatable` whose `status_reason` is the text kube-scheduler reports and whose
`reasons` say why, for explain. Pure: no I/O.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from itertools import islice
from typing import Any, NamedTuple

from extender.dra.capacity import Quantity
from extender.dra.cel import CelError, CelRuntimeError, compile_selector
from extender.dra.objects import (
    ALL,
    ALLOCATION_RESULTS_MAX_SIZE,
    EXACT_COUNT,
    FIRST_AVAILABLE_MAX_SIZE,
    FROM_CLAIM,
    FROM_CLASS,
    Allocation,
    Constraint,
    Device,
    DeviceClass,
    DeviceID,
    DeviceRequest,
    DeviceResult,
    DeviceTaint,
    Pool,
    Request,
    ResourceClaim,
    ResourceSlice,
    pinned_to,
)
from extender.errors import ExtenderError

CANNOT_ALLOCATE = "cannot allocate all claims"
INVALID_POOLS = "invalid resource pools were encountered"


class AllocationError(ExtenderError):
    """What kube-scheduler treats as an error of the scheduling attempt (statusError), not
    as an unschedulable node: a missing class, a CEL error, a request the allocator cannot
    read, an "All" request meeting an incomplete pool."""


class SearchLimitExceeded(AllocationError):
    """`max_backtracks` was reached: our stand-in for the Filter timeout, which
    kube-scheduler also reports as an error so that the pod retries after a backoff."""


@dataclass(frozen=True)
class NodeAllocation:
    """The claims can be allocated on this node. The allocations themselves (results, config,
    node selector) are written only when read: Filter needs the verdict for every node, Reserve
    and Score the allocations of a few."""

    build: Callable[[], tuple[Allocation, ...]]
    backtracks: int
    claims: Sequence[ResourceClaim] = ()

    @cached_property
    def allocations(self) -> tuple[Allocation, ...]:
        return self.build()

    @property
    def score(self) -> int:
        """The DynamicResources Score of these claims' choice on this node (first_available_score)."""
        return first_available_score(self.claims, self.allocations)


NOTHING_TO_ALLOCATE = NodeAllocation(tuple, 0)


@dataclass(frozen=True)
class Unallocatable:
    """No allocation on this node. `reasons` (for explain) are written only when read: a full
    cluster refuses most nodes for every pod, and only explain and the logs look at why."""

    explain: Callable[[], tuple[str, ...]]
    status_reason: str = CANNOT_ALLOCATE

    @property
    def reasons(self) -> tuple[str, ...]:
        return self.explain()


def first_available_score(claims: Sequence[ResourceClaim], allocations: Sequence[Allocation]) -> int:
    """DynamicResources Score in v1.36 (dynamicresources.go computeScore): for every
    firstAvailable request, FirstAvailableDeviceRequestMaxSize (8) minus the index of the
    subrequest that was allocated, summed over the claims; `allocations[i]` is claim i's."""
    score = 0
    for claim, allocation in zip(claims, allocations, strict=True):
        chosen = {result.request for result in allocation.results if "/" in result.request}
        for request in claim.requests:
            if request.exactly is not None:
                continue
            for index, sub in enumerate(request.first_available):
                if sub.name in chosen:
                    score += FIRST_AVAILABLE_MAX_SIZE - index
    return score


def allocate(claims: Sequence[ResourceClaim], node_name: str, labels: Mapping[str, str], pools: Sequence[Pool],
             device_class: Callable[[str], DeviceClass | None], in_use: Collection[DeviceID], *,
             consumed: Mapping[DeviceID, Mapping[str, Fraction]] = {},  # noqa: B006 - read only
             max_backtracks: int | None = None, prefer: Sequence[DeviceID] = ()) -> NodeAllocation | Unallocatable:
    """Allocate `claims` together on one node from `pools` (`gather_pools` for that node).

    `prefer`: devices to try first, in this order, before the others in pool order. It changes
    which of the valid allocations is found, never whether one is: kube-scheduler takes the
    first devices that fit; DeviceFit puts the GPUs its strategy chose first (gpu_claims.py).

    `in_use` holds the devices allocated exclusively to other claims or in flight (results
    with no shareID, `DeviceResult.exclusive`); it should be a set. `consumed` holds every
    device shared by such allocations, with what their shares consume of its capacities
    (`objects.consumed_capacity`). The counters that the devices of either in `pools` consume
    are taken from their counter sets. Raises AllocationError where kube-scheduler's Filter
    returns an error.
    """
    search = _Search(claims, node_name, labels, pools, device_class, in_use, consumed, max_backtracks, prefer)
    search.prepare()
    if not search.run():
        if any(pool.invalid for pool in pools):
            return Unallocatable(search.explain, INVALID_POOLS)
        return Unallocatable(search.explain)
    return NodeAllocation(lambda: tuple(search.allocation(index) for index in range(len(claims))), search.backtracks,
                          claims)


def _preferred_first(candidates: Sequence[Candidate], prefer: Sequence[DeviceID]) -> list[Candidate]:
    """The candidates with `prefer`'s devices first, in its order; the rest in pool order."""
    rank = {device_id: i for i, device_id in enumerate(prefer)}
    first = sorted((c for c in candidates if c[0] in rank), key=lambda c: rank[c[0]])
    return [*first, *(c for c in candidates if c[0] not in rank)]


class _TooManyResults(Exception):
    """errAllocationResultMaxSizeExceeded: no way on from here stays within 32 results."""


Candidate = tuple[DeviceID, Device, ResourceSlice]


@dataclass(slots=True)
class _Wanted:
    """requestData: one exact request or one subrequest, checked and with its class."""

    request: DeviceRequest
    parent: Request | None
    device_class: DeviceClass
    num_devices: int
    all_devices: list[Candidate] | None  # for allocationMode All: fixed up front


class _AttributeConstraint:
    """What matchAttribute and distinctAttribute constraints (constraint.go) share: they bind
    the devices of the constrained requests (none named: every request), each of which must
    have the attribute; `admits` and `keep` say what else a value must be. `count` is how
    many devices hold the constraint now."""

    __slots__ = ("requests", "attribute", "count")

    def __init__(self, constraint: Constraint, attribute: str) -> None:
        self.requests = frozenset(constraint.requests)
        self.attribute = attribute
        self.count = 0

    def applies(self, request: DeviceRequest) -> bool:
        if not self.requests:
            return True
        return request.request in self.requests or (bool(request.subrequest) and request.name in self.requests)

    def add(self, request: DeviceRequest, device: Device) -> bool:
        if not self.applies(request):
            return True
        value = _lookup_attribute(device, self.attribute)
        if value is None or (self.count and not self.admits(value)):
            return False
        self.keep(request, value)
        self.count += 1
        return True

    def remove(self, request: DeviceRequest) -> None:
        if self.applies(request):
            self.forget(request)
            self.count -= 1

    def admits(self, value: Mapping[str, Any]) -> bool:
        """Whether a device with `value` may join the `count` (> 0) devices held already."""
        raise NotImplementedError

    def keep(self, request: DeviceRequest, value: Mapping[str, Any]) -> None:
        """Remember what `admits` compares later devices with."""

    def forget(self, request: DeviceRequest) -> None:
        """A device of `request` is taken back."""


class _MatchAttribute(_AttributeConstraint):
    """matchAttributeConstraint: every device of the constrained requests has the attribute,
    with the same type and value as the first one. Only counts are tracked (monotonic)."""

    __slots__ = ("first",)

    def __init__(self, constraint: Constraint, attribute: str) -> None:
        super().__init__(constraint, attribute)
        self.first: Mapping[str, Any] | None = None

    def admits(self, value: Mapping[str, Any]) -> bool:
        kind = _attribute_kind(value)
        return kind is not None and self.first is not None and kind in self.first and self.first[kind] == value[kind]

    def keep(self, request: DeviceRequest, value: Mapping[str, Any]) -> None:
        if self.count == 0:
            self.first = value


class _DistinctAttribute(_AttributeConstraint):
    """distinctAttributeConstraint (constraint.go, DRAConsumableCapacity): every device of the
    constrained requests has the attribute, each with a value of its own. As in the source,
    the values are remembered by (parent) request name, so a request of several devices keeps
    only its latest one, and taking a device back forgets that request's value."""

    __slots__ = ("values",)

    def __init__(self, constraint: Constraint, attribute: str) -> None:
        super().__init__(constraint, attribute)
        self.values: dict[str, Mapping[str, Any]] = {}

    def admits(self, value: Mapping[str, Any]) -> bool:
        kind = _attribute_kind(value)
        return kind is not None and not any(seen.get(kind) is not None and seen[kind] == value[kind]
                                            for seen in self.values.values())

    def keep(self, request: DeviceRequest, value: Mapping[str, Any]) -> None:
        self.values[request.request] = value

    def forget(self, request: DeviceRequest) -> None:
        self.values.pop(request.request, None)


def _attribute_kind(value: Mapping[str, Any]) -> str | None:
    """The value's type, in the order matchAttributeConstraint.add switches on them; the
    list types (DRAListTypeAttributes, alpha) are unknown to the GA allocator."""
    for kind in ("string", "int", "bool", "version"):
        if value.get(kind) is not None:
            return kind
    return None


def _lookup_attribute(device: Device, name: str) -> Mapping[str, Any] | None:
    """lookupAttribute: the name as written first, then, when its domain is the driver's,
    the bare identifier (drivers may publish their own attributes unqualified)."""
    value = device.attributes.get(name)
    if value is None:
        domain, slash, ident = name.partition("/")
        if not slash or domain != device.driver:
            return None
        value = device.attributes.get(ident)
    return value if isinstance(value, Mapping) else None


def _claim_ref(claim: ResourceClaim) -> str:
    """klog.KObj: namespace/name, or the bare name without a namespace."""
    return f"{claim.namespace}/{claim.name}" if claim.namespace else claim.name


class _RuntimeFailure(ValueError):
    """A selector failed while evaluating on a device (kept as the device's verdict)."""


def _verdict(expression: str, device: Device) -> bool | ValueError:
    """The selector on the device: True, False, or the error (compile or runtime), to keep."""
    try:
        selector = compile_selector(expression)
    except CelError as error:
        return error
    try:
        return bool(selector.matches(device.cel))
    except (CelRuntimeError, CelError) as error:
        return _RuntimeFailure(str(error))


def _untolerated(device: Device, request: DeviceRequest) -> DeviceTaint | None:
    """taintPreventsAllocation: the first NoSchedule or NoExecute taint that none of the
    request's tolerations tolerates. Both effects keep a device from being allocated; None
    and unknown effects are ignored. Admin access does not lift it."""
    for taint in device.taints:
        if taint.blocks_allocation and not any(t.tolerates(taint) for t in request.tolerations):
            return taint
    return None


_BINARY_SUFFIXES = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def _quantity(value: Fraction) -> str:
    """A counter's value for a reason: whole numbers with the largest binary suffix that divides them."""
    if value.denominator != 1:
        return str(float(value))
    number = int(value)
    for suffix, size in _BINARY_SUFFIXES:
        if number and number % size == 0:
            return f"{number // size}{suffix}"
    return str(number)


class _Counters:
    """The counters of the node's pools during one search (checkAvailableCounters,
    deallocateCountersForDevice in allocator_incubating.go).

    A pool's available counters are its counter sets less what its devices in use consume,
    computed on the first device of that pool that consumes counters, and fixed for the
    search; they can be below zero (over-committed). `consumed` holds what the devices picked
    so far take; `take` adds a device's consumption only if every counter of the pool then
    stays within what is available, and `give_back` undoes it.
    """

    __slots__ = ("pools", "in_use", "shared", "available", "overcommitted", "consumed")

    def __init__(self, pools: Sequence[Pool], in_use: Collection[DeviceID], shared: Collection[DeviceID]) -> None:
        self.pools = {(pool.driver, pool.name): pool for pool in pools}
        self.in_use = in_use
        self.shared = shared
        self.available: dict[tuple[str, str], dict[tuple[str, str], Fraction]] = {}  # (set, counter) -> value
        self.overcommitted: dict[tuple[str, str], bool] = {}
        self.consumed: dict[tuple[str, str], dict[tuple[str, str], Fraction]] = {}

    def _available(self, key: tuple[str, str]) -> dict[tuple[str, str], Fraction]:
        available = self.available.get(key)
        if available is not None:
            return available
        pool = self.pools[key]
        available = {(set_name, counter): value for set_name, counter_set in pool.counter_sets.items()
                     for counter, value in counter_set.counters.items()}
        for device_id, device in pool.consumers:
            # internal.IsDeviceAllocated: held exclusively, or shared by at least one allocation.
            if device_id in self.in_use or device_id in self.shared:
                for consumption in device.consumes_counters:
                    for counter, value in consumption.counters.items():
                        available[(consumption.name, counter)] -= value
        self.available[key] = available
        # The source compares every counter of the pool for each device: one below zero
        # refuses every device of the pool that consumes counters, whichever it consumes.
        self.overcommitted[key] = any(value < 0 for value in available.values())
        return available

    def take(self, device_id: DeviceID, device: Device) -> bool:
        key = (device_id.driver, device_id.pool)
        available = self._available(key)
        if self.overcommitted[key]:
            return False
        consumed = self.consumed.setdefault(key, {})
        for consumption in device.consumes_counters:
            for counter, value in consumption.counters.items():
                name = (consumption.name, counter)
                consumed[name] = consumed.get(name, 0) + value
        # Counters this device does not touch were within bounds before it (every earlier take checked them).
        if all(consumed[(c.name, counter)] <= available[(c.name, counter)]
               for c in device.consumes_counters for counter in c.counters):
            return True
        self.give_back(device_id, device)
        return False

    def give_back(self, device_id: DeviceID, device: Device) -> None:
        consumed = self.consumed[(device_id.driver, device_id.pool)]
        for consumption in device.consumes_counters:
            for counter, value in consumption.counters.items():
                consumed[(consumption.name, counter)] -= value

    def shortage(self, device_id: DeviceID, device: Device) -> str:
        """Why `device` alone does not fit the counters the devices in use leave, or "" if it does."""
        key = (device_id.driver, device_id.pool)
        available = self._available(key)
        counter_sets = self.pools[key].counter_sets
        for consumption in device.consumes_counters:
            for counter, value in consumption.counters.items():
                left = available[(consumption.name, counter)]
                if value > left:
                    total = counter_sets[consumption.name].counters[counter]
                    return (f"counter set {consumption.name} of device {device_id} has "
                            f"{_quantity(max(left, Fraction(0)))} of {_quantity(total)} {counter} left, "
                            f"needs {_quantity(value)}")
        if self.overcommitted[key]:
            (set_name, counter), _ = next(item for item in available.items() if item[1] < 0)
            return (f"counter set {set_name} of device {device_id} has 0 of "
                    f"{_quantity(counter_sets[set_name].counters[counter])} {counter} left "
                    "(over-committed by the devices in use)")
        return ""


class _Picked(NamedTuple):
    """One device picked in the search; `shared` for a share of a device that allows multiple
    allocations, with what it consumes of each capacity of the device."""

    request: DeviceRequest
    candidate: Candidate
    shared: bool = False
    consumed: Mapping[str, Quantity] | None = None


class _Search:
    def __init__(self, claims: Sequence[ResourceClaim], node_name: str, labels: Mapping[str, str],
                 pools: Sequence[Pool], device_class: Callable[[str], DeviceClass | None],
                 in_use: Collection[DeviceID], consumed: Mapping[DeviceID, Mapping[str, Fraction]],
                 max_backtracks: int | None, prefer: Sequence[DeviceID] = ()) -> None:
        self.claims = claims
        self.node_name = node_name
        self.labels = labels
        self.pools = pools
        self.device_class = device_class
        self.in_use = in_use
        self.consumed = consumed
        self.max_backtracks = max_backtracks
        self.backtracks = 0
        # Each pool's devices in visiting order; the search picks from complete, valid pools only.
        self.by_pool: list[tuple[Candidate, ...]] = [pool.devices for pool in pools]
        usable = [pool.devices for pool in pools if not pool.incomplete and not pool.invalid]
        self.candidates: Sequence[Candidate] = usable[0] if len(usable) == 1 else [c for d in usable for c in d]
        if prefer:
            self.candidates = _preferred_first(self.candidates, prefer)
        self.wanted: dict[tuple[int, int, int], _Wanted] = {}
        self.chosen_sub: dict[tuple[int, int], int] = {}
        self.constraints: list[list[_AttributeConstraint]] = []
        self.results: list[list[_Picked]] = [[] for _ in claims]
        self.allocating: dict[DeviceID, set[int]] = {}
        # allocatingCapacity: the shares of multi-allocatable devices picked so far, and their sum.
        self.shares: dict[DeviceID, int] = {}
        self.allocating_capacity: dict[DeviceID, dict[str, Fraction]] = {}
        self.matches: dict[tuple[DeviceID, int, int, int], bool] = {}
        self._counter_book: _Counters | None = None  # only for pools with devices that consume counters

    @property
    def counters(self) -> _Counters:
        if self._counter_book is None:
            self._counter_book = _Counters(self.pools, self.in_use, self.consumed)
        return self._counter_book

    # -- the checks before the search (Allocate's first loop, validateDeviceRequest) --

    def prepare(self) -> None:
        for c, claim in enumerate(self.claims):
            minimum = 0
            for r, request in enumerate(claim.requests):
                if request.first_available:
                    counts = [self._check(c, r, s, sub, request) for s, sub in enumerate(request.first_available)]
                    minimum += min(counts)
                elif request.exactly is not None:
                    minimum += self._check(c, r, 0, request.exactly, None)
                else:
                    raise AllocationError(f"claim {_claim_ref(claim)}, request {request.name}: "
                                          "missing device class name (unsupported request type?)")
            if minimum > ALLOCATION_RESULTS_MAX_SIZE:
                raise AllocationError(f"claim {_claim_ref(claim)}: number of requested devices {minimum} "
                                      f"exceeds the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}")
            constraints: list[_AttributeConstraint] = []
            for i, constraint in enumerate(claim.constraints):
                if constraint.match_attribute is not None:
                    constraints.append(_MatchAttribute(constraint, constraint.match_attribute))
                elif constraint.distinct_attribute is not None:
                    constraints.append(_DistinctAttribute(constraint, constraint.distinct_attribute))
                else:
                    raise AllocationError(f"claim {_claim_ref(claim)}, constraint #{i}: "
                                          "empty constraint (unsupported constraint type?)")
            self.constraints.append(constraints)

    def _check(self, c: int, r: int, s: int, request: DeviceRequest, parent: Request | None) -> int:
        claim = self.claims[c]
        label = f"claim {_claim_ref(claim)}, request {request.subrequest or request.request}"
        for i, expression in enumerate(request.selectors):
            if not expression:
                raise AllocationError(f"{label}, selector #{i}: CEL expression empty (unsupported selector type?)")
        if not request.device_class:
            raise AllocationError(f"{label}: missing device class name (unsupported request type?)")
        device_class = self.device_class(request.device_class)
        if device_class is None:
            raise AllocationError(f"{label}: could not retrieve device class {request.device_class}: "
                                  f'deviceclass.resource.k8s.io "{request.device_class}" not found')
        wanted = _Wanted(request, parent, device_class, 0, None)
        self.wanted[(c, r, s)] = wanted
        if request.allocation_mode == EXACT_COUNT:
            wanted.num_devices = request.count
        elif request.allocation_mode == ALL:
            wanted.all_devices = []
            for pool, candidates in zip(self.pools, self.by_pool, strict=True):
                if pool.incomplete:
                    raise AllocationError(f"{label}: asks for all devices, but resource pool {pool} "
                                          "is currently being updated")
                if pool.invalid:
                    raise AllocationError(f"{label}: asks for all devices, but resource pool {pool} "
                                          "is currently invalid")
                wanted.all_devices.extend(cand for cand in candidates if self._selectable(c, r, s, wanted, cand)
                                          and self._capacity_fits(request, cand))
            wanted.num_devices = len(wanted.all_devices)
        else:
            raise AllocationError(f"{label}: unsupported count mode {request.allocation_mode}")
        return wanted.num_devices

    # -- selectors --

    def _selectable(self, c: int, r: int, s: int, wanted: _Wanted, candidate: Candidate) -> bool:
        """isSelectable: class selectors, then the request's; cached per device and request."""
        device_id = candidate[0]
        key = (device_id, c, r, s)
        known = self.matches.get(key)
        if known is not None:
            return known
        cls = wanted.device_class
        result = (self._selectors_match(f"class {cls.name}", cls.selectors, candidate)
                  and self._selectors_match(f"claim {_claim_ref(self.claims[c])}", wanted.request.selectors, candidate)
                  and (not candidate[2].per_device_node_selection or self._reaches(candidate)))
        self.matches[key] = result
        return result

    def _reaches(self, candidate: Candidate) -> bool:
        """isSelectable's last check: a device of a perDeviceNodeSelection slice must reach the node itself."""
        _, device, slice_ = candidate
        return not slice_.per_device_node_selection or device.available_on(self.node_name, self.labels)

    def _selectors_match(self, owner: str, expressions: Sequence[str], candidate: Candidate) -> bool:
        return _selectors_hold(owner, expressions, candidate[1])

    # -- the search (allocateOne, allocateDevice) --

    def run(self) -> bool:
        try:
            return self._one(0, 0, 0, 0, False, 0)
        except _TooManyResults:
            return False

    def _in_use(self, device_id: DeviceID) -> bool:
        return device_id in self.in_use or bool(self.allocating.get(device_id))

    def _one(self, c: int, r: int, s: int, d: int, in_sub: bool, start: int) -> bool:
        """allocateOne: device `d` of subrequest `s` of request `r` of claim `c`, looking at
        the candidates from `start` on (after the request's previous device)."""
        if c >= len(self.claims):
            return True
        claim = self.claims[c]
        if r >= len(claim.requests):
            try:
                return self._one(c + 1, 0, 0, 0, False, 0)
            except _TooManyResults:
                # Another choice in this claim's subrequests may need fewer devices.
                return False
        wanted = self.wanted[(c, r, s)]
        if not in_sub and wanted.parent is not None:
            all_too_many = True
            for sub in range(len(wanted.parent.first_available)):
                try:
                    done = self._one(c, r, sub, d, True, 0)
                except _TooManyResults:
                    continue
                all_too_many = False
                if done:
                    self.chosen_sub[(c, r)] = sub
                    return True
            if all_too_many:
                raise _TooManyResults
            return False

        if wanted.all_devices is not None and not wanted.all_devices:
            return False  # "All" needs at least one device
        if d >= wanted.num_devices:
            return self._one(c, r + 1, 0, 0, False, 0)
        if len(self.results[c]) + wanted.num_devices - d > ALLOCATION_RESULTS_MAX_SIZE:
            raise _TooManyResults

        if wanted.all_devices is not None:
            undo = self._take(c, wanted, wanted.all_devices[d], must=True)
            if undo is None:
                return False
            try:
                done = self._one(c, r, s, d + 1, in_sub, 0)
            except BaseException:
                undo()
                raise
            if not done:
                self._backtrack(undo)
            return done

        admin = wanted.request.admin_access
        for index, candidate in enumerate(islice(self.candidates, start, None), start):
            device_id = candidate[0]
            if admin:
                if c in self.allocating.get(device_id, ()):
                    continue
            elif self._in_use(device_id):
                continue
            if not self._selectable(c, r, s, wanted, candidate):
                continue
            undo = self._take(c, wanted, candidate, must=False)
            if undo is None:
                continue
            try:
                done = self._one(c, r, s, d + 1, in_sub, index + 1)
            except BaseException:
                undo()
                raise
            if done:
                return True
            self._backtrack(undo)
        return False

    def _backtrack(self, undo: Callable[[], None]) -> None:
        """Give back a device after nothing worked with it, counting against `max_backtracks`."""
        undo()
        self.backtracks += 1
        if self.max_backtracks is not None and self.backtracks > self.max_backtracks:
            raise SearchLimitExceeded(f"gave up after {self.max_backtracks} backtracks trying to allocate devices")

    def _take(self, c: int, wanted: _Wanted, candidate: Candidate, *, must: bool) -> Callable[[], None] | None:
        """allocateDevice: the device's availability, the claim's constraints and the capacity
        asked of it; on success the device is recorded and the returned function undoes that.
        A device that allows multiple allocations is never marked in use: it takes a share,
        and its counters only with its first share (skipCounterCheck)."""
        device_id, device, _ = candidate
        request = wanted.request
        multi = device.allow_multiple_allocations
        if request.admin_access:
            if not multi and c in self.allocating.get(device_id, ()):
                return None
        elif self._in_use(device_id):
            return None
        counted = bool(device.consumes_counters) and not (multi and self._capacity_in_use(device_id))
        if counted and not self.counters.take(device_id, device):
            return None
        if device.taints and _untolerated(device, request) is not None:
            if counted:
                self.counters.give_back(device_id, device)
            return None
        constraints = self.constraints[c]
        for added, constraint in enumerate(constraints):
            if not constraint.add(request, device):
                for previous in reversed(constraints[:added]):
                    previous.remove(request)
                if counted:
                    self.counters.give_back(device_id, device)
                if must:
                    raise AllocationError(
                        f"claim {_claim_ref(self.claims[c])}, request {request.subrequest or request.request}: "
                        f"cannot add device {device_id} because a claim constraint would not be satisfied")
                return None
        if not self._capacity_fits(request, candidate):
            for constraint in reversed(constraints):
                constraint.remove(request)
            if counted:
                self.counters.give_back(device_id, device)
            return None
        results = self.results[c]
        if multi:
            consumed = {name: capacity.consumed(request.capacity.get(name))
                        for name, capacity in device.capacities.items()}
            self._add_share(device_id, consumed, 1)
            results.append(_Picked(request, candidate, True, consumed))
        else:
            self.allocating.setdefault(device_id, set()).add(c)
            results.append(_Picked(request, candidate))

        def undo() -> None:
            picked = results.pop()
            if multi:
                self._add_share(device_id, picked.consumed or {}, -1)
            else:
                self.allocating[device_id].discard(c)
            for constraint in reversed(constraints):
                constraint.remove(request)
            if counted:
                self.counters.give_back(device_id, device)

        return undo

    # -- consumable capacity (CmpRequestOverCapacity, consumable_capacity.go) --

    def _capacity_in_use(self, device_id: DeviceID) -> bool:
        """deviceCapacityInUse: some share of the device (stored, in flight or in this search)
        reports consumed capacity; for a share of a device with no capacity, only this search's."""
        return bool(self.consumed.get(device_id)) or self.shares.get(device_id, 0) > 0

    def _add_share(self, device_id: DeviceID, consumed: Mapping[str, Quantity], sign: int) -> None:
        self.shares[device_id] = self.shares.get(device_id, 0) + sign
        total = self.allocating_capacity.setdefault(device_id, {})
        for name, quantity in consumed.items():
            total[name] = total.get(name, Fraction(0)) + sign * quantity.value

    def _capacity_fits(self, request: DeviceRequest, candidate: Candidate) -> bool:
        """CmpRequestOverCapacity, for every device: each requested capacity must exist; for
        each capacity of the device, the amount consumed (the request rounded up by the policy,
        or the default, or everything) must be allowed by its policy, and with what the device's
        other shares consume stay within its value. A device without capacities takes any
        request that names none."""
        device_id, device, _ = candidate
        if not device.capacities:
            return not request.capacity
        if (not request.capacity and device.whole_capacity and device_id not in self.consumed
                and not self.shares.get(device_id)):
            return True  # takes each capacity whole, and nothing else consumes any of it
        if any(name not in device.capacities for name in request.capacity):
            return False
        used = self.consumed.get(device_id, {})
        allocating = self.allocating_capacity.get(device_id, {})
        for name, capacity in device.capacities.items():
            consumed = capacity.consumed(request.capacity.get(name))
            if capacity.violates(consumed):
                return False
            if used.get(name, 0) + consumed.value + allocating.get(name, 0) > capacity.value.value:
                return False
        return True

    # -- the result (the end of Allocate, createNodeSelector) --

    def allocation(self, c: int) -> Allocation:
        """The claim's AllocationResult; each share gets a new UUID (GenerateNewShareID) and
        its consumedCapacity when the device has capacities."""
        claim = self.claims[c]
        results = tuple(DeviceResult(picked.request.name, device_id.driver, device_id.pool, device_id.device,
                                     picked.request.admin_access, picked.request.tolerations,
                                     str(uuid.uuid4()) if picked.shared else None, picked.consumed or None,
                                     device.binding_conditions, device.binding_failure_conditions)
                        for picked in self.results[c] for device_id, device, _ in (picked.candidate,))
        return Allocation(results, self._config(c, claim), self._node_selector(claim, self.results[c]))

    def _selected(self, c: int, r: int) -> _Wanted:
        return self.wanted[(c, r, self.chosen_sub.get((c, r), 0))]

    def _config(self, c: int, claim: ResourceClaim) -> tuple[dict[str, Any], ...]:
        """Class config first, each class's entries once with every request that used the
        class; then the claim's config entries that name no request or a request (or the
        chosen subrequest) of this claim, once per request they name, as the source loops."""
        config: list[dict[str, Any]] = []
        class_entries: dict[str, list[dict[str, Any]]] = {}
        for r in range(len(claim.requests)):
            wanted = self._selected(c, r)
            name = wanted.request.name
            entries = class_entries.get(wanted.device_class.name)
            if entries is not None:
                for entry in entries:
                    entry["requests"].append(name)
                continue
            entries = [{"source": FROM_CLASS, "requests": [name], **entry} for entry in wanted.device_class.config]
            class_entries[wanted.device_class.name] = entries
            config.extend(entries)
        for raw in claim.config:
            names = list(raw.get("requests") or ())
            rest = {key: value for key, value in raw.items() if key != "requests"}
            if not names:
                config.append({"source": FROM_CLAIM, **rest})
                continue
            for r, request in enumerate(claim.requests):
                if request.name in names or (request.first_available
                                             and self._selected(c, r).request.name in names):
                    config.append({"source": FROM_CLAIM, "requests": list(names), **rest})
        return tuple(config)

    def _node_selector(self, claim: ResourceClaim, results: list[_Picked]) -> dict[str, Any] | None:
        """createNodeSelector: a node-local device, or one that binds to its node, pins the claim
        to this node; otherwise the union of the single-term selectors; allNodes adds nothing.
        In a perDeviceNodeSelection slice the device's own nodeName, nodeSelector or allNodes
        counts, not the slice's."""
        fields: list[Mapping[str, Any]] = []
        expressions: list[Mapping[str, Any]] = []
        for picked in results:
            _, device, slice_ = picked.candidate
            node_name, selector = ((device.node_name, device.node_selector) if slice_.per_device_node_selection
                                   else (slice_.node_name, slice_.node_selector))
            if node_name or device.binds_to_node:
                return pinned_to(self.node_name)
            if selector is None:
                continue
            terms = selector.raw.get("nodeSelectorTerms") or []
            if len(terms) > 1:
                raise AllocationError(f"create NodeSelector for claim {claim.name}: "
                                      f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms")
            if terms:
                _add_requirements(terms[0].get("matchFields") or [], fields)
                _add_requirements(terms[0].get("matchExpressions") or [], expressions)
        if not fields and not expressions:
            return None
        term: dict[str, Any] = {}
        if expressions:
            term["matchExpressions"] = [dict(e) for e in expressions]
        if fields:
            term["matchFields"] = [dict(f) for f in fields]
        return {"nodeSelectorTerms": [term]}

    # -- why not (for explain; kube-scheduler itself only says "cannot allocate all claims") --

    def explain(self) -> tuple[str, ...]:
        reasons = []
        for pool in self.pools:
            if pool.incomplete:
                reasons.append(f"resource pool {pool} is incomplete: not all of its ResourceSlices are published")
            elif pool.invalid:
                reasons.append(f"resource pool {pool} is invalid: {pool.invalid}")
        for c, claim in enumerate(self.claims):
            for r, request in enumerate(claim.requests):
                problems = [self._shortfall(c, r, s) for s in range(len(request.alternatives()))]
                if all(problems):
                    reasons.extend(p for p in problems if p)
        if len(reasons) == sum(1 for pool in self.pools if pool.incomplete or pool.invalid):
            if not self.candidates:
                reasons.append("no devices on this node")
            elif any(claim.constraints for claim in self.claims):
                reasons.append("no combination of free devices satisfies every request and constraint")
            else:
                reasons.append("the free devices cannot satisfy every request at once")
        return tuple(reasons)

    def _shortfall(self, c: int, r: int, s: int) -> str:
        """Why this request (or subrequest) alone cannot be met, or "" if it could be."""
        wanted = self.wanted[(c, r, s)]
        request, cls = wanted.request, wanted.device_class
        label = f"claim {_claim_ref(self.claims[c])}, request {request.name}"
        of_class = matching = free = usable = 0
        first_failing = first_blocked = ""
        for candidate in self.candidates:
            if not self._reaches(candidate):
                continue
            try:
                if not self._selectors_match(f"class {cls.name}", cls.selectors, candidate):
                    continue
                of_class += 1
                if not self._selectable(c, r, s, wanted, candidate):
                    if not first_failing:
                        first_failing = next((e for e in request.selectors
                                              if candidate[1].verdicts.get(e, True) is False), "")
                    continue
            except AllocationError as error:
                return f"{label}: {error}"
            matching += 1
            if not request.admin_access and candidate[0] in self.in_use:
                continue
            free += 1
            blocked = self._blocked(request, candidate)
            if blocked:
                first_blocked = first_blocked or blocked
            else:
                usable += 1
        if of_class == 0:
            return f"{label}: no device on this node matches device class {cls.name}"
        if matching == 0:
            shown = f" selector {first_failing}" if first_failing else " its selectors"
            return f"{label}: no device of class {cls.name} matches{shown}"
        if wanted.all_devices is not None:
            if free < matching:
                return f"{label}: asks for all {matching} matching devices, {matching - free} in use"
            if usable < free:
                return f"{label}: asks for all {matching} matching devices: {first_blocked}"
            return ""
        if free < request.count:
            return f"{label}: {request.count} requested, {free} free"
        if usable < request.count:
            return f"{label}: {request.count} requested, {usable} usable: {first_blocked}"
        return ""

    def _blocked(self, request: DeviceRequest, candidate: Candidate) -> str:
        """Why a free, matching device cannot be taken for `request`: an untolerated taint, a
        counter the devices in use leave too little of, or a capacity; "" when none."""
        device_id, device, _ = candidate
        taint = _untolerated(device, request) if device.taints else None
        if taint is not None:
            return f"device {device_id} has taint {taint} that request {request.name} does not tolerate"
        if device.consumes_counters and not (device.allow_multiple_allocations and self.consumed.get(device_id)):
            shortage = self.counters.shortage(device_id, device)
            if shortage:
                return shortage
        if device.capacities or request.capacity:
            return self._capacity_shortage(request, candidate)
        return ""

    def _capacity_shortage(self, request: DeviceRequest, candidate: Candidate) -> str:
        """Why the capacity the request asks of the device (alone, after the devices' other
        shares) does not fit: a capacity it does not have, a policy refusing the amount, or
        too little left; "" when it fits."""
        device_id, device, _ = candidate
        for name in request.capacity:
            if name not in device.capacities:
                return f"request {request.name} asks for capacity {name}, which device {device_id} does not have"
        used = self.consumed.get(device_id, {})
        for name, capacity in device.capacities.items():
            consumed = capacity.consumed(request.capacity.get(name))
            if capacity.violates(consumed):
                return (f"request {request.name} asks for {consumed} {name}, outside device {device_id}'s policy "
                        f"({capacity.policy})")
            left = capacity.value.value - used.get(name, 0)
            if consumed.value > left:
                return (f"capacity {name} of device {device_id}: {consumed} requested, "
                        f"{_quantity(max(left, Fraction(0)))} left")
        return ""


def _add_requirements(source: Sequence[Mapping[str, Any]], into: list[Mapping[str, Any]]) -> None:
    """addNewNodeSelectorRequirements: skip one that is already there (same key, operator
    and set of values)."""
    for requirement in source:
        values = set(requirement.get("values") or ())
        if not any(existing.get("key") == requirement.get("key")
                   and existing.get("operator") == requirement.get("operator")
                   and set(existing.get("values") or ()) == values for existing in into):
            into.append(requirement)


def class_selects(device_class: DeviceClass, device: Device) -> bool:
    """The class's selectors on the device, evaluated and kept in its verdicts as the search does,
    for code that lists the devices of a class outside a search (DeviceFit with a deviceClass,
    DRA-backed extended resources' scoring). A CEL error raises AllocationError."""
    return _selectors_hold(f"class {device_class.name}", device_class.selectors, device)


def _selectors_hold(owner: str, expressions: Sequence[str], device: Device) -> bool:
    """Every expression true on the device, each evaluated once per device (its verdicts); a CEL
    error raises AllocationError naming `owner` and the selector."""
    verdicts = device.verdicts
    for i, expression in enumerate(expressions):
        known = verdicts.get(expression)
        if known is None:
            known = verdicts[expression] = _verdict(expression, device)
        if known is False:
            return False
        if known is not True:
            stage = "runtime" if isinstance(known, _RuntimeFailure) else "compile"
            raise AllocationError(f"{owner}: selector #{i}: CEL {stage} error: {known}")
    return True


def request_selects(owner: str, expressions: Sequence[str], device: Device) -> bool:
    """Whether a request's selectors hold on the device (each verdict remembered on the device);
    AllocationError on a CEL error, naming `owner`: for code that lists the devices a request
    may get outside a search (DeviceFit's shared-GPU claims)."""
    return _selectors_hold(owner, expressions, device)
