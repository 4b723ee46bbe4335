"""Explain's view of shared devices: what each candidate node's GPUs have free for a GPU pod.

A refused node's reason already carries its devices' numbers; a feasible one has no
reason, yet "why this node and not that one" for a GPU pod is mostly about free device
memory and cores. So explain adds one note per GPU node with every device's free share.
"""

from __future__ import annotations

from collections.abc import Sequence

from extender.model.devices import DeviceRequest
from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy.builtin.device_requests import pod_device_request
from extender.policy.builtin.devices import DeviceFit
from extender.policy.cluster_view import EMPTY_CLUSTER, ClusterView

MAX_NODES = 50


def device_notes(pod: PodView, nodes: Sequence[NodeInfo], cluster: ClusterView | None = None,
                 fit: DeviceFit | None = None) -> list[str]:
    """"GPUs on gpu-1: GPU-a (A100) 30720/40960 MiB, 70/100% cores free, 2 pod(s); ..." per GPU node,
    from the inventory the policy's DeviceFit reads (`fit`; the annotations without one)."""
    if not isinstance(pod_device_request(pod), DeviceRequest):
        return []
    view = cluster if cluster is not None else EMPTY_CLUSTER
    fit = fit if fit is not None else DeviceFit()
    notes = [note for info in nodes for note in (fit.node_note(info, view),) if note is not None]
    if len(notes) > MAX_NODES:
        notes = [*notes[:MAX_NODES], f"... and {len(notes) - MAX_NODES} more GPU nodes"]
    return notes or ["no candidate node publishes a GPU inventory"]
