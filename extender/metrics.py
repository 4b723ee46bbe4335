"""Prometheus metrics for every mode, in one place so names and labels stay consistent.

Under gunicorn each worker is a process; prometheus_client's multiprocess mode
(PROMETHEUS_MULTIPROC_DIR set before this module is imported) makes the counts
add up across workers. `extender serve` sets that directory up; `render()`
picks the right collector either way.
"""

from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    values,
)

MULTIPROCESS = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


class _ProcessId:
    """os.getpid(), remembered and refreshed in each child after a fork.

    prometheus_client's multiprocess values compare the process identifier on every
    increment to notice a fork; with os.getpid that is a system call per increment,
    seven per verb request. The identifier stays the pid, so processes running at the
    same time still get distinct files, as the library requires.
    """

    def __init__(self) -> None:
        self.pid = os.getpid()
        os.register_at_fork(after_in_child=self._refresh)

    def _refresh(self) -> None:
        self.pid = os.getpid()

    def __call__(self) -> int:
        return self.pid


if MULTIPROCESS:
    values.ValueClass = values.MultiProcessValue(process_identifier=_ProcessId())  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_NODE_BUCKETS = (1, 5, 10, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
_BYTE_BUCKETS = (1e3, 1e4, 1e5, 1e6, 4e6, 1.6e7, 6.4e7)

# ---- webhook ------------------------------------------------------------------
REQUESTS = Counter("extender_requests_total", "Extender verb requests, by verb and result.", ["verb", "result"])
REQUEST_LATENCY = Histogram(
    "extender_request_duration_seconds", "Handler latency per verb and result.", ["verb", "result"],
    buckets=_LATENCY_BUCKETS,
)
REQUEST_NODES = Histogram("extender_request_nodes", "Nodes per request.", ["verb"], buckets=_NODE_BUCKETS)
REQUEST_BYTES = Histogram("extender_request_bytes", "Request body size.", ["verb"], buckets=_BYTE_BUCKETS)
FILTER_REJECTIONS = Counter(
    "extender_filter_rejections_total", "Nodes refused by a filter plugin.", ["plugin"]
)
BIND_OUTCOMES = Counter("extender_bind_total", "Bind outcomes (webhook and standalone).", ["result"])

# ---- cluster state -----------------------------------------------------------------
CACHE_SYNCED = Gauge(
    "extender_cache_synced", "1 when the initial node and pod lists are in.", multiprocess_mode="livemin"
)
CACHE_LAST_EVENT = Gauge(
    "extender_cache_last_event_timestamp_seconds", "Unix time of the last watch event applied.",
    multiprocess_mode="livemax",
)
CACHE_OBJECTS = Gauge("extender_cache_objects", "Objects in the cluster state.", ["kind"],
                      multiprocess_mode="livemax")
WATCH_RESTARTS = Counter("extender_watch_restarts_total", "Watch reconnects, by resource and cause.",
                         ["resource", "cause"])
REJECTED_OBJECTS = Counter("extender_cache_rejected_objects_total", "Objects skipped as unreadable.",
                           ["kind"])

# ---- policy ---------------------------------------------------------------------
POLICY_RELOADS = Counter("extender_policy_reloads_total", "Policy reload attempts by outcome.", ["outcome"])

# ---- node usage (load-aware plugins) ------------------------------------------------
USAGE_SOURCE_UP = Gauge(
    "extender_usage_source_up", "1 while the last fetch from the node usage source succeeded.", ["source"],
    multiprocess_mode="livemin",
)
USAGE_SAMPLE_AGE = Gauge(
    "extender_usage_sample_age_seconds", "Age of the newest node usage sample, by source.", ["source"],
    multiprocess_mode="livemax",
)
USAGE_NODES = Gauge("extender_usage_nodes", "Nodes with a fresh usage sample, by source.", ["source"],
                    multiprocess_mode="livemin")
USAGE_FETCH_FAILURES = Counter(
    "extender_usage_fetch_failures_total", "Failed fetches from the node usage source, by reason.",
    ["source", "reason"],
)
USAGE_DROPPED = Counter(
    "extender_usage_dropped_values_total", "Usage values dropped as garbage, by reason.", ["source", "reason"]
)
USAGE_FETCH_LATENCY = Histogram(
    "extender_usage_fetch_duration_seconds", "Time to fetch node usage, by source.", ["source"],
    buckets=_LATENCY_BUCKETS,
)

# ---- API server requests (kube_client.request_json; watches are counted as restarts) ----
API_REQUESTS = Counter("extender_api_requests_total",
                       "Requests to the API server by method and HTTP status ('error': no reply).", ["method", "code"])
API_REQUEST_LATENCY = Histogram("extender_api_request_duration_seconds",
                                "API server request latency by method, until the whole reply is read.", ["method"],
                                buckets=_LATENCY_BUCKETS)

# ---- standalone scheduler --------------------------------------------------------
SCHEDULE_ATTEMPTS = Counter(
    "extender_schedule_attempts_total", "Scheduling attempts by result.", ["profile", "result"]
)
SCHEDULING_LATENCY = Histogram(
    "extender_scheduling_duration_seconds", "From dequeue to bind issued.", ["profile"], buckets=_LATENCY_BUCKETS
)
QUEUE_DEPTH = Gauge("extender_queue_depth", "Pods waiting, by queue.", ["queue"], multiprocess_mode="livesum")
BIND_ERRORS = Counter("extender_bind_errors_total", "Failed binds by reason.", ["reason"])
PREEMPTION_ATTEMPTS = Counter("extender_preemption_attempts_total",
                              "Preemption attempts for pods that fit nowhere, by result.", ["result"])
PREEMPTION_VICTIMS = Counter("extender_preemption_victims_total", "Pods evicted to make room, by outcome.",
                             ["outcome"])
LEADER = Gauge("extender_leader", "1 while this instance holds the lease.", multiprocess_mode="livemax")

# ---- pod groups (docs/gangs.md) ---------------------------------------------------------
GANG_GROUPS_WAITING = Gauge("extender_gang_groups_waiting",
                            "Pod groups with members waiting: for their group or quorum of members (gated), or "
                            "placed and held until the quorum is placed.", multiprocess_mode="livesum")
GANG_COMPLETION = Histogram("extender_gang_completion_seconds",
                            "From a pod group's first member admitted to its quorum released for binding.",
                            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600))
