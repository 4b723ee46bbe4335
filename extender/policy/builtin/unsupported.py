"""UnsupportedConstraints: refuse pods whose hard constraints this engine does not evaluate.

Every constraint it used to list has a plugin of its own now: dynamic resource claims
(`spec.resourceClaims`) are allocated by DynamicResources, inter-pod affinity by
InterPodAffinity, topology spread by PodTopologySpread, host ports by NodePorts. The plugin
stays so that policy files that list it still load; with nothing left to check it refuses
nothing, and naming one of those checks in its `args` is an error saying which plugin to
list instead. The check reads the pod once; it costs nothing per node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy import enqueue, names
from extender.policy.builtin import arguments
from extender.policy.cluster_view import ClusterView
from extender.policy.enqueue import EventHint
from extender.policy.plugins import FilterPlugin, PreFilterPlugin
from extender.policy.status import Status

NAME = names.UNSUPPORTED_CONSTRAINTS
CHECKS: tuple[str, ...] = ()
# Checks that earlier versions had, and the plugin that evaluates the constraint now.
_EVALUATED_NOW = {"resourceClaims": names.DYNAMIC_RESOURCES,
                  "podAffinity": names.INTER_POD_AFFINITY, "podAntiAffinity": names.INTER_POD_AFFINITY,
                  "topologySpread": names.POD_TOPOLOGY_SPREAD, "hostPorts": names.NODE_PORTS}


def _unsupported(check: str) -> str:
    if check in _EVALUATED_NOW:
        return f"{check!r} is evaluated by the {_EVALUATED_NOW[check]} plugin now: remove it here and list that plugin"
    return f"{check!r} is not a check this plugin knows (it has none left)"


_ARGS = arguments.schema({"checks": arguments.strings(each=_unsupported, default=CHECKS)})


@dataclass(frozen=True)
class UnsupportedConstraints(PreFilterPlugin, FilterPlugin):
    """Kept so that policy files naming it still load; it refuses nothing (module docstring)."""

    name: ClassVar[str] = NAME
    needs_pods: ClassVar[bool] = False  # reads the node alone (engine.Policy.needs_pods)
    checks: tuple[str, ...] = CHECKS

    def events_to_register(self) -> Sequence[EventHint]:
        """A node added: the pod's own update is what may lift the refusal."""
        return (enqueue.NODE_ADDED,)

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> UnsupportedConstraints:
        return cls(arguments.load(_ARGS, args)["checks"])

    def prefilter(self, pod: PodView, cluster: ClusterView) -> Status | None:
        return None  # nothing is left to refuse: `checks` can only be empty (see _unsupported)

    def filter(self, pod: PodView, node: NodeInfo) -> Status | None:
        return None
