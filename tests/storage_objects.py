"""Builders for storage objects and pods that use them, as Kubernetes dicts.

Each builder returns an object the API server accepts as is (kind, apiVersion, required
fields), so the same dict serves the engine tests (through a snapshot) and the API-server
tests (POSTed). Status fields a controller would set (a PV's phase, a claim's Bound) are
returned separately by the tests that play those controllers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

STORAGE_API = "storage.k8s.io/v1"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
LOCAL = "local-storage"  # a class without provisioner, WaitForFirstConsumer (local volumes)
FAST = "fast"  # a provisioned class, WaitForFirstConsumer
CSI_DRIVER = "csi.example.com"


def storage_class(name: str, *, provisioner: str = CSI_DRIVER, mode: str | None = "WaitForFirstConsumer",
                  topologies: Sequence[Mapping[str, Sequence[str]]] | None = None,
                  default: bool = False) -> dict[str, Any]:
    """`topologies`: one {label: values} per allowedTopologies term."""
    obj: dict[str, Any] = {"apiVersion": STORAGE_API, "kind": "StorageClass", "metadata": {"name": name},
                           "provisioner": provisioner}
    if mode is not None:
        obj["volumeBindingMode"] = mode
    if topologies is not None:
        obj["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": k, "values": list(v)} for k, v in term.items()]}
            for term in topologies]
    if default:
        obj["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return obj


def local_class() -> dict[str, Any]:
    return storage_class(LOCAL, provisioner="kubernetes.io/no-provisioner")


def node_affinity(key: str, *values: str) -> dict[str, Any]:
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": key, "operator": "In", "values": list(values)}]}]}}


def persistent_volume(name: str, *, size: str = "10Gi", cls: str | None = LOCAL,
                      modes: Sequence[str] = ("ReadWriteOnce",), node: str | None = None,
                      affinity: Mapping[str, Any] | None = None, labels: Mapping[str, str] | None = None,
                      claim: tuple[str, str] | tuple[str, str, str] | None = None, csi: tuple[str, str] | None = None,
                      phase: str | None = "Available", volume_mode: str | None = None) -> dict[str, Any]:
    """A PV: local (pinned to `node`) unless `csi` (driver, handle) is given. `phase` is its status
    (what the PV controller reports); drop it when creating through the API."""
    spec: dict[str, Any] = {"capacity": {"storage": size}, "accessModes": list(modes),
                            "persistentVolumeReclaimPolicy": "Retain"}
    if cls is not None:
        spec["storageClassName"] = cls
    if csi is not None:
        spec["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    else:
        spec["local"] = {"path": f"/mnt/disks/{name}"}
    if affinity is not None:
        spec["nodeAffinity"] = dict(affinity)
    elif node is not None:
        spec["nodeAffinity"] = node_affinity(HOSTNAME, node)
    elif csi is None:
        spec["nodeAffinity"] = node_affinity(HOSTNAME, "nowhere")
    if claim is not None:
        namespace, claim_name, *uid = claim
        spec["claimRef"] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": namespace,
                            "name": claim_name, **({"uid": uid[0]} if uid else {})}
    if volume_mode is not None:
        spec["volumeMode"] = volume_mode
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = dict(labels)
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec}
    if phase is not None:
        obj["status"] = {"phase": phase}
    return obj


def claim(name: str, *, namespace: str = "default", size: str = "1Gi", cls: str | None = LOCAL,
          modes: Sequence[str] = ("ReadWriteOnce",), volume: str | None = None, bound: bool = False,
          selected_node: str | None = None, selector: Mapping[str, Any] | None = None,
          owner: tuple[str, str] | None = None, uid: str | None = None,
          deleting: bool = False, phase: str | None = None) -> dict[str, Any]:
    """A PVC. `bound`: the PV controller's view of a finished binding (volume name, the
    bind-completed annotation, phase Bound). `owner`: (pod name, pod uid), for ephemeral claims."""
    spec: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if cls is not None:
        spec["storageClassName"] = cls
    if volume is not None:
        spec["volumeName"] = volume
    if selector is not None:
        spec["selector"] = dict(selector)
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    annotations = {}
    if bound:
        annotations[BIND_COMPLETED] = "yes"
    if selected_node is not None:
        annotations[SELECTED_NODE] = selected_node
    if annotations:
        meta["annotations"] = annotations
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner[0], "uid": owner[1],
                                    "controller": True, "blockOwnerDeletion": True}]
    if uid is not None:
        meta["uid"] = uid
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}
    if bound or phase is not None:
        obj["status"] = {"phase": phase or "Bound"}
    return obj


def csi_node(name: str, drivers: Mapping[str, int | None]) -> dict[str, Any]:
    """`drivers`: name -> allocatable count (None: no limit)."""
    entries = []
    for driver, count in drivers.items():
        entry: dict[str, Any] = {"name": driver, "nodeID": name}
        if count is not None:
            entry["allocatable"] = {"count": count}
        entries.append(entry)
    return {"apiVersion": STORAGE_API, "kind": "CSINode", "metadata": {"name": name}, "spec": {"drivers": entries}}


def csi_driver(name: str, *, storage_capacity: bool = True) -> dict[str, Any]:
    return {"apiVersion": STORAGE_API, "kind": "CSIDriver", "metadata": {"name": name},
            "spec": {"storageCapacity": storage_capacity}}


def storage_capacity(name: str, cls: str, *, capacity: str | None = "10Gi", maximum: str | None = None,
                     labels: Mapping[str, str] | None = None, namespace: str = "default") -> dict[str, Any]:
    """A CSIStorageCapacity reachable from the nodes carrying `labels` (None: from no node)."""
    obj: dict[str, Any] = {"apiVersion": STORAGE_API, "kind": "CSIStorageCapacity",
                           "metadata": {"name": name, "namespace": namespace}, "storageClassName": cls}
    if capacity is not None:
        obj["capacity"] = capacity
    if maximum is not None:
        obj["maximumVolumeSize"] = maximum
    if labels is not None:
        obj["nodeTopology"] = {"matchLabels": dict(labels)}
    return obj


def volume_attachment(name: str, node: str, volume: str, attacher: str = CSI_DRIVER) -> dict[str, Any]:
    return {"apiVersion": STORAGE_API, "kind": "VolumeAttachment", "metadata": {"name": name},
            "spec": {"attacher": attacher, "nodeName": node, "source": {"persistentVolumeName": volume}}}


def claim_volumes(claims: Iterable[str] = (), *, ephemeral: Iterable[str] = (),
                  inline: Iterable[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """`spec.volumes` entries: persistentVolumeClaim volumes named after their claims, generic
    ephemeral volumes (their claim is `<pod>-<volume>`), and inline volume sources."""
    volumes: list[dict[str, Any]] = [{"name": f"v-{c}", "persistentVolumeClaim": {"claimName": c}}
                                     for c in claims]
    volumes += [{"name": e, "ephemeral": {"volumeClaimTemplate": {"spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}} for e in ephemeral]
    volumes += [{"name": f"inline-{i}", **source} for i, source in enumerate(inline)]
    return volumes


def with_volumes(pod: dict[str, Any], claims: Iterable[str] = (), **kwargs: Any) -> dict[str, Any]:
    """`pod` with the claim volumes added to its spec."""
    pod["spec"]["volumes"] = claim_volumes(claims, **kwargs)
    return pod
