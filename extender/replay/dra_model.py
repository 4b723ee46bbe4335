"""`extender replay --devices dra`: the same trace with its GPUs published as DRA devices with
consumable capacity, and each GPU pod asking for them through a ResourceClaim of its own.

* Each node's GPUs (its shared-GPU inventory, docs/devices.md) become one ResourceSlice of the
  driver `DRIVER` (pool = the node), one device per GPU: `allowMultipleAllocations: true`,
  capacity `memory` (the inventory's MiB) and `cores` (its percent, 100), attributes `uuid`
  (the inventory id) and `productName` (the model). The DeviceClass `DEVICE_CLASS` selects the
  driver's devices. The inventory annotation is removed: the slices are the only record.
* A GPU pod loses its `extender.example/gpu*` resources and type annotations and names the
  claim of the template `CLAIM_TEMPLATE` (`spec.resourceClaims: [{name: gpu,
  resourceClaimTemplateName: ...}]`, its container `resources.claims: [{name: gpu}]`). When it
  arrives, the replay makes the claim kube-controller-manager would make from the template:
  `<pod>-gpu`, owned by the pod and named in its `status.resourceClaimStatuses`, with one
  ExactCount request of `count` devices of the class, asking per device `capacity.requests:
  {memory: <MiB>Mi, cores: "<percent>"}` (a whole GPU asks for no capacity: it takes all of
  each device), and the `gpu-type` (and `gpu-type-avoid`) annotation as CEL selectors on
  `productName`, with the annotation's case-insensitive substring rule (gpu_claims.type_selector).

DeviceFit places these claims (extender/policy/builtin/gpu_claims.py): the policies read and
choose the GPUs as in the annotation model, and the allocation is the DRA allocation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from extender.errors import InvalidObject
from extender.model.devices import (
    ASSIGNMENT_ANNOTATION,
    AVOID_TYPE_ANNOTATION,
    INVENTORY_ANNOTATION,
    RESOURCES,
    TYPE_ANNOTATION,
    DeviceRequest,
    device_request,
    node_inventory,
)
from extender.policy.builtin.gpu_claims import type_selector
from extender.replay.traces import Trace, TraceError

DRIVER = "gpu.replay.extender.example"
DEVICE_CLASS = "replay-shared-gpu"
CLAIM = "gpu"  # the pod's name for its claim
CLAIM_TEMPLATE = "replay-gpu"
DEVICES = ("annotation", "dra")


class DraModelError(InvalidObject):
    """A trace that the DRA model cannot express."""


def device_class() -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DEVICE_CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def node_slice(node: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The node without its inventory annotation, and the ResourceSlice of its GPUs (None: none)."""
    metadata = node.get("metadata") or {}
    annotations = dict(metadata.get("annotations") or {})
    inventory = node_inventory(annotations)
    if inventory is None:
        return dict(node), None
    name = str(metadata.get("name"))
    if inventory.error:
        raise DraModelError(f"node {name}: unreadable GPU inventory: {inventory.error}")
    del annotations[INVENTORY_ANNOTATION]
    stripped = {**node, "metadata": {**metadata, "annotations": annotations}}
    devices = [{"name": f"gpu{i}", "allowMultipleAllocations": True,
                "attributes": {"uuid": {"string": d.id}, "productName": {"string": d.type}},
                "capacity": {"memory": {"value": f"{d.memory}Mi"}, "cores": {"value": str(d.cores)}},
                **({} if d.healthy else {"taints": [{"key": f"{DRIVER}/unhealthy", "effect": "NoSchedule"}]})}
               for i, d in enumerate(inventory.devices)]
    slice_ = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{name}-gpus"},
              "spec": {"driver": DRIVER, "nodeName": name,
                       "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}
    return stripped, slice_


def as_dra(nodes: Sequence[Mapping[str, Any]], placed: Sequence[Mapping[str, Any]]
           ) -> tuple[tuple[dict[str, Any], ...], tuple[dict[str, Any], ...]]:
    """The nodes without inventories, and the DRA objects (the class, one slice per GPU node).
    A snapshot's bound pods holding GPU shares are refused: their shares would need claims."""
    for pod in placed:
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        if ASSIGNMENT_ANNOTATION in annotations:
            meta = pod.get("metadata") or {}
            raise DraModelError(f"pod {meta.get('namespace')}/{meta.get('name')} of the snapshot holds GPU "
                                "shares (extender.example/gpu-assignment): --devices dra replays snapshots "
                                "without bound GPU pods")
    stripped = []
    objects: list[dict[str, Any]] = [device_class()]
    for node in nodes:
        plain, slice_ = node_slice(node)
        stripped.append(plain)
        if slice_ is not None:
            objects.append(slice_)
    return tuple(stripped), tuple(objects)


def _claim_spec(request: DeviceRequest) -> dict[str, Any]:
    container = request.containers[0]
    exactly: dict[str, Any] = {"deviceClassName": DEVICE_CLASS, "allocationMode": "ExactCount",
                               "count": container.count}
    wanted = {}
    if container.memory is not None:
        wanted["memory"] = f"{container.memory}Mi"
    if container.cores is not None:
        wanted["cores"] = str(container.cores)
    if wanted:
        exactly["capacity"] = {"requests": wanted}
    selectors = []
    if request.types:
        selectors.append(type_selector(DRIVER, request.types))
    if request.avoid:
        selectors.append(f"!({type_selector(DRIVER, request.avoid)})")
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"devices": {"requests": [{"name": CLAIM, "exactly": exactly}]}}


