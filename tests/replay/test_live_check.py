"""The live check's offline parts (bench/replay_live.py): the slice, the pinned policy, and the
end-state check, which must catch each broken invariant (tests/e2e/test_replay_live.py runs the
whole check on a real control plane)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from bench.replay_live import Slice, check_state, make_slice, pinned_policy, replay_slice
from extender.model.devices import ASSIGNMENT_ANNOTATION, Assignment
from extender.policy.loading import load_policy_file
from extender.replay.arrivals import arrivals
from extender.replay.traces import read_trace
from tests.replay.traces import small_cluster

ROOT = Path(__file__).resolve().parents[2]
FGD = ROOT / "config" / "replay" / "fgd.yaml"


def _slice(tmp_path: Path, size: int = 4) -> Slice:
    nodes, pods = small_cluster(tmp_path)
    return make_slice(read_trace(nodes=str(nodes), pods=str(pods)), 42, size)


def test_the_slice_is_the_seeds_first_nodes_and_its_pods_up_to_their_gpus(tmp_path: Path) -> None:
    nodes, pods = small_cluster(tmp_path)
    trace = read_trace(nodes=str(nodes), pods=str(pods))
    piece = make_slice(trace, 42, 4)
    order = arrivals(trace, 42, 1.3)
    names = [node["metadata"]["name"] for node in piece.trace.nodes]
    assert names == sorted(order.node_names.values())[:4]
    asked = sum(pod.gpu for pod in piece.order.pods)
    assert asked <= piece.capacity
    assert list(piece.order.pods) == list(order.pods[:len(piece.order.pods)])
    following = order.pods[len(piece.order.pods)]
    assert asked + following.gpu > piece.capacity  # the walk stopped at the first that would pass


def test_the_pinned_policy_pins_every_workload_argument_to_the_slices_shapes(tmp_path: Path) -> None:
    piece = _slice(tmp_path)
    path, count = pinned_policy(FGD, [pod.shape for pod in piece.order.pods], tmp_path / "out")
    assert count == 2 and path.name == "fgd.yaml"
    document = yaml.safe_load(path.read_text())
    (device_fit,) = [f for f in document["filters"] if f["name"] == "DeviceFit"]
    (fgd,) = document["scores"]
    assert device_fit["args"]["workload"] == fgd["args"]["workload"]
    weights = [shape["weight"] for shape in fgd["args"]["workload"]]
    assert abs(sum(weights) - 1) < 1e-9 and weights == sorted(weights, reverse=True)
    load_policy_file(str(path))  # the engine takes it


def _bound(piece: Slice) -> tuple[list[dict[str, Any]], list[str | None]]:
    """The pods as the API server would hold them after a replay of the slice."""
    result, nodes = replay_slice(piece, FGD)
    assert result.placed == sum(1 for n in nodes if n)
    pods = []
    for trace_pod, node in zip(piece.order.pods, nodes, strict=True):
        if node is None:
            continue
        pod = copy.deepcopy(dict(trace_pod.raw))
        pod["spec"]["nodeName"] = node
        shape = trace_pod.shape
        if shape.count:
            device_ids = [d["id"] for d in json.loads(next(
                n for n in piece.trace.nodes if n["metadata"]["name"] == node)["metadata"]["annotations"][
                "extender.example/gpu-devices"])["devices"]]
            # an assignment of the right shape on the node's first GPUs (the check reads shares, not the choice)
            share = (shape.milli, shape.milli // 10)
            assignment = Assignment(node, (("task", tuple((d, *share) for d in device_ids[:shape.count])),))
            pod["metadata"]["annotations"] = {**pod["metadata"]["annotations"],
                                              ASSIGNMENT_ANNOTATION: assignment.to_annotation()}
        pods.append(pod)
    return pods, nodes


def test_the_state_check_counts_the_bound_pods_and_catches_each_broken_invariant(tmp_path: Path) -> None:
    piece = _slice(tmp_path, 6)
    pods, nodes = _bound(piece)
    used, problems = check_state(piece, pods, nodes)
    assert used == sum(pod.gpu for pod, node in zip(piece.order.pods, nodes, strict=True) if node)
    # every share piled on the node's first GPUs: over capacity somewhere (the trace asks >100 % of some)
    over = [p for p in problems if "over its capacity" in p]
    assert over and problems == over

    gpu_pod = next(p for p in pods if ASSIGNMENT_ANNOTATION in p["metadata"]["annotations"])
    name = gpu_pod["metadata"]["name"]

    missing = copy.deepcopy(pods)
    next(p for p in missing if p["metadata"]["name"] == name)["metadata"]["annotations"].pop(ASSIGNMENT_ANNOTATION)
    assert any(f"pod {name} on" in p and "has no assignment" in p for p in check_state(piece, missing, nodes)[1])

    elsewhere = copy.deepcopy(pods)
    pod = next(p for p in elsewhere if p["metadata"]["name"] == name)
    other = next(n["metadata"]["name"] for n in piece.trace.nodes if n["metadata"]["name"] != pod["spec"]["nodeName"])
    text = json.loads(pod["metadata"]["annotations"][ASSIGNMENT_ANNOTATION])
    text["node"] = other
    pod["metadata"]["annotations"][ASSIGNMENT_ANNOTATION] = json.dumps(text)
    assert any(f"its assignment names {other}" in p for p in check_state(piece, elsewhere, nodes)[1])

    wrong_share = copy.deepcopy(pods)
    pod = next(p for p in wrong_share if p["metadata"]["name"] == name)
    text = json.loads(pod["metadata"]["annotations"][ASSIGNMENT_ANNOTATION])
    for shares in text["containers"].values():
        shares[0]["memory"] = shares[0]["memory"] // 2
    pod["metadata"]["annotations"][ASSIGNMENT_ANNOTATION] = json.dumps(text)
    found = check_state(piece, wrong_share, nodes)[1]
    assert any(f"pod {name} asks for" in p for p in found)
    assert any(p.startswith(f"node {pod['spec']['nodeName']}: its pods ask for") for p in found)

    unbound = copy.deepcopy(pods)
    unbound[0]["spec"].pop("nodeName")
    assert any("is still there and not bound" in p for p in check_state(piece, unbound, nodes)[1])

    gone = pods[1:]
    assert any(f"pod {pods[0]['metadata']['name']} was bound" in p and "is gone" in p
               for p in check_state(piece, gone, nodes)[1])


def test_a_state_within_capacity_passes(tmp_path: Path) -> None:
    """One pod per node, on its own GPUs: nothing to report."""
    piece = _slice(tmp_path, 6)
    pods, nodes = _bound(piece)
    seen: set[str] = set()
    kept_nodes: list[str | None] = []
    kept = []
    by_name = {p["metadata"]["name"]: p for p in pods}
    for trace_pod, node in zip(piece.order.pods, nodes, strict=True):
        if node is not None and node not in seen:
            seen.add(node)
            kept.append(by_name[trace_pod.raw["metadata"]["name"]])
            kept_nodes.append(node)
        else:
            kept_nodes.append(None)
    used, problems = check_state(piece, kept, kept_nodes)
    assert len(kept) > 1 and problems == []
    assert used == sum(pod.gpu for pod, node in zip(piece.order.pods, kept_nodes, strict=True) if node)
