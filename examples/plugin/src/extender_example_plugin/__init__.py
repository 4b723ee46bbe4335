"""Example plugins for the extender policy engine, found through the `extender.plugins` entry point.

`register(registry)` is the whole contract: the engine calls it once, the first time
a policy names a plugin it does not know, and the names become usable in policy files.
"""

from __future__ import annotations

from typing import Any

from extender_example_plugin.plugins import FewestPods, MaxPodsPerNode


def register(registry: Any) -> None:
    """Add this package's plugins to an `extender.policy.registry.Registry`."""
    registry.add_filter(MaxPodsPerNode.name, MaxPodsPerNode.from_args)
    registry.add_scorer(FewestPods.name, FewestPods.from_args)
