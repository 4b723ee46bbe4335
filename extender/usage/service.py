"""The usage service: runs the usage loop while a policy needs it, with that policy's settings.usage.

Both modes own one: the webhook's Runtime (one per gunicorn worker, each with its own
cluster state) and the standalone Scheduler (one for all its profiles). It follows the
policy holders: at start and after every successful reload it looks at the current
policies; if none uses a load-aware plugin nothing runs (no thread, no API calls); if
the usage settings changed, the old loop stops and a new one starts with a fresh store.
Several profiles share one cluster state and so one source: the first profile (in
order) whose policy uses load plugins decides the settings, and a different block in
another profile is logged as ignored.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from extender.cluster.state import ClusterState
from extender.errors import PolicyError
from extender.model.nodes import NodeView
from extender.policy.engine import Policy
from extender.policy.usage_settings import (
    ANNOTATIONS,
    METRICS_SERVER,
    PROMETHEUS,
    UsageSettings,
    usage_settings,
    uses_usage,
)
from extender.usage import readings
from extender.usage.annotations import AnnotationSource
from extender.usage.metrics_api import MetricsApiSource
from extender.usage.polling import UsagePoller
from extender.usage.prometheus import PrometheusSource
from extender.usage.readings import Fetch, FetchError
from extender.usage.store import UsageStore

log = logging.getLogger(__name__)


class _NoApiServer:
    """metrics-server without an API server (the webhook on a snapshot): says so instead of failing."""

    name = METRICS_SERVER

    def fetch(self, nodes: Mapping[str, NodeView]) -> Fetch:
        raise FetchError(readings.NOT_CONFIGURED, "the metrics.k8s.io source needs an API server; this process "
                                                  "reads its cluster from a snapshot")

    def close(self) -> None:
        """Nothing to release."""


def build_source(settings: UsageSettings, api_client: Any) -> Any:
    """The live source the settings name."""
    if settings.source == PROMETHEUS:
        assert settings.prometheus is not None  # parse_usage_settings requires it
        return PrometheusSource(settings.prometheus)
    if settings.source == ANNOTATIONS:
        return AnnotationSource(settings.annotations)
    if api_client is None:
        return _NoApiServer()
    return MetricsApiSource(api_client)


def node_views(state: ClusterState) -> dict[str, NodeView]:
    return {info.name: info.node for info in state.all_node_infos()}


def wanted_settings(policies: Iterable[Policy]) -> UsageSettings | None:
    """The usage settings of the first policy with a load plugin, or None when none has one."""
    chosen: UsageSettings | None = None
    for policy in policies:
        if not uses_usage(policy):
            continue
        try:
            settings = usage_settings(policy.settings)
        except PolicyError as exc:  # load_policy validated it; a hand-built Policy may not be
            log.error("policy %s: %s; its load plugins see no usage", policy.source, exc)
            continue
        if chosen is None:
            chosen = settings
        elif settings != chosen:
            log.warning("policy %s has its own settings.usage; this process runs one usage source, "
                        "configured by the first profile's policy: its block is ignored", policy.source)
    return chosen


class UsageService:
    def __init__(self, state: ClusterState, api_client: Any, holders: Iterable[Any]) -> None:
        """`holders` are policy holders (PolicyHolder, FixedPolicy, a profile's): `.policy` and
        `add_listener(callback)`, called after each successful reload."""
        self.state = state
        self.api_client = api_client
        self.holders = list(holders)
        self.settings: UsageSettings | None = None
        self.store: UsageStore | None = None
        self.poller: Any = None
        self._lock = threading.Lock()
        self._started = False

    def start(self) -> None:
        for holder in self.holders:
            holder.add_listener(self._policy_changed)
        self._started = True
        self.apply()

    def stop(self) -> None:
        with self._lock:
            self._started = False
            self._stop_loop()

    def _policy_changed(self, policy: Policy) -> None:
        if self._started:
            self.apply()

    def apply(self) -> None:
        """Start, restart or stop the loop to match the holders' current policies."""
        wanted = wanted_settings(holder.policy for holder in self.holders)
        with self._lock:
            if not self._started or wanted == self.settings:
                return
            self._stop_loop()
            if wanted is not None:
                self._start_loop(wanted)

    def _start_loop(self, settings: UsageSettings) -> None:
        source = build_source(settings, self.api_client)
        store = UsageStore(source.name, settings)
        self.state.add_pod_hook(store.on_pod_change)
        self.state.set_usage_provider(store.table)
        poller = UsagePoller(store, source, lambda: node_views(self.state), ready=lambda: self.state.nodes_synced)
        poller.start()
        self.settings, self.store, self.poller = settings, store, poller
        log.info("node usage: source %s every %gs, samples stale after %gs", source.name, settings.interval,
                 settings.max_age)

    def _stop_loop(self) -> None:
        if self.poller is not None:
            self.poller.stop()
        if self.store is not None:
            self.state.remove_pod_hook(self.store.on_pod_change)
            self.state.set_usage_provider(None)
            log.info("node usage: source %s stopped", self.store.source)
        self.settings, self.store, self.poller = None, None, None

    @property
    def settled(self) -> bool:
        """True once the loop has tried its first fetch (or when no loop runs).

        The standalone scheduler waits for it after start-up, so the first burst of pending
        pods is not placed on requests alone a few milliseconds before the usage arrives. The
        wait is bounded by the source's own timeout: a failed first fetch settles it too."""
        poller = self.poller
        return poller is None or poller.attempts > 0

    def status(self) -> dict[str, Any]:
        """For /readyz: the source and its state (never a reason to be unready: requests still work)."""
        store = self.store
        if store is None:
            return {"source": "", "state": "off"}
        table = store.table()
        newest = store.newest_timestamp()
        body: dict[str, Any] = {"source": store.source, "state": store.state, "nodes": store.fresh_count()}
        if store.state_detail:
            body["detail"] = store.state_detail
        if newest is not None:
            body["newestSampleAgeSeconds"] = round(max(0.0, table.now - newest), 1)
        return body

    def describe(self) -> str:
        """One line for the standalone scheduler's text /readyz."""
        status = self.status()
        if status["state"] == "off":
            return ""
        text = f"usage {status['source']} {status['state']}, {status['nodes']} node(s) fresh"
        return text + (f" ({status['detail']})" if status.get("detail") else "")
