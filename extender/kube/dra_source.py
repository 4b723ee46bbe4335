"""Watching DeviceClasses, ResourceSlices and ResourceClaims (resource.k8s.io/v1) into the state's DRA store.

One Reflector per kind, with the same list+watch, resume and re-list behaviour as the node
and pod reflectors; the store is unsynced until each kind has listed once, so no pod with a
claim is placed before the claims, and the devices they hold, have been seen.

Where the API server does not serve resource.k8s.io/v1 (a cluster older than 1.34, or the
group turned off with --runtime-config), DRA is off: that is logged once, nothing is watched,
and pods with claims wait with a reason saying so. ResourceClaimTemplates are not watched:
their claims are made by kube-controller-manager's resourceclaim controller, and the
scheduler reads only the claims (the pod's status names them).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import replace
from typing import Any

from extender import metrics
from extender.cluster.dra_store import (
    CLAIMS,
    CLASSES,
    SLICES,
    TAINT_RULES,
    AllocatorStats,
    DraStore,
    raw_key,
)
from extender.cluster.state import ClusterState
from extender.errors import ClusterError, NotFoundError
from extender.kube import client as kube_client
from extender.kube.store_reflectors import store_reflectors
from extender.kube.watching import Reflector

log = logging.getLogger(__name__)

API = "resource.k8s.io/v1"
DRA_PATHS: dict[str, str] = {
    CLASSES: f"/apis/{API}/deviceclasses",
    SLICES: f"/apis/{API}/resourceslices",
    CLAIMS: f"/apis/{API}/resourceclaims",
}
_KIND = {CLASSES: "DeviceClass", SLICES: "ResourceSlice", CLAIMS: "ResourceClaim", TAINT_RULES: "DeviceTaintRule"}
ALL = (CLASSES, SLICES, CLAIMS, TAINT_RULES)  # what DynamicResources reads (the rules where served)
# DeviceTaintRules: served only with --runtime-config (DRADeviceTaintRules is off by default in
# v1.36), in the newest of these versions that the server has.
TAINT_RULE_VERSIONS = ("resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha3")
# What the webhook reads when kube-scheduler allocates the claims: which extended resources a
# class serves (DRAExtendedResource), so that /bind's copy of NodeResourcesFit leaves them to DRA.
CLASSES_ONLY = (CLASSES,)


def served(api_client: Any) -> str:
    """"" when the server serves every kind the store needs, else why DRA is off (discovery)."""
    try:
        listing = kube_client.request_json(api_client, "GET", f"/apis/{API}", timeout=(5.0, 10.0))
    except NotFoundError:
        return f"the API server does not serve {API}"
    except ClusterError as exc:
        return f"discovery of {API} failed ({exc})"
    names = {r.get("name") for r in listing.get("resources") or () if isinstance(r, dict)}
    missing = sorted(set(DRA_PATHS) - names)
    return f"{API} does not serve {', '.join(missing)}" if missing else ""


def taint_rules_path(api_client: Any) -> str | None:
    """Where DeviceTaintRules are listed, None when no version of them is served (logged)."""
    for version in TAINT_RULE_VERSIONS:
        try:
            listing = kube_client.request_json(api_client, "GET", f"/apis/{version}", timeout=(5.0, 10.0))
        except ClusterError:  # NotFoundError included: that version is not served
            continue
        if any(isinstance(r, dict) and r.get("name") == TAINT_RULES for r in listing.get("resources") or ()):
            log.info("DeviceTaintRules are served (%s): their taints apply to the devices they select", version)
            return f"/apis/{version}/{TAINT_RULES}"
    log.info("DeviceTaintRules are not served (DRADeviceTaintRules is off by default): device taints come "
             "from the ResourceSlices only")
    return None


def dra_reflectors(state: ClusterState, api_client: Any, kinds: Collection[str] = ALL, **options: Any
                   ) -> list[Reflector]:
    """Reflectors feeding `state.dra_store` with `kinds`, or none (and DRA off, logged once) where
    it is not served."""
    store = state.dra_store
    why = served(api_client)
    if why:
        log.info("dynamic resource allocation is off: %s; pods with resource claims stay pending", why)
        store.disable(why)
        return []
    paths = {kind: path for kind, path in DRA_PATHS.items() if kind in kinds}
    if TAINT_RULES in kinds and (rules := taint_rules_path(api_client)) is not None:
        paths[TAINT_RULES] = rules
    return store_reflectors(store, paths, api_client, key_of=raw_key, kinds=_KIND, trim_managed_fields=True,
                            **options)


class DraMetrics:
    """Publishes the DRA store's counts and the allocator's work since the last call."""

    def __init__(self) -> None:
        self._last = AllocatorStats()

    def publish(self, store: DraStore) -> None:
        for resource, count in store.counts().items():
            metrics.CACHE_OBJECTS.labels(kind=_KIND[resource]).set(count)
        now, last = replace(store.stats), self._last
        for outcome in ("allocated", "unallocatable", "errors"):
            delta = getattr(now, outcome) - getattr(last, outcome)
            if delta > 0:
                metrics.DRA_ALLOCATIONS.labels(outcome=outcome.rstrip("s") if outcome == "errors" else outcome).inc(delta)
        if now.seconds > last.seconds:
            metrics.DRA_ALLOCATION_SECONDS.inc(now.seconds - last.seconds)
        if now.backtracks > last.backtracks:
            metrics.DRA_BACKTRACKS.inc(now.backtracks - last.backtracks)
        self._last = now
