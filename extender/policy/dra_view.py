"""What the DynamicResources plugin may read (and assume) about DeviceClasses, ResourceSlices and ResourceClaims.

kube-scheduler's DynamicResources plugin reads these through its DRA manager
(pkg/scheduler/framework/plugins/dynamicresources/dra_manager.go): listers for classes
and slices, the claims' assume cache, and the in-flight allocations that Reserve made and
PreBind has not written yet. `ClusterView.dra()` gives plugins the same through this
interface, implemented by the cluster state's DRA store (`extender.cluster.dra_store`);
`EMPTY_DRA` holds nothing and serves DRA.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Protocol

from extender.dra.objects import (
    Allocation,
    DeviceClass,
    DeviceID,
    Pool,
    ResourceClaim,
    ResourceSlice,
)

EXTENDED_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"  # resourceapi.ExtendedResourceClaimAnnotation


def extended_key(pod_uid: str) -> str:
    """The in-flight key of a pod's extended-resource allocation (its claim has no uid yet)."""
    return f"extended-resources/{pod_uid}"


def extended_claim_owner(claim: ResourceClaim) -> str:
    """The uid of the pod whose extended resources the claim serves (annotated, owned by the pod),
    "" for any other claim (findExtendedResourceClaim)."""
    annotations = (claim.raw.get("metadata") or {}).get("annotations") or {}
    if annotations.get(EXTENDED_ANNOTATION) != "true":
        return ""
    return next((owner.uid for owner in claim.owner_uids if owner.kind == "Pod" and owner.controller), "")


class DraView(Protocol):
    enabled: bool  # False: the API server does not serve resource.k8s.io/v1

    def device_class(self, name: str) -> DeviceClass | None: ...

    def extended_class(self, resource: str) -> DeviceClass | None:
        """The class serving an extended resource (extendedResourceName, or the implicit
        deviceclass.resource.kubernetes.io/<class>), None when no class does."""

    def claim(self, namespace: str, name: str) -> ResourceClaim | None: ...

    def slices_for(self, node_name: str) -> Sequence[ResourceSlice]:
        """The slices that may publish devices for the node (its own, nodeSelector and allNodes ones)."""

    def all_slices(self) -> Iterable[ResourceSlice]:
        """Every slice, iterated only when needed (a pool the node sees only part of)."""

    def pools_for(self, node_name: str, labels: Mapping[str, str]) -> Sequence[Pool]:
        """The resource pools the node reaches (structured's GatherPools over its slices)."""

    def in_use(self) -> Collection[DeviceID]:
        """Devices held by allocations, stored or in flight (a live view: membership tests only)."""

    def record_allocation(self, outcome: str, seconds: float, backtracks: int) -> None:
        """One allocator run (`outcome`: allocated, unallocatable or error), for the metrics."""

    def consumed(self) -> Mapping[DeviceID, Mapping[str, Fraction]]:
        """What the shares of multi-allocatable devices take of them (stored and in flight)."""

    def sharers(self) -> Mapping[DeviceID, int]:
        """How many allocations (stored and in flight) hold a share of each such device."""

    def pending_allocation(self, uid: str) -> Allocation | None:
        """The allocation Reserve made for claim `uid` and PreBind has not written yet."""

    def assume_allocation(self, claim: ResourceClaim, allocation: Allocation) -> None:
        """Reserve: hold the allocation's devices for the claim; ValueError when it cannot."""

    def extended_claim_of(self, pod_uid: str) -> ResourceClaim | None:
        """The claim made earlier for the pod's extended resources, if any."""

    def assume_extended(self, pod_uid: str, allocation: Allocation) -> None:
        """Reserve the devices of a pod's extended resources (their claim is made at PreBind)."""

    def release_allocation(self, uid: str) -> None:
        """Unreserve: give back an allocation still in flight."""


class _EmptyDra:
    """No classes, slices or claims: every claim a pod names is missing."""

    enabled = True

    def device_class(self, name: str) -> DeviceClass | None:
        return None

    def extended_class(self, resource: str) -> DeviceClass | None:
        return None

    def claim(self, namespace: str, name: str) -> ResourceClaim | None:
        return None

    def slices_for(self, node_name: str) -> Sequence[ResourceSlice]:
        return ()

    def all_slices(self) -> Iterable[ResourceSlice]:
        return ()

    def pools_for(self, node_name: str, labels: Mapping[str, str]) -> Sequence[Pool]:
        return ()

    def in_use(self) -> Collection[DeviceID]:
        return ()

    def record_allocation(self, outcome: str, seconds: float, backtracks: int) -> None:
        return None

    def consumed(self) -> Mapping[DeviceID, Mapping[str, Fraction]]:
        return {}

    def sharers(self) -> Mapping[DeviceID, int]:
        return {}

    def pending_allocation(self, uid: str) -> Allocation | None:
        return None

    def assume_allocation(self, claim: ResourceClaim, allocation: Allocation) -> None:
        raise ValueError(f"resourceclaim {claim.key} is not known")

    def extended_claim_of(self, pod_uid: str) -> ResourceClaim | None:
        return None

    def assume_extended(self, pod_uid: str, allocation: Allocation) -> None:
        return None

    def release_allocation(self, uid: str) -> None:
        return None


EMPTY_DRA: DraView = _EmptyDra()
