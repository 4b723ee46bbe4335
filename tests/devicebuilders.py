"""Builders for shared-GPU tests: node inventories, GPU pods and assignments, as Kubernetes dicts."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from extender.model.devices import (
    ASSIGNMENT_ANNOTATION,
    GPU,
    GPU_CORES,
    GPU_MEMORY,
    INVENTORY_ANNOTATION,
    parse_assignment,
)
from tests.policy.builders import node_dict


def gpu(device_id: str, memory: int = 16384, cores: int = 100, kind: str = "Tesla-T4",
        healthy: bool = True) -> dict[str, Any]:
    return {"id": device_id, "type": kind, "memory": memory, "cores": cores, "healthy": healthy}


def inventory(*devices: Mapping[str, Any]) -> str:
    return json.dumps({"version": 1, "devices": list(devices)})


def gpu_node_dict(name: str, devices: Iterable[Mapping[str, Any]] | None = None, *, raw: str | None = None,
                  **kwargs: Any) -> dict[str, Any]:
    """A Ready node publishing `devices` (or the annotation text `raw`)."""
    node = node_dict(name, **kwargs)
    text = raw if raw is not None else inventory(*(devices or ()))
    node["metadata"]["annotations"] = {INVENTORY_ANNOTATION: text}
    return node


def gpu_limits(gpus: int | None = None, memory: int | None = None, cores: int | None = None) -> dict[str, str]:
    limits = {}
    if gpus is not None:
        limits[GPU] = str(gpus)
    if memory is not None:
        limits[GPU_MEMORY] = str(memory)
    if cores is not None:
        limits[GPU_CORES] = str(cores)
    return limits


def gpu_pod_dict(name: str = "p", gpus: int | None = None, memory: int | None = None, cores: int | None = None,
                 *, namespace: str = "default", containers: list[dict[str, Any]] | None = None,
                 annotations: Mapping[str, str] | None = None, node: str = "", uid: str | None = None,
                 assignment: Mapping[str, list[tuple[str, int, int]]] | None = None,
                 scheduler_name: str = "", phase: str | None = None) -> dict[str, Any]:
    """A pod asking for GPUs (one container `main`, unless `containers`); bound to `node` with
    `assignment` ({container: [(device, MiB, cores)]}) when given."""
    if containers is None:
        containers = [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                       "resources": {"limits": gpu_limits(gpus, memory, cores)}}]
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid or f"uid-{namespace}-{name}",
                            "annotations": dict(annotations or {})}
    if assignment is not None:
        meta["annotations"][ASSIGNMENT_ANNOTATION] = assignment_text(node, assignment)
    spec: dict[str, Any] = {"containers": containers}
    if node:
        spec["nodeName"] = node
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": {"phase": phase or ("Running" if node else "Pending")}}


def assignment_text(node: str, containers: Mapping[str, list[tuple[str, int, int]]]) -> str:
    return json.dumps({"node": node, "containers": {
        name: [{"id": d, "memory": m, "cores": c} for d, m, c in shares] for name, shares in containers.items()}})


def assigned(pod: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """Per device, the MiB and cores a pod's assignment annotation gives it ({} when none)."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(ASSIGNMENT_ANNOTATION)
    if text is None:
        return {}
    totals: dict[str, tuple[int, int]] = {}
    for device_id, memory, cores in parse_assignment(text).shares():
        before = totals.get(device_id, (0, 0))
        totals[device_id] = (before[0] + memory, before[1] + cores)
    return totals


def device_totals(pods: Iterable[Mapping[str, Any]]) -> dict[str, tuple[int, int, int]]:
    """Per "node/device", the MiB, cores and pods that the bound `pods`' assignments add up to."""
    totals: dict[str, tuple[int, int, int]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            continue
        for device_id, (memory, cores) in assigned(pod).items():
            key = f"{node}/{device_id}"
            before = totals.get(key, (0, 0, 0))
            totals[key] = (before[0] + memory, before[1] + cores, before[2] + 1)
    return totals


def create_ready_node(kube: Any, name: str, devices: Iterable[Mapping[str, Any]] | None = None,
                      **options: Any) -> dict[str, Any]:
    """Create a Ready node (publishing `devices`, when given) through the API server.

    A real kube-apiserver taints every new node node.kubernetes.io/not-ready:NoSchedule
    (admission: TaintNodesByCondition) until the node lifecycle controller sees it Ready;
    no controller runs here, so the taint is removed as that controller would.
    """
    if devices is not None:
        options["annotations"] = {**options.get("annotations", {}), INVENTORY_ANNOTATION: inventory(*devices)}
    options.setdefault("cpu", "32")
    options.setdefault("memory", "128Gi")
    kube.create_node(name, **options)
    return kube.patch_node(name, {"spec": {"taints": None}}, content_type="application/merge-patch+json")
