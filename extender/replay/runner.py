"""One replay run: a trace's pods through the engine, one at a time in arrival order, each placed
(reserved, assumed, bound in memory, as `simulate` does) or dropped before the next arrives.

The run uses the same cycle as the standalone scheduler (extender.cycle.pod.schedule_one through
simulate's Placer) with every node scored (percentageOfNodesToScore 100) and no preemption (the
published runs give every pod one priority). It records the curve (extender.replay.curves), the
fragmentation ratio, the time per thousand pods in each quarter of the run, and checks at the end
that the GPU use the cluster state derived from the pods' assignments is the sum of what was
placed.
"""

from __future__ import annotations

import random
import resource
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from extender.cluster.dra_store import CLAIMS, CLASSES, SLICES
from extender.cluster.memory_binder import MemoryBinder
from extender.cluster.state import ClusterState
from extender.dra.capacity import canonical_text
from extender.dra.objects import DeviceID
from extender.errors import ExtenderError
from extender.model.gpushare import MILLI, PodShape, Workload, top_shapes
from extender.model.pods import PodView
from extender.policy.builtin.gpu_choice import ANNOTATION, Fragmentation, WorkloadPrimed, gpu_state
from extender.policy.engine import Engine, Policy
from extender.policy.loading import load_policy_file
from extender.replay.arrivals import Arrivals, arrivals, renamed_nodes
from extender.replay.curves import Curve, percent_x
from extender.replay.dra_model import DEVICE_CLASS, DEVICES, dra_pod, dra_trace, renamed_slices
from extender.replay.traces import Trace
from extender.simulation.placing import Placer, Taken

# Pod shapes the engine remembers (openb: 91 to 312 distinct). A policy that learns its workload
# names a new key for every shape each time the workload (or the model pressure) is published
# again, and the old keys are dead: 4,096 of them kept 1,213 nodes' rows each, 566 MB on gpuspec25
# for the recommended policy; 1,024 gave 363 MB, the same placements and CPU within the noise.
MEMO_SHAPES = 1024
WORKLOADS = ("trace", "online")


class ReplayError(ExtenderError):
    """A run could not be made (a policy that does not load, a broken invariant)."""


@dataclass(frozen=True)
class RunResult:
    policy: str
    seed: int
    pods: int
    placed: int
    seconds: float
    cpu_seconds: float
    rss_mb: float
    curve: dict[str, float]
    fragmentation: dict[str, float]
    per_thousand: tuple[float, ...] = ()  # CPU seconds per 1,000 pods in each quarter of the run
    gpu_milli: int = 0
    failed_shapes: dict[str, int] = field(default_factory=dict)
    # The GPUs with room left once the demand has reached the cluster's GPUs (x = 100): free milli
    # -> how many GPUs have exactly that much free (1000: idle). Where the unallocated share of
    # the bar-chart figure sits: on openb, mostly in the 190 milli beside each 810-milli share.
    free_gpus_at_100: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"policy": self.policy, "seed": self.seed, "pods": self.pods, "placed": self.placed,
                "seconds": round(self.seconds, 2), "cpu_seconds": round(self.cpu_seconds, 2),
                "rss_mb": round(self.rss_mb, 1), "curve": self.curve,
                "fragmentation": self.fragmentation,
                "seconds_per_1000_pods": [round(s, 3) for s in self.per_thousand],
                "free_gpus_at_100": self.free_gpus_at_100}


def policy_name(path: str) -> str:
    return Path(path).stem


def prime(policy: Policy, shapes: Sequence[PodShape]) -> int:
    """Give every plugin that learns FGD's target workload the trace's shapes; how many took them."""
    primed = 0
    seen: set[int] = set()
    for plugin in (*policy.filters, *(scorer.plugin for scorer in policy.scorers)):
        if id(plugin) not in seen and isinstance(plugin, WorkloadPrimed):
            seen.add(id(plugin))
            plugin.prime(shapes)
            primed += 1
    return primed


def _rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _shape_label(shape: PodShape) -> str:
    gpu = f"{shape.count}x{shape.milli}m GPU" if shape.count else "no GPU"
    return f"{shape.cpu}m CPU, {gpu}" + (f" ({'|'.join(shape.types)})" if shape.types else "")


