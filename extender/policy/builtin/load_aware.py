"""Load-aware plugins: NodeLoad (filter), TargetLoadPacking and LoadVariationRiskBalancing (scorers).

They read measured usage, not requests, through `cluster.node_usage()`: the table a
background usage source published (extender/usage; settings.usage in the policy file).
A node without a sample, or whose sample is older than the source's `maxAge`, has no
data: NodeLoad lets it through, and the scorers give it 0, as Trimaran does ("avoid the
node by scoring minimum"). When the whole source is down every node scores 0, which
ranks nothing, so placement falls back to the request-based scorers.

Every figure counts the requests of pods placed on the node since its sample was taken
(`recent_*`): usage lags, and without them a burst of pods all lands on the node that
looked idle at the last sample.

The scorers follow sigs.k8s.io/scheduler-plugins pkg/trimaran (v0.33):

TargetLoadPacking
    predicted = 100 * (measured cpu + pod's predicted cpu + recent) / cpu capacity, then
    score = round((100 - target) * predicted / target + target)   when predicted <= target,
            round(target * (100 - predicted) / (100 - target))     when target < predicted <= 100,
            0                                                      when predicted > 100.
    The pod's predicted cpu is, per container, its cpu limit, else its cpu request times
    `defaultRequestsMultiplier`, else `defaultRequests.cpu`; plus the pod's overhead.
    Capacity is the node's status.capacity, as Trimaran's.

LoadVariationRiskBalancing
    per resource (cpu, memory), with capacity = allocatable as Trimaran:
        mu    = clamp((used + pod request) / capacity)
        sigma = clamp(clamp(stdev / capacity) ** (1 / sensitivity) * margin)
        score = (1 - (mu + sigma) / 2) * 100
    the node's score is the lower of the two, or the one available. `used` and `stdev`
    are the measured percentages of capacity applied to allocatable (Trimaran's
    ResourceStats), plus recent placements' requests. The deviation comes from the
    source's window when it gives one (a Prometheus stddev query, an annotation);
    metrics-server gives one instantaneous sample per node, so the usage store then
    keeps an exponentially weighted deviation over the samples it has seen.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, cast

from extender.errors import QuantityError
from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.model.quantities import to_units
from extender.model.usage_samples import UsageSample
from extender.policy import enqueue, names
from extender.policy.builtin import arguments
from extender.policy.builtin.base import identity
from extender.policy.cluster_view import EMPTY_CLUSTER, ClusterView
from extender.policy.enqueue import EventHint
from extender.policy.plugins import (
    FilterPlugin,
    FilterResult,
    NodeCheck,
    NodeScore,
    NormalizeScores,
    PreFilterPlugin,
    PreScorePlugin,
    Score,
    ScorePlugin,
)
from extender.policy.status import Code, Status

CPU_OVER = "node(s) had cpu usage above the load threshold"
MEMORY_OVER = "node(s) had memory usage above the load threshold"

DEFAULT_TARGET = 40
DEFAULT_REQUEST_MILLICORES = 1000
DEFAULT_MULTIPLIER = 1.5


def go_round(value: float) -> int:
    """Go's math.Round: half away from zero (Python's round() rounds half to even)."""
    return int(math.floor(value + 0.5)) if value >= 0 else -int(math.floor(-value + 0.5))


def _percent(raw: Any) -> float:
    value = arguments.read_number(raw)
    return value if 0 < value <= 100 else arguments.fail("must be a percentage above 0 and at most 100")


_THRESHOLD = "give a cpu or a memory threshold (percent of the node's capacity)"
_NODE_LOAD = arguments.schema({"cpu": arguments.value(_percent, default=None, null=None),
                               "memory": arguments.value(_percent, default=None, null=None)},
                              arguments.one_needed(("cpu", "memory"), _THRESHOLD))


def _cores(millicores: float) -> str:
    return f"{millicores / 1000:.2f}"


def _memory(amount: float) -> str:
    if amount >= 2**30:
        return f"{amount / 2**30:.2f}Gi"
    return f"{amount / 2**20:.0f}Mi"


# ---- NodeLoad ---------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeLoad(PreFilterPlugin, FilterPlugin):
    """Refuse nodes whose measured usage (plus recent placements) is above a threshold.

    Args: `cpu` and/or `memory`, percentages of the node's capacity. Refusals are
    unresolvable: evicting lower-priority pods is not known to bring usage down.
    """

    name: ClassVar[str] = names.NODE_LOAD
    needs_usage: ClassVar[bool] = True
    cpu: float | None = None
    memory: float | None = None

    def events_to_register(self) -> Sequence[EventHint]:
        """A node added or grown, a placed pod deleted: each may bring usage under the threshold."""
        return (enqueue.NODE_ADDED, enqueue.on(enqueue.NODES, enqueue.UPDATE_NODE_ALLOCATABLE), enqueue.on(enqueue.PODS, enqueue.DELETE))

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> NodeLoad:
        args = arguments.load(_NODE_LOAD, args)
        return cls(args["cpu"], args["memory"])

    def prefilter(self, pod: PodView, cluster: ClusterView) -> NodeCheck | None:
        table = cluster.node_usage()
        samples = table.samples
        if not samples:
            return None  # no data at all: nothing to refuse
        now = table.now
        cpu_limit, memory_limit = self.cpu, self.memory

        def check(info: NodeInfo) -> FilterResult:
            sample = samples.get(info.name)
            if sample is None or now > sample.expires:
                return None
            if cpu_limit is not None and sample.cpu is not None and sample.cpu_capacity > 0 and \
                    (sample.cpu + sample.recent_cpu) * 100 > cpu_limit * sample.cpu_capacity:
                return Status(Code.UNRESOLVABLE, (CPU_OVER,), partial(_cpu_detail, sample, cpu_limit, now))
            if memory_limit is not None and sample.memory is not None and sample.memory_capacity > 0 and \
                    (sample.memory + sample.recent_memory) * 100 > memory_limit * sample.memory_capacity:
                return Status(Code.UNRESOLVABLE, (MEMORY_OVER,),
                              partial(_memory_detail, sample, memory_limit, now))
            return None

        return check

    def filter(self, pod: PodView, node: NodeInfo, cluster: ClusterView = EMPTY_CLUSTER) -> FilterResult:
        check = self.prefilter(pod, cluster)
        return None if check is None else check(node)


def _recent(sample: UsageSample, amount: str) -> str:
    if not sample.recent_pods:
        return ""
    return f" + {amount} requested by {sample.recent_pods} pod(s) placed since"


def _detail(what: str, percent: float | None, capacity: str, measured: str, recent: str, age: float,
            limit: float) -> str:
    return (f"{what} usage {percent or 0.0:.0f}% of {capacity} ({measured} measured {age:.0f}s ago{recent}), "
            f"threshold {limit:g}%")


def _cpu_detail(sample: UsageSample, limit: float, now: float) -> str:
    assert sample.cpu is not None
    return _detail("cpu", sample.cpu_percent(), f"{_cores(sample.cpu_capacity)} cores", _cores(sample.cpu),
                   _recent(sample, _cores(sample.recent_cpu)), sample.age(now), limit)


def _memory_detail(sample: UsageSample, limit: float, now: float) -> str:
    assert sample.memory is not None
    return _detail("memory", sample.memory_percent(), _memory(sample.memory_capacity), _memory(sample.memory),
                   _recent(sample, _memory(sample.recent_memory)), sample.age(now), limit)


# ---- TargetLoadPacking -------------------------------------------------------------------


def _container_cpu(container: Any, default: int, multiplier: float) -> int:
    """Trimaran's PredictUtilisation for one container: limit, else request x multiplier, else default."""
    resources = container.get("resources") if isinstance(container, Mapping) else None
    resources = resources if isinstance(resources, Mapping) else {}
    # Each is the value just checked to be a Mapping, or an empty one.
    limits = cast("Mapping[str, Any]", resources.get("limits") if isinstance(resources.get("limits"), Mapping) else {})
    requests = cast("Mapping[str, Any]",
                    resources.get("requests") if isinstance(resources.get("requests"), Mapping) else {})
    if "cpu" in limits:
        return to_units("cpu", limits["cpu"])
    if "cpu" in requests:
        return go_round(to_units("cpu", requests["cpu"]) * multiplier)
    return default


