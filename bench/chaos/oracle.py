"""Does a Pending pod fit now? The project's own engine over the final cluster, one pod at a time.

The oracle is the standalone policy with shared GPUs (config/policy-devices.yaml): every
filter kube-scheduler runs plus DeviceFit, which is the union of what both pools' pods
are judged by (kube-scheduler's filters and the webhook's DeviceFit). Each Pending pod is
placed alone (``simulate`` on the bound pods plus that one pod), without preemption: a
pod that fits only by evicting others is not "a pod that could fit".
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from extender.cluster.snapshot import Snapshot
from extender.cluster.volumes import KIND_NAMES
from extender.policy.loading import load_policy_file
from extender.simulation.simulating import simulate

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "config" / "policy-devices.yaml"


def fits_oracle(nodes: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]],
                storage: Mapping[str, Sequence[Mapping[str, Any]]]) -> Callable[[Mapping[str, Any]], str]:
    """``fits(pod)``: the node the pod would go to now without evicting anyone, or ""."""
    policy = load_policy_file(POLICY)
    bound = [p for p in pods if (p.get("spec") or {}).get("nodeName")]

    def fits(pod: Mapping[str, Any]) -> str:
        # A fresh copy each time: a simulated bind writes into the objects it was given.
        snapshot = Snapshot(nodes=copy.deepcopy(list(nodes)), pods=copy.deepcopy([*bound, pod]),
                            storage={KIND_NAMES[kind]: copy.deepcopy(list(items)) for kind, items in storage.items()})
        result = simulate(snapshot, policy)
        for placement in result.placements:
            if not placement.victims:
                return placement.node
        return ""

    return fits
