"""A trace to replay: the cluster's nodes and the pods that arrive, read from the openb CSVs
(Alibaba's cluster-trace-gpu-v2023, the FGD paper's input) or from a snapshot YAML and a YAML
list of pods. Every problem is a `TraceError` naming the file, the line and the field.

openb rows become Kubernetes objects in the shared-GPU model of docs/devices.md:
* a node (`sn, cpu_milli, memory_mib, gpu, model`) gets that allocatable CPU and memory, a pod
  limit of 1001, and an inventory of `gpu` devices of type `model`, each with 100 % compute and
  1000 units of memory, so that memory and compute shares move together (the trace has a single
  milli-GPU per pod);
* a pod (`name, cpu_milli, memory_mib, num_gpu, gpu_milli`, and `gpu_spec` where the list has
  it) requests that CPU and memory and, with `num_gpu` > 0, `extender.example/gpu: num_gpu` and, for a share
  (`gpu_milli` < 1000), `gpu-cores: gpu_milli/10` and `gpu-memory: gpu_milli`; `gpu_spec`
  (models separated by `|`) becomes the `extender.example/gpu-type` annotation.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from extender.cluster.snapshot import read_snapshot
from extender.errors import ExtenderError, InvalidObject
from extender.model.devices import (
    GPU,
    GPU_CORES,
    GPU_MEMORY,
    INVENTORY_ANNOTATION,
    TYPE_ANNOTATION,
    device_request,
    node_inventory,
)
from extender.model.gpushare import MILLI, PodShape, device_shape
from extender.model.pods import PodView

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")  # required
# Optional: the multigpu20/30/40 pod lists of openb have no gpu_spec column (any model, as empty).
OPTIONAL_POD_COLUMNS = ("gpu_spec",)
POD_LIMIT = 1001  # the published runs' pods per node
DEVICE_MEMORY = MILLI  # units of GPU memory per device: a share's memory equals its milli
NAMESPACE = "replay"


class TraceError(ExtenderError):
    """A trace that cannot be replayed; the message names the file, the line and the field."""


@dataclass(frozen=True, slots=True)
class TracePod:
    """One pod of the trace: its object, and its shape (what the policies and the curve read)."""

    name: str
    raw: Mapping[str, Any] = field(repr=False)
    shape: PodShape

    @property
    def gpu(self) -> int:
        """Its GPU request in milli (what moves the x axis)."""
        return self.shape.gpu


@dataclass(frozen=True, slots=True)
class Trace:
    nodes: tuple[Mapping[str, Any], ...]
    pods: tuple[TracePod, ...]
    source: str
    snapshot_pods: tuple[Mapping[str, Any], ...] = ()  # already placed (a snapshot's bound pods)
    # --devices dra (replay/dra_model.py): the DeviceClass and the ResourceSlices publishing the
    # GPUs, the nodes then having no inventory annotation; empty for the annotation model.
    dra: tuple[Mapping[str, Any], ...] = ()

    @property
    def gpu_capacity(self) -> int:
        """Every GPU of the cluster in milli (healthy inventory devices, or untainted DRA devices)."""
        total = 0
        for item in self.dra:
            if item.get("kind") == "ResourceSlice":
                total += MILLI * sum(1 for d in item["spec"]["devices"] if not d.get("taints"))
        for node in self.nodes:
            inventory = node_inventory(node.get("metadata", {}).get("annotations"))
            if inventory is not None and not inventory.error:
                total += MILLI * sum(1 for d in inventory.devices if d.healthy)
        return total


def _rows(path: Path, columns: Sequence[str]) -> Iterator[tuple[int, dict[str, str]]]:
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror or exc}") from None
    with handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        missing = [c for c in columns if c not in header]
        if missing:
            raise TraceError(f"{path}:1: missing column {missing[0]!r} (expected {', '.join(columns)})")
        for row in reader:
            yield reader.line_num, row


def _integer(path: Path, line: int, row: Mapping[str, str], column: str, *, minimum: int = 0,
             maximum: int | None = None) -> int:
    text = (row.get(column) or "").strip()
    try:
        value = int(text)
    except ValueError:
        raise TraceError(f"{path}:{line}: {column}: expected an integer, not {text!r}") from None
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"from {minimum} to {maximum}" if maximum is not None else f"at least {minimum}"
        raise TraceError(f"{path}:{line}: {column}: must be {bound}, not {value}")
    return value


def _unique_name(path: Path, line: int, row: Mapping[str, str], column: str, seen: dict[str, int]) -> str:
    """The row's name, refused when empty or already on an earlier line."""
    name = (row.get(column) or "").strip()
    if not name:
        raise TraceError(f"{path}:{line}: {column}: empty name")
    if name in seen:
        raise TraceError(f"{path}:{line}: {column}: {name!r} is already on line {seen[name]}")
    seen[name] = line
    return name


