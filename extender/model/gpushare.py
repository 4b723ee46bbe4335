"""GPU sharing as the placement-quality policies see it: a node's free CPU and free share of
each GPU, a pod's shape, a target workload, and the FGD fragmentation measure. Pure.

The policies of the FGD paper (Weng et al., "Beware of Fragmentation", USENIX ATC'23; the
exact rules are in docs/replay.md) read a node as (free CPU in milli, the free milli-GPU of
each GPU in inventory order, the GPU model) and a pod as (CPU milli, milli-GPU per GPU, GPU
count, accepted models). Shared GPUs here are the inventory devices of docs/devices.md: a
GPU's free share is the smaller of its free memory and free compute, in thousandths, so a
pod asking `gpu-cores: 46` (and memory in step) takes 460 milli.

A `GpuNode` is a value, hashable, so the scorers can remember a result for every node in
the same state (hundreds of identical empty machines) and not per node name.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from extender.model.devices import (
    GPU,
    GPU_CORES,
    GPU_MEMORY,
    DeviceRequest,
    Inventory,
    Use,
)

MILLI = 1000  # one whole GPU
CPU = "cpu"


@dataclass(frozen=True, slots=True)
class GpuNode:
    """A node as the GPU-sharing policies read it: `free` is each healthy GPU's free milli,
    in inventory order (the index is the GPU a choice names); `model` is lower-cased."""

    cpu_free: int
    free: tuple[int, ...]
    model: str

    @property
    def gpu_free(self) -> int:
        return sum(self.free)

    @property
    def gpus(self) -> int:
        return len(self.free)


@dataclass(frozen=True, slots=True)
class PodShape:
    """What the policies read of a pod: CPU milli, milli per GPU (0: no GPU), GPU count, and
    the accepted models (lower-cased substrings, as `extender.example/gpu-type`; empty: any)."""

    cpu: int
    milli: int
    count: int
    types: tuple[str, ...] = ()

    @property
    def gpu(self) -> int:
        """The pod's whole GPU request in milli."""
        return self.milli * self.count

    @property
    def shares(self) -> bool:
        """A share of one GPU (the only fractional requests the policies place)."""
        return self.count == 1 and 0 < self.milli < MILLI

    def accepts(self, model: str) -> bool:
        return not self.types or any(t in model for t in self.types)

    def tag(self) -> str:
        """GpuClustering's tag: "share-gpu" or "<k>-gpu" ("" for a pod with no GPU)."""
        if not self.count:
            return ""
        return "share-gpu" if self.shares else f"{self.count}-gpu"


@dataclass(frozen=True, slots=True)
class Workload:
    """The target workload FGD's fragmentation is measured against: shapes and their weights
    (summing to 1). Empty: nothing to measure against (every score is neutral)."""

    shapes: tuple[tuple[float, PodShape], ...] = ()


def device_shape(request: DeviceRequest | None, cpu: int) -> PodShape | None:
    """A pod's shape from its device request (None: the pod has several GPU containers, or
    whole devices mixed with shares, which the policies do not model)."""
    if request is None:
        return PodShape(cpu, 0, 0)
    if len(request.containers) != 1:
        return None
    container = request.containers[0]
    if container.memory is None and container.cores is None:
        milli = MILLI
    else:
        milli = min(MILLI, (container.cores if container.cores is not None else 100) * 10)
        if milli <= 0:
            milli = MILLI // 100
    return PodShape(cpu, milli, container.count, request.types)


def shape_from_requests(requests: Mapping[str, int], types: tuple[str, ...] = ()) -> PodShape:
    """A placed or observed pod's shape from its summed requests (extended resources by
    their names in extender.model.devices)."""
    count = requests.get(GPU, 0)
    cores = requests.get(GPU_CORES)
    if not count and (cores or requests.get(GPU_MEMORY)):
        count = 1
    if not count:
        return PodShape(requests.get(CPU, 0), 0, 0)
    milli = MILLI if not cores else min(MILLI, cores * 10)
    return PodShape(requests.get(CPU, 0), milli, count, types)


def gpu_node(inventory: Inventory | None, totals: Mapping[str, Use], cpu_free: int) -> GpuNode:
    """The node's GPUs as the policies read them: each healthy device's free share in milli
    (the smaller of free memory and free compute), and its model (the first device's type)."""
    if inventory is None or inventory.error:
        return GpuNode(cpu_free, (), "")
    free = []
    model = ""
    for device in inventory.devices:
        if not device.healthy:
            continue
        if not model:
            model = device.type.lower()
        used = totals.get(device.id)
        if used is None:
            free.append(MILLI)
            continue
        memory = (device.memory - used.memory) * MILLI // device.memory
        cores = (device.cores - used.cores) * MILLI // device.cores
        free.append(max(0, min(memory, cores)))
    return GpuNode(cpu_free, tuple(free), model)


