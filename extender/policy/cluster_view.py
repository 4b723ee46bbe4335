"""What a plugin may read about the rest of the cluster: a read-only view, and the interfaces around it.

Most filters look at one node at a time. Some cannot: inter-pod affinity, topology spread,
volumes and preemption need the pods on other nodes, namespaces' labels, claims (the
storage objects come through `storage()`, see policy/storage.py).
kube-scheduler gives its plugins a snapshot lister; here the engine passes a
`ClusterView` (the live `ClusterState` in every mode, or `EMPTY_CLUSTER`) to every
plugin's per-pod steps (policy/plugins.py):

    prefilter(pod, cluster)          -> NodeCheck | Status | None
    prescore(pod, cluster, nodes)    -> NodeScore | None    (nodes: the ones to be scored)
    reserve(pod, node, cluster)      -> Reservation | Status | None

The view is an interface, not the state itself, so the policy layer stays free of the
cluster adapters, and tests can hand a plugin any object with these methods.

Preemption and nominated pods change what is on a node without changing the cluster:
a NodeCheck that depends on pods elsewhere may implement `updated(changes)`, returning
the check as it would be with those pods added (+1) or removed (-1), as kube-scheduler's
PreFilterExtensions.AddPod / RemovePod do. Checks that only read their NodeInfo need
nothing: the engine hands them a NodeInfo with the pods already added or removed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from extender.model.affinity import AffinityTerm, PodAffinity
from extender.model.budgets import DisruptionBudget
from extender.model.devices import EMPTY_USE, NodeDeviceUse, Shares
from extender.model.nodes import NodeInfo, NodeView
from extender.model.records import PodRecord
from extender.model.selectors import LabelSelector
from extender.model.usage_samples import EMPTY_USAGE, UsageTable
from extender.policy.dra_view import EMPTY_DRA, DraView
from extender.policy.storage import EMPTY_STORAGE, StorageView


class PodGroup(Protocol):
    """Placed pods that share one set of affinity terms: the replicas of a workload."""

    terms: PodAffinity

    def pods(self) -> list[PodRecord]:
        """The group's placed pods (looked up on demand: only matching groups are read)."""

    def counts(self, topology_key: str) -> dict[str, int]:
        """How many of the group's placed pods sit in each domain (label value) of `topology_key`."""


class ClusterView(Protocol):
    def node_info(self, name: str) -> NodeInfo | None: ...

    def all_node_infos(self) -> list[NodeInfo]: ...

    def matching_pods(self, namespaces: Iterable[str], selector: LabelSelector) -> list[PodRecord]:
        """Placed pods (bound or assumed, not finished) of `namespaces` whose labels match."""

    def owned_pods(self, namespace: str, kind: str, name: str) -> list[PodRecord]: ...

    def affinity_groups(self) -> Sequence[PodGroup]:
        """Placed pods carrying pod (anti-)affinity terms, grouped by identical terms."""

    def matching_counts(self, terms: Sequence[AffinityTerm], topology_keys: Sequence[str]) -> dict[str, dict[str, int]]:
        """Placed pods matching every one of `terms` (by namespace names and selector), per
        domain: topology key -> label value -> pods, for each of `topology_keys`."""

    def spread_counts(self, namespace: str, selector: LabelSelector | None,
                      owner: tuple[str, str] | None = None) -> dict[str, int]:
        """Placed, not terminating pods of `namespace` matching `selector` (or controlled by
        `owner`), per node name: what a topology spread rule counts."""

    def namespace_labels(self, name: str) -> dict[str, str] | None: ...

    def namespaces_matching(self, selector: LabelSelector) -> frozenset[str]: ...

    def nominations(self) -> Mapping[str, Sequence[PodRecord]]:
        """Node name -> pending pods nominated there by preemption, as records placed on it."""

    def nominated_node(self, key: str) -> str:
        """The node pod `key` is nominated to ("" if none)."""

    def disruption_budgets(self) -> Sequence[DisruptionBudget]: ...

    def kind_objects(self, resource: str) -> Mapping[str, Any]:
        """The objects of a keyed kind (cluster/kinds.py) by key, as its parser made them; empty
        for a kind not declared. The reader a plugin of a newly watched kind needs."""

    def memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        """`compute()` cached while node labels and taints do not change."""

    def node_usage(self) -> UsageTable:
        """The latest published node usage samples (load-aware plugins), read once per cycle."""
    def storage(self) -> StorageView:
        """Claims, volumes, classes and CSI objects (see policy/storage.py)."""

    def claim_users(self, namespace: str, claim: str) -> list[PodRecord]:
        """Placed pods with a `persistentVolumeClaim` volume of that claim."""

    def dra(self) -> DraView:
        """DeviceClasses, ResourceSlices, ResourceClaims and allocations in flight (see policy/dra_view.py)."""

    def device_use(self, node: str) -> NodeDeviceUse:
        """What the pods on `node` hold of its shared devices (bound ones, and claims in flight)."""

    def claim_devices(self, node: str, key: str, uid: str, shares: Shares, capacity: Mapping[str, tuple[int, int]],
                      replacing: int | None = None) -> tuple[int, NodeDeviceUse] | None:
        """Reserve: take device shares for a pod if they still fit, atomically; None if they do not.
        The token is for `release_devices`; the use is the node's, the claim included.
        `replacing`: the pod's current claim, swapped for this one in the same step (a move)."""

    def release_devices(self, token: int) -> None:
        """Unreserve: give a claim back."""


