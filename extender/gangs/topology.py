"""All members of a group in one domain of a node label: the candidate node sets.

kube-scheduler v1.36's TopologyPlacementGenerator (framework/plugins/topologyaware/
topology_placement.go): with a topology key, one placement per value of that label over the
nodes that carry it; once members are scheduled (held, allowed or bound), only their domain, and
an error when they already span two. Only the first key counts ("we only support a single
topology constraint on the API level"). The standalone group cycle tries each placement and
keeps the best; the webhook's filter keeps the nodes of one domain.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

REASON_NO_DOMAIN = "no node carries the pod group's topology label"
REASON_SPLIT = "the pod group's placed members span several topology domains"


@dataclass(frozen=True, slots=True)
class Placements:
    """Candidate domains (label value -> node names, sorted) or, when there are none, why."""

    key: str
    domains: dict[str, tuple[str, ...]]
    reason: str = ""
    message: str = ""


def placements(key: str, node_labels: Mapping[str, Mapping[str, str]], placed_nodes: Iterable[str]) -> Placements:
    """The domains of `key` the group may use. `node_labels`: node name -> labels (the candidate
    nodes); `placed_nodes`: the nodes of the group's members already scheduled."""
    pinned: set[str] = set()
    for node in placed_nodes:
        labels = node_labels.get(node)
        if labels is None or key not in labels:
            return Placements(key, {}, REASON_SPLIT, f"member on node {node} has no label {key}")
        pinned.add(labels[key])
    if len(pinned) > 1:
        return Placements(key, {}, REASON_SPLIT, f"members already in {key}={', '.join(sorted(pinned))}")
    domains: dict[str, list[str]] = {}
    for node, labels in node_labels.items():
        value = labels.get(key)
        if value is not None and (not pinned or value in pinned):
            domains.setdefault(value, []).append(node)
    if not domains:
        where = f" {key}={next(iter(pinned))}" if pinned else f" {key}"
        return Placements(key, {}, REASON_NO_DOMAIN, f"no candidate node in{where}")
    return Placements(key, {value: tuple(sorted(nodes)) for value, nodes in sorted(domains.items())})
