"""The built-in filters and scorers, registered by name (see `extender.policy.names`).

One module per plugin family: readiness (NodeReady), gates (SchedulingGates), fit
(ResourceFit), taints, affinity, labels (NodeLabels, LabelPreference) and
allocation (Least/Most/BalancedAllocation), unsupported (UnsupportedConstraints), devices
(DeviceFit, DeviceAllocation: shared GPUs, opt-in). Each plugin is a frozen dataclass built
by `from_args`, which validates the policy file's `args`; equal args give equal
plugins, which is how a policy file is compared with the built-in defaults.
"""

from __future__ import annotations

from typing import Protocol

from extender.policy.builtin.affinity import NodeAffinity, PreferredNodeAffinity
from extender.policy.builtin.allocation import BalancedAllocation, LeastAllocated, MostAllocated
from extender.policy.builtin.devices import DeviceAllocation, DeviceFit
from extender.policy.builtin.fit import ResourceFit
from extender.policy.builtin.gates import SchedulingGates
from extender.policy.builtin.labels import LabelPreference, NodeLabels
from extender.policy.builtin.readiness import NodeReady
from extender.policy.builtin.taints import TaintPreferNoSchedule, TaintToleration
from extender.policy.builtin.unsupported import UnsupportedConstraints
from extender.policy.plugins import PluginFactory

FILTERS = (SchedulingGates, UnsupportedConstraints, NodeReady, TaintToleration, NodeAffinity, ResourceFit,
           NodeLabels)
SCORERS = (
    LeastAllocated,
    MostAllocated,
    BalancedAllocation,
    PreferredNodeAffinity,
    TaintPreferNoSchedule,
    LabelPreference,
)
# Opt-in, so not in FILTERS/SCORERS (which the standalone default runs in full): shared
# devices need a node agent publishing inventories and a policy that asks for them.
DEVICE_FILTERS = (DeviceFit,)
DEVICE_SCORERS = (DeviceAllocation,)


class _Registry(Protocol):
    def add_filter(self, name: str, factory: PluginFactory) -> None: ...

    def add_scorer(self, name: str, factory: PluginFactory) -> None: ...


def register(registry: _Registry) -> None:
    """Add every built-in to `registry` (the same hook third-party packages provide)."""
    for plugin in (*FILTERS, *DEVICE_FILTERS):
        registry.add_filter(plugin.name, plugin.from_args)
    for plugin in (*SCORERS, *DEVICE_SCORERS):
        registry.add_scorer(plugin.name, plugin.from_args)


__all__ = [
    "FILTERS",
    "SCORERS",
    "BalancedAllocation",
    "DeviceAllocation",
    "DeviceFit",
    "LabelPreference",
    "LeastAllocated",
    "MostAllocated",
    "NodeAffinity",
    "NodeLabels",
    "NodeReady",
    "PreferredNodeAffinity",
    "ResourceFit",
    "SchedulingGates",
    "TaintPreferNoSchedule",
    "TaintToleration",
    "UnsupportedConstraints",
    "register",
]
