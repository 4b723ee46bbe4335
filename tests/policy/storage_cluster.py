"""A cluster state holding nodes, pods and storage objects, for the volume plugins' tests."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from extender.cluster.snapshot import Snapshot, load_into
from extender.cluster.state import ClusterState
from extender.cluster.volume_store import KIND_NAMES
from extender.model.pods import PodView
from extender.policy.decisions import Decision
from extender.policy.defaults import default_policy
from extender.policy.engine import Engine, Policy
from tests.storage_objects import with_volumes

from .builders import node_dict, pod_dict


def cluster(nodes: Iterable[dict[str, Any]], *objects: dict[str, Any],
            pods: Iterable[dict[str, Any]] = ()) -> ClusterState:
    """A state loaded the way a snapshot is: `objects` are storage objects of any kind."""
    snapshot = Snapshot(nodes=list(nodes), pods=list(pods))
    for obj in objects:
        snapshot.storage.setdefault(KIND_NAMES[obj["kind"]], []).append(obj)
    state = ClusterState(assume_ttl=float("inf"))
    load_into(state, snapshot)
    return state


def nodes(*names: str, **labels_by_node: dict[str, str]) -> list[dict[str, Any]]:
    """Nodes named `names`; `labels_by_node` gives some of them extra labels (dashes as underscores)."""
    return [node_dict(name, labels=labels_by_node.get(name.replace("-", "_"))) for name in names]


def decide(pod: dict[str, Any], state: ClusterState, policy: Policy | None = None) -> Decision:
    """Filter (and score) every node of `state` for `pod`, as the standalone cycle does."""
    engine = Engine(policy or default_policy("standalone"))
    return engine.decide(PodView.from_dict(pod), state.all_node_infos(), state)


def refusals(decision: Decision) -> dict[str, tuple[str, tuple[str, ...], bool]]:
    """node -> (plugin, reasons, unresolvable)."""
    return {name: (s.plugin, s.reasons, s.code.name == "UNRESOLVABLE") for name, s in decision.failed.items()}


def feasible(decision: Decision) -> list[str]:
    return sorted(info.name for info in decision.feasible)


def running_with(name: str, node: str, *claims: str, **volumes: Any) -> dict[str, Any]:
    """A pod running on `node` that uses `claims` (and `with_volumes`'s other `volumes`)."""
    pod = with_volumes(pod_dict(name), claims, **volumes)
    pod["spec"]["nodeName"] = node
    pod["status"]["phase"] = "Running"
    return pod
