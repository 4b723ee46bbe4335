"""Does a Pending pod fit now? The project's own engine over the final cluster, one pod at a time.

The oracle is the standalone policy with shared GPUs (config/policy-devices.yaml): every
filter kube-scheduler runs plus DeviceFit, which is the union of what both pools' pods
are judged by (kube-scheduler's filters and the webhook's DeviceFit). Each Pending pod is
placed alone (``simulate`` on the bound pods plus that one pod), without preemption: a
pod that fits only by evicting others is not "a pod that could fit". The pending members of
a pod group are placed together instead (``together``), each seeing the ones placed before:
how many fit at once is what the group's quorum is judged by. Pods are given to the engine
without their group membership (``plain``): the all-or-nothing rule is the checker's, the
oracle only says whether the room is there.

The DRA objects at the end (``dra``: DeviceClasses, ResourceSlices, ResourceClaims, by
resource) go in too, so a Pending pod whose claims could be allocated now (DynamicResources,
kube-scheduler v1.36's allocator, docs/dra.md) "could fit"; a pod whose template claim was
never made cannot. For the webhook pool, where kube-scheduler allocates, this is our
allocator's answer on kube-scheduler's final state: where the two disagree kube-scheduler is
the reference (docs/reliability.md says how a flagged pod is checked against it).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from extender.cluster.snapshot import Snapshot
from extender.cluster.volume_store import KIND_NAMES
from extender.policy.engine import Policy
from extender.policy.loading import load_policy_file
from extender.simulation.simulating import simulate

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "config" / "policy-devices.yaml"


Pods = Sequence[Mapping[str, Any]]
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"


def plain(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `pod` that is no pod group's member (neither API)."""
    copied = copy.deepcopy(dict(pod))
    (copied.get("spec") or {}).pop("schedulingGroup", None)
    ((copied.get("metadata") or {}).get("labels") or {}).pop(COSCHEDULING_LABEL, None)
    return copied


@dataclass(frozen=True)
class Oracle:
    """The final cluster, and the policy that judges what would fit on it now."""

    nodes: Pods
    pods: Pods
    storage: Mapping[str, Pods]
    dra: Mapping[str, Pods] = field(default_factory=dict)  # resource -> DRA objects (extender.cluster.dra)
    policy: Policy = field(default_factory=lambda: load_policy_file(POLICY))

    def placed(self, pending: Pods) -> dict[str, str]:
        """Pod key -> node for each of `pending` placed without evicting anyone, in queue order,
        each seeing the ones placed before."""
        bound = [p for p in self.pods if (p.get("spec") or {}).get("nodeName")]
        # A fresh copy each time: a simulated bind writes into the objects it was given.
        snapshot = Snapshot(nodes=copy.deepcopy(list(self.nodes)), pods=[plain(p) for p in [*bound, *pending]],
                            storage={KIND_NAMES[kind]: copy.deepcopy(list(items))
                                     for kind, items in self.storage.items()},
                            dra={resource: copy.deepcopy(list(items)) for resource, items in self.dra.items()})
        return {p.pod: p.node for p in simulate(snapshot, self.policy).placements if not p.victims}

    def fits(self, pod: Mapping[str, Any]) -> str:
        """The node `pod` would go to now without evicting anyone, or ""."""
        return next(iter(self.placed([pod]).values()), "")

    def together(self, pods: Pods) -> int:
        """How many of `pods` fit at once now (no evictions)."""
        return len(self.placed(pods))
