"""Snapshot files: what `kubectl get nodes,pods -A -o yaml` prints, as one file or a directory.

Accepted shapes: a `List`/`NodeList`/`PodList`/`NamespaceList` with `items`, a single
Node, Pod or Namespace, or multi-document YAML of any of those; JSON is YAML. Objects of
other kinds are ignored, so a full `kubectl get all` dump loads too. Namespaces matter
only for their labels (pod affinity's `namespaceSelector`), PodDisruptionBudgets for
preemption. The storage objects the volume plugins read are accepted too (`kubectl get
pvc,pv,storageclass,csinode,csidriver,csistoragecapacity,volumeattachment -A -o yaml`),
alone or as their `...List`. NodeMetrics (metrics.k8s.io, `kubectl get --raw
/apis/metrics.k8s.io/v1beta1/nodes`) give simulate and explain the nodes' measured usage
for the load-aware plugins. PodGroups (`scheduling.k8s.io/v1alpha2` and Coscheduling's
`scheduling.x-k8s.io/v1alpha1`, `kubectl get podgroups.scheduling.k8s.io,podgroups.scheduling.x-k8s.io
-A -o yaml`) give simulate the pod groups its members are placed with (docs/gangs.md).
DeviceClasses, ResourceSlices and ResourceClaims (`kubectl get
deviceclasses,resourceslices,resourceclaims -A -o yaml`) give the DynamicResources plugin
the devices and claims of dynamic resource allocation (docs/dra_store.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from extender.cluster import dra_store, kinds
from extender.cluster.state import ClusterState
from extender.cluster.volume_store import KIND_NAMES
from extender.errors import ClusterError

log = logging.getLogger(__name__)

SUFFIXES = (".yaml", ".yml", ".json")


@dataclass
class Snapshot:
    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    kinds: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # resource -> a keyed kind's objects
    node_metrics: list[dict[str, Any]] = field(default_factory=list)
    storage: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # resource -> objects
    pod_groups: list[dict[str, Any]] = field(default_factory=list)  # either API; parsed by their reader
    dra: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # resource -> DRA objects

    @property
    def pending(self) -> list[dict[str, Any]]:
        """Pods not yet on a node and not finished: what simulate has to place."""
        return [
            p for p in self.pods
            if not (p.get("spec") or {}).get("nodeName")
            and (p.get("status") or {}).get("phase", "Pending") == "Pending"
        ]


def _objects(document: Any, where: str) -> Iterator[Mapping[str, Any]]:
    if document is None:
        return
    if not isinstance(document, Mapping):
        raise ClusterError(f"{where}: expected a Kubernetes object or List, got {type(document).__name__}")
    if "items" in document and isinstance(document.get("items"), list):
        for item in document["items"]:
            if isinstance(item, Mapping):
                yield from _objects(item, where)
        return
    yield document


def _kind(obj: Mapping[str, Any], list_kind: str) -> str:
    kind = obj.get("kind")
    if kind:
        return str(kind)
    if list_kind.endswith("List") and (list_kind[:-4] in KIND_NAMES or list_kind[:-4] in dra_store.KIND_NAMES):
        return list_kind[:-4]
    return {"NodeList": "Node", "PodList": "Pod", "NamespaceList": "Namespace",
            "NodeMetricsList": "NodeMetrics"}.get(list_kind, "")


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _documents(path: Path) -> list[Any]:
    """JSON through orjson (a 5000-node dump parses in a second, not a minute); YAML otherwise."""
    try:
        if path.suffix == ".json":
            return [orjson.loads(path.read_bytes())]
        return list(yaml.load_all(path.read_text(encoding="utf-8"), Loader=_LOADER))
    except (OSError, UnicodeDecodeError, orjson.JSONDecodeError, yaml.YAMLError) as exc:
        raise ClusterError(f"cannot read snapshot {path}: {exc}") from exc


def _read_file(path: Path, snapshot: Snapshot) -> None:
    documents = _documents(path)
    lists = {"Node": snapshot.nodes, "Pod": snapshot.pods, "NodeMetrics": snapshot.node_metrics,
             "PodGroup": snapshot.pod_groups,
             **{kind.kind: snapshot.kinds.setdefault(kind.resource, []) for kind in kinds.KINDS}}
    for index, document in enumerate(documents):
        list_kind = str(document.get("kind", "")) if isinstance(document, Mapping) else ""
        for obj in _objects(document, f"{path} document {index}"):
            kind = _kind(obj, list_kind)
            if kind in lists:
                lists[kind].append(dict(obj))
            elif kind in KIND_NAMES:
                snapshot.storage.setdefault(KIND_NAMES[kind], []).append(dict(obj))
            elif kind in dra_store.KIND_NAMES:
                snapshot.dra.setdefault(dra_store.KIND_NAMES[kind], []).append(dict(obj))


def read_snapshot(path: str | Path) -> Snapshot:
    """Read a snapshot file or every YAML/JSON file of a directory (sorted, not recursive)."""
    root = Path(path)
    if not root.exists():
        raise ClusterError(f"snapshot {root} does not exist")
    files = sorted(p for p in root.iterdir() if p.suffix in SUFFIXES) if root.is_dir() else [root]
    snapshot = Snapshot()
    for file in files:
        _read_file(file, snapshot)
    if not snapshot.nodes:
        log.warning("snapshot %s holds no Node objects", root)
    return snapshot


def load_into(state: ClusterState, snapshot: Snapshot) -> None:
    state.replace_nodes(snapshot.nodes)
    for resource, store in state.kind_stores.items():
        store.replace(snapshot.kinds.get(resource, ()))
    for resource, objects in snapshot.storage.items():
        state.volumes.replace(resource, objects)
    for resource, objects in snapshot.dra.items():
        state.dra_store.replace(resource, objects)
    state.replace_pods(snapshot.pods)


class SnapshotSource:
    """A cluster source backed by a snapshot: loaded once, then changed only by our own binds."""

    kind = "snapshot"

    def __init__(self, state: ClusterState, path: str | Path) -> None:
        self.state = state
        self.path = Path(path)

    def start(self) -> None:
        load_into(self.state, read_snapshot(self.path))
        log.info(
            "loaded snapshot %s: %d nodes, %d pods", self.path, self.state.node_count(), self.state.pod_count()
        )

    @property
    def pods_watched(self) -> bool:
        return True  # the snapshot's pods are all loaded

    def start_pod_watch(self, why: str = "") -> bool:
        """The snapshot's pods are loaded with it: nothing to start."""
        return True

    def begin_pod_watch(self, why: str) -> bool:
        return True

    def pods_listed(self, timeout: float) -> bool:
        return True

    def refresh_pod(self, namespace: str, name: str) -> bool:
        """The snapshot is the whole cluster: there is nothing newer to read."""
        return False

    def stop(self) -> None:
        """Nothing runs in the background."""
