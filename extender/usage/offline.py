"""Usage for simulate and explain: one fetch, published into an in-memory cluster state.

Offline, the usage comes from the snapshot: its NodeMetrics objects (`kubectl get
--raw /apis/metrics.k8s.io/v1beta1/nodes` saved beside the nodes and pods) when it has
any, else the node annotations named by the policy's settings.usage.annotations. The
clock stops at the newest sample's time, so a snapshot taken last week is judged as it
was then: samples much older than the others are stale, the rest are fresh. Pods that
simulate places count as recent placements on top of their node's sample, exactly as
the live store counts binds, so a burst does not pile onto the node that looked idle.

Live explain (`--kubeconfig`) fetches once from the policy's configured source instead.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from extender.cluster.state import ClusterState
from extender.model.usage_samples import DOWN, UP
from extender.policy.engine import Policy
from extender.policy.usage_settings import ANNOTATIONS, METRICS_SERVER, usage_settings, uses_usage
from extender.usage import readings
from extender.usage.annotations import AnnotationSource
from extender.usage.metrics_api import parse_node_metrics
from extender.usage.readings import Fetch, FetchError
from extender.usage.service import build_source, node_views
from extender.usage.store import UsageStore


def _attach(state: ClusterState, store: UsageStore, fetch: Fetch, *, count_placements: bool) -> None:
    nodes = node_views(state)
    store.publish(fetch.readings, {name: readings.node_capacity(view) for name, view in nodes.items()})
    if count_placements:
        state.add_pod_hook(store.on_pod_change)
    state.set_usage_provider(store.table)


def _summary(store: UsageStore, fetch: Fetch, origin: str, total: int) -> str:
    dropped = ", ".join(f"{count} {reason}" for reason, count in sorted(fetch.dropped.items()))
    text = f"node usage: {store.fresh_count()}/{total} node(s) with a fresh sample from {origin}"
    return text + (f" (dropped: {dropped})" if dropped else "")


def snapshot_usage(state: ClusterState, node_metrics: Sequence[Any], policy: Policy, *,
                   count_placements: bool = True) -> list[str]:
    """Publish the snapshot's usage into `state` when `policy` uses it; returns notes for the report.

    `count_placements`: pods placed from now on count on top of the samples (simulate), or
    not (explain, which moves pods in and out of the state without placing anything)."""
    if not uses_usage(policy):
        return []
    settings = usage_settings(policy.settings)
    nodes = node_views(state)
    keys = ", ".join(key for key in (settings.annotations.cpu, settings.annotations.memory) if key)
    if node_metrics:
        fetch = parse_node_metrics(list(node_metrics), nodes)
        origin, source = "the snapshot's NodeMetrics", METRICS_SERVER
    else:
        fetch = AnnotationSource(settings.annotations).fetch(nodes)
        origin, source = f"node annotations {keys}", ANNOTATIONS
    now = max((reading.timestamp for reading in fetch.readings), default=time.time())
    store = UsageStore(source, settings, clock=lambda: now)
    store.set_state(UP, "offline, from the snapshot")
    _attach(state, store, fetch, count_placements=count_placements)
    if not fetch.readings:
        return [f"node usage: the snapshot has no NodeMetrics and no node annotation {keys}: "
                "the load plugins see no data"]
    return [_summary(store, fetch, origin, len(nodes))]


def live_usage(state: ClusterState, api_client: Any, policy: Policy) -> list[str]:
    """Fetch once from the policy's source (live explain, which places nothing); a failure is a note."""
    if not uses_usage(policy):
        return []
    settings = usage_settings(policy.settings)
    source = build_source(settings, api_client)
    store = UsageStore(source.name, settings)
    try:
        fetch = source.fetch(node_views(state))
    except FetchError as exc:
        store.set_state(DOWN, str(exc))
        _attach(state, store, Fetch(), count_placements=False)
        return [f"node usage: source {source.name} is down ({exc.reason}: {exc}); the load plugins see no data"]
    finally:
        source.close()
    store.set_state(UP)
    _attach(state, store, fetch, count_placements=False)
    return [_summary(store, fetch, f"source {source.name}", len(node_views(state)))]