def predicted_cpu(pod: PodView, default: int = DEFAULT_REQUEST_MILLICORES,
                  multiplier: float = DEFAULT_MULTIPLIER) -> int:
    """The pod's predicted cpu in millicores: its app containers (not init containers) plus overhead."""
    spec = pod.raw.get("spec") if isinstance(pod.raw, Mapping) else None
    spec = spec if isinstance(spec, Mapping) else {}
    total = 0
    try:
        for container in spec.get("containers") or ():
            total += _container_cpu(container, default, multiplier)
        overhead = spec.get("overhead")
        if isinstance(overhead, Mapping) and "cpu" in overhead:
            total += to_units("cpu", overhead["cpu"])
    except QuantityError:
        return pod.score_requests.get("cpu", default)  # unreachable for a parsed pod; never fail a cycle
    return total


def target_load_score(predicted: float, target: float) -> int:
    """Trimaran's piecewise score for a predicted utilisation (percent) and a target (percent)."""
    if predicted > target:
        if predicted > 100:
            return 0
        return go_round(target * (100 - predicted) / (100 - target))
    return go_round((100 - target) * predicted / target + target)


def _millicores(raw: Any) -> int:
    try:
        return to_units("cpu", raw)
    except QuantityError as exc:
        raise arguments.Invalid(str(exc)) from None


