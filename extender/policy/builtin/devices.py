"""Shared devices: DeviceFit (filter, and the device choice at Reserve) and DeviceAllocation (scorer).

A pod asks for GPUs through `extender.example/gpu`, `gpu-memory` (MiB per device) and
`gpu-cores` (percent per device); a node offers the devices its inventory annotation
lists; what each device has left is what the pods bound there (and the binds in flight)
do not hold. See extender.model.devices for the contract, docs/devices.md for people.

DeviceFit keeps a node when each container can get its devices there: enough healthy
devices of an accepted type, each with the memory and cores free. A node without an
inventory, with an unreadable one, or whose devices are too few or too small even when
empty is unresolvable; a node whose devices are merely taken is unschedulable
(preemption may free them). At Reserve it picks the exact devices (`strategy: binpack`
takes the fullest devices that fit, `spread` the emptiest), claims them in the cluster
state at once, so the next pod in flight sees them taken, and returns the assignment for
the Binding plus a `LedgerClaim` for PreBind, which arbitrates between processes.

DeviceAllocation ranks the feasible nodes by how full their devices would be with the
pod: `binpack` prefers fuller nodes and devices (whole ones stay free for big jobs),
`spread` emptier ones. The score, 0..100, averages the node's device utilisation and
that of the devices the pod would get, memory and cores alike.

With `deviceClass` set, both read the devices from DRA instead (dra_devices.py): the
ResourceSlices' devices of that class with consumable capacity, their use from every DRA
allocation, and the shares recorded as a claim of the pod's own (no ledger).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar

from extender.model.devices import (
    ASSIGNMENT_ANNOTATION,
    BINPACK,
    REASON_BAD_INVENTORY,
    REASON_NO_DEVICES,
    SPREAD,
    STRATEGIES,
    Assignment,
    Device,
    DeviceRequest,
    LedgerClaim,
    Needs,
    Shares,
    Shortfall,
    Use,
    add_shares,
    choose,
    describe_devices,
    node_inventory,
    raw_annotations,
    utilisation,
)
from extender.model.gpushare import PodShape
from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy import enqueue, names
from extender.policy.builtin import arguments, dra_devices, gpu_choice, gpu_claims
from extender.policy.builtin.device_requests import pod_device_request
from extender.policy.cluster_view import EMPTY_CLUSTER, ClusterView, PodChange
from extender.policy.enqueue import EventHint
from extender.policy.plugins import (
    Check,
    FilterPlugin,
    FilterResult,
    NodeCheck,
    NodeScore,
    NormalizeScores,
    PostFilterPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    Score,
    ScorePlugin,
)
from extender.policy.reservations import Reservation
from extender.policy.status import Code, Status

REASON_CHANGED = dra_devices.REASON_CHANGED
_CLAIM_ATTEMPTS = 3

_NO_DEVICES = Status(Code.UNRESOLVABLE, (REASON_NO_DEVICES,),
                     "the node publishes no device inventory (annotation extender.example/gpu-devices)",
                     names.DEVICE_FIT)


_ARGS = arguments.schema({
    "strategy": arguments.one_of(STRATEGIES, f"{{value!r}} is not one of {', '.join(STRATEGIES)}", default=BINPACK),
    # Unset: the annotation inventory. Set: DRA mode (dra_devices.py), devices of this DeviceClass.
    "deviceClass": arguments.string(default=""),
})
# DeviceFit's choice inside the node may also follow a GPU-sharing policy (docs/replay.md):
# `random` (uniform among the GPUs that fit) and `fgd` (the GPU whose share removes the most
# fragmentation, with FGD's target workload as its args say).
RANDOM = "random"
FGD = "fgd"
FIT_STRATEGIES = (*STRATEGIES, RANDOM, FGD)
_FIT_ARGS = arguments.schema({
    "strategy": arguments.one_of(FIT_STRATEGIES, f"{{value!r}} is not one of {', '.join(FIT_STRATEGIES)}",
                                 default=BINPACK),
    "deviceClass": arguments.string(default=""),
    **gpu_choice.WORKLOAD_ARGS,
    "seed": arguments.integer(minimum=0, maximum=2**63, default=0),
})


def _shortfall_status(shortfall: Shortfall) -> Status:
    code = Code.UNRESOLVABLE if shortfall.final else Code.UNSCHEDULABLE
    return Status(code, shortfall.reasons, shortfall.note, names.DEVICE_FIT)


# DeviceFit's verdicts by (request, inventory, use): the inventory is compared by identity (the
# parsed inventories are shared, model.devices.node_inventory) and kept in the entry, so a
# recycled id() never matches another inventory.
_verdicts: dict[tuple[Any, ...], tuple[Any, Status | None]] = {}
_VERDICTS_KEPT = 100_000


class _DeviceCheck:
    """DeviceFit's per-node check for one pod; `updated` applies preemption's pod changes."""

    def __init__(self, request: DeviceRequest, cluster: ClusterView, strategy: str,
                 changes: Sequence[PodChange] = ()) -> None:
        self.request = request
        self.cluster = cluster
        self.strategy = strategy
        self.changes = tuple(changes)

    def use(self, node: str) -> Mapping[str, Use]:
        totals = self.cluster.device_use(node).totals
        if not self.changes:
            return totals
        adjusted = dict(totals)
        for change in self.changes:
            if change.node.name == node and change.pod.devices:
                add_shares(adjusted, change.pod.devices, change.delta)
        return adjusted

    def __call__(self, info: NodeInfo) -> Status | None:
        inventory = node_inventory(raw_annotations(info.node.raw))
        if inventory is None:
            return _NO_DEVICES
        if inventory.error:
            return Status(Code.UNRESOLVABLE, (REASON_BAD_INVENTORY,), inventory.error, names.DEVICE_FIT)
        use = self.use(info.name)
        # The verdict is a function of the request, the inventory and its use: remembered by
        # content, so the hundreds of identical machines of a large cluster cost one choice.
        key = (self.request, id(inventory), tuple(use.items()))
        known = _verdicts.get(key)
        if known is not None and known[0] is inventory:
            return known[1]
        result = choose(inventory.devices, use, self.request, self.strategy)
        status = _shortfall_status(result) if isinstance(result, Shortfall) else None
        if len(_verdicts) >= _VERDICTS_KEPT:
            _verdicts.clear()
        _verdicts[key] = (inventory, status)
        return status

    def updated(self, changes: Sequence[PodChange]) -> _DeviceCheck:
        return _DeviceCheck(self.request, self.cluster, self.strategy, (*self.changes, *changes))


_EVENTS = (enqueue.NODE_ADDED,
           enqueue.on(enqueue.NODES, enqueue.UPDATE_NODE_LABEL, enqueue.UPDATE_NODE_TAINT, enqueue.UPDATE_NODE_UNSCHEDULABLE,
                     enqueue.UPDATE_NODE_ALLOCATABLE, enqueue.UPDATE_NODE_DEVICES),
           enqueue.on(enqueue.PODS, enqueue.DELETE),
           *enqueue.on_each(enqueue.DRA))


@dataclass(frozen=True)
class DeviceFit(PreFilterPlugin, FilterPlugin, ReservePlugin, PostFilterPlugin):
    """Args: `strategy: binpack|spread` (default binpack): which devices of the node a pod gets;
    `deviceClass` (default unset): read and record the shares as DRA consumable capacity of this
    DeviceClass's devices instead of the annotation inventory (dra_devices.py)."""

    name: ClassVar[str] = names.DEVICE_FIT
    strategy: str = BINPACK
    device_class: str = ""
    # The `fgd` and `random` choices (gpu_choice.py); None for binpack and spread.
    chooser: gpu_choice.Chooser | None = field(default=None, compare=False, repr=False)
    args_key: str = ""
    # Place the pods' own shared-GPU claims (gpu_claims.py); off when the policy lists
    # DynamicResources, which then allocates them (policy/loading.py). Not an argument: derived
    # from the policy's other filters, so left out of the comparison of two DeviceFits.
    places_claims: bool = field(default=True, compare=False)

    def events_to_register(self) -> Sequence[EventHint]:
        """DynamicResources' events (with a deviceClass its shares are DRA allocations), a node's
        device inventory changed, and a placed pod deleted (its shares freed)."""
        return _EVENTS

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> DeviceFit:
        values = arguments.load(_FIT_ARGS, args)
        strategy = values["strategy"]
        chooser = gpu_choice.Chooser(strategy, values) if strategy in (RANDOM, FGD) else None
        key = repr(sorted((k, v) for k, v in values.items() if k not in ("strategy", "deviceClass")))
        return cls(strategy, values["deviceClass"], chooser, key if chooser is not None else "")

    def prefilter(self, pod: PodView, cluster: ClusterView) -> NodeCheck | Status | None:
        claimed = self._claim_gpus(pod, cluster)
        if claimed is not None:
            return claimed if isinstance(claimed, Status) else self._claim_check(claimed, cluster)
        if self.chooser is not None:
            self.chooser.observe(pod)
        request = pod_device_request(pod)
        if request is None or isinstance(request, Status):
            return request
        if self.device_class:
            return dra_devices.prepare(pod, request, cluster.dra(), self.device_class, self.strategy)
        # All it reads of the pod (FilterCycle.run): the node's device use is part of its NodeInfo's
        # identity (the state builds a node's NodeInfo again when its use changes). Preemption's
        # updated checks (UpdatableCheck, through the Check) read changes of their own: no memo.
        return Check(_DeviceCheck(request, cluster, self.strategy), memo_key=(names.DEVICE_FIT, request))

    def _claim_gpus(self, pod: PodView, cluster: ClusterView) -> gpu_claims.ClaimGpus | Status | None:
        """The pod's own shared-GPU claim when this DeviceFit places claims (None: it asks otherwise)."""
        if not self.places_claims or not gpu_claims.names_claims(pod):
            return None
        return gpu_claims.pod_claim_gpus(pod, cluster.dra())

    def _claim_check(self, claimed: gpu_claims.ClaimGpus, cluster: ClusterView) -> NodeCheck:
        if self.chooser is not None and self.chooser.fragmentation is not None:
            self.chooser.fragmentation.observe(claimed.shape)  # the `fgd` choice's learned workload
        # memo_key: the node's DRA shares are part of its NodeInfo (ClusterState builds it again
        # when they change), so the verdict is a function of the claim's request and the NodeInfo.
        return Check(gpu_claims.ClaimCheck(claimed, cluster.dra(), self.strategy), memo_key=claimed.memo_key)

    def prime(self, shapes: Sequence[PodShape]) -> None:
        """The `fgd` choice's target workload, pinned (gpu_choice.WorkloadPrimed); others ignore it."""
        if self.chooser is not None:
            self.chooser.prime(shapes)

    def post_filter(self, pod: PodView, failed: Mapping[str, Status], cluster: ClusterView) -> Sequence[Any]:
        """DRA mode: a claim an earlier attempt left for the pod's shares is deleted (every node
        refused the pod for it), so that the next attempt makes its own."""
        if not self.device_class or not isinstance(pod_device_request(pod), DeviceRequest):
            return ()
        stale = dra_devices.stale_claim(pod, cluster.dra())
        return () if stale is None else (stale,)

    def node_note(self, info: NodeInfo, cluster: ClusterView) -> str | None:
        """Explain's line for a GPU node: every device's free memory, compute and pods (None: the
        node has no shared GPUs)."""
        if self.device_class:
            dra = cluster.dra()
            device_class = dra.device_class(self.device_class)
            if device_class is None:
                return None
            found = dra_devices.inventory(dra, device_class, info.node)
            if found.error:
                return f"GPUs on {info.name}: unusable inventory: {found.error}"
            return f"GPUs on {info.name}: {found.describe(dra)}" if found.gpus else None
        inventory = node_inventory(raw_annotations(info.node.raw))
        if inventory is None:
            return None
        if inventory.error:
            return f"GPUs on {info.name}: unusable inventory: {inventory.error}"
        return f"GPUs on {info.name}: {describe_devices(inventory.devices, cluster.device_use(info.name).totals)}"

    def filter(self, pod: PodView, node: NodeInfo) -> FilterResult:
        """One node, without a cluster: as if nothing held any of its devices."""
        check = self.prefilter(pod, EMPTY_CLUSTER)
        if check is None or isinstance(check, Status):
            return check
        return check(node)

    def reserve(self, pod: PodView, node: NodeInfo, cluster: ClusterView) -> Reservation | Status | None:
        """Pick the devices and claim them in the cluster state before the next pod is considered."""
        own_claim = self._claim_gpus(pod, cluster)
        if own_claim is not None:
            if isinstance(own_claim, Status):
                return own_claim
            return gpu_claims.reserve(own_claim, pod, node, cluster.dra(), self.strategy,
                                      None if self.chooser is None else self.chooser.choose)
        request = pod_device_request(pod)
        if request is None or isinstance(request, Status):
            return request
        if self.device_class:
            return self._reserve_on_dra(pod, request, node, cluster)
        inventory = node_inventory(raw_annotations(node.node.raw))
        if inventory is None:
            return _NO_DEVICES
        if inventory.error:
            return Status(Code.UNRESOLVABLE, (REASON_BAD_INVENTORY,), inventory.error, names.DEVICE_FIT)
        for _ in range(_CLAIM_ATTEMPTS):  # another thread may claim between our read and our claim
            totals = cluster.device_use(node.name).totals
            preferred = None if self.chooser is None else self.chooser.choose(pod, request, node, inventory, totals)
            result = choose(inventory.devices, totals, request, self.strategy) if preferred is None else preferred
            if isinstance(result, Shortfall):
                return _shortfall_status(result)
            assignment = Assignment(node.name, result)
            shares = assignment.shares()
            capacity = {device_id: inventory.capacity(device_id) for device_id, _, _ in shares}
            claimed = cluster.claim_devices(node.name, pod.key, pod.uid, shares, capacity)
            if claimed is not None:
                break
        else:
            return Status(Code.UNSCHEDULABLE, (REASON_CHANGED,), "other pods kept claiming the chosen devices",
                          names.DEVICE_FIT)
        token, use = claimed
        held = _HeldAssignment(assignment, token)
        move = partial(held.move, pod, request, inventory.devices, cluster, self.strategy)
        ledger = LedgerClaim(node.name, pod.key, pod.uid or pod.key, shares, capacity, use, move)
        return Reservation(self.name, held, (ledger,), held.release_with(cluster))

    def _reserve_on_dra(self, pod: PodView, request: DeviceRequest, node: NodeInfo, cluster: ClusterView
                        ) -> Reservation | Status:
        """DRA mode: the shares held in flight in the DRA store, recorded in a claim at PreBind
        (no ledger: the claim's allocation is the record, and the API server arbitrates it)."""
        shares = dra_devices.prepare(pod, request, cluster.dra(), self.device_class, self.strategy)
        if isinstance(shares, Status):
            return shares
        held = dra_devices.reserve(shares, node, ASSIGNMENT_ANNOTATION,
                                   None if self.chooser is None else self.chooser.choose)
        if isinstance(held, Status):
            return held
        return Reservation(self.name, held.annotations, held.actions, held.release, held.undo)


