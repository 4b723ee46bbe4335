"""Watching the storage objects the volume plugins read, into the cluster state's volume store.

One Reflector per kind (claims, volumes, classes, CSI nodes, CSI drivers, storage
capacities, volume attachments), each with the same list+watch, resume and re-list
behaviour as the node and pod reflectors. The store reports unsynced until every kind
has been listed once, and so does the state's readiness: a scheduler must not place
a pod with a claim before it has seen the claims.
"""

from __future__ import annotations

from typing import Any

from extender import metrics
from extender.cluster.state import ClusterState
from extender.cluster.volume_store import (
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
from extender.kube.store_reflectors import store_reflectors
from extender.kube.watching import Reflector

STORAGE_PATHS: dict[str, str] = {
    CLAIMS: "/api/v1/persistentvolumeclaims",
    VOLUMES: "/api/v1/persistentvolumes",
    CLASSES: "/apis/storage.k8s.io/v1/storageclasses",
    CSI_NODES: "/apis/storage.k8s.io/v1/csinodes",
    CSI_DRIVERS: "/apis/storage.k8s.io/v1/csidrivers",
    CAPACITIES: "/apis/storage.k8s.io/v1/csistoragecapacities",
    ATTACHMENTS: "/apis/storage.k8s.io/v1/volumeattachments",
}


def storage_reflectors(state: ClusterState, api_client: Any, **options: Any) -> list[Reflector]:
    """Reflectors feeding `state.volumes`; the store is marked unsynced until each has listed."""
    return store_reflectors(state.volumes, STORAGE_PATHS, api_client, key_of=lambda resource, raw:
                            KINDS[resource].raw_key(raw), kinds={r: k.kind for r, k in KINDS.items()}, **options)


def publish_counts(store: VolumeStore) -> None:
    """The extender_cache_objects gauge for each storage kind."""
    for resource, count in store.counts().items():
        metrics.CACHE_OBJECTS.labels(kind=KINDS[resource].kind).set(count)
