"""The GPU-sharing policies' shared parts: a pod's and a node's shape, FGD's target workload
and measure, and the choice of GPU inside a node that DeviceFit makes at Reserve with the
`random` and `fgd` strategies (the scorers in gpu_share.py rank the nodes with the same rules).
docs/replay.md describes the policies.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from extender.errors import InvalidObject
from extender.model.devices import (
    DeviceRequest,
    Inventory,
    Shares,
    Use,
    node_inventory,
    raw_annotations,
    whole_needs,
)
from extender.model.gpushare import (
    MILLI,
    GpuNode,
    PodShape,
    Workload,
    WorkloadLearner,
    after,
    device_shape,
    fed_fragmentation,
    fragmentation,
    gpu_node,
    lowest_free,
    shape_from_requests,
    sigmoid_score,
    top_shapes,
)
from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.model.records import PodRecord
from extender.policy.builtin import arguments, gpu_claims
from extender.policy.builtin.device_requests import pod_device_request
from extender.policy.cluster_view import ClusterView

CACHE_LIMIT = 200_000


def pod_shape(pod: PodView) -> PodShape | None:
    """The pod as the policies read it; None for a malformed or multi-container GPU request."""
    request = pod_device_request(pod)
    if request is not None and not isinstance(request, DeviceRequest):
        return None
    return device_shape(request, pod.requests.get("cpu", 0))


def seeded(seed: int, *parts: str) -> random.Random:
    digest = hashlib.blake2b("\0".join((str(seed), *parts)).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))




# ---- fragmentation gradient descent ----------------------------------------------------------


def _shape_arg(raw: Any, where: str) -> tuple[float, PodShape]:
    if not isinstance(raw, Mapping):
        raise InvalidObject(f"{where}: expected a mapping with cpu, gpuMilli, gpus, weight")
    unknown = set(raw) - {"cpu", "gpuMilli", "gpus", "types", "weight"}
    if unknown:
        raise InvalidObject(f"{where}.{sorted(unknown)[0]}: unknown field")
    values = []
    for key, low, high in (("cpu", 0, 10**9), ("gpuMilli", 0, MILLI), ("gpus", 0, 256)):
        value = raw.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise InvalidObject(f"{where}.{key}: expected an integer from {low} to {high}")
        values.append(value)
    weight = raw.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or weight <= 0:
        raise InvalidObject(f"{where}.weight: expected a positive number")
    types = raw.get("types", [])
    if not isinstance(types, list) or not all(isinstance(t, str) and t for t in types):
        raise InvalidObject(f"{where}.types: expected a list of GPU model names")
    cpu, milli, count = values
    if bool(milli) != bool(count):
        raise InvalidObject(f"{where}: gpuMilli and gpus are both 0 (a CPU-only shape) or both set")
    return float(weight), PodShape(cpu, milli, count, tuple(t.lower() for t in types))


def _read_workload(raw: Any) -> Any:
    """"learned", or pinned shapes: each problem at its index."""
    if raw == "learned":
        return raw
    if not isinstance(raw, list) or not raw:
        return arguments.fail('expected "learned" or a non-empty list of shapes {cpu, gpuMilli, gpus, types, weight}')
    read = arguments.parsed(_shape_arg)
    return tuple(read(item) for item in raw)


MEASURES = {"fgd": fragmentation, "cpuFed": fed_fragmentation}

WORKLOAD_ARGS = {
    # "learned": the shapes of the pods seen (a decaying histogram); a list: pinned.
    "workload": arguments.Value(_read_workload, default="learned"),
    "halfLife": arguments.integer(minimum=0, maximum=10**9, default=5000),
    "epoch": arguments.integer(minimum=1, maximum=10**9, default=200),
    # fgd: the paper's measure; cpuFed: also the free GPUs the node's CPU cannot feed (model.gpushare).
    "measure": arguments.one_of(tuple(MEASURES), f"{{value!r}} is not one of {', '.join(MEASURES)}", default="fgd"),
    # true: a replay never hands it the trace's shapes; it learns from the pods it sees, as live.
    "learnOnly": arguments.boolean(default=False),
}


class Fragmentation:
    """FGD's target workload and its measure, shared by the scorer and DeviceFit's `fgd` choice."""

    def __init__(self, pinned: tuple[tuple[float, PodShape], ...] = (), half_life: int = 5000,
                 epoch: int = 200, measure: str = "fgd", learn_only: bool = False) -> None:
        self.learner = None if pinned else WorkloadLearner(half_life=half_life, epoch=epoch)
        self._measure = MEASURES[measure]
        self.learn_only = learn_only
        total = sum(w for w, _ in pinned)
        self._pinned = Workload(tuple((w / total, s) for w, s in pinned)) if pinned else Workload()
        self._lock = threading.Lock()
        self._primed = 0
        self._cached_version: int | None = None
        self._frag: dict[Any, float] = {}
        self._scores: dict[Any, tuple[int, tuple[int, ...]]] = {}

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> Fragmentation:
        """From the checked WORKLOAD_ARGS."""
        pinned = () if values["workload"] == "learned" else tuple(values["workload"])
        return cls(pinned, values["halfLife"], values["epoch"], values["measure"], values["learnOnly"])

    @property
    def workload(self) -> Workload:
        return self.learner.workload if self.learner is not None else self._pinned

    @property
    def version(self) -> int:
        return self.learner.version if self.learner is not None else -self._primed

    def observe(self, shape: PodShape) -> None:
        if self.learner is not None:
            with self._lock:
                self.learner.observe(shape)

    def prime(self, shapes: Sequence[PodShape]) -> None:
        """Pin the workload to these shapes' distribution for good (a replay's trace, as the paper
        gives FGD the whole trace's shapes; the list stays fixed for the run). With `learnOnly`
        it keeps learning: a policy that claims to know only the pods seen so far must not be
        given the whole trace's distribution."""
        if self.learn_only:
            return
        counts: dict[PodShape, float] = {}
        for shape in shapes:
            counts[shape] = counts.get(shape, 0.0) + 1
        with self._lock:
            self.learner = None
            self._pinned = top_shapes(counts)
            self._primed += 1

    def measure(self, state: GpuNode) -> float:
        version = self.version
        if version != self._cached_version:  # a new workload: nothing remembered holds any more
            self._cached_version = version
            self._frag.clear()
            self._scores.clear()
        key = (state, version)
        value = self._frag.get(key)
        if value is None:
            if len(self._frag) >= CACHE_LIMIT:
                self._frag.clear()
            value = self._frag[key] = self._measure(state, self.workload)
        return value

    def best(self, shape: PodShape, state: GpuNode) -> tuple[int, tuple[int, ...]]:
        """FGD's score of the node for the pod, and the GPUs it would take (() for none)."""
        key = (shape, state, self.version)
        found = self._scores.get(key)
        if found is None:
            if len(self._scores) >= CACHE_LIMIT:
                self._scores.clear()
            found = self._scores[key] = self._best(shape, state)
        return found

    def removed(self, shape: PodShape, state: GpuNode, gpus: tuple[int, ...]) -> float:
        """The fragmentation the pod removes from the node by taking `gpus` (negative: adds)."""
        return self.measure(state) - self.measure(after(state, shape, gpus))

    def _best(self, shape: PodShape, state: GpuNode) -> tuple[int, tuple[int, ...]]:
        if not shape.shares:
            gpus = lowest_free(state.free, shape.count) if shape.count else ()
            return sigmoid_score(self.removed(shape, state, gpus)), gpus
        best: tuple[int, tuple[int, ...]] = (-1, ())
        for i, free in enumerate(state.free):
            if free >= shape.milli:
                score = sigmoid_score(self.removed(shape, state, (i,)))
                if score > best[0]:
                    best = (score, (i,))
        return best