def _multiplier(raw: Any) -> float:
    if isinstance(raw, str):  # Trimaran's own config spells it as a string ("1.5")
        try:
            raw = float(raw)
        except ValueError:
            raise arguments.Invalid("not a number") from None
    return arguments.read_number(raw, minimum=0)


_TARGET_LOAD_PACKING = arguments.schema({
    "targetUtilization": arguments.integer(minimum=1, maximum=100, default=DEFAULT_TARGET),
    "defaultRequests": arguments.value(arguments.schema({
        "cpu": arguments.value(_millicores, default=DEFAULT_REQUEST_MILLICORES)}).load,
        default={"cpu": DEFAULT_REQUEST_MILLICORES}),
    "defaultRequestsMultiplier": arguments.value(_multiplier, default=DEFAULT_MULTIPLIER),
})


@dataclass(frozen=True)
class TargetLoadPacking(PreScorePlugin, ScorePlugin, NormalizeScores):
    """Pack cpu up to `targetUtilization` percent, then spread (Trimaran's best-fit packing).

    Args: `targetUtilization` (1..100, default 40), `defaultRequests: {cpu: 1}` for
    containers with neither request nor limit, `defaultRequestsMultiplier` (default 1.5)
    for containers with a request and no limit.
    """

    name: ClassVar[str] = names.TARGET_LOAD_PACKING
    needs_usage: ClassVar[bool] = True
    target: int = DEFAULT_TARGET
    default_cpu: int = DEFAULT_REQUEST_MILLICORES
    multiplier: float = DEFAULT_MULTIPLIER

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> TargetLoadPacking:
        args = arguments.load(_TARGET_LOAD_PACKING, args)
        return cls(args["targetUtilization"], args["defaultRequests"]["cpu"], args["defaultRequestsMultiplier"])

    def prescore(self, pod: PodView, cluster: ClusterView, nodes: Sequence[NodeInfo]) -> NodeScore:
        table = cluster.node_usage()
        samples, now = table.samples, table.now
        pod_cpu = predicted_cpu(pod, self.default_cpu, self.multiplier)
        target = self.target

        def score(info: NodeInfo) -> float:
            sample = samples.get(info.name)
            if sample is None or now > sample.expires or sample.cpu is None:
                return 0
            capacity = sample.cpu_capacity
            predicted = 100 * (sample.cpu + pod_cpu + sample.recent_cpu) / capacity if capacity > 0 else 0.0
            return target_load_score(predicted, target)

        # Its parts, for explain (explain/usage_lines.py).
        return Score(score, explain=partial(_packing_parts, samples, now, pod_cpu, target))

    def score(self, pod: PodView, node: NodeInfo, cluster: ClusterView = EMPTY_CLUSTER) -> float:
        return self.prescore(pod, cluster, [node])(node)

    def normalize_scores(self, scores: Sequence[float]) -> list[float]:
        return identity(list(scores))  # already 0..100; Trimaran's NormalizeScore does nothing


