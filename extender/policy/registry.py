"""Name-to-factory registry of filter and score plugins.

Built-ins are registered in code; third-party plugins come from the `extender.plugins`
entry-point group, loaded once per registry the first time a name is not found.
An entry point names either a factory or a module/object with a `register(registry)`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from extender.errors import PolicyError
from extender.policy import builtin
from extender.policy.plugins import PluginFactory

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "extender.plugins"


class Registry:
    def __init__(self) -> None:
        self._filters: dict[str, PluginFactory] = {}
        self._scorers: dict[str, PluginFactory] = {}
        self._entry_points_loaded = False

    def add_filter(self, name: str, factory: PluginFactory) -> None:
        self._add(self._filters, name, factory)

    def add_scorer(self, name: str, factory: PluginFactory) -> None:
        self._add(self._scorers, name, factory)

    @staticmethod
    def _add(table: dict[str, PluginFactory], name: str, factory: PluginFactory) -> None:
        if name in table and table[name] is not factory:
            raise PolicyError(f"plugin {name!r} is registered twice")
        table[name] = factory

    def filter_names(self) -> list[str]:
        self.load_entry_points()
        return sorted(self._filters)

    def scorer_names(self) -> list[str]:
        self.load_entry_points()
        return sorted(self._scorers)

    def build_filter(self, name: str, args: Mapping[str, Any]) -> Any:
        return self._build(self._filters, "filter", name, args)

    def build_scorer(self, name: str, args: Mapping[str, Any]) -> Any:
        return self._build(self._scorers, "scorer", name, args)

    def _build(self, table: dict[str, PluginFactory], kind: str, name: str, args: Mapping[str, Any]) -> Any:
        if name not in table:
            self.load_entry_points()
        if name not in table:
            known = ", ".join(sorted(table)) or "none"
            raise PolicyError(f"unknown {kind} plugin {name!r} (known: {known})")
        plugin = table[name](args)
        if not getattr(plugin, "name", None):
            plugin.name = name
        return plugin

    def load_entry_points(self) -> None:
        """Load third-party plugins once; a broken one is logged and skipped, not fatal."""
        if self._entry_points_loaded:
            return
        self._entry_points_loaded = True
        for entry in entry_points(group=ENTRY_POINT_GROUP):
            try:
                target = entry.load()
                register = getattr(target, "register", None)
                if callable(register):
                    register(self)
                else:
                    raise PolicyError("entry point has no register(registry) function")
            except Exception as exc:  # a third-party plugin must not take the service down
                log.error("cannot load plugin entry point %s (%s): %s", entry.name, entry.value, exc)


def default_registry() -> Registry:
    """A fresh registry with every built-in plugin; each caller gets its own (no globals)."""
    registry = Registry()
    builtin.register(registry)
    return registry