class PodChange(NamedTuple):
    """A pod added to (+1) or removed from (-1) `node`, for NodeCheck.updated()."""

    pod: PodRecord
    node: NodeView
    delta: int


class _EmptyCluster:
    """No nodes, no pods, no namespaces: for callers without a cluster state."""

    def node_info(self, name: str) -> NodeInfo | None:
        return None

    def all_node_infos(self) -> list[NodeInfo]:
        return []

    def matching_pods(self, namespaces: Iterable[str], selector: LabelSelector) -> list[PodRecord]:
        return []

    def owned_pods(self, namespace: str, kind: str, name: str) -> list[PodRecord]:
        return []

    def affinity_groups(self) -> Sequence[PodGroup]:
        return []

    def matching_counts(self, terms: Sequence[AffinityTerm], topology_keys: Sequence[str]) -> dict[str, dict[str, int]]:
        return {}

    def spread_counts(self, namespace: str, selector: LabelSelector | None,
                      owner: tuple[str, str] | None = None) -> dict[str, int]:
        return {}

    def namespace_labels(self, name: str) -> dict[str, str] | None:
        return None

    def namespaces_matching(self, selector: LabelSelector) -> frozenset[str]:
        return frozenset()

    def nominations(self) -> Mapping[str, Sequence[PodRecord]]:
        return {}

    def nominated_node(self, key: str) -> str:
        return ""

    def disruption_budgets(self) -> Sequence[DisruptionBudget]:
        return ()

    def kind_objects(self, resource: str) -> Mapping[str, Any]:
        return {}

    def memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        return compute()

    def node_usage(self) -> UsageTable:
        return EMPTY_USAGE
    def storage(self) -> StorageView:
        return EMPTY_STORAGE

    def claim_users(self, namespace: str, claim: str) -> list[PodRecord]:
        return []

    def dra(self) -> DraView:
        return EMPTY_DRA

    def device_use(self, node: str) -> NodeDeviceUse:
        return EMPTY_USE

    def claim_devices(self, node: str, key: str, uid: str, shares: Shares, capacity: Mapping[str, tuple[int, int]],
                      replacing: int | None = None) -> tuple[int, NodeDeviceUse] | None:
        return 0, EMPTY_USE  # nothing else is placed anywhere: every claim fits

    def release_devices(self, token: int) -> None:
        return None


EMPTY_CLUSTER: ClusterView = _EmptyCluster()
