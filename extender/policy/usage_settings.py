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

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.errors import PolicyError
from extender.policy.builtin import arguments

METRICS_SERVER = "metrics-server"
PROMETHEUS = "prometheus"
ANNOTATIONS = "annotations"
SOURCES = (METRICS_SERVER, PROMETHEUS, ANNOTATIONS)

RATIO, PERCENT, ABSOLUTE = "ratio", "percent", "absolute"
UNITS = (RATIO, PERCENT, ABSOLUTE)

WHERE = "settings.usage"
MIN_INTERVAL = 1.0
MAX_DURATION = 7 * 24 * 3600.0

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_SCALE = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}

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


def duration(raw: Any, where: str, *, minimum: float = 0.0) -> float:
    """Seconds from a number or a string like `30s`, `2m`, `500ms`, `1h`."""
    if isinstance(raw, bool):
        raise PolicyError(f"{where}: expected a duration such as 30s, 2m or a number of seconds")
    if isinstance(raw, int | float):
        seconds = float(raw)
    elif isinstance(raw, str) and (match := _DURATION.match(raw)):
        seconds = float(match[1]) * _SCALE[match[2]]
    else:
        raise PolicyError(f"{where}: expected a duration such as 30s, 2m or a number of seconds")
    if seconds != seconds or not minimum <= seconds <= MAX_DURATION:
        raise PolicyError(f"{where}: must be from {minimum:g}s to {MAX_DURATION:g}s")
    return seconds


def _unit(raw: Any, where: str, default: str) -> str:
    if raw is None:
        return default
    if raw not in UNITS:
        raise PolicyError(f"{where}: must be one of {', '.join(UNITS)}")
    return str(raw)


def _query(raw: Any, where: str, default: Query | None) -> Query | None:
    """`expr` text alone, or {query: ..., unit: ...}; null turns a default query off."""
    if raw is None:
        return None
    if isinstance(raw, str):
        return Query(arguments.string(raw, where), default.unit if default else RATIO)
    table = arguments.mapping(raw, where)
    arguments.only_keys(table, ("query", "unit"), where)
    expr = arguments.string(table.get("query"), arguments.join(where, "query"))
    return Query(expr, _unit(table.get("unit"), arguments.join(where, "unit"), RATIO))


def _prometheus(raw: Any, where: str) -> PrometheusSettings:
    table = arguments.mapping(raw, where)
    arguments.only_keys(table, ("url", "nodeLabel", "timeout", "queries", "window", "bearerTokenFile",
                                "caFile"), where)
    url = arguments.string(table.get("url"), arguments.join(where, "url"))
    if not url.startswith(("http://", "https://")):
        raise PolicyError(f"{arguments.join(where, 'url')}: must start with http:// or https://")
    queries = arguments.mapping(table.get("queries"), arguments.join(where, "queries"))
    qwhere = arguments.join(where, "queries")
    arguments.only_keys(queries, ("cpu", "memory", "cpuStdev", "memoryStdev"), qwhere)
    defaults = PrometheusSettings(url)
    picked = {
        name: _query(queries[key], arguments.join(qwhere, key), getattr(defaults, name))
        if key in queries else getattr(defaults, name)
        for key, name in (("cpu", "cpu"), ("memory", "memory"), ("cpuStdev", "cpu_stdev"),
                          ("memoryStdev", "memory_stdev"))
    }
    if picked["cpu"] is None and picked["memory"] is None:
        raise PolicyError(f"{qwhere}: needs a cpu or a memory query")
    timeout = table.get("timeout")
    window = table.get("window")
    return PrometheusSettings(
        url=url.rstrip("/"),
        node_label=arguments.string(table.get("nodeLabel", "node"), arguments.join(where, "nodeLabel")),
        timeout=duration(timeout, arguments.join(where, "timeout"), minimum=0.1) if timeout is not None else 5.0,
        window=duration(window, arguments.join(where, "window")) if window is not None else 0.0,
        bearer_token_file=_optional_string(table.get("bearerTokenFile"), arguments.join(where, "bearerTokenFile")),
        ca_file=_optional_string(table.get("caFile"), arguments.join(where, "caFile")),
        **picked,
    )


def _optional_string(raw: Any, where: str) -> str:
    return "" if raw is None else arguments.string(raw, where)


def _annotations(raw: Any, where: str) -> AnnotationSettings:
    table = arguments.mapping(raw, where)
    arguments.only_keys(table, ("cpu", "memory", "cpuStdev", "memoryStdev", "unit"), where)
    default = AnnotationSettings()
    keys = {}
    for key, name in (("cpu", "cpu"), ("memory", "memory"), ("cpuStdev", "cpu_stdev"),
                      ("memoryStdev", "memory_stdev")):
        if key not in table:
            keys[name] = getattr(default, name)
        elif table[key] is None or table[key] == "":
            keys[name] = ""
        else:
            keys[name] = arguments.string(table[key], arguments.join(where, key))
    if not keys["cpu"] and not keys["memory"]:
        raise PolicyError(f"{where}: needs a cpu or a memory annotation key")
    return AnnotationSettings(unit=_unit(table.get("unit"), arguments.join(where, "unit"), PERCENT), **keys)


def parse_usage_settings(raw: Any) -> UsageSettings:
    """The validated block; raises PolicyError whose message starts with `settings.usage...`."""
    table = arguments.mapping(raw, WHERE)
    arguments.only_keys(table, ("source", "interval", "maxAge", "reportingLag", "varianceSamples",
                                "prometheus", "annotations"), WHERE)
    source = table.get("source", METRICS_SERVER)
    if source not in SOURCES:
        raise PolicyError(f"{WHERE}.source: must be one of {', '.join(SOURCES)}")
    interval = duration(table.get("interval", 30.0), f"{WHERE}.interval", minimum=MIN_INTERVAL)
    max_age = duration(table["maxAge"], f"{WHERE}.maxAge") if "maxAge" in table else 3 * interval
    if max_age < interval:
        raise PolicyError(f"{WHERE}.maxAge: must be at least the interval ({interval:g}s), "
                          "or every sample would be stale before the next one")
    lag = duration(table.get("reportingLag", 60.0), f"{WHERE}.reportingLag")
    samples = arguments.integer(table.get("varianceSamples", 10), f"{WHERE}.varianceSamples",
                                minimum=1, maximum=10_000)
    prometheus = None
    if source == PROMETHEUS or "prometheus" in table:
        if table.get("prometheus") is None:
            raise PolicyError(f"{WHERE}.prometheus: required with source: prometheus (at least its url)")
        prometheus = _prometheus(table["prometheus"], f"{WHERE}.prometheus")
    annotations = _annotations(table["annotations"], f"{WHERE}.annotations") if "annotations" in table \
        else AnnotationSettings()
    return UsageSettings(source, interval, max_age, lag, samples, prometheus, annotations)


def usage_settings(settings: Mapping[str, Any]) -> UsageSettings:
    """The `usage` block of a loaded policy's settings (defaults when absent)."""
    return parse_usage_settings(settings.get("usage"))


def uses_usage(policy: Any) -> bool:
    """Whether any of the policy's plugins reads node usage (declares `needs_usage = True`)."""
    plugins = [*policy.filters, *(entry.plugin for entry in policy.scorers)]
    return any(getattr(plugin, "needs_usage", False) for plugin in plugins)
