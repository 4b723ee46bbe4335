"""UnsupportedConstraints: refuse pods whose hard constraints this engine does not evaluate.

kube-scheduler also allocates dynamic resource claims (`spec.resourceClaims`, the
DynamicResources plugin). The standalone scheduler replaces kube-scheduler for its pods,
so placing such a pod while ignoring its claims would silently break what its owner
asked for: the pod stays Pending with a reason that says so, which is what a user can act
on (use kube-scheduler for it). Inter-pod affinity, topology spread and host ports used to
be listed here; they have plugins of their own now (InterPodAffinity, PodTopologySpread,
NodePorts). The check reads the pod once; it costs nothing per node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy import names
from extender.policy.builtin import arguments
from extender.policy.cluster import EMPTY_CLUSTER, ClusterView
from extender.policy.plugins import FilterPlugin, PreFilterPlugin
from extender.policy.status import Code, Status

NAME = names.UNSUPPORTED_CONSTRAINTS
CHECKS = ("resourceClaims",)
# Checks that earlier versions had, and the plugin that evaluates the constraint now.
_EVALUATED_NOW = {"podAffinity": names.INTER_POD_AFFINITY, "podAntiAffinity": names.INTER_POD_AFFINITY,
                  "topologySpread": names.POD_TOPOLOGY_SPREAD, "hostPorts": names.NODE_PORTS}


def _resource_claims(spec: Mapping[str, Any]) -> bool:
    claims = spec.get("resourceClaims")
    return isinstance(claims, list) and bool(claims)


_FINDERS = {
    "resourceClaims": (_resource_claims,
                       "pod uses dynamic resource claims (spec.resourceClaims), which this scheduler does not "
                       "allocate"),
}


def _unsupported(check: str) -> str:
    if check in _EVALUATED_NOW:
        return f"{check!r} is evaluated by the {_EVALUATED_NOW[check]} plugin now: remove it here and list that plugin"
    return "" if check in _FINDERS else f"{check!r} is not one of {', '.join(CHECKS)}"


_ARGS = arguments.schema({"checks": arguments.strings(each=_unsupported, default=CHECKS)})


@dataclass(frozen=True)
class UnsupportedConstraints(PreFilterPlugin, FilterPlugin):
    """Refuse every node, unresolvably, for a pod with a constraint listed in `checks`."""

    name: ClassVar[str] = NAME
    needs_pods: ClassVar[bool] = False  # reads the node alone (engine.Policy.needs_pods)
    checks: tuple[str, ...] = CHECKS

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> UnsupportedConstraints:
        return cls(arguments.load(_ARGS, args)["checks"])

    def prefilter(self, pod: PodView, cluster: ClusterView) -> Status | None:
        spec = pod.raw.get("spec") if isinstance(pod.raw, Mapping) else None
        if not isinstance(spec, Mapping):
            return None
        for check in self.checks:
            found, reason = _FINDERS[check]
            if found(spec):
                return Status(Code.UNRESOLVABLE, (reason,), "", NAME)
        return None

    def filter(self, pod: PodView, node: NodeInfo) -> Status | None:
        return self.prefilter(pod, EMPTY_CLUSTER)