def _expected(node: GpuNode, workload: Workload, stranded: Callable[[GpuNode, PodShape, int], int]) -> float:
    """The mean over the target workload of the free GPU milli that cannot serve each shape:
    all of it for a shape with no GPU, a shape the node's model is not for, or one the node
    lacks the CPU for; otherwise what `stranded` says of the shape (given the total free)."""
    total_free = sum(node.free)
    if not total_free:
        return 0.0
    result = 0.0
    for weight, shape in workload.shapes:
        if not shape.milli or (shape.types and not shape.accepts(node.model)) or node.cpu_free < shape.cpu:
            result += weight * total_free
        else:
            result += weight * stranded(node, shape, total_free)
    return result


def _too_full(node: GpuNode, shape: PodShape, total_free: int) -> int:
    """FGD: the free milli of the GPUs too full for the shape (all of it with too few GPUs left)."""
    serving = 0
    stranded = 0
    for f in node.free:
        if f >= shape.milli:
            serving += 1
        else:
            stranded += f
    return stranded if serving >= shape.count else total_free


def _unfed(node: GpuNode, shape: PodShape, total_free: int) -> int:
    """The free milli outside the GPUs the node can host pods of the shape on (fed_fragmentation)."""
    serving = [f for f in node.free if f >= shape.milli]
    pods = len(serving) if shape.shares else len(serving) // shape.count
    if shape.cpu:
        pods = min(pods, node.cpu_free // shape.cpu)
    gpus = pods if shape.shares else pods * shape.count
    if gpus < len(serving):
        serving.sort(reverse=True)
        del serving[gpus:]
    return total_free - sum(serving)


def fragmentation(node: GpuNode, workload: Workload) -> float:
    """FGD's expected fragmentation of the node, in milli-GPU: for each target shape, the free
    GPU milli that cannot serve it, weighted by the shape's share of the workload.

    Everything free is a fragment for a shape with no GPU, a shape the node's model is not
    for, or one that does not fit (too few GPUs with room, or too little CPU); for a shape that
    fits, only the free milli of the GPUs too full to serve it."""
    return _expected(node, workload, _too_full)


def fed_fragmentation(node: GpuNode, workload: Workload) -> float:
    """FGD's expected fragmentation, counting as fragments also the free GPUs a shape could use
    but the node cannot feed: the recommended policy's measure (docs/replay.md, "Beyond FGD").

    FGD calls every GPU with room for a shape usable by it. On openb's busiest machines (8 GPUs,
    12 cores each) the CPU runs out first: a node with 5 free GPUs and 22 free cores serves two
    pods of 11 cores, and the other 3 GPUs wait idle until the pods leave. Here a shape that fits
    can use only as many GPUs as the node can host pods of it: for a share, one GPU per pod the
    free CPU allows (the largest free ones); for k whole GPUs, k per pod, as many pods as both
    the free GPUs and the CPU allow. The rest of the free milli is a fragment for that shape. A
    node whose CPU is kept for the GPUs it has thus scores better than one whose CPU went to
    CPU-only pods, which is where openb's unplaced whole-GPU pods came from."""
    return _expected(node, workload, _unfed)


@dataclass(frozen=True, slots=True)
class ModelPressure:
    """How hard the pods that pin a GPU model press on its free GPUs, per model: `rho[m]` is the
    share of the target workload's GPU demand pinned to m (a shape naming several models split
    over them by their free GPUs) over m's share of the cluster's free GPU milli.

    FGD's measure sees how a placement fragments a node, never what it takes from whom: a pod
    that may run on any model scores the same on a T4 machine as on a G2 one, though only the T4
    machines can take the pods that ask for a T4. `costs` is what a placement on m takes from the
    pinned pods, in milli: the pod's GPU milli times how much more m is pressed than the models
    the pod accepts are on average (weighted by their free GPUs). A pod pinned to m alone costs
    nothing there, and with no pinned shape in the workload nothing costs anything."""

    rho: Mapping[str, float]
    free: Mapping[str, int]

    def costs(self, shape: PodShape) -> dict[str, float]:
        """Per model the pod accepts, what placing it there takes from the pinned pods, in milli
        (the models where it takes nothing left out). One look-up per node, once per pod."""
        if not shape.gpu or not self.rho:
            return {}
        accepted = [m for m in self.free if self.free[m] and shape.accepts(m)]
        total = sum(self.free[m] for m in accepted)
        if not total:
            return {}
        mean = sum(self.free[m] * self.rho.get(m, 0.0) for m in accepted) / total
        return {m: shape.gpu * (self.rho[m] - mean) for m in accepted if self.rho.get(m, 0.0) > mean}


def model_pressure(free: Mapping[str, int], workload: Workload) -> ModelPressure:
    """The pressure of the workload's pinned shapes on each model's `free` GPU milli."""
    demand = sum(weight * shape.gpu for weight, shape in workload.shapes)
    total_free = sum(free.values())
    pinned = dict.fromkeys(free, 0.0)
    for weight, shape in workload.shapes:
        if not shape.types or not shape.gpu:
            continue
        models = [m for m in free if shape.accepts(m)]
        supply = sum(free[m] for m in models)
        for m in models if supply else ():
            pinned[m] += weight * shape.gpu * free[m] / supply
    if not demand or not total_free:
        return ModelPressure({}, dict(free))
    rho = {m: (pinned[m] / demand) / (free[m] / total_free) for m in free if free[m] and pinned[m]}
    return ModelPressure(rho, dict(free))


def sigmoid_score(delta: float) -> int:
    """FGD's node score, 0..100: int(100·sigmoid(Δ/1000)), Δ the fragmentation removed (milli)."""
    x = delta / MILLI
    if x < -50:
        return 0
    return int(100 / (1 + math.exp(-x)))


def lowest_free(free: Sequence[int], count: int) -> tuple[int, ...]:
    """The indices of the `count` lowest-indexed fully free GPUs (whole-GPU pods take these)."""
    picked = [i for i, f in enumerate(free) if f >= MILLI][:count]
    return tuple(picked)


def after(node: GpuNode, pod: PodShape, gpus: Iterable[int]) -> GpuNode:
    """The node with the pod placed on `gpus`."""
    free = list(node.free)
    for i in gpus:
        free[i] -= pod.milli
    return GpuNode(node.cpu_free - pod.cpu, tuple(free), node.model)


def top_shapes(counts: Mapping[PodShape, float], coverage: float = 0.95) -> Workload:
    """The paper's target workload from shape counts: the most frequent shapes until they cover
    `coverage` of the pods (ties: larger CPU, milli, count, then types first), weights summing to 1."""
    total = sum(counts.values())
    if total <= 0:
        return Workload()
    ordered = sorted(counts.items(), key=lambda item: (-item[1], -item[0].cpu, -item[0].milli, -item[0].count,
                                                       tuple(reversed(item[0].types))), )
    kept: list[tuple[PodShape, float]] = []
    covered = 0.0
    for shape, count in ordered:
        kept.append((shape, count))
        covered += count
        if covered >= coverage * total - 1e-9:
            break
    return Workload(tuple((count / covered, shape) for shape, count in kept))


class WorkloadLearner:
    """A decaying histogram of the pod shapes seen, published as a `Workload` in epochs.

    Each shape seen adds 1 and every earlier count decays by `decay` (count-based, so a replay
    and a live scheduler that see the same pods in the same order learn the same). The
    published workload changes only every `epoch` pods: the scorers remember per-node results
    for one published workload, and a distribution moving with every pod would defeat that.
    `version` names the published one. Not thread-safe: a scorer calls it under its lock."""

    def __init__(self, *, half_life: int = 5000, epoch: int = 200, coverage: float = 0.95) -> None:
        self.decay = 0.5 ** (1 / half_life) if half_life > 0 else 1.0
        self.epoch = epoch
        self.coverage = coverage
        self._counts: dict[PodShape, float] = {}
        self._scale = 1.0  # a stored count / _scale is its decayed weight; each new pod adds _scale
        self._pending = 0
        self.version = 0
        self.workload = Workload()

    def observe(self, shape: PodShape) -> None:
        self._scale /= self.decay
        if self._scale > 1e100:  # renormalise before floats overflow
            self._counts = {s: c / self._scale for s, c in self._counts.items()}
            self._scale = 1.0
        self._counts[shape] = self._counts.get(shape, 0.0) + self._scale
        self._pending += 1
        if self._pending >= self.epoch or not self.workload.shapes:
            self.publish()

    def publish(self) -> None:
        self._pending = 0
        self.workload = top_shapes(self._counts, self.coverage)
        self.version += 1