def _packing_parts(samples: Mapping[str, UsageSample], now: float, pod_cpu: int, target: int,
                   info: NodeInfo) -> str:
    sample = samples.get(info.name)
    if sample is None or now > sample.expires or sample.cpu is None:
        return "no fresh cpu figure: minimum score"
    capacity = sample.cpu_capacity
    predicted = 100 * (sample.cpu + pod_cpu + sample.recent_cpu) / capacity if capacity > 0 else 0.0
    recent = f" + {_cores(sample.recent_cpu)} recent" if sample.recent_pods else ""
    side = "above" if predicted > target else "up to"
    return (f"cpu ({_cores(sample.cpu)} measured + {_cores(pod_cpu)} pod{recent}) / {_cores(capacity)} cores "
            f"= {predicted:.1f}%, {side} target {target}% -> {target_load_score(predicted, target)}")


# ---- LoadVariationRiskBalancing -----------------------------------------------------------


def risk_score(capacity: float, request: float, used: float, stdev: float, margin: float,
               sensitivity: float) -> tuple[float, float, float]:
    """Trimaran's computeScore for one resource: (score 0..100, mu, sigma)."""
    if capacity <= 0:
        return 0.0, 0.0, 0.0
    request = max(request, 0.0)
    used = max(min(used, capacity), 0.0)
    stdev = max(min(stdev, capacity), 0.0)
    mu = max(min((used + request) / capacity, 1.0), 0.0)
    sigma = max(min(stdev / capacity, 1.0), 0.0)
    if sensitivity >= 0:
        sigma = sigma ** (1 / sensitivity if sensitivity else math.inf)
    sigma = max(min(sigma * margin, 1.0), 0.0)
    risk = (mu + sigma) / 2
    return (1.0 - risk) * 100, mu, sigma


def _resource_score(sample: UsageSample, resource: str, allocatable: int, request: int, margin: float,
                    sensitivity: float) -> tuple[float, float, float] | None:
    """None when the sample has no figure for `resource` (Trimaran: metric not found)."""
    if resource == "cpu":
        measured, stdev, capacity, recent = sample.cpu, sample.cpu_stdev, sample.cpu_capacity, sample.recent_cpu
    else:
        measured, stdev, capacity = sample.memory, sample.memory_stdev, sample.memory_capacity
        recent = sample.recent_memory
    if measured is None or capacity <= 0:
        return None
    # Trimaran's ResourceStats: the measured percentage (of capacity) applied to allocatable.
    used = measured / capacity * allocatable + recent
    deviation = (stdev or 0.0) / capacity * allocatable
    return risk_score(allocatable, request, used, deviation, margin, sensitivity)


def _risk_total(cpu: tuple[float, float, float] | None, memory: tuple[float, float, float] | None) -> int:
    if cpu is not None and memory is not None:
        return go_round(min(cpu[0], memory[0]))
    return go_round(max(cpu[0] if cpu else 0.0, memory[0] if memory else 0.0))


_LOAD_VARIATION = arguments.schema({
    "safeVarianceMargin": arguments.number(minimum=0, default=1.0),
    "safeVarianceSensitivity": arguments.number(minimum=0, default=1.0),
})