def free_gpus(state: ClusterState, source: str = ANNOTATION) -> dict[str, int]:
    """How many GPUs of the cluster have each amount of free milli (those with none left out),
    largest total first: the free capacity of the curve's y, by the size of the holes it is in."""
    counts: dict[int, int] = {}
    for info in state.all_node_infos():
        for free in gpu_state(info, state, source).free:
            if free > 0:
                counts[free] = counts.get(free, 0) + 1
    ranked = sorted(counts.items(), key=lambda item: (-item[0] * item[1], -item[0]))
    return {str(free): gpus for free, gpus in ranked}


class _Fragmentation:
    """The cluster's fragmentation (FGD's measure against the trace's workload), kept per node:
    one node is measured again per placement (the measure is remembered per node state)."""

    def __init__(self, state: ClusterState, workload: Workload, source: str = ANNOTATION) -> None:
        self.state = state
        self.source = source
        self.measure = Fragmentation(workload.shapes).measure
        self.per_node = {info.name: self._of(info.name) for info in state.all_node_infos()}
        self.total = sum(self.per_node.values())

    def _of(self, name: str) -> float:
        info = self.state.node_info(name)
        return 0.0 if info is None else self.measure(gpu_state(info, self.state, self.source))

    def changed(self, name: str) -> None:
        value = self._of(name)
        self.total += value - self.per_node.get(name, 0.0)
        self.per_node[name] = value


