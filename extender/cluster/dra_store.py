"""The DRA objects of the cluster state: DeviceClasses, ResourceSlices, ResourceClaims, and allocations in flight.

kube-scheduler's DynamicResources plugin reads these through its DRA manager
(pkg/scheduler/framework/plugins/dynamicresources/dra_manager.go): listers for classes
and slices, an assume cache for claims, and `inFlightAllocations`, the claims that Reserve
allocated and PreBind has not written yet. A device is in use while a stored claim's
allocation holds it (allocateddevices.go; an adminAccess result holds nothing) or while an
allocation of it is in flight, so no device is ever given to two claims, even between
Reserve and the watch showing our own status write.

Objects are parsed into the frozen views of `extender.dra.objects` as they arrive; one
that cannot be read is counted, logged and skipped. Writers (watch threads, snapshot
loading, simulate's in-memory writes, Reserve) hold the store's lock; readers never do:
every value is immutable and every table is replaced or changed one key at a time.

`enabled` is False when the API server does not serve resource.k8s.io/v1 (the source
says so once); the DynamicResources plugin then keeps DRA pods pending with that reason.
Changes that may make a waiting pod schedulable (a class, slice or claim added or
changed, a claim deleted or deallocated) are announced as `DRA_CHANGED` with `(kind, key)`.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import partial
from typing import Any

from extender.dra.objects import (
    Allocation,
    DeviceClass,
    DeviceID,
    DeviceTaintRule,
    Pool,
    PoolCache,
    ResourceClaim,
    ResourceSlice,
    gather_pools,
    with_taint_rules,
)
from extender.errors import InvalidObject
from extender.model.fields import object_key
from extender.policy.dra_view import extended_claim_owner, extended_key

log = logging.getLogger(__name__)

DRA_CHANGED = "dra-changed"

CLASSES = "deviceclasses"
# resourceapi.ResourceDeviceClassPrefix: every class serves the extended resource of its name.
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
SLICES = "resourceslices"
CLAIMS = "resourceclaims"
# DeviceTaintRules (resource.k8s.io/v1beta2; off by default in v1.36): read only where served.
TAINT_RULES = "devicetaintrules"
RESOURCES = (CLASSES, SLICES, CLAIMS, TAINT_RULES)
KIND_NAMES = {"DeviceClass": CLASSES, "ResourceSlice": SLICES, "ResourceClaim": CLAIMS,
              "DeviceTaintRule": TAINT_RULES}

Notify = Callable[[str, Any], None]


def extended_resources(classes: Iterable[DeviceClass]) -> dict[str, DeviceClass]:
    """Extended resource name -> DeviceClass, as kube-scheduler's ExtendedResourceCache
    (dynamic-resource-allocation/deviceclass/extendedresourcecache): every class serves
    `deviceclass.resource.kubernetes.io/<name>`; where several name the same
    `extendedResourceName`, the newest class wins, and the lower name between equals."""
    table: dict[str, DeviceClass] = {}
    chosen: dict[str, tuple[str, str]] = {}  # resource -> (creationTimestamp, name) of its class
    for cls in classes:
        table[IMPLICIT_PREFIX + cls.name] = cls
        if not cls.extended_resource_name:
            continue
        created = str((cls.raw.get("metadata") or {}).get("creationTimestamp") or "")
        known = chosen.get(cls.extended_resource_name)
        if known is None or created > known[0] or (created == known[0] and cls.name < known[1]):
            chosen[cls.extended_resource_name] = (created, cls.name)
            table[cls.extended_resource_name] = cls
    return table


def held_devices(claim: ResourceClaim) -> list[DeviceID]:
    """The devices a claim's allocation keeps from other claims (allocateddevices.go: not
    adminAccess results, and not shares of a device that allows multiple allocations)."""
    if claim.allocation is None:
        return []
    return _allocation_devices(claim.allocation)


def _allocation_devices(allocation: Allocation) -> list[DeviceID]:
    return [result.id for result in allocation.results if result.exclusive]


def _shares(allocation: Allocation) -> bool:
    return any(result.share_id is not None and not result.admin_access for result in allocation.results)


def raw_key(resource: str, raw: Mapping[str, Any]) -> str | None:
    """The store key of an unparsed object (a deletion event), None without a name."""
    return object_key(raw, resource == CLAIMS)


@dataclass
class AllocatorStats:
    """What the allocator did, summed by the scheduling loop; the source publishes the deltas as metrics."""

    allocated: int = 0
    unallocatable: int = 0
    errors: int = 0
    seconds: float = 0.0
    backtracks: int = 0


class SharedTotals:
    """consumed_capacity() and the sharers of a set of allocations with shares, kept as allocations
    come and go (`add(allocation, +1 / -1)`) instead of summed again: the same values as
    objects.consumed_capacity, a device or capacity name present while some share reports it."""

    def __init__(self, allocations: Iterable[Allocation] = ()) -> None:
        self.consumed: dict[DeviceID, dict[str, Fraction]] = {}
        self.sharers: Counter[DeviceID] = Counter()
        self._results: Counter[DeviceID] = Counter()
        self._named: Counter[tuple[DeviceID, str]] = Counter()
        for allocation in allocations:
            self.add(allocation, 1)

    def add(self, allocation: Allocation, sign: int) -> None:
        devices: set[DeviceID] = set()
        for result in allocation.results:
            if result.admin_access or result.share_id is None:
                continue
            device = result.id
            devices.add(device)
            total = self.consumed.setdefault(device, {})
            for name, quantity in (result.consumed or {}).items():
                key = (device, name)
                self._named[key] += sign
                if self._named[key] > 0:
                    total[name] = total.get(name, Fraction(0)) + sign * quantity.value
                else:
                    del self._named[key]
                    total.pop(name, None)
            self._results[device] += sign
            if self._results[device] <= 0:
                del self._results[device]
                del self.consumed[device]
        for device in devices:
            self.sharers[device] += sign
            if self.sharers[device] <= 0:
                del self.sharers[device]


def _allocation_nodes(allocation: Allocation) -> set[str] | None:
    """The nodes an allocation is pinned to by name (its node selector's metadata.name terms);
    None when it may be on any node (no selector, or one by labels)."""
    selector = allocation.node_selector
    if not isinstance(selector, Mapping):
        return None
    nodes: set[str] = set()
    for term in selector.get("nodeSelectorTerms") or ():
        fields = term.get("matchFields") if isinstance(term, Mapping) else None
        names = [f.get("values") for f in fields or () if isinstance(f, Mapping) and f.get("key") == "metadata.name"
                 and f.get("operator") == "In"]
        if not names or not isinstance(names[0], list) or term.get("matchExpressions"):
            return None
        nodes.update(str(name) for name in names[0])
    return nodes or None


class DraStore:
    """Implements `extender.policy.dra_view.DraView` over watched (or snapshot) DRA objects."""

    def __init__(self, notify: Notify | None = None,
                 on_nodes: Callable[[Collection[str] | None], None] | None = None) -> None:
        self._notify = notify or (lambda event, obj: None)
        # Told the nodes whose shared devices' use or slices changed (None: any node may have):
        # the cluster state builds their NodeInfos again, so that the engine's per-node memos of
        # checks that read a node's DRA devices (DeviceFit's shared-GPU claims) see the change.
        self._on_nodes = on_nodes or (lambda nodes: None)
        self._lock = threading.RLock()
        self._classes: dict[str, DeviceClass] = {}
        self._extended: dict[str, DeviceClass] = {}  # extended resource name -> the class serving it
        self._slices: dict[str, ResourceSlice] = {}  # with the DeviceTaintRules' taints
        self._published: dict[str, ResourceSlice] = {}  # as the driver published them
        self._rules: dict[str, DeviceTaintRule] = {}
        self._node_slices: dict[str, dict[str, ResourceSlice]] = {}  # node name -> slice name -> slice
        self._shared_slices: dict[str, ResourceSlice] = {}  # nodeSelector / allNodes slices
        # The pools each node reaches (gather_pools), kept while neither its own slices nor the
        # shared ones change: node name -> (own generation, shared generation, labels, pools).
        self._node_generation: dict[str, int] = {}
        self._shared_generation = 0
        self._pools: dict[str, tuple[int, int, Mapping[str, str], list[Pool]]] = {}
        self._built_pools: PoolCache = {}  # each pool made once, shared by the nodes reaching it
        self._claims: dict[str, ResourceClaim] = {}
        self._by_uid: dict[str, str] = {}
        self._extended_claims: dict[str, str] = {}  # pod uid -> key of its extended-resource claim
        self._held: Counter[DeviceID] = Counter()  # devices held by stored allocations (and in flight)
        self._in_flight: dict[str, tuple[str, Allocation]] = {}  # claim uid -> (claim key, allocation)
        self._shared: dict[str, Allocation] = {}  # claim key or in-flight key -> an allocation with shares
        self._totals = SharedTotals()  # consumed_capacity(_shared) and the sharers, kept as _shared changes
        self._unsynced: set[str] = set()
        self.enabled = True
        self.disabled_reason = ""
        self.stats = AllocatorStats()
        self.rejected = 0
        self._writes = 0  # in-memory status writes, for their resourceVersions

    # ---- sync ---------------------------------------------------------------------------

    def expect(self, resources: Iterable[str]) -> None:
        """A source will list these kinds: the store is not synced until it has."""
        with self._lock:
            self._unsynced.update(resources)

    def disable(self, why: str) -> None:
        """The API server does not serve DRA: nothing will be listed, and DRA pods wait with `why`."""
        with self._lock:
            self.enabled = False
            self.disabled_reason = why
            self._unsynced.clear()

    @property
    def synced(self) -> bool:
        return not self._unsynced

    def counts(self) -> dict[str, int]:
        return {CLASSES: len(self._classes), SLICES: len(self._slices), CLAIMS: len(self._claims),
                TAINT_RULES: len(self._rules)}

    # ---- reads (lock-free) --------------------------------------------------------------

    def device_class(self, name: str) -> DeviceClass | None:
        return self._classes.get(name)

    def extended_class(self, resource: str) -> DeviceClass | None:
        """The class that serves an extended resource (DRAExtendedResource): the one naming it in
        `extendedResourceName`, or the class of the implicit `deviceclass.resource.kubernetes.io/<class>`."""
        return self._extended.get(resource)

    def claim(self, namespace: str, name: str) -> ResourceClaim | None:
        return self._claims.get(f"{namespace}/{name}")

    def claims(self) -> list[ResourceClaim]:
        return list(self._claims.values())

    def extended_claim_of(self, pod_uid: str) -> ResourceClaim | None:
        """The claim the scheduler made for the pod's extended resources (owned by the pod and
        annotated resource.kubernetes.io/extended-resource-claim), if one exists."""
        key = self._extended_claims.get(pod_uid)
        return self._claims.get(key) if key is not None else None

    def slices(self) -> list[ResourceSlice]:
        return list(self._slices.values())

    def all_slices(self) -> Iterable[ResourceSlice]:
        """Every slice, copied only when iterated (for a pool a node sees only part of, which is rare)."""
        return _LazySlices(self._slices)

    def slices_for(self, node_name: str) -> list[ResourceSlice]:
        """The slices that may publish devices for `node_name`: its own, and those with a
        nodeSelector or allNodes (the allocator checks which of those reach the node)."""
        own = self._node_slices.get(node_name)
        shared = self._shared_slices
        if not shared:
            return list(own.values()) if own else []
        return [*(own.values() if own else ()), *shared.values()]

    def pools_for(self, node_name: str, labels: Mapping[str, str]) -> list[Pool]:
        """gather_pools for the node, remembered until a slice it may reach changes. A pool the
        node sees only part of (incomplete here, or with device slices for other nodes whose
        counters it shares) is not remembered: its other slices live in other nodes' tables."""
        own, shared = self._node_generation.get(node_name, 0), self._shared_generation
        cached = self._pools.get(node_name)
        if cached is not None and cached[0] == own and cached[1] == shared and (
                cached[2] is labels or cached[2] == labels):
            return cached[3]
        pools = gather_pools(self.slices_for(node_name), node_name, labels, all_slices=self.all_slices(),
                             built=self._built_pools)
        if not any(pool.incomplete or pool.elsewhere for pool in pools):
            self._pools[node_name] = (own, shared, labels, pools)
        return pools

    def in_use(self) -> Collection[DeviceID]:
        """Every device held by an allocation, stored or in flight: a live view, for membership tests."""
        return self._held.keys()

    def consumed(self) -> Mapping[DeviceID, Mapping[str, Fraction]]:
        """What the shares of devices that allow multiple allocations take of them, stored and in
        flight (kube-scheduler's AllocatedState: shared device ids and aggregated capacity). A
        live view, kept up to date with every allocation (not rebuilt per change: a replay makes
        thousands of them); read it, do not keep it across allocations."""
        return self._totals.consumed

    def sharers(self) -> Mapping[DeviceID, int]:
        """How many allocations (stored and in flight) hold a share of each device that allows
        multiple allocations: the "pods" a shared GPU shows in DeviceFit's DRA mode. A live view."""
        return self._totals.sharers

    def _share(self, key: str, allocation: Allocation | None) -> None:
        """Track an allocation with shares under `key` (None: it has none any more)."""
        old = self._shared.get(key)
        new = allocation if allocation is not None and _shares(allocation) else None
        if old is None and new is None:
            return
        if new is not None:
            self._shared[key] = new
        else:
            del self._shared[key]
        if old is not None:
            self._totals.add(old, -1)
        if new is not None:
            self._totals.add(new, 1)
        nodes = _allocation_nodes(old) if old is not None else set()
        more = _allocation_nodes(new) if new is not None else set()
        self._on_nodes(None if nodes is None or more is None else nodes | more)

    def record_allocation(self, outcome: str, seconds: float, backtracks: int) -> None:
        """One allocator run (`outcome`: allocated, unallocatable or error), for the metrics."""
        stats = self.stats
        if outcome == "allocated":
            stats.allocated += 1
        elif outcome == "unallocatable":
            stats.unallocatable += 1
        else:
            stats.errors += 1
        stats.seconds += seconds
        stats.backtracks += backtracks

    def pending_allocation(self, uid: str) -> Allocation | None:
        """The allocation Reserve made for claim `uid`, until the watch shows it written (or it is released)."""
        entry = self._in_flight.get(uid)
        return entry[1] if entry is not None else None

    # ---- watched objects ----------------------------------------------------------------

    def replace(self, resource: str, raws: Iterable[Mapping[str, Any]]) -> None:
        """A full list of one kind: the store holds exactly these (and is synced for it)."""
        parsed = self._parsed(resource, raws)
        with self._lock:
            if resource == CLASSES:
                self._classes = {c.name: c for c in parsed}
                self._extended = extended_resources(self._classes.values())
            elif resource == SLICES:
                self._slices = {}
                self._published = {}
                self._node_slices = {}
                self._shared_slices = {}
                self._pools = {}
                for item in parsed:
                    self._file_slice(item)
            elif resource == TAINT_RULES:
                self._rules = {rule.name: rule for rule in parsed}
                self._retaint()
            else:
                self._claims = {}
                self._by_uid = {}
                self._extended_claims = {}
                self._shared = {key: a for key, (_, a) in self._in_flight.items() if _shares(a)}
                self._totals = SharedTotals(self._shared.values())
                self._on_nodes(None)
                self._held = Counter()
                for item in parsed:
                    self._file_claim(item)
                self._held.update(d for _, allocation in self._in_flight.values()
                                  for d in _allocation_devices(allocation))
            self._unsynced.discard(resource)
        self._notify(DRA_CHANGED, (resource, ""))

    def upsert(self, resource: str, raw: Mapping[str, Any]) -> bool:
        """Add or replace one object; False when it cannot be read (counted, logged, skipped)."""
        previous = self._claims.get(raw_key(CLAIMS, raw) or "") if resource == CLAIMS else None
        parsed = self._parsed(resource, [raw], previous)
        if not parsed:
            return False
        item = parsed[0]
        with self._lock:
            if resource == CLASSES:
                self._classes[item.name] = item
                self._extended = extended_resources(self._classes.values())
                key = item.name
            elif resource == SLICES:
                self._unfile_slice(item.name)
                self._file_slice(item)
                key = item.name
            elif resource == TAINT_RULES:
                self._rules[item.name] = item
                self._retaint()
                key = item.name
            else:
                key = item.key
                self._unfile_claim(key)
                self._file_claim(item)
        self._notify(DRA_CHANGED, (resource, key))
        return True

    def delete(self, resource: str, key: str) -> None:
        with self._lock:
            if resource == CLASSES:
                self._classes.pop(key, None)
                self._extended = extended_resources(self._classes.values())
            elif resource == SLICES:
                self._unfile_slice(key)
            elif resource == TAINT_RULES:
                if self._rules.pop(key, None) is not None:
                    self._retaint()
            else:
                claim = self._unfile_claim(key)
                if claim is not None:
                    self._drop_in_flight(claim.uid)
        self._notify(DRA_CHANGED, (resource, key))

    def _parsed(self, resource: str, raws: Iterable[Mapping[str, Any]], previous: ResourceClaim | None = None
                ) -> list[Any]:
        parsers: dict[str, Callable[[Mapping[str, Any]], Any]] = {
            CLASSES: DeviceClass.parse, SLICES: ResourceSlice.parse, TAINT_RULES: DeviceTaintRule.parse,
            CLAIMS: partial(ResourceClaim.parse, previous=previous)}
        parse = parsers[resource]
        parsed = []
        for raw in raws:
            try:
                parsed.append(parse(raw))
            except InvalidObject as exc:
                self.rejected += 1
                log.warning("skipping %s: %s", resource, exc)
        return parsed

    def _touch_slices(self, node_name: str | None) -> None:
        self._built_pools = {}  # a new table, not clear(): a reader may be gathering with the old one
        if node_name:
            self._node_generation[node_name] = self._node_generation.get(node_name, 0) + 1
        else:
            self._shared_generation += 1
        self._on_nodes({node_name} if node_name else None)

    @staticmethod
    def _own_node(item: ResourceSlice) -> str | None:
        """The node whose table holds the slice; None for those that may reach any node (a
        nodeSelector, allNodes, per-device node selection, or shared counters, which reach every
        node whatever their nodeName says: pools_incubating.go)."""
        return item.node_name if item.node_name and not item.shared_counters else None

    def _file_slice(self, published: ResourceSlice) -> None:
        self._published[published.name] = published
        item = with_taint_rules(published, self._rules.values()) if self._rules else published
        self._slices[item.name] = item
        own = self._own_node(item)
        self._touch_slices(own)
        if own:
            self._node_slices.setdefault(own, {})[item.name] = item
        else:
            self._shared_slices[item.name] = item

    def _retaint(self) -> None:
        """The rules changed: every slice whose devices' taints change is filed again (and the
        pools of the nodes it reaches are gathered anew)."""
        for published in list(self._published.values()):
            tainted = with_taint_rules(published, self._rules.values())
            if [d.taints for d in tainted.devices] != [d.taints for d in self._slices[published.name].devices]:
                self._unfile_slice(published.name)
                self._file_slice(published)

    def _unfile_slice(self, name: str) -> None:
        self._published.pop(name, None)
        old = self._slices.pop(name, None)
        if old is None:
            return
        node = self._own_node(old)
        self._touch_slices(node)
        if node:
            own = self._node_slices.get(node)
            if own is not None:
                own.pop(name, None)
                if not own:
                    del self._node_slices[node]
        else:
            self._shared_slices.pop(name, None)

    def _file_claim(self, claim: ResourceClaim) -> None:
        self._claims[claim.key] = claim
        self._by_uid[claim.uid] = claim.key
        self._held.update(held_devices(claim))
        self._share(claim.key, claim.allocation)
        pod = extended_claim_owner(claim)
        if pod:
            self._extended_claims[pod] = claim.key
        if claim.allocation is not None:
            # Our own write (or anyone's) is visible now: the stored allocation is authoritative.
            self._drop_in_flight(claim.uid)
            if pod:
                self._drop_in_flight(extended_key(pod))

    def _unfile_claim(self, key: str) -> ResourceClaim | None:
        old = self._claims.pop(key, None)
        if old is None:
            return None
        if self._by_uid.get(old.uid) == key:
            del self._by_uid[old.uid]
        pod = extended_claim_owner(old)
        if pod and self._extended_claims.get(pod) == key:
            del self._extended_claims[pod]
        self._unhold(held_devices(old))
        self._share(old.key, None)
        return old

    # ---- Reserve / Unreserve --------------------------------------------------------------

    def assume_allocation(self, claim: ResourceClaim, allocation: Allocation) -> None:
        """Reserve: hold `allocation`'s devices for `claim` until its status shows it, or
        `release_allocation`. ValueError when the claim is gone, allocated already or in flight."""
        with self._lock:
            stored = self._claims.get(claim.key)
            if stored is None or stored.uid != claim.uid:
                raise ValueError(f"resourceclaim {claim.key} is not known")
            if stored.allocation is not None:
                raise ValueError(f"resourceclaim {claim.key} got allocated elsewhere in the meantime")
            if claim.uid in self._in_flight:
                raise ValueError(f"resource claim {claim.key} is in the process of being allocated")
            taken = [d for d in _allocation_devices(allocation) if self._held.get(d, 0) > 0]
            if taken:
                raise ValueError(f"device {taken[0].driver}/{taken[0].pool}/{taken[0].device} is already allocated")
            self._in_flight[claim.uid] = (claim.key, allocation)
            self._held.update(_allocation_devices(allocation))
            self._share(claim.uid, allocation)

    def assume_extended(self, pod_uid: str, allocation: Allocation) -> None:
        """Reserve, for the claim of a pod's extended resources, which exists only from PreBind
        on: its devices are held under the pod until the created claim shows its allocation, or
        `release_allocation(extended_key(pod_uid))`. ValueError when a device is taken already."""
        with self._lock:
            key = extended_key(pod_uid)
            taken = [d for d in _allocation_devices(allocation) if self._held.get(d, 0) > 0]
            if taken or key in self._in_flight:
                raise ValueError(f"device {taken[0]} is already allocated" if taken
                                 else f"the extended resources of pod {pod_uid} are being allocated")
            self._in_flight[key] = (key, allocation)
            self._held.update(_allocation_devices(allocation))
            self._share(key, allocation)

    def release_allocation(self, uid: str) -> None:
        """Unreserve: give back an allocation still in flight (nothing once the status shows it)."""
        with self._lock:
            dropped = self._drop_in_flight(uid)
        if dropped:
            self._notify(DRA_CHANGED, (CLAIMS, ""))

    def _drop_in_flight(self, uid: str) -> bool:
        entry = self._in_flight.pop(uid, None)
        if entry is None:
            return False
        self._unhold(_allocation_devices(entry[1]))
        self._share(uid, None)
        return True

    def _unhold(self, devices: Iterable[DeviceID]) -> None:
        """Count `devices` as held once less; a device held by nobody leaves the table (in_use reads its keys)."""
        held = self._held
        for device in devices:
            left = held.get(device, 0) - 1
            if left > 0:
                held[device] = left
            else:
                held.pop(device, None)

    # ---- in-memory writes (simulate, the snapshot webhook) --------------------------------------

    def write_status(self, namespace: str, name: str, uid: str,
                     update: Callable[[dict[str, Any]], None]) -> ResourceClaim:
        """Apply `update` to a copy of the stored claim's raw form and store it, as a status
        write to the API server would; ValueError when the claim is gone or was recreated."""
        key = f"{namespace}/{name}"
        with self._lock:
            stored = self._claims.get(key)
            if stored is None or (uid and stored.uid != uid):
                raise ValueError(f"resourceclaim {key} not found")
            raw = _copy_claim(stored.raw)
            update(raw)
            self._writes += 1
            raw.setdefault("metadata", {})["resourceVersion"] = f"mem-{self._writes}"
        if not self.upsert(CLAIMS, raw):
            raise ValueError(f"resourceclaim {key} could not be stored after the write")
        stored = self._claims[key]
        return stored