GANG_TIMEOUTS = Counter("extender_gang_timeouts_total",
                        "Pod groups whose held members were all sent back because the wait ran out.")
GANG_HOLDS = Counter("extender_gang_holds_total",
                     "Webhook: binds held for a pod group's quorum, by how the hold ended (released; timeout: the group's "
                     "hold ran out; gave-way; stopping; gone: the pod or its group was deleted).", ["outcome"])
GANG_GIVE_WAY = Counter("extender_gang_give_way_total",
                        "Held pod groups that gave way to a competing gang (all their holds released at once, the "
                        "group backed off), by reason: outranked, no-room.", ["reason"])
for _outcome in ("released", "timeout", "gave-way", "stopping", "gone"):  # shown at 0: "no hold timed out" is readable
    GANG_HOLDS.labels(outcome=_outcome)
for _reason in ("outranked", "no-room"):
    GANG_GIVE_WAY.labels(reason=_reason)

# ---- volume binding (bind time) ----------------------------------------------------
VOLUME_WRITES = Counter("extender_volume_binding_writes_total",
                        "API writes before a bind: PV claimRef and claim selected-node, by kind and result.",
                        ["kind", "result"])
VOLUME_WAITS = Counter("extender_volume_binding_waits_total",
                       "Waits for a pod's claims to be bound before its bind, by outcome.", ["outcome"])
VOLUME_WAIT_SECONDS = Histogram(
    "extender_volume_binding_wait_seconds", "Time until a pod's claims were bound (or the wait ended).",
    ["outcome"], buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200),
)

# ---- dynamic resource allocation (DynamicResources) ---------------------------------
DRA_ALLOCATIONS = Counter("extender_dra_allocations_total", "Allocator runs (one pod's claims on one node) by "
                          "outcome: allocated, unallocatable, error.", ["outcome"])
DRA_ALLOCATION_SECONDS = Counter("extender_dra_allocation_seconds_total", "Time spent in the allocator.")
DRA_BACKTRACKS = Counter("extender_dra_allocator_backtracks_total", "Devices the allocator's search took back "
                         "(constraints or later requests that did not fit).")
DRA_CLAIM_WRITES = Counter("extender_dra_claim_writes_total", "PreBind writes of resource claims by result: "
                           "allocated, reserved (allocated before: the pod added to reservedFor), conflict "
                           "(read again and retried), refused (the claim changed: the bind fails).", ["result"])
DRA_BINDING_WAITS = Counter("extender_dra_binding_condition_waits_total", "PreBind waits for devices' binding "
                            "conditions by outcome: ready, failed (a failure condition), timeout, stopped, error.",
                            ["outcome"])
DRA_BINDING_WAIT_SECONDS = Histogram(
    "extender_dra_binding_condition_wait_seconds", "Time until a pod's devices met their binding conditions "
    "(or the wait ended).", ["outcome"], buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200),
)

# ---- shared devices ---------------------------------------------------------------------
# Per GPU node, from the cluster state (every worker holds the same; the latest write wins).

DEVICE_MEMORY = Gauge("extender_device_memory_mebibytes", "GPU memory of healthy devices by state "
                      "(allocated to pods, free).", ["node", "state"], multiprocess_mode="livemostrecent")
DEVICE_CORES = Gauge("extender_device_cores_percent", "GPU compute of healthy devices by state, in percent "
                     "of one device (allocated, free).", ["node", "state"], multiprocess_mode="livemostrecent")
DEVICE_COUNT = Gauge("extender_devices", "GPUs in the node's inventory by health, and how many hold shares.",
                     ["node", "state"], multiprocess_mode="livemostrecent")
DEVICE_LEDGER_WRITES = Counter("extender_device_ledger_writes_total", "Device ledger updates by result: "
                               "written, conflict (409, retried), moved (chosen shares taken, other devices "
                               "of the node given), refused (no room left), error.", ["result"])


def render() -> tuple[bytes, str]:
    """The exposition text for /metrics, merged across workers in multiprocess mode."""
    if MULTIPROCESS:
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
