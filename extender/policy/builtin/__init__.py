"""The built-in filters and scorers, registered by name (see `extender.policy.names`).

One module per plugin family: readiness (NodeReady), gates (SchedulingGates), fit
(ResourceFit), taints, affinity, labels (NodeLabels, LabelPreference) and
allocation (Least/Most/BalancedAllocation), unsupported (UnsupportedConstraints), and the volume
plugins: volume_restrictions, volume_limits (NodeVolumeLimits), volume_binding, volume_zone, and
volume_scoring (the opt-in VolumeBinding scorer). Each plugin is a frozen dataclass built
by `from_args`, which validates the policy file's `args`; equal args give equal
plugins, which is how a policy file is compared with the built-in defaults.
"""

from __future__ import annotations

from typing import Protocol

from extender.policy.builtin.affinity import NodeAffinity, PreferredNodeAffinity
from extender.policy.builtin.allocation import BalancedAllocation, LeastAllocated, MostAllocated
from extender.policy.builtin.fit import ResourceFit
from extender.policy.builtin.gates import SchedulingGates
from extender.policy.builtin.labels import LabelPreference, NodeLabels
from extender.policy.builtin.readiness import NodeReady
from extender.policy.builtin.taints import TaintPreferNoSchedule, TaintToleration
from extender.policy.builtin.unsupported import UnsupportedConstraints
from extender.policy.builtin.volume_binding import VolumeBinding
from extender.policy.builtin.volume_limits import NodeVolumeLimits
from extender.policy.builtin.volume_restrictions import VolumeRestrictions
from extender.policy.builtin.volume_scoring import VolumeBindingScore
from extender.policy.builtin.volume_zone import VolumeZone
from extender.policy.plugins import PluginFactory

FILTERS = (SchedulingGates, UnsupportedConstraints, NodeReady, TaintToleration, NodeAffinity, ResourceFit,
           VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone, NodeLabels)
SCORERS = (
    LeastAllocated,
    MostAllocated,
    BalancedAllocation,
    PreferredNodeAffinity,
    TaintPreferNoSchedule,
    LabelPreference,
    VolumeBindingScore,
)


class _Registry(Protocol):
    def add_filter(self, name: str, factory: PluginFactory) -> None: ...

    def add_scorer(self, name: str, factory: PluginFactory) -> None: ...


def register(registry: _Registry) -> None:
    """Add every built-in to `registry` (the same hook third-party packages provide)."""
    for plugin in FILTERS:
        registry.add_filter(plugin.name, plugin.from_args)
    for plugin in SCORERS:
        registry.add_scorer(plugin.name, plugin.from_args)


__all__ = [
    "FILTERS",
    "SCORERS",
    "BalancedAllocation",
    "LabelPreference",
    "LeastAllocated",
    "MostAllocated",
    "NodeAffinity",
    "NodeLabels",
    "NodeReady",
    "NodeVolumeLimits",
    "PreferredNodeAffinity",
    "ResourceFit",
    "SchedulingGates",
    "TaintPreferNoSchedule",
    "TaintToleration",
    "UnsupportedConstraints",
    "VolumeBinding",
    "VolumeBindingScore",
    "VolumeRestrictions",
    "VolumeZone",
    "register",
]