def dra_pod(raw: Mapping[str, Any], uid: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The pod asking for its GPUs through its own claim, and that claim (None: a pod without
    GPUs, unchanged). `uid` is the pod's; the claim is owned by it."""
    spec = raw.get("spec") or {}
    metadata = raw.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    request = device_request(spec, annotations)
    if request is None:
        return dict(raw), None
    if len(request.containers) != 1:
        raise DraModelError("only single-container GPU requests can be replayed")
    # Copied where it changes (the metadata, the containers' resources), shared elsewhere: a
    # replay holds thousands of these.
    pod = {**raw, "metadata": {**metadata}, "spec": {**spec}}
    meta = pod["metadata"]
    meta["annotations"] = {k: v for k, v in annotations.items() if k not in (TYPE_ANNOTATION, AVOID_TYPE_ANNOTATION)}
    for field in ("initContainers", "containers"):
        if not isinstance(spec.get(field), list):
            continue
        pod["spec"][field] = [{**c, "resources": {**(c.get("resources") or {})}} if isinstance(c, Mapping) else c
                              for c in spec[field]]
        for container in pod["spec"][field]:
            resources = container.get("resources") or {}
            uses = False
            for part in ("requests", "limits"):
                values = resources.get(part)
                if isinstance(values, dict) and any(name in values for name in RESOURCES):
                    resources[part] = {k: v for k, v in values.items() if k not in RESOURCES}
                    uses = True
            if uses and container.get("name") == request.containers[0].container:
                resources["claims"] = [{"name": CLAIM}]
                container["resources"] = resources
    pod["spec"]["resourceClaims"] = [{"name": CLAIM, "resourceClaimTemplateName": CLAIM_TEMPLATE}]
    name = f"{meta['name']}-{CLAIM}"
    namespace = meta.get("namespace") or "default"
    pod["status"] = {**(pod.get("status") or {}), "resourceClaimStatuses": [{"name": CLAIM, "resourceClaimName": name}]}
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": name, "namespace": namespace, "uid": f"claim-{uid}", "resourceVersion": "1",
                          "annotations": {"resource.kubernetes.io/pod-claim-name": CLAIM},
                          "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": uid,
                                               "controller": True, "blockOwnerDeletion": True}]},
             "spec": _claim_spec(request)}
    return pod, claim


def dra_trace(trace: Trace, where: str = "") -> Trace:
    """The trace with its GPUs as DRA devices (the pods are turned into claim users as they arrive);
    `where` names the cluster's file in errors (default: the trace's source)."""
    if trace.dra:
        return trace
    try:
        nodes, objects = as_dra(trace.nodes, trace.snapshot_pods)
    except InvalidObject as exc:
        raise TraceError(f"{where or trace.source}: {exc}") from None
    return replace(trace, nodes=nodes, dra=objects)


def renamed_slices(objects: Sequence[Mapping[str, Any]], names: Mapping[str, str]) -> list[dict[str, Any]]:
    """The ResourceSlices of `objects` on the run's node names (arrivals.renamed_nodes)."""
    renamed = []
    for item in objects:
        if item.get("kind") != "ResourceSlice":
            continue
        spec = item["spec"]
        renamed.append({**item, "spec": {**spec, "nodeName": names.get(spec["nodeName"], spec["nodeName"])}})
    return renamed
