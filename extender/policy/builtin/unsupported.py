"""UnsupportedConstraints: refuse pods whose hard constraints this engine does not evaluate.

kube-scheduler also enforces required inter-pod (anti-)affinity, topology spread
with `whenUnsatisfiable: DoNotSchedule`, and host port conflicts. The standalone
scheduler replaces kube-scheduler for its pods, so placing such a pod while
ignoring the constraint would silently break what its owner asked for. Until
those plugins exist here, the pod stays Pending with a reason that says so,
which is what a user can act on (use kube-scheduler for it, or drop the rule).
The check reads the pod once; it costs nothing per node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from extender.errors import PolicyError
from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy import names
from extender.policy.builtin import arguments
from extender.policy.status import Code, Status

NAME = names.UNSUPPORTED_CONSTRAINTS
CHECKS = ("podAffinity", "podAntiAffinity", "topologySpread", "hostPorts")


def _required_pod_affinity(spec: Mapping[str, Any], kind: str) -> bool:
    affinity = spec.get("affinity")
    block = affinity.get(kind) if isinstance(affinity, Mapping) else None
    return isinstance(block, Mapping) and bool(block.get("requiredDuringSchedulingIgnoredDuringExecution"))


def _hard_spread(spec: Mapping[str, Any]) -> bool:
    constraints = spec.get("topologySpreadConstraints")
    return isinstance(constraints, list) and any(
        isinstance(c, Mapping) and c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
        for c in constraints
    )


def _host_ports(spec: Mapping[str, Any]) -> bool:
    for field in ("containers", "initContainers"):
        for container in spec.get(field) or []:
            ports = container.get("ports") if isinstance(container, Mapping) else None
            if isinstance(ports, list) and any(isinstance(p, Mapping) and p.get("hostPort") for p in ports):
                return True
    return False


_FINDERS = {
    "podAffinity": (lambda spec: _required_pod_affinity(spec, "podAffinity"),
                    "pod has required inter-pod affinity, which this scheduler does not evaluate"),
    "podAntiAffinity": (lambda spec: _required_pod_affinity(spec, "podAntiAffinity"),
                        "pod has required inter-pod anti-affinity, which this scheduler does not evaluate"),
    "topologySpread": (_hard_spread,
                       "pod has DoNotSchedule topology spread constraints, which this scheduler does not evaluate"),
    "hostPorts": (_host_ports, "pod uses host ports, whose conflicts this scheduler does not evaluate"),
}


@dataclass(frozen=True)
class UnsupportedConstraints:
    """Refuse every node, unresolvably, for a pod with a constraint listed in `checks`."""

    name: ClassVar[str] = NAME
    checks: tuple[str, ...] = CHECKS

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> UnsupportedConstraints:
        args = arguments.mapping(args, "")
        arguments.only_keys(args, ("checks",))
        checks = arguments.string_list(args.get("checks", list(CHECKS)), "checks")
        for index, check in enumerate(checks):
            if check not in _FINDERS:
                raise PolicyError(f"checks[{index}]: {check!r} is not one of {', '.join(CHECKS)}")
        return cls(checks)

    def prefilter(self, pod: PodView) -> Status | None:
        spec = pod.raw.get("spec") if isinstance(pod.raw, Mapping) else None
        if not isinstance(spec, Mapping):
            return None
        for check in self.checks:
            found, reason = _FINDERS[check]
            if found(spec):
                return Status(Code.UNRESOLVABLE, (reason,), "", NAME)
        return None

    def filter(self, pod: PodView, node: NodeInfo) -> Status | None:
        return self.prefilter(pod)