class _LazySlices:
    """Iterable over a table of slices, copied when iterated: a watch thread may change it meanwhile."""

    __slots__ = ("_table",)

    def __init__(self, table: dict[str, ResourceSlice]) -> None:
        self._table = table

    def __iter__(self) -> Iterator[ResourceSlice]:
        return iter(list(self._table.values()))


def _copy_claim(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A copy deep enough for a status or finalizer write (metadata and status are replaced, spec is shared)."""
    copy = dict(raw)
    copy["metadata"] = dict(raw.get("metadata") or {})
    copy["status"] = dict(raw.get("status") or {})
    return copy


def device_use(store: DraStore, node_name: str, labels: Mapping[str, str]) -> dict[str, tuple[int, int]]:
    """Per driver, (devices allocated, devices published) among the slices that reach the node
    (its own, and nodeSelector or allNodes ones): simulate's view of a node's DRA devices."""
    in_use, shared = store.in_use(), store.consumed()
    use: dict[str, tuple[int, int]] = {}
    for item in store.slices_for(node_name):
        if not item.available_on(node_name, labels):
            continue
        taken, total = use.get(item.driver, (0, 0))
        for device in item.devices:
            total += 1
            device_id = DeviceID(item.driver, item.pool, device.name)
            taken += device_id in in_use or device_id in shared
        use[item.driver] = (taken, total)
    return use


def describe_device_use(use: Mapping[str, tuple[int, int]]) -> str:
    """"gpu.example.com 2/2" per driver: devices allocated of those published ("" without any)."""
    return ", ".join(f"{driver} {taken}/{total}" for driver, (taken, total) in sorted(use.items()))
