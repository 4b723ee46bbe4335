"""The built-in filters and scorers, registered by name (see `extender.policy.names`).

One module per plugin family: readiness (NodeReady), gates (SchedulingGates), fit
(ResourceFit), taints, node_affinity (NodeAffinity, PreferredNodeAffinity), interpod
(InterPodAffinity), spread (PodTopologySpread), ports (NodePorts), labels (NodeLabels,
LabelPreference), allocation (Least/Most/BalancedAllocation), unsupported
(UnsupportedConstraints), load_aware (NodeLoad, TargetLoadPacking,
LoadVariationRiskBalancing: measured usage), the volume
plugins: volume_restrictions, volume_limits (NodeVolumeLimits), volume_binding, volume_zone,
and volume_scoring (the opt-in VolumeBinding scorer), devices (DeviceFit,
DeviceAllocation: shared GPUs), gpu_share (the FGD paper's GPU-sharing policies, docs/replay.md),
dynamic_resources (DynamicResources: DRA claims), and
node_features (NodeDeclaredFeatures: node.status.declaredFeatures).
InterPodAffinity, PodTopologySpread and DynamicResources are a filter and a scorer under one name, as in
kube-scheduler. Each plugin is a frozen dataclass built by its from_args, which validates the
policy file's args; equal args give equal plugins, which is how a policy file is compared with
the built-in defaults. Each filter registers the cluster events that may change its answer
next to its filter (its events_to_register: policy/enqueue.py).
Shared by several: base (the prefilter/prescore base classes, the volume plugins' storage
events), arguments (the args loader), volume_matching (VolumeBinding's volume search),
dra_devices and dra_extended (DeviceFit's DRA shares, DRA extended resources).
"""

from __future__ import annotations

from typing import Protocol

from extender.policy.builtin.allocation import BalancedAllocation, LeastAllocated, MostAllocated
from extender.policy.builtin.devices import DeviceAllocation, DeviceFit
from extender.policy.builtin.dynamic_resources import DynamicResources, DynamicResourcesScore
from extender.policy.builtin.fit import ResourceFit
from extender.policy.builtin.gates import SchedulingGates
from extender.policy.builtin.gpu_share import GPU_SCORERS
from extender.policy.builtin.interpod import InterPodAffinity, PreferredInterPodAffinity
from extender.policy.builtin.labels import LabelPreference, NodeLabels
from extender.policy.builtin.load_aware import (
    LoadVariationRiskBalancing,
    NodeLoad,
    TargetLoadPacking,
)
from extender.policy.builtin.node_affinity import NodeAffinity, PreferredNodeAffinity
from extender.policy.builtin.node_features import NodeDeclaredFeatures
from extender.policy.builtin.ports import NodePorts
from extender.policy.builtin.readiness import NodeReady
from extender.policy.builtin.spread import PodTopologySpread, PreferredPodTopologySpread
from extender.policy.builtin.taints import TaintPreferNoSchedule, TaintToleration
from extender.policy.builtin.unsupported import UnsupportedConstraints
from extender.policy.builtin.volume_binding import VolumeBinding
from extender.policy.builtin.volume_limits import NodeVolumeLimits
from extender.policy.builtin.volume_restrictions import VolumeRestrictions
from extender.policy.builtin.volume_scoring import VolumeBindingScore
from extender.policy.builtin.volume_zone import VolumeZone
from extender.policy.plugins import PluginFactory

FILTERS = (SchedulingGates, UnsupportedConstraints, NodeReady, TaintToleration, NodeAffinity, NodePorts,
           ResourceFit, VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone, PodTopologySpread,
           InterPodAffinity, DynamicResources, NodeDeclaredFeatures, NodeLabels)
SCORERS = (
    LeastAllocated,
    MostAllocated,
    BalancedAllocation,
    PreferredNodeAffinity,
    TaintPreferNoSchedule,
    PreferredPodTopologySpread,
    PreferredInterPodAffinity,
    LabelPreference,
    VolumeBindingScore,
    DynamicResourcesScore,
)
# Opt-in, so no default policy runs them: the load plugins need thresholds or a usage source
# (settings.usage); shared devices need a node agent publishing inventories.
OPT_IN_FILTERS = (NodeLoad, DeviceFit)
OPT_IN_SCORERS = (TargetLoadPacking, LoadVariationRiskBalancing, DeviceAllocation, *GPU_SCORERS)


class _Registry(Protocol):
    def add_filter(self, name: str, factory: PluginFactory) -> None: ...

    def add_scorer(self, name: str, factory: PluginFactory) -> None: ...


def register(registry: _Registry) -> None:
    """Add every built-in to `registry` (the same hook third-party packages provide)."""
    for plugin in (*FILTERS, *OPT_IN_FILTERS):
        registry.add_filter(plugin.name, plugin.from_args)
    for scorer in (*SCORERS, *OPT_IN_SCORERS):
        registry.add_scorer(scorer.name, scorer.from_args)


__all__ = [
    "FILTERS",
    "OPT_IN_FILTERS",
    "OPT_IN_SCORERS",
    "SCORERS",
    "BalancedAllocation",
    "DeviceAllocation",
    "DeviceFit",
    "DynamicResources",
    "DynamicResourcesScore",
    "InterPodAffinity",
    "LabelPreference",
    "LeastAllocated",
    "LoadVariationRiskBalancing",
    "MostAllocated",
    "NodeAffinity",
    "NodeDeclaredFeatures",
    "NodeLabels",
    "NodePorts",
    "NodeLoad",
    "NodeReady",
    "PodTopologySpread",
    "PreferredInterPodAffinity",
    "NodeVolumeLimits",
    "PreferredNodeAffinity",
    "PreferredPodTopologySpread",
    "ResourceFit",
    "SchedulingGates",
    "TaintPreferNoSchedule",
    "TaintToleration",
    "TargetLoadPacking",
    "UnsupportedConstraints",
    "VolumeBinding",
    "VolumeBindingScore",
    "VolumeRestrictions",
    "VolumeZone",
    "register",
]
