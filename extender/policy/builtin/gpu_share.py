"""The GPU-sharing placement policies of the FGD paper, as scorers: GpuRandom, GpuDotProduct,
GpuClustering, GpuPacking, GpuBestFit and GpuFragmentation (FGD; with `measure: cpuFed` and
`modelPressure`, the project's recommended policy). docs/replay.md says what each optimises, and which GPU it picks.

They read the shared GPUs of docs/devices.md (the inventory annotation and its use) and the
node's free CPU; DeviceFit filters and, at Reserve, picks the GPU inside the node with the same
rule (its `strategy`: `binpack` is the best fit the paper's policies use, `random` and `fgd` the
other two). Each is a plain scorer, so it runs the same way in the webhook's `prioritize`, the
standalone scheduler, simulate and replay.

Every result is a function of the pod's shape and the node's `GpuNode`, a value: each scorer
remembers it per (shape, node state), so hundreds of identical machines cost one computation,
and the engine's per-node memo (`memo_key`) skips the nodes that did not change.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from extender.model.gpushare import (
    MILLI,
    GpuNode,
    ModelPressure,
    PodShape,
    Workload,
    model_pressure,
    sigmoid_score,
)
from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy.builtin import arguments
from extender.policy.builtin.gpu_choice import (
    ANNOTATION,
    CACHE_LIMIT,
    NO_GPUS,
    WORKLOAD_ARGS,
    Fragmentation,
    gpu_state,
    held_shape,
    pod_gpus,
    seeded,
)
from extender.policy.cluster_view import EMPTY_CLUSTER, ClusterView
from extender.policy.plugins import NodeScore, NormalizeScores, PreScorePlugin, Score, ScorePlugin

# The paper's normalisers: a node of 128 cores and 8 GPUs (its largest).
_CPU_SCALE = 128_000
_GPU_SCALE = 8 * MILLI


class _Remembered:
    """(shape, node state) -> result, bounded; shared by the threads of a process."""

    def __init__(self) -> None:
        self._values: dict[Any, Any] = {}

    def get(self, key: Any, compute: Callable[[], Any]) -> Any:
        value = self._values.get(key)
        if value is None:
            if len(self._values) >= CACHE_LIMIT:
                self._values.clear()
            value = self._values[key] = compute()
        return value


def _scorer(name: str, shape: PodShape, cluster: ClusterView, rule: Callable[[GpuNode], float],
            cache: _Remembered, version: Any = None, source: str = ANNOTATION) -> NodeScore:
    """The per-node function of a rule over node states, remembered per state; `source`: the
    device model the pod's GPUs come from (gpu_choice.pod_gpus)."""

    def score(info: NodeInfo) -> float:
        state = gpu_state(info, cluster, source)
        return cache.get((shape, state, version), lambda: rule(state))  # type: ignore[no-any-return]  # the cache returns what the rule made: a float

    return Score(score, memo_key=(name, shape, version, source))  # all it reads of the pod


@dataclass(frozen=True)
class _GpuScorer(PreScorePlugin, ScorePlugin, NormalizeScores):
    """The shared part: integer scores 0..100 kept as they are (the paper's policies are scored
    alone, un-normalised, and ties go to the node order)."""

    name: ClassVar[str] = ""
    needs_pods = True
    _cache: _Remembered = field(default_factory=_Remembered, compare=False, repr=False)

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> _GpuScorer:
        arguments.load(arguments.schema({}), args)
        return cls()

    def rule(self, shape: PodShape, state: GpuNode) -> float:
        raise NotImplementedError

    def prescore(self, pod: PodView, cluster: ClusterView, nodes: Sequence[NodeInfo]) -> NodeScore | None:
        found = pod_gpus(pod, cluster)
        if found is None:
            return None
        shape, source = found
        return _scorer(self.name, shape, cluster, lambda state: self.rule(shape, state), self._cache, source=source)

    def score(self, pod: PodView, node: NodeInfo) -> float:
        fn = self.prescore(pod, EMPTY_CLUSTER, [node])
        return 0 if fn is None else fn(node)

    def normalize_scores(self, scores: Sequence[float]) -> list[float]:
        return list(scores)


@dataclass(frozen=True)
class GpuDotProduct(_GpuScorer):
    """Tetris: the smallest dot product of the node's free (CPU, GPU) and the pod's demand wins."""

    name: ClassVar[str] = "GpuDotProduct"

    def rule(self, shape: PodShape, state: GpuNode) -> float:
        product = (state.cpu_free / _CPU_SCALE) * (shape.cpu / _CPU_SCALE) + (
            state.gpu_free / _GPU_SCALE) * (shape.gpu / _GPU_SCALE)
        return int(100 * (1 - product / 2))