class _HeldAssignment(Mapping[str, str]):
    """A reservation's assignment, as the Binding's annotations: a mapping that reads the current
    choice, since the ledger may move the claim to other devices before the Binding is made."""

    def __init__(self, assignment: Assignment, token: int) -> None:
        self.assignment = assignment
        self.token: int | None = token
        self._lock = threading.Lock()

    def __getitem__(self, key: str) -> str:
        if key != ASSIGNMENT_ANNOTATION:
            raise KeyError(key)
        return self.assignment.to_annotation()

    def __iter__(self) -> Iterator[str]:
        return iter((ASSIGNMENT_ANNOTATION,))

    def __len__(self) -> int:
        return 1

    def release_with(self, cluster: ClusterView) -> Callable[[], None]:
        def release() -> None:
            with self._lock:
                token, self.token = self.token, None
            if token is not None:
                cluster.release_devices(token)
        return release

    def move(self, pod: PodView, request: DeviceRequest, devices: Sequence[Device], cluster: ClusterView,
             strategy: str, ledger: Mapping[str, Shares]) -> tuple[Shares, dict[str, tuple[int, int]]] | None:
        """Choose again, and move the claim there: by the ledger's entries (other processes'
        binds), and this process's claims as they are now (some may be newer than the ledger)."""
        own = pod.uid or pod.key
        others: dict[str, Use] = {}
        for ident, shares in cluster.device_use(self.assignment.node).holders.items():
            if ident != own and ident not in ledger:
                add_shares(others, shares)
        for ident, shares in ledger.items():
            if ident != own:
                add_shares(others, shares)
        result = choose(devices, others, request, strategy)
        if isinstance(result, Shortfall):
            return None
        moved = Assignment(self.assignment.node, result)
        shares = moved.shares()
        capacity = {d.id: (d.memory, d.cores) for d in devices}
        with self._lock:
            if self.token is None:  # released already: the bind is being given up
                return None
            # One step: the old claim is swapped, not released (a release would tell the ledger
            # this pod's bind was given up, and its entry could be dropped while it is in flight).
            claimed = cluster.claim_devices(moved.node, pod.key, pod.uid, shares, capacity, replacing=self.token)
            if claimed is None:  # taken here meanwhile: the bind fails, the pod is retried
                return None
            self.token, self.assignment = claimed[0], moved
        return shares, {device_id: capacity[device_id] for device_id, _, _ in shares}