@runtime_checkable
class WorkloadPrimed(Protocol):
    """A plugin that learns FGD's target workload, and can be given one at once (a replay gives
    the trace's shapes, as the paper does)."""

    def prime(self, shapes: Sequence[PodShape]) -> None: ...


class Chooser:
    """DeviceFit's `random` and `fgd` choice of GPU inside the chosen node (binpack and spread
    are model.devices.choose's). Only single-container pods asking for one share or whole GPUs
    are chosen here; anything else falls back to binpack."""

    def __init__(self, strategy: str, values: Mapping[str, Any]) -> None:
        self.strategy = strategy
        self.seed = int(values.get("seed", 0))
        self.fragmentation = Fragmentation.from_values(values) if strategy == "fgd" else None

    def observe(self, pod: PodView) -> None:
        if self.fragmentation is not None:
            shape = pod_shape(pod)
            if shape is not None:
                self.fragmentation.observe(shape)

    def prime(self, shapes: Sequence[PodShape]) -> None:
        if self.fragmentation is not None:
            self.fragmentation.prime(shapes)

    def choose(self, pod: PodView, request: DeviceRequest, node: NodeInfo, inventory: Inventory,
               totals: Mapping[str, Use]) -> tuple[tuple[str, Shares], ...] | None:
        shape = device_shape(request, pod.requests.get("cpu", 0))
        if shape is None or not shape.count:
            return None
        healthy = [d for d in inventory.devices if d.healthy]
        state = gpu_node(inventory, totals, node.free("cpu"))
        if not shape.accepts(state.model) or len(healthy) != len(state.free):
            return None
        if not shape.shares:
            picked: tuple[int, ...] = lowest_free(state.free, shape.count)
        elif self.fragmentation is not None:
            picked = self.fragmentation.best(shape, state)[1]
        else:
            fitting = [i for i, f in enumerate(state.free) if f >= shape.milli]
            picked = (fitting[seeded(self.seed, pod.uid or pod.key, node.name).randrange(len(fitting))],) \
                if fitting else ()
        if len(picked) != shape.count:
            return None
        container = request.containers[0]
        shares = tuple((healthy[i].id, *whole_needs(container, healthy[i])) for i in picked)
        return ((container.container, shares),)


