"""The policy file's `settings.usage` block: where node usage comes from, how often, how stale it may be.

One block, not plugin args, because one source feeds the NodeLoad filter and both load
scorers, and a cluster has one metrics pipeline:

    settings:
      usage:
        source: metrics-server      # metrics-server (default) | prometheus | annotations
        interval: 30s               # between fetches (default 30s)
        maxAge: 90s                 # older samples count as missing (default 3 x interval)
        reportingLag: 60s           # a new pod's requests count on top of samples taken
                                    # less than this long after it was placed (default 60s)
        varianceSamples: 10         # stdev over about this many samples when the source
                                    # gives none (metrics-server, annotations)
        prometheus: {url: ..., queries: {...}}
        annotations: {cpu: cpu_usage_avg_5m, memory: mem_usage_avg_5m, unit: percent}

Validated when the policy loads (`load_policy` calls `parse_usage_settings`), every
error naming its path (`settings.usage.interval: ...`), so a bad block never reaches
the loop. Pure: the adapters in extender/usage read these dataclasses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from extender.policy.builtin import arguments

METRICS_SERVER = "metrics-server"
PROMETHEUS = "prometheus"
ANNOTATIONS = "annotations"
SOURCES = (METRICS_SERVER, PROMETHEUS, ANNOTATIONS)

RATIO, PERCENT, ABSOLUTE = "ratio", "percent", "absolute"
UNITS = (RATIO, PERCENT, ABSOLUTE)

WHERE = "settings.usage"
MIN_INTERVAL = 1.0
MAX_DURATION = arguments.MAX_DURATION

# node_exporter through a Prometheus that labels series with the Kubernetes node name
# (the usual kubernetes_sd relabelling to `node`); both ratios of the node's capacity.
DEFAULT_CPU_QUERY = '1 - avg by (node) (rate(node_cpu_seconds_total{mode="idle"}[5m]))'
DEFAULT_MEMORY_QUERY = (
    "1 - sum by (node) (node_memory_MemAvailable_bytes) / sum by (node) (node_memory_MemTotal_bytes)"
)


@dataclass(frozen=True)
class Query:
    """A PromQL instant query returning one sample per node, and the unit of its values."""

    expr: str
    unit: str = RATIO  # ratio of capacity (0..1), percent (0..100), absolute (cores, bytes)


@dataclass(frozen=True)
class PrometheusSettings:
    url: str
    node_label: str = "node"
    timeout: float = 5.0
    cpu: Query | None = Query(DEFAULT_CPU_QUERY)
    memory: Query | None = Query(DEFAULT_MEMORY_QUERY)
    cpu_stdev: Query | None = None  # window statistics, e.g. stddev_over_time(...[10m])
    memory_stdev: Query | None = None
    window: float = 0.0  # seconds the queries cover, for explain (0: not stated)
    bearer_token_file: str = ""
    ca_file: str = ""


@dataclass(frozen=True)
class AnnotationSettings:
    """Node annotations kept fresh by someone else (Crane's pattern): `value` or `value,RFC3339-time`."""

    cpu: str = "cpu_usage_avg_5m"
    memory: str = "mem_usage_avg_5m"
    cpu_stdev: str = ""
    memory_stdev: str = ""
    unit: str = PERCENT


@dataclass(frozen=True)
class UsageSettings:
    source: str = METRICS_SERVER
    interval: float = 30.0
    max_age: float = 90.0
    reporting_lag: float = 60.0
    variance_samples: int = 10
    prometheus: PrometheusSettings | None = None
    annotations: AnnotationSettings = field(default_factory=AnnotationSettings)

    @property
    def smoothing(self) -> float:
        """The weight of a new sample in the exponentially weighted mean and variance."""
        return 2.0 / (self.variance_samples + 1)


def _unit(default: str) -> Any:
    return arguments.one_of(UNITS, f"must be one of {', '.join(UNITS)}", default=default, null=default)


def _seconds(default: float | None, minimum: float = 0.0, **options: Any) -> Any:
    return arguments.value(lambda raw: arguments.read_duration(raw, minimum=minimum), default=default, **options)


def _query(default: Query | None) -> Any:
    """`expr` text alone, or {query: ..., unit: ...}; null turns a default query off."""
    return arguments.value(lambda raw: Query(arguments.read_string(raw)) if isinstance(raw, str) else _QUERY.load(raw),
                           default=default, null=None)


def _url(raw: Any) -> str:
    url = arguments.read_string(raw)
    return url.rstrip("/") if url.startswith(("http://", "https://")) else arguments.fail(
        "must start with http:// or https://")


def _annotation_key(default: str, **options: Any) -> Any:
    return arguments.string(allow_empty=True, default=default, null="", **options)


_QUERY = arguments.schema({"query": arguments.string(), "unit": _unit(RATIO)}, lambda q: Query(q["query"], q["unit"]))
_QUERIES = arguments.schema({
    "cpu": _query(Query(DEFAULT_CPU_QUERY)),
    "memory": _query(Query(DEFAULT_MEMORY_QUERY)),
    "cpuStdev": _query(None),
    "memoryStdev": _query(None),
}, arguments.one_needed(("cpu", "memory"), "needs a cpu or a memory query"))
_PROMETHEUS = arguments.schema({
    "url": arguments.value(_url),
    "nodeLabel": arguments.string(default="node"),
    "timeout": _seconds(5.0, 0.1, null=5.0),
    "queries": arguments.value(_QUERIES.load, default=_QUERIES.load({})),
    "window": _seconds(0.0, null=0.0),
    "bearerTokenFile": arguments.string(default="", null=""),
    "caFile": arguments.string(default="", null=""),
}, lambda p: PrometheusSettings(p["url"], p["nodeLabel"], p["timeout"], p["queries"]["cpu"], p["queries"]["memory"],
                                p["queries"]["cpuStdev"], p["queries"]["memoryStdev"], p["window"],
                                p["bearerTokenFile"], p["caFile"]))
_ANNOTATIONS = arguments.schema({
    "cpu": _annotation_key(AnnotationSettings.cpu),
    "memory": _annotation_key(AnnotationSettings.memory),
    "cpu_stdev": _annotation_key("", data_key="cpuStdev"),
    "memory_stdev": _annotation_key("", data_key="memoryStdev"),
    "unit": _unit(PERCENT),
}, arguments.one_needed(("cpu", "memory"), "needs a cpu or a memory annotation key",
                        lambda a: AnnotationSettings(**a)))


def _usage(table: dict[str, Any]) -> UsageSettings:
    interval, max_age, source = table["interval"], table["maxAge"], table["source"]
    if max_age is None:
        max_age = 3 * interval
    elif max_age < interval:
        raise arguments.Invalid({"maxAge": [f"must be at least the interval ({interval:g}s), "
                                            "or every sample would be stale before the next one"]})
    if source == PROMETHEUS and table["prometheus"] is None:
        raise arguments.Invalid({"prometheus": [_PROMETHEUS_REQUIRED]})
    return UsageSettings(source, interval, max_age, table["reportingLag"], table["varianceSamples"],
                         table["prometheus"], table["annotations"])


_PROMETHEUS_REQUIRED = "required with source: prometheus (at least its url)"
_USAGE = arguments.schema({
    "source": arguments.one_of(SOURCES, f"must be one of {', '.join(SOURCES)}", default=METRICS_SERVER),
    "interval": _seconds(30.0, MIN_INTERVAL),
    "maxAge": _seconds(None),  # None: 3 x interval
    "reportingLag": _seconds(60.0),
    "varianceSamples": arguments.integer(minimum=1, maximum=10_000, default=10),
    "prometheus": arguments.value(lambda raw: _PROMETHEUS.load(raw) if raw is not None
                                  else arguments.fail(_PROMETHEUS_REQUIRED), default=None),
    "annotations": arguments.value(_ANNOTATIONS.load, default=AnnotationSettings()),
}, _usage)


def parse_usage_settings(raw: Any) -> UsageSettings:
    """The validated block; raises PolicyError naming every problem, each starting with `settings.usage`."""
    return cast(UsageSettings, arguments.load(_USAGE, raw, WHERE))  # _USAGE's build (_usage) makes it


def usage_settings(settings: Mapping[str, Any]) -> UsageSettings:
    """The `usage` block of a loaded policy's settings (defaults when absent)."""
    return parse_usage_settings(settings.get("usage"))


def uses_usage(policy: Any) -> bool:
    """Whether any of the policy's plugins reads node usage (declares `needs_usage = True`)."""
    return any(points.needs_usage for points in (*policy.filter_points, *(p for p, _ in policy.scorer_points)))