@dataclass(frozen=True)
class GpuBestFit(_GpuScorer):
    """The node left with the least free CPU and GPU after the pod (halves of each, normalised),
    then min-max normalised over the feasible nodes."""

    name: ClassVar[str] = "GpuBestFit"

    def rule(self, shape: PodShape, state: GpuNode) -> float:
        raw = 0.5 * (state.cpu_free - shape.cpu) / _CPU_SCALE + 0.5 * (state.gpu_free - shape.gpu) / _GPU_SCALE
        return int((1 - raw) * 100)

    def normalize_scores(self, scores: Sequence[float]) -> list[float]:
        if not scores:
            return []
        low, high = min(scores), max(scores)
        if high == low:
            return [0.0] * len(scores)
        return [float((int(s) - int(low)) * 100 // (int(high) - int(low))) for s in scores]


@dataclass(frozen=True)
class GpuPacking(_GpuScorer):
    """Fill busy GPUs first, then partly used nodes, and keep whole idle machines for last."""

    name: ClassVar[str] = "GpuPacking"

    def rule(self, shape: PodShape, state: GpuNode) -> float:
        if not shape.count or not state.free:
            return 0
        if all(f >= MILLI for f in state.free):
            return max(33 - state.gpus, state.gpus)
        order = sorted(range(state.gpus), key=lambda i: state.free[i])  # stable: ties by index
        picked = [i for i in order if state.free[i] >= shape.milli][:shape.count]
        if len(picked) < shape.count:
            return 0
        whole = sum(1 for i in picked if state.free[i] >= MILLI)
        if whole:
            return max(50 - whole, 33)
        return max(100 - sum(state.free[i] * 100 // MILLI for i in picked) // 10, 50)


def _nodes_tags(info: NodeInfo) -> frozenset[str]:
    return frozenset(tag for tag in (held_shape(p).tag() for p in info.pods) if tag)


@dataclass(frozen=True)
class GpuClustering(_GpuScorer):
    """Keep pods of one kind (shares, 1 GPU, 2 GPUs...) together on the same machines."""

    name: ClassVar[str] = "GpuClustering"

    def prescore(self, pod: PodView, cluster: ClusterView, nodes: Sequence[NodeInfo]) -> NodeScore | None:
        found = pod_gpus(pod, cluster)
        if found is None:
            return None
        shape, source = found
        tag = shape.tag()
        cache = self._cache

        def score(info: NodeInfo) -> float:
            if not tag:
                return 0
            state = gpu_state(info, cluster, source)
            tags = _nodes_tags(info)
            return cache.get((tag, state, tags), lambda: _clustering(tag, state, tags))  # type: ignore[no-any-return]  # the cache returns what _clustering made: a float

        return Score(score, memo_key=(self.name, shape, source))  # all it reads of the pod


def _clustering(tag: str, state: GpuNode, tags: frozenset[str]) -> int:
    base = 25 * (_GPU_SCALE - state.gpu_free) // _GPU_SCALE
    if not tags:
        return base + 25
    if tag in tags:
        return base + (75 if len(tags) == 1 else 50)
    return base


@dataclass(frozen=True)
class GpuRandom(PreScorePlugin, ScorePlugin, NormalizeScores):
    """One feasible node at random scores 100, the others 0. The draw is a function of `seed`
    and the pod's UID, so a replay is reproducible and every webhook replica agrees."""

    name: ClassVar[str] = "GpuRandom"
    needs_pods = False
    seed: int = 0

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> GpuRandom:
        values = arguments.load(arguments.schema({"seed": arguments.integer(minimum=0, maximum=2**63, default=0)}),
                                args)
        return cls(values["seed"])

    def prescore(self, pod: PodView, cluster: ClusterView, nodes: Sequence[NodeInfo]) -> NodeScore | None:
        if not nodes:
            return None
        chosen = nodes[seeded(self.seed, pod.uid or pod.key).randrange(len(nodes))].name
        return lambda info: 100 if info.name == chosen else 0

    def score(self, pod: PodView, node: NodeInfo) -> float:
        return 100

    def normalize_scores(self, scores: Sequence[float]) -> list[float]:
        return list(scores)


PRESSURE_EVERY = 50  # pods scored between two readings of the cluster's free GPUs per model


class PressureGauge:
    """The pinned models' pressure (model.gpushare.ModelPressure) on the cluster's free GPUs,
    read again every PRESSURE_EVERY pods scored: summing every node's GPUs for every pod would
    cost more than scoring them, and the pressure moves slowly. `epoch` names the reading, so the
    engine's per-node memo never keeps a score made under an older one. Shared by the threads
    of a webhook worker, hence the lock."""

    def __init__(self, weight: float, every: int = PRESSURE_EVERY) -> None:
        self.weight = weight
        self.every = every
        self.epoch = 0
        self._scored = 0
        self._current = ModelPressure({}, {})
        self._lock = threading.Lock()

    def read(self, workload: Workload, cluster: ClusterView) -> tuple[int, ModelPressure]:
        with self._lock:
            if self._scored % self.every == 0:
                self._current = model_pressure(_free_by_model(cluster), workload)
                self.epoch += 1
            self._scored += 1
            return self.epoch, self._current

    def costs(self, shape: PodShape, workload: Workload, cluster: ClusterView) -> tuple[int, dict[str, float]]:
        """The reading's epoch and the weighted cost of the pod on each model it pays on (none
        for a pod without GPUs, which does not count towards the next reading either)."""
        if not shape.gpu:
            return 0, {}
        epoch, pressure = self.read(workload, cluster)
        return epoch, {model: self.weight * cost for model, cost in pressure.costs(shape).items()}


def _free_by_model(cluster: ClusterView) -> dict[str, int]:
    free: dict[str, int] = {}
    for info in cluster.all_node_infos():
        state = gpu_state(info, cluster, NO_GPUS)
        if state.model:
            free[state.model] = free.get(state.model, 0) + state.gpu_free
    return free


FRAGMENTATION_ARGS = {
    **WORKLOAD_ARGS,
    # 0: FGD alone; w > 0: a placement's score also pays w times what it takes from the pods that
    # pin the node's GPU model (model.gpushare.ModelPressure), in milli of fragmentation.
    "modelPressure": arguments.number(minimum=0, default=0.0),
}


@dataclass(frozen=True)
class GpuFragmentation(PreScorePlugin, ScorePlugin, NormalizeScores):
    """FGD: the node whose expected fragmentation the pod reduces most (or grows least) wins.
    Args: `workload` ("learned", or pinned shapes {cpu, gpuMilli, gpus, types, weight}),
    `halfLife` and `epoch` (the learned histogram's decay, in pods, and how often it is
    published), `measure` (`fgd`, the paper's; `cpuFed`, which also counts the free GPUs the
    node's CPU cannot feed), `learnOnly` (never given a replay's trace shapes) and
    `modelPressure` (the weight of what a placement takes from the pods that pin a GPU model)."""

    name: ClassVar[str] = "GpuFragmentation"
    needs_pods = True
    fragmentation: Fragmentation = field(default_factory=Fragmentation, compare=False, repr=False)
    args_key: Any = None
    pressure: PressureGauge | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> GpuFragmentation:
        values = arguments.load(arguments.schema(FRAGMENTATION_ARGS), args)
        weight = values["modelPressure"]
        return cls(Fragmentation.from_values(values), repr(sorted(values.items())),
                   PressureGauge(weight) if weight else None)

    def prescore(self, pod: PodView, cluster: ClusterView, nodes: Sequence[NodeInfo]) -> NodeScore | None:
        return self._scores(pod, cluster, self.pressure)

    def score(self, pod: PodView, node: NodeInfo) -> float:
        # One node and no cluster: no pressure to read (a reading of an empty cluster would stand
        # for the pods after it).
        fn = self._scores(pod, EMPTY_CLUSTER, None)
        return 0 if fn is None else fn(node)

    def _scores(self, pod: PodView, cluster: ClusterView, gauge: PressureGauge | None) -> NodeScore | None:
        found = pod_gpus(pod, cluster)
        if found is None:
            return None
        shape, source = found
        frag = self.fragmentation
        frag.observe(shape)
        version = frag.version
        epoch, costs = gauge.costs(shape, frag.workload, cluster) if gauge is not None else (0, {})
        if not costs:
            def score(info: NodeInfo) -> float:
                return frag.best(shape, gpu_state(info, cluster, source))[0]

            return Score(score, memo_key=(self.name, shape, version, source))  # all it reads of the pod

        def pressed(info: NodeInfo) -> float:
            state = gpu_state(info, cluster, source)
            value, gpus = frag.best(shape, state)
            cost = costs.get(state.model)
            return sigmoid_score(frag.removed(shape, state, gpus) - cost) if cost else value

        return Score(pressed, memo_key=(self.name, shape, version, source, epoch))

    def normalize_scores(self, scores: Sequence[float]) -> list[float]:
        return list(scores)

    def prime(self, shapes: Sequence[PodShape]) -> None:
        """Pin the target workload to these shapes' distribution (gpu_choice.WorkloadPrimed)."""
        self.fragmentation.prime(shapes)


GPU_SCORERS = (GpuRandom, GpuDotProduct, GpuClustering, GpuPacking, GpuBestFit, GpuFragmentation)