def run(trace: Trace, policy_path: str, seed: int, *, tune: float = 1.3, workload: str = "trace",
        progress: Callable[[int], None] | None = None, order: Arrivals | None = None,
        placed_on: Callable[[int, str | None], None] | None = None, devices: str = "annotation") -> RunResult:
    """Replay `trace` with the policy at `policy_path` for `seed`.

    `devices`: "annotation" (the GPUs as node inventories, the pods' extended resources) or "dra"
    (the GPUs as DRA devices with consumable capacity, each GPU pod with a claim of its own:
    replay/dra_model.py); the same arrivals and the same policy file either way.

    `order`: the pods and node names to use instead of the seed's (`tune` is then unused): the
    live check (bench/replay_live.py) replays a slice in the order it gave the real cluster.
    `placed_on(i, node)`: called for each pod (its 0-based index in the order) with its node,
    or None when it was dropped, so a caller can compare placements pod by pod."""
    wall, cpu = time.perf_counter(), time.process_time()
    if devices not in DEVICES:
        raise ReplayError(f"devices: {devices!r} is not one of {', '.join(DEVICES)}")
    if devices == "dra":
        trace = dra_trace(trace)
    try:
        policy = load_policy_file(policy_path)  # fresh: a learned workload must not leak between runs
    except ExtenderError as exc:
        raise ReplayError(str(exc)) from None
    shapes = [pod.shape for pod in trace.pods]
    target = top_shapes(_counts(shapes))
    if workload == "trace":
        prime(policy, shapes)
    if order is None:
        order = arrivals(trace, seed, tune)
    state = ClusterState(assume_ttl=float("inf"))
    state.replace_nodes(renamed_nodes(trace.nodes, order.node_names))
    if trace.snapshot_pods:
        state.replace_pods(trace.snapshot_pods)
    source = ANNOTATION
    if trace.dra:
        source = DEVICE_CLASS
        state.dra_store.replace(CLASSES, [item for item in trace.dra if item.get("kind") == "DeviceClass"])
        state.dra_store.replace(SLICES, renamed_slices(trace.dra, order.node_names))
        state.dra_store.replace(CLAIMS, [])
    capacity = trace.gpu_capacity
    if capacity <= 0:
        raise ReplayError(f"{trace.source}: the cluster has no GPUs to replay against")
    placer = Placer(Engine(policy, memo_shapes=MEMO_SHAPES), state, MemoryBinder(state), random.Random(seed), 100)
    frag = _Fragmentation(state, target, source)
    curve, frag_curve = Curve(), Curve()
    arrived = used = placed = 0
    failed: dict[str, int] = {}
    total = len(order.pods)
    marks = {max(1, total * q // 4): q for q in (1, 2, 3, 4)}
    quarter_times: list[float] = []
    last_cpu, last_index = cpu, 0
    at_100: dict[str, int] | None = None
    for index, pod in enumerate(order.pods, start=1):
        if at_100 is None and percent_x(arrived + pod.gpu, capacity) > 100:
            at_100 = free_gpus(state, source)  # the last event of x = 100 is behind us
        raw = dict(pod.raw)
        metadata = dict(raw["metadata"])
        metadata["uid"] = f"{seed}-{index}"
        raw["metadata"] = metadata
        claim = None
        if trace.dra:
            raw, claim = _with_claim(raw, metadata["uid"], trace)
            if claim is not None:
                state.dra_store.upsert(CLAIMS, claim)
        view = PodView.from_dict(raw)
        taken = placer.take(view, preempting=False)
        outcome = placer.bind(taken) if isinstance(taken, Taken) else taken
        if isinstance(taken, Taken) and outcome is taken.placement:
            placed += 1
            used += pod.gpu
            frag.changed(taken.placement.node)
            if placed_on is not None:
                placed_on(index - 1, taken.placement.node)
        else:
            if claim is not None:  # a dropped pod's claim goes with it
                state.dra_store.delete(CLAIMS, f"{claim['metadata']['namespace']}/{claim['metadata']['name']}")
            if placed_on is not None:
                placed_on(index - 1, None)
            label = _shape_label(pod.shape)
            failed[label] = failed.get(label, 0) + 1
        arrived += pod.gpu
        x = percent_x(arrived, capacity)
        curve.add(x, round(used * 100 / capacity, 2))
        free = capacity - used
        frag_curve.add(x, 100 * frag.total / free if free else 0.0)
        if index in marks:
            now = time.process_time()
            quarter_times.append((now - last_cpu) * 1000 / max(1, index - last_index))
            last_cpu, last_index = now, index
        if progress is not None and index % 500 == 0:
            progress(500)
    if progress is not None:
        progress(total % 500)
    _check_use(state, used, capacity, trace, source)
    return RunResult(policy_name(policy_path), seed, total, placed, time.perf_counter() - wall,
                     time.process_time() - cpu, _rss_mb(), curve.points(), frag_curve.points(),
                     tuple(quarter_times), used, failed,
                     free_gpus(state, source) if at_100 is None else at_100)


def _counts(shapes: Sequence[PodShape]) -> Mapping[PodShape, float]:
    counts: dict[PodShape, float] = {}
    for shape in shapes:
        counts[shape] = counts.get(shape, 0.0) + 1
    return counts


def _with_claim(raw: dict[str, Any], uid: str, trace: Trace) -> tuple[dict[str, Any], dict[str, Any] | None]:
    try:
        return dra_pod(raw, uid)
    except ExtenderError as exc:
        raise ReplayError(f"{trace.source}: pod {raw['metadata'].get('name')}: {exc}") from None


def _check_use(state: ClusterState, used: int, capacity: int, trace: Trace, source: str = ANNOTATION) -> None:
    """The GPU milli the state derives from the bound pods' assignments (or, with DRA devices, from
    the claims' allocations) must be what was placed, and no GPU may be over its capacity."""
    if trace.dra:
        _check_dra_capacity(state, trace)
    derived = 0
    for info in state.all_node_infos():
        gpu = gpu_state(info, state, source)
        if any(f < 0 for f in gpu.free):
            raise ReplayError(f"{trace.source}: a GPU of {info.name} is over its capacity: {gpu.free}")
        derived += MILLI * gpu.gpus - gpu.gpu_free
    if trace.snapshot_pods:
        return  # the snapshot's own pods hold GPUs too
    if derived != used:
        raise ReplayError(f"{trace.source}: the assignments hold {derived} milli-GPU, the placements {used}")


def _check_dra_capacity(state: ClusterState, trace: Trace) -> None:
    """No DRA device may have more of any capacity consumed than it has, and no claim may still be
    in flight (every placed pod's claim is allocated and reserved for it)."""
    dra = state.dra_store
    consumed = dra.consumed()
    for published in dra.slices():
        for device in published.devices:
            taken = consumed.get(DeviceID(published.driver, published.pool, device.name), {})
            for name, capacity in device.capacities.items():
                if taken.get(name, 0) > capacity.value.value:
                    amount = canonical_text(Fraction(taken[name]), binary=capacity.value.text.endswith("i"))
                    raise ReplayError(f"{trace.source}: DRA device {published.pool}/{device.name} has {amount} of "
                                      f"its {name} consumed, more than its {capacity.value.text}")
    for claim in dra.claims():
        if claim.allocation is None or not claim.reserved_for or dra.pending_allocation(claim.uid) is not None:
            raise ReplayError(f"{trace.source}: claim {claim.key} of a placed pod is not allocated and reserved")
