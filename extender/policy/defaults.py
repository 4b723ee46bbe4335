"""The built-in default policies, one per mode (docs/architecture.md; kube-scheduler v1.36's default profile).

standalone: this scheduler replaces kube-scheduler for its pods, so it runs every
    built-in filter, the volume ones in kube-scheduler's order after ResourceFit
    (never place a pod kube-scheduler would refuse, and also refuse
    NotReady and pressured nodes at once instead of waiting for the condition taints)
    and kube-scheduler's default scoring with its default weights (NodeResourcesFit
    LeastAllocated 1, BalancedAllocation 1, NodeAffinity 2, TaintToleration 3,
    PodTopologySpread 2, InterPodAffinity 2, DynamicResources 2).
webhook: kube-scheduler has already run its own filters and scorers on the nodes it
    sends, so repeating them only adds latency (and repeating scorers would count
    them twice). It keeps the one cheap check kube-scheduler lacks (node conditions
    read directly, a few dict look-ups per node) and the custom-rule plugins, which
    do nothing until rules are configured.

`config/policy.yaml` and `config/policy-webhook.yaml` load to exactly these
(a test keeps them in step); the files are the commented, editable form.
"""

from __future__ import annotations

import hashlib

from extender.errors import PolicyError
from extender.policy.builtin import (
    BalancedAllocation,
    DynamicResources,
    DynamicResourcesScore,
    InterPodAffinity,
    LeastAllocated,
    NodeAffinity,
    NodeDeclaredFeatures,
    NodeLabels,
    NodePorts,
    NodeReady,
    NodeVolumeLimits,
    PodTopologySpread,
    PreferredInterPodAffinity,
    PreferredNodeAffinity,
    PreferredPodTopologySpread,
    ResourceFit,
    SchedulingGates,
    TaintPreferNoSchedule,
    TaintToleration,
    VolumeBinding,
    VolumeRestrictions,
    VolumeZone,
)
from extender.policy.builtin.readiness import ALL_PRESSURE_CONDITIONS
from extender.policy.engine import Policy, WeightedScorer

MODES = ("standalone", "webhook")


def _standalone() -> tuple[tuple[object, ...], tuple[WeightedScorer, ...]]:
    filters = (
        SchedulingGates(),
        NodeReady(pressure_conditions=ALL_PRESSURE_CONDITIONS),
        TaintToleration(),
        NodeAffinity(),
        NodePorts(),
        ResourceFit(),
        VolumeRestrictions(),
        NodeVolumeLimits(),
        VolumeBinding(),
        VolumeZone(),
        PodTopologySpread(),
        InterPodAffinity(),
        DynamicResources(),
        NodeDeclaredFeatures(),
        NodeLabels(),
    )
    scorers = (
        WeightedScorer(LeastAllocated(), 1),
        WeightedScorer(BalancedAllocation(), 1),
        WeightedScorer(PreferredNodeAffinity(), 2),
        WeightedScorer(TaintPreferNoSchedule(), 3),
        WeightedScorer(PreferredPodTopologySpread(), 2),
        WeightedScorer(PreferredInterPodAffinity(), 2),
        WeightedScorer(DynamicResourcesScore(), 2),
    )
    return filters, scorers


def _webhook() -> tuple[tuple[object, ...], tuple[WeightedScorer, ...]]:
    return (NodeReady(pressure_conditions=ALL_PRESSURE_CONDITIONS), NodeLabels()), ()


def default_policy(mode: str) -> Policy:
    """The policy a mode uses when no policy file is given."""
    if mode == "standalone":
        filters, scorers = _standalone()
    elif mode == "webhook":
        filters, scorers = _webhook()
    else:
        raise PolicyError(f"unknown mode {mode!r} (expected one of: {', '.join(MODES)})")
    digest = hashlib.sha256(repr((filters, scorers)).encode()).hexdigest()
    return Policy(filters=filters, scorers=scorers, source=f"<built-in {mode}>", digest=digest)
