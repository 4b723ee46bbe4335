"""The storage objects of the cluster state: claims, volumes, classes and CSI objects, by name.

The volume plugins look up a pod's claims, the volume bound to each, the class of an
unbound one, the available volumes of that class, and a node's CSI attach limits and
attachments; each is a dict read here, and the two lists that plugins scan (volumes
and storage capacities of one class, attachments of one node) are kept as indexes.
Objects are parsed into the frozen views of `extender.model.volumes` as they arrive.

Writers (watch threads, snapshot loading, simulate's in-memory binds, Reserve's
assumptions) hold the store's lock; readers never do: every value is immutable and
replaced whole, as in the ClusterState.

Assumptions are kube-scheduler's passive assume cache (see policy/storage.py): an
assumed claim or volume is served in place of the stored one while the stored one
still has the resourceVersion it was derived from.

Changes that may make a waiting pod schedulable (kube-scheduler's EventsToRegister of
the volume plugins: a claim, volume, class, CSI node, CSI driver or capacity added or
updated, an attachment removed) are announced to the state's listeners as
`STORAGE_CHANGED` with `(kind, key)`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from extender.errors import InvalidObject
from extender.model.fields import object_key
from extender.model.volumes import (
    Claim,
    CSIDriver,
    CSINode,
    StorageCapacity,
    StorageClass,
    Volume,
    VolumeAttachment,
)

log = logging.getLogger(__name__)

STORAGE_CHANGED = "storage-changed"

CLAIMS = "persistentvolumeclaims"
VOLUMES = "persistentvolumes"
CLASSES = "storageclasses"
CSI_NODES = "csinodes"
CSI_DRIVERS = "csidrivers"
CAPACITIES = "csistoragecapacities"
ATTACHMENTS = "volumeattachments"


@dataclass(frozen=True, slots=True)
class StorageKind:
    """How the store reads and files one resource."""

    resource: str  # the API's plural name, also the key of the store's tables
    kind: str  # the object's Kind, as snapshots spell it
    parse: Callable[[Any], Any]
    namespaced: bool = False
    index: Callable[[Any], str] | None = None  # the value lists are kept by
    wakes_on_delete: bool = False  # a deletion may make a waiting pod schedulable

    def key(self, obj: Any) -> str:
        return f"{obj.namespace}/{obj.name}" if self.namespaced else str(obj.name)

    def raw_key(self, raw: Mapping[str, Any]) -> str | None:
        """The key of an unparsed object (a deletion event), None without a name."""
        return object_key(raw, self.namespaced)


KINDS: dict[str, StorageKind] = {k.resource: k for k in (
    StorageKind(CLAIMS, "PersistentVolumeClaim", Claim.from_dict, namespaced=True),
    StorageKind(VOLUMES, "PersistentVolume", Volume.from_dict, index=lambda v: v.class_name),
    StorageKind(CLASSES, "StorageClass", StorageClass.from_dict),
    StorageKind(CSI_NODES, "CSINode", CSINode.from_dict),
    StorageKind(CSI_DRIVERS, "CSIDriver", CSIDriver.from_dict),
    StorageKind(CAPACITIES, "CSIStorageCapacity", StorageCapacity.from_dict, namespaced=True,
                index=lambda c: c.class_name),
    StorageKind(ATTACHMENTS, "VolumeAttachment", VolumeAttachment.from_dict, index=lambda a: a.node,
                wakes_on_delete=True),
)}
KIND_NAMES: dict[str, str] = {k.kind: k.resource for k in KINDS.values()}
ASSUMABLE = (CLAIMS, VOLUMES)

Notify = Callable[[str, Any], None]


class VolumeStore:
    """Implements `extender.policy.storage.StorageView` over watched (or snapshot) objects."""

    def __init__(self, notify: Notify | None = None) -> None:
        self._notify = notify or (lambda event, obj: None)
        self._lock = threading.RLock()
        self._objects: dict[str, dict[str, Any]] = {resource: {} for resource in KINDS}
        self._indexes: dict[str, dict[str, dict[str, Any]]] = {
            resource: {} for resource, kind in KINDS.items() if kind.index is not None}
        self._assumed: dict[str, dict[str, Any]] = {resource: {} for resource in ASSUMABLE}
        self._unsynced: set[str] = set()
        self._writes = 0  # simulate's in-memory writes, for their resourceVersions
        self.rejected = 0

    # ---- sync ---------------------------------------------------------------------------

    def expect(self, resources: Iterable[str]) -> None:
        """A source will list these kinds: the store is not synced until it has."""
        with self._lock:
            self._unsynced.update(resources)

    @property
    def synced(self) -> bool:
        return not self._unsynced

    def counts(self) -> dict[str, int]:
        return {resource: len(objects) for resource, objects in self._objects.items()}

    # ---- reads (StorageView) ---------------------------------------------------------------

    def _current(self, resource: str, key: str) -> Any:
        stored = self._objects[resource].get(key)
        assumed = self._assumed[resource].get(key)
        if assumed is not None and stored is not None and assumed.resource_version == stored.resource_version:
            return assumed
        return stored

    def claim(self, namespace: str, name: str) -> Claim | None:
        return self._current(CLAIMS, f"{namespace}/{name}")  # type: ignore[no-any-return]  # _current returns what CLAIMS holds: Claims

    def volume(self, name: str) -> Volume | None:
        return self._current(VOLUMES, name)  # type: ignore[no-any-return]  # _current returns what VOLUMES holds: Volumes

    def stored_claim(self, namespace: str, name: str) -> Claim | None:
        """The claim as the API server last said, without assumptions."""
        return self._objects[CLAIMS].get(f"{namespace}/{name}")

    def stored_volume(self, name: str) -> Volume | None:
        return self._objects[VOLUMES].get(name)

    def volumes_of_class(self, class_name: str) -> list[Volume]:
        found = list(self._indexes[VOLUMES].get(class_name, {}).values())
        assumed = self._assumed[VOLUMES]
        if not assumed:
            return found
        result = []
        for volume in found:
            mine = assumed.get(volume.name)
            result.append(mine if mine is not None and mine.resource_version == volume.resource_version else volume)
        return result

    def storage_class(self, name: str) -> StorageClass | None:
        return self._objects[CLASSES].get(name)

    def csi_node(self, name: str) -> CSINode | None:
        return self._objects[CSI_NODES].get(name)

    def csi_driver(self, name: str) -> CSIDriver | None:
        return self._objects[CSI_DRIVERS].get(name)

    def capacities_of_class(self, class_name: str) -> list[StorageCapacity]:
        return list(self._indexes[CAPACITIES].get(class_name, {}).values())

    def attachments_on(self, node: str) -> list[VolumeAttachment]:
        return list(self._indexes[ATTACHMENTS].get(node, {}).values())

    def objects(self, resource: str) -> list[Any]:
        """Every stored object of a kind, as the API server last said."""
        return list(self._objects[resource].values())

    # ---- assumptions (Reserve / Unreserve) -------------------------------------------------

    def assume_claim(self, claim: Claim) -> None:
        self._assume(CLAIMS, claim.key, claim)

    def assume_volume(self, volume: Volume) -> None:
        self._assume(VOLUMES, volume.name, volume)

    def restore_claim(self, claim: Claim) -> None:
        self._restore(CLAIMS, claim.key, claim)

    def restore_volume(self, volume: Volume) -> None:
        self._restore(VOLUMES, volume.name, volume)

    def _assume(self, resource: str, key: str, obj: Any) -> None:
        with self._lock:
            stored = self._objects[resource].get(key)
            if stored is None:
                raise ValueError(f"{KINDS[resource].kind} {key} no longer exists")
            if stored.resource_version != obj.resource_version:
                raise ValueError(f"{KINDS[resource].kind} {key} is out of sync (stored: "
                                 f"{stored.resource_version}, assume: {obj.resource_version})")
            self._assumed[resource][key] = obj

    def _restore(self, resource: str, key: str, obj: Any) -> None:
        with self._lock:
            assumed = self._assumed[resource].get(key)
            if assumed is not None and assumed.resource_version == obj.resource_version:
                del self._assumed[resource][key]

    # ---- writes from sources ----------------------------------------------------------------

    def replace(self, resource: str, raws: Iterable[Mapping[str, Any]]) -> None:
        """Swap in a full list of one kind (initial list, re-list after 410, snapshot)."""
        kind = KINDS[resource]
        parsed: dict[str, Any] = {}
        for raw in raws:
            obj = self._parse(kind, raw)
            if obj is not None:
                parsed[kind.key(obj)] = obj
        with self._lock:
            previous = self._objects[resource]
            self._objects[resource] = parsed
            if kind.index is not None:
                index: dict[str, dict[str, Any]] = {}
                for key, obj in parsed.items():
                    index.setdefault(kind.index(obj), {})[key] = obj
                self._indexes[resource] = index
            if resource in self._assumed:
                self._assumed[resource] = {k: v for k, v in self._assumed[resource].items()
                                           if k in parsed and parsed[k].resource_version == v.resource_version}
            self._unsynced.discard(resource)
        changed = any(previous.get(key) != obj for key, obj in parsed.items())
        if changed or (kind.wakes_on_delete and previous.keys() - parsed.keys()):
            self._notify(STORAGE_CHANGED, (resource, ""))

    def upsert(self, resource: str, raw: Mapping[str, Any]) -> Any:
        """Add or replace one object; None (and counted as rejected) when it cannot be read."""
        kind = KINDS[resource]
        obj = self._parse(kind, raw)
        if obj is None:
            return None
        self._put(kind, obj)
        return obj

    def delete(self, resource: str, key: str) -> None:
        kind = KINDS[resource]
        with self._lock:
            old = self._objects[resource].pop(key, None)
            if old is not None and kind.index is not None:
                self._unindex(kind, key, old)
            if resource in self._assumed:
                self._assumed[resource].pop(key, None)
        if old is not None and kind.wakes_on_delete:
            self._notify(STORAGE_CHANGED, (resource, key))

    def write(self, resource: str, obj: Any) -> Any:
        """Store `obj` as the API server would after an update: with a new resourceVersion.

        For the in-memory cluster of simulate and the snapshot webhook, whose binds write
        here what they would write to the API server."""
        with self._lock:
            self._writes += 1
            version = f"memory-{self._writes}"
        obj = replace(obj, resource_version=version)
        self._put(KINDS[resource], obj)
        return obj

    def _parse(self, kind: StorageKind, raw: Mapping[str, Any]) -> Any:
        try:
            return kind.parse(raw)
        except InvalidObject as exc:
            self.rejected += 1
            log.warning("skipping %s: %s", kind.kind, exc)
            return None

    def _put(self, kind: StorageKind, obj: Any) -> None:
        key = kind.key(obj)
        resource = kind.resource
        with self._lock:
            old = self._objects[resource].get(key)
            self._objects[resource][key] = obj
            if kind.index is not None:
                if old is not None:
                    self._unindex(kind, key, old)
                self._indexes[resource].setdefault(kind.index(obj), {})[key] = obj
            if resource in self._assumed:
                assumed = self._assumed[resource].get(key)
                if assumed is not None and assumed.resource_version != obj.resource_version:
                    del self._assumed[resource][key]  # a newer version: the assumption expired
        if old != obj:
            self._notify(STORAGE_CHANGED, (resource, key))

    def _unindex(self, kind: StorageKind, key: str, old: Any) -> None:
        assert kind.index is not None
        table = self._indexes[kind.resource]
        value = kind.index(old)
        bucket = table.get(value)
        if bucket is not None:
            bucket.pop(key, None)
            if not bucket:
                del table[value]