def _packing(devices: Sequence[Device], use: Mapping[str, Use], request: DeviceRequest, strategy: str,
             needs: Needs | None = None) -> float:
    """DeviceAllocation's score of one node's devices with the pod placed on them (0: it does not fit)."""
    result = choose(devices, use, request, strategy, needs)
    if isinstance(result, Shortfall):
        return 0
    if len(result) == 1 and len(result[0][1]) == 1:  # the usual one device: no dict to build
        device_id, memory, cores = result[0][1][0]
        added = {device_id: (memory, cores)}
    else:
        added = {}
        for _, shares in result:
            for device_id, memory, cores in shares:
                before = added.get(device_id, (0, 0))
                added[device_id] = (before[0] + memory, before[1] + cores)
    node, chosen = utilisation(devices, use, added)
    value = round((node + chosen) * 50)
    return 100 - value if strategy == SPREAD else value


@dataclass(frozen=True)
class DeviceAllocation(PreScorePlugin, ScorePlugin, NormalizeScores):
    """Args: `strategy: binpack|spread` (default binpack): fuller or emptier nodes and devices first;
    `deviceClass`: as DeviceFit's (the same inventory and use, from DRA)."""

    name: ClassVar[str] = names.DEVICE_ALLOCATION
    strategy: str = BINPACK
    device_class: str = ""

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> DeviceAllocation:
        values = arguments.load(_ARGS, args)
        return cls(values["strategy"], values["deviceClass"])

    def prescore(self, pod: PodView, cluster: ClusterView, nodes: Sequence[NodeInfo]) -> NodeScore | None:
        request = pod_device_request(pod)
        if request is None or isinstance(request, Status):
            return None
        if self.device_class:
            return self._dra_scores(request, cluster)

        def score(info: NodeInfo) -> float:
            inventory = node_inventory(raw_annotations(info.node.raw))
            if inventory is None or inventory.error:
                return 0
            return _packing(inventory.devices, cluster.device_use(info.name).totals, request, self.strategy)

        # All it reads of the pod (Engine._remembered); the node's device use goes with its NodeInfo.
        return Score(score, memo_key=(self.name, self.strategy, request))

    def _dra_scores(self, request: DeviceRequest, cluster: ClusterView) -> NodeScore | None:
        dra = cluster.dra()
        device_class = dra.device_class(self.device_class) if dra.enabled else None
        if device_class is None:
            return None  # DeviceFit refused the pod everywhere

        def score(info: NodeInfo) -> float:
            found = dra_devices.inventory(dra, device_class, info.node)
            if found.error or not found.gpus:
                return 0
            return _packing(found.devices, found.use(dra), request, self.strategy, found.needs)

        return score

    def score(self, pod: PodView, node: NodeInfo) -> float:
        """One node, without a cluster: as if nothing held any of its devices."""
        fn = self.prescore(pod, EMPTY_CLUSTER, [node])
        return 0 if fn is None else fn(node)

    def normalize_scores(self, scores: Sequence[float]) -> list[float]:
        return list(scores)  # already 0..100
