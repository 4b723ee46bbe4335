"""Watching the storage objects the volume plugins read, into the cluster state's volume store.

One Reflector per kind (claims, volumes, classes, CSI nodes, CSI drivers, storage
capacities, volume attachments), each with the same list+watch, resume and re-list
behaviour as the node and pod reflectors. The store reports unsynced until every kind
has been listed once, and so does the state's readiness: a scheduler must not place
a pod with a claim before it has seen the claims.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import partial
from typing import Any

from extender import metrics
from extender.cluster.state import ClusterState
from extender.cluster.volumes import (
    ATTACHMENTS,
    CAPACITIES,
    CLAIMS,
    CLASSES,
    CSI_DRIVERS,
    CSI_NODES,
    KINDS,
    VOLUMES,
    VolumeStore,
)
from extender.kube.watching import Reflector

log = logging.getLogger(__name__)

STORAGE_PATHS: dict[str, str] = {
    CLAIMS: "/api/v1/persistentvolumeclaims",
    VOLUMES: "/api/v1/persistentvolumes",
    CLASSES: "/apis/storage.k8s.io/v1/storageclasses",
    CSI_NODES: "/apis/storage.k8s.io/v1/csinodes",
    CSI_DRIVERS: "/apis/storage.k8s.io/v1/csidrivers",
    CAPACITIES: "/apis/storage.k8s.io/v1/csistoragecapacities",
    ATTACHMENTS: "/apis/storage.k8s.io/v1/volumeattachments",
}


def _listed(store: VolumeStore, resource: str, items: Iterable[dict[str, Any]]) -> None:
    before = store.rejected
    store.replace(resource, items)
    _count_rejected(resource, store.rejected - before)
    log.info("cluster state: %d %s", store.counts()[resource], resource)


def _event(store: VolumeStore, resource: str, kind: str, obj: dict[str, Any]) -> None:
    key = KINDS[resource].raw_key(obj)
    if key is None:
        _count_rejected(resource, 1)
        log.warning("skipping %s %s event without metadata.name", resource, kind)
        return
    if kind == "DELETED":
        store.delete(resource, key)
    elif store.upsert(resource, obj) is None:
        _count_rejected(resource, 1)


def _count_rejected(resource: str, count: int) -> None:
    if count > 0:
        metrics.REJECTED_OBJECTS.labels(kind=KINDS[resource].kind).inc(count)


def storage_reflectors(state: ClusterState, api_client: Any, **options: Any) -> list[Reflector]:
    """Reflectors feeding `state.volumes`; the store is marked unsynced until each has listed."""
    store = state.volumes
    store.expect(STORAGE_PATHS)
    return [
        Reflector(api_client, path, resource=resource, on_list=partial(_listed, store, resource),
                  on_event=partial(_event, store, resource), **options)
        for resource, path in STORAGE_PATHS.items()
    ]


def publish_counts(store: VolumeStore) -> None:
    """The extender_cache_objects gauge for each storage kind."""
    for resource, count in store.counts().items():
        metrics.CACHE_OBJECTS.labels(kind=KINDS[resource].kind).set(count)