@dataclass(frozen=True)
class LoadVariationRiskBalancing(PreScorePlugin, ScorePlugin, NormalizeScores):
    """Prefer nodes with low and steady usage: risk = (mean + margin x stdev) / 2 per resource.

    Args: `safeVarianceMargin` (>= 0, default 1), `safeVarianceSensitivity` (>= 0, default 1;
    Trimaran recommends 2): sigma is raised to 1/sensitivity before the margin applies.
    """

    name: ClassVar[str] = names.LOAD_VARIATION_RISK_BALANCING
    needs_usage: ClassVar[bool] = True
    margin: float = 1.0
    sensitivity: float = 1.0

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> LoadVariationRiskBalancing:
        args = arguments.load(_LOAD_VARIATION, args)
        return cls(args["safeVarianceMargin"], args["safeVarianceSensitivity"])

    def prescore(self, pod: PodView, cluster: ClusterView, nodes: Sequence[NodeInfo]) -> NodeScore:
        table = cluster.node_usage()
        samples, now = table.samples, table.now
        cpu_request = pod.requests.get("cpu", 0)
        memory_request = pod.requests.get("memory", 0)
        margin, sensitivity = self.margin, self.sensitivity

        def score(info: NodeInfo) -> float:
            sample = samples.get(info.name)
            if sample is None or now > sample.expires:
                return 0
            # _resource_score for both resources, inlined: this runs for every node.
            allocatable = info.node.allocatable
            cpu = memory = None
            measured, capacity = sample.cpu, sample.cpu_capacity
            if measured is not None and capacity > 0:
                share = allocatable.get("cpu", 0) / capacity
                cpu = risk_score(allocatable.get("cpu", 0), cpu_request, measured * share + sample.recent_cpu,
                                 (sample.cpu_stdev or 0.0) * share, margin, sensitivity)[0]
            measured, capacity = sample.memory, sample.memory_capacity
            if measured is not None and capacity > 0:
                share = allocatable.get("memory", 0) / capacity
                memory = risk_score(allocatable.get("memory", 0), memory_request,
                                    measured * share + sample.recent_memory, (sample.memory_stdev or 0.0) * share,
                                    margin, sensitivity)[0]
            if cpu is not None and memory is not None:
                return go_round(cpu if cpu < memory else memory)
            return go_round(cpu if cpu is not None else memory if memory is not None else 0.0)

        # Its parts, for explain (explain/usage_lines.py).
        return Score(score, explain=partial(_risk_parts, samples, now, cpu_request, memory_request, margin, sensitivity))

    def score(self, pod: PodView, node: NodeInfo, cluster: ClusterView = EMPTY_CLUSTER) -> float:
        return self.prescore(pod, cluster, [node])(node)

    def normalize_scores(self, scores: Sequence[float]) -> list[float]:
        return identity(list(scores))


def _risk_parts(samples: Mapping[str, UsageSample], now: float, cpu_request: int, memory_request: int,
                margin: float, sensitivity: float, info: NodeInfo) -> str:
    sample = samples.get(info.name)
    if sample is None or now > sample.expires:
        return "no fresh usage: minimum score"
    allocatable = info.node.allocatable
    parts = []
    results = {}
    for resource, request in (("cpu", cpu_request), ("memory", memory_request)):
        result = _resource_score(sample, resource, allocatable.get(resource, 0), request, margin, sensitivity)
        results[resource] = result
        if result is None:
            parts.append(f"{resource}: no figure")
        else:
            value, mu, sigma = result
            parts.append(f"{resource}: mu {mu:.3f} sigma {sigma:.3f} risk {(mu + sigma) / 2:.3f} -> {value:.1f}")
    kind = f"stdev {sample.stdev_kind}" if sample.stdev_kind else "stdev 0 (none known)"
    total = _risk_total(results["cpu"], results["memory"])
    return f"{'; '.join(parts)} ({kind}) -> {total}"
