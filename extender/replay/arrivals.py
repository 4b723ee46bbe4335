"""The order pods arrive in, as the FGD paper's runs made it (docs/replay.md): the trace sorted
by name and shuffled with the seed, then "tuned" to `tune` times the cluster's GPUs: clones of
pods drawn at random (with replacement, from the trace sorted by name) appended after the
originals until the next draw would pass the target, or, for a trace that asks for more than
the target, pods removed at random until it no longer does. Nodes are renamed with a
seed-dependent prefix ("0042-name"), which, with ties going to the smallest name, makes the
tie-break a seeded random order of the machines.

The generator is Python's (`random.Random(seed)`), not Go's `math/rand`: the published orders
are not reproduced draw for draw, only in distribution (the means over seeds are compared).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.replay.traces import Trace, TracePod


@dataclass(frozen=True, slots=True)
class Arrivals:
    pods: tuple[TracePod, ...]  # in arrival order, clones named "<name>-tuned-<i>"
    node_names: Mapping[str, str]  # trace name -> the run's name


def _clone(pod: TracePod, index: int) -> TracePod:
    name = f"{pod.name}-tuned-{index}"
    raw = copy.deepcopy(dict(pod.raw))
    metadata = dict(raw.get("metadata") or {})
    metadata["name"] = name.rpartition("/")[2]
    metadata.pop("uid", None)
    raw["metadata"] = metadata
    return TracePod(name, raw, pod.shape)


def arrivals(trace: Trace, seed: int, tune: float) -> Arrivals:
    """The run's pod order and node names for `seed` (the same for every policy)."""
    rng = random.Random(seed)
    rng.random()  # the published simulator's first draw went to a log line
    by_name = sorted(trace.pods, key=lambda pod: pod.name)
    order = list(by_name)
    rng.shuffle(order)
    target = tune * trace.gpu_capacity
    total = sum(pod.gpu for pod in order)
    if total < target:
        index = 0
        while True:
            drawn = by_name[rng.randrange(len(by_name))]
            if total + drawn.shape.milli > target:  # the simulator checks one GPU's milli
                break
            order.append(_clone(drawn, index))
            total += drawn.gpu
            index += 1
    else:
        while total > target and order:
            removed = order.pop(rng.randrange(len(order)))
            total -= removed.gpu
    names = sorted(str(node["metadata"]["name"]) for node in trace.nodes)
    permutation = list(range(len(names)))
    rng.shuffle(permutation)
    return Arrivals(tuple(order), {name: f"{rank:04d}-{name}" for name, rank in zip(names, permutation, strict=True)})


def renamed_nodes(nodes: Sequence[Mapping[str, Any]], names: Mapping[str, str]) -> list[dict[str, Any]]:
    """The nodes under the run's names (labels and inventory device ids keep the trace's)."""
    renamed = []
    for node in nodes:
        copied = dict(node)
        metadata = dict(copied["metadata"])
        new = names[metadata["name"]]
        metadata["name"] = new
        metadata["labels"] = {**(metadata.get("labels") or {}), "kubernetes.io/hostname": new}
        copied["metadata"] = metadata
        renamed.append(copied)
    return renamed
