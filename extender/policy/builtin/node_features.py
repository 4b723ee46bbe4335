"""NodeDeclaredFeatures: a pod that needs a node feature goes only to nodes declaring it.

kube-scheduler v1.36.3's NodeDeclaredFeatures plugin (pkg/scheduler/framework/plugins/
nodedeclaredfeatures): a kubelet publishes in `status.declaredFeatures` the features of its
version and gates that a pod may depend on, and a pod whose spec uses one must not land on
an older or differently configured kubelet. Which features a pod needs is inferred from its
spec by component-helpers v0.36.3 (nodedeclaredfeatures): each registered feature's
`InferForScheduling`, skipping a feature whose `MaxVersion` is below the scheduler's
version (by then every node has it). A pod that needs none (nearly every pod) skips the
plugin, with no per-node cost; otherwise a node passes only if it declares every one, and
is refused as UnschedulableAndUnresolvable (preemption cannot add a feature) with
kube-scheduler's reason. The detail names the missing features.

kube-scheduler runs it only with its NodeDeclaredFeatures gate on, which v1.36 turns on by
default (beta since 1.36 in pkg/features/kube_features.go; default_plugins.go's applyFeatureGates
appends it to the default profile); here it is opt-in for now: list it in a policy file
(docs/plugins.md). The
registry below is v0.36.3's (features/registry.go); a feature added there must be added
here, with its inference, for the two schedulers to agree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy import enqueue, names
from extender.policy.builtin.base import PrefilteredFilter, TakesNoArgs
from extender.policy.cluster_view import ClusterView
from extender.policy.enqueue import EventHint
from extender.policy.plugins import Check, NodeCheck
from extender.policy.status import Code, Status

NAME = names.NODE_DECLARED_FEATURES
REASON = "node(s) didn't match Pod's required features"
#: The version the scheduler infers for (kube-scheduler passes its own: version.Get()).
VERSION = (1, 36, 3)

Version = tuple[int, int, int]
Spec = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Feature:
    """One registered feature, as far as scheduling reads it: its name, whether a pod spec
    needs it (InferForScheduling) and the last version where nodes may lack it (MaxVersion;
    None: no such version yet)."""

    name: str
    infer: Callable[[Spec], bool]
    max_version: Version | None = None

    def applies(self, version: Version) -> bool:
        """Framework.InferForPodScheduling skips a feature once the target is past its MaxVersion."""
        return self.max_version is None or not version > self.max_version


def _items(raw: Any) -> Iterable[Any]:
    """A list field, or nothing: inference reads a spec the API server has validated, and a
    malformed one (a snapshot) needs no feature rather than failing the pod."""
    return raw if isinstance(raw, list) else ()


def _never(spec: Spec) -> bool:
    """Features that matter only to pod updates or to the API server, never to placement."""
    return False


def _restarts_all_containers(spec: Spec) -> bool:
    """restartallcontainers: a container or init container with a restartPolicyRules entry
    whose action is RestartAllContainers."""
    for key in ("containers", "initContainers"):
        for container in _items(spec.get(key)):
            if isinstance(container, Mapping):
                for rule in _items(container.get("restartPolicyRules")):
                    if isinstance(rule, Mapping) and rule.get("action") == "RestartAllContainers":
                        return True
    return False


def _user_namespaces_host_network(spec: Spec) -> bool:
    """usernamespaceshostnetwork: hostNetwork with its own user namespace (hostUsers: false)."""
    return spec.get("hostNetwork") is True and spec.get("hostUsers") is False


#: features.AllFeatures of component-helpers v0.36.3, sorted by name as ndf.New sorts it.
REGISTRY: tuple[Feature, ...] = tuple(sorted((
    Feature("RestartAllContainersOnContainerExits", _restarts_all_containers),
    Feature("InPlacePodLevelResourcesVerticalScaling", _never),  # inplacepodresize: updates only
    Feature("ExtendWebSocketsToKubelet", _never),  # the API server's proxy, not scheduling
    Feature("InPlacePodVerticalScalingInitContainers", _never),  # inplacepodresize: updates only
    Feature("UserNamespacesHostNetworkSupport", _user_namespaces_host_network),
), key=lambda feature: feature.name))


def required_features(spec: Spec, registry: Iterable[Feature] = REGISTRY,
                      version: Version = VERSION) -> frozenset[str]:
    """The features a pod with `spec` needs of its node (Framework.InferForPodScheduling)."""
    return frozenset(f.name for f in registry if f.applies(version) and f.infer(spec))


def _refusal(missing: Callable[[], str] | str) -> Status:
    return Status(Code.UNRESOLVABLE, (REASON,), missing, NAME)


def _missing(required: tuple[str, ...], declared: frozenset[str]) -> Callable[[], str]:
    """The detail, written only if explain or a log reads it."""
    return lambda: "node lacks declared feature(s): " + ", ".join(f for f in required if f not in declared)


@dataclass(frozen=True)
class NodeDeclaredFeatures(TakesNoArgs, PrefilteredFilter):
    """No args; the feature registry is v1.36.3's."""

    name: ClassVar[str] = NAME
    needs_pods: ClassVar[bool] = False  # reads the node alone (engine.Policy.needs_pods)

    def events_to_register(self) -> Sequence[EventHint]:
        """A node added, or one whose declared features changed (only this plugin registers
        UpdateNodeDeclaredFeature)."""
        return (enqueue.NODE_ADDED, enqueue.on(enqueue.NODES, enqueue.UPDATE_NODE_DECLARED_FEATURE))

    def prefilter(self, pod: PodView, cluster: ClusterView) -> NodeCheck | None:
        spec = pod.raw.get("spec")
        required = required_features(spec if isinstance(spec, Mapping) else {})
        if not required:
            return None  # kube-scheduler's PreFilter returns Skip: Filter never runs for this pod
        ordered = tuple(sorted(required))
        bare = _refusal("node declares no features; needs " + ", ".join(ordered))

        def check(info: NodeInfo) -> Status | None:
            declared = info.node.declared_features
            if required <= declared:
                return None
            return bare if not declared else _refusal(_missing(ordered, declared))

        return Check(check, memo_key=required)  # all it reads of the pod (FilterCycle.run)