def openb_node(name: str, cpu_milli: int, memory_mib: int, gpus: int, model: str) -> dict[str, Any]:
    """A Node object of the shared-GPU model (see the module docstring)."""
    annotations = {}
    if gpus:
        inventory = {"version": 1, "devices": [
            {"id": f"{name}-gpu{i}", "type": model, "memory": DEVICE_MEMORY, "cores": 100} for i in range(gpus)]}
        annotations[INVENTORY_ANNOTATION] = json.dumps(inventory, separators=(",", ":"))
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "gpu-card-model": model},
                     "annotations": annotations},
        "spec": {},
        "status": {"allocatable": {"cpu": f"{cpu_milli}m", "memory": f"{memory_mib}Mi", "pods": str(POD_LIMIT)},
                   "capacity": {"cpu": f"{cpu_milli}m", "memory": f"{memory_mib}Mi", "pods": str(POD_LIMIT)},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def read_openb_nodes(path: str | Path) -> tuple[dict[str, Any], ...]:
    where = Path(path)
    nodes = []
    seen: dict[str, int] = {}
    for line, row in _rows(where, NODE_COLUMNS):
        name = _unique_name(where, line, row, "sn", seen)
        cpu = _integer(where, line, row, "cpu_milli", minimum=1)
        memory = _integer(where, line, row, "memory_mib", minimum=1)
        gpus = _integer(where, line, row, "gpu", maximum=256)
        model = (row.get("model") or "").strip()
        if gpus and not model:
            raise TraceError(f"{where}:{line}: model: a node with {gpus} GPUs needs a model")
        nodes.append(openb_node(name, cpu, memory, gpus, model))
    if not nodes:
        raise TraceError(f"{where}: no nodes")
    return tuple(nodes)


def openb_pod(name: str, cpu_milli: int, memory_mib: int, num_gpu: int, gpu_milli: int,
              spec: Sequence[str]) -> dict[str, Any]:
    """A Pod object of the shared-GPU model (see the module docstring)."""
    limits: dict[str, str] = {}
    if num_gpu:
        limits[GPU] = str(num_gpu)
        if gpu_milli < MILLI:
            limits[GPU_CORES] = str(gpu_milli // 10)
            limits[GPU_MEMORY] = str(gpu_milli * DEVICE_MEMORY // MILLI)
    annotations = {TYPE_ANNOTATION: ",".join(spec)} if num_gpu and spec else {}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations},
        "spec": {"containers": [{"name": "task", "image": "replay", "resources": {
            "requests": {"cpu": f"{cpu_milli}m", "memory": f"{memory_mib}Mi", **limits}, "limits": limits}}]},
        "status": {"phase": "Pending"},
    }


def read_openb_pods(path: str | Path, models: frozenset[str]) -> tuple[TracePod, ...]:
    """The pods of an openb pod list, checked against the nodes' GPU models."""
    where = Path(path)
    pods = []
    seen: dict[str, int] = {}
    for line, row in _rows(where, POD_COLUMNS):
        name = _unique_name(where, line, row, "name", seen)
        cpu = _integer(where, line, row, "cpu_milli")
        memory = _integer(where, line, row, "memory_mib")
        num_gpu = _integer(where, line, row, "num_gpu", maximum=256)
        gpu_milli = min(MILLI, _integer(where, line, row, "gpu_milli"))
        if num_gpu and not gpu_milli:
            raise TraceError(f"{where}:{line}: gpu_milli: a pod with num_gpu {num_gpu} needs gpu_milli above 0")
        if num_gpu > 1 and gpu_milli < MILLI:
            raise TraceError(f"{where}:{line}: gpu_milli: {gpu_milli} with num_gpu {num_gpu}: a share of a GPU is "
                             "for one GPU only")
        if gpu_milli % 10:
            raise TraceError(f"{where}:{line}: gpu_milli: {gpu_milli} is not a multiple of 10 (a share is whole "
                             "percents of a GPU's compute)")
        spec = tuple(part.strip() for part in (row.get("gpu_spec") or "").split("|") if part.strip())
        unknown = [model for model in spec if model not in models]
        if unknown and num_gpu:
            raise TraceError(f"{where}:{line}: gpu_spec: unknown GPU model {unknown[0]!r} (the nodes have "
                             f"{', '.join(sorted(models)) or 'no GPUs'})")
        raw = openb_pod(name, cpu, memory, num_gpu, gpu_milli, spec)
        shape = PodShape(cpu, gpu_milli if num_gpu else 0, num_gpu,
                         tuple(m.lower() for m in spec) if num_gpu else ())
        pods.append(TracePod(name, raw, shape))
    return tuple(pods)


def _models(nodes: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    found: set[str] = set()
    for node in nodes:
        inventory = node_inventory(node.get("metadata", {}).get("annotations"))
        if inventory is not None and not inventory.error:
            found.update(d.type for d in inventory.devices)
    return frozenset(found)


def yaml_pod(raw: Any, where: str) -> TracePod:
    """A pod of a YAML list, its shape read as the policies read it."""
    try:
        view = PodView.from_dict(raw)
        spec = raw.get("spec") if isinstance(raw, Mapping) else None
        request = device_request(spec if isinstance(spec, Mapping) else {}, view.annotations)
    except InvalidObject as exc:
        raise TraceError(f"{where}: {exc}") from None
    shape = device_shape(request, view.requests.get("cpu", 0))
    if shape is None:
        raise TraceError(f"{where}: only single-container GPU requests can be replayed")
    return TracePod(view.key, raw, shape)


def read_yaml_pods(path: str | Path) -> tuple[TracePod, ...]:
    where = Path(path)
    try:
        documents = list(yaml.safe_load_all(where.read_text(encoding="utf-8")))
    except OSError as exc:
        raise TraceError(f"{where}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise TraceError(f"{where}{line}: not YAML: {getattr(exc, 'problem', exc)}") from None
    items: list[Any] = []
    for document in documents:
        if isinstance(document, Mapping) and isinstance(document.get("items"), list):
            items.extend(document["items"])
        elif isinstance(document, list):
            items.extend(document)
        elif document is not None:
            items.append(document)
    pods = tuple(yaml_pod(raw, f"{where}: pod {index}") for index, raw in enumerate(items))
    if not pods:
        raise TraceError(f"{where}: no pods")
    return pods


def read_trace(*, nodes: str | None = None, snapshot: str | None = None, pods: str) -> Trace:
    """The openb CSVs (`nodes` and a CSV `pods`), or a snapshot YAML and a YAML (or CSV) pod list."""
    if (nodes is None) == (snapshot is None):
        raise TraceError("give the cluster as --nodes (an openb node CSV) or --snapshot (a snapshot YAML)")
    placed: tuple[Mapping[str, Any], ...] = ()
    if nodes is not None:
        node_objects: tuple[Mapping[str, Any], ...] = read_openb_nodes(nodes)
    else:
        try:
            cluster = read_snapshot(snapshot)  # type: ignore[arg-type]  # set: exactly one of nodes and snapshot (checked above)
        except ExtenderError as exc:
            raise TraceError(str(exc)) from None
        node_objects = tuple(cluster.nodes)
        placed = tuple(p for p in cluster.pods if (p.get("spec") or {}).get("nodeName"))
    if str(pods).endswith(".csv"):
        trace_pods = read_openb_pods(pods, _models(node_objects))
    else:
        trace_pods = read_yaml_pods(pods)
    return Trace(node_objects, trace_pods, f"{Path(pods).name}", placed)