# ---- both device models ----------------------------------------------------------------------
# A pod asks for shared GPUs through extended resources (the annotation inventory) or through a
# ResourceClaim of its own (DRA devices with consumable capacity, gpu_claims.py). The scorers and
# the replay read the pod and a node through these two, whichever the pod uses.

ANNOTATION = ""  # the source of a pod's GPUs in the annotation model; else its DeviceClass's name
NO_GPUS = "*"  # a pod without GPUs: a node's GPUs from its inventory annotation, else its DRA devices


def pod_gpus(pod: PodView, cluster: ClusterView) -> tuple[PodShape, str] | None:
    """The pod's shape and where its GPUs come from: ANNOTATION, or the DeviceClass of its shared-GPU
    claim. None for what the policies do not model (several GPU containers, whole and shares mixed)."""
    if gpu_claims.names_claims(pod):
        claimed = gpu_claims.pod_claim_gpus(pod, cluster.dra())
        if isinstance(claimed, gpu_claims.ClaimGpus):
            return claimed.shape, claimed.device_class.name
    shape = pod_shape(pod)
    return None if shape is None else (shape, ANNOTATION if shape.count else NO_GPUS)


def gpu_state(info: NodeInfo, cluster: ClusterView, source: str) -> GpuNode:
    """The node's free CPU and GPUs from the model `source` names (pod_gpus). A pod asking through
    extended resources, or for no GPU, reads the node's inventory annotation, else (DeviceFit's
    `deviceClass` mode, or a node on DRA) the node's shared GPUs on DRA, of any class."""
    if source in (ANNOTATION, NO_GPUS):
        inventory = node_inventory(raw_annotations(info.node.raw))
        if inventory is not None:
            return gpu_node(inventory, cluster.device_use(info.name).totals, info.free("cpu"))
        return gpu_claims.node_state(info, cluster.dra(), None)
    return gpu_claims.node_state(info, cluster.dra(), source)


def held_shape(record: PodRecord) -> PodShape:
    """A placed pod's shape from its requests, or, for a pod whose GPUs came from a claim (no GPU
    requests), from its assignment annotation's shares: what GpuClustering tags it by."""
    shape = shape_from_requests(record.requests)
    if shape.count or not record.devices:
        return shape
    cores = record.devices[0][2]
    return PodShape(shape.cpu, min(MILLI, cores * 10) if cores else MILLI, len(record.devices))
