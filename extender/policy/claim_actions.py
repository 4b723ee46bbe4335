"""The bind-time action of DynamicResources: kube-scheduler's PreBind for one ResourceClaim (bindClaim).

Plain data, carried out by each binder's handler (extender/kube/claim_binding.py against
the API server, extender/cluster/dra_actions.py on the in-memory cluster), in the
order of pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go `bindClaim`:

1. a claim being deleted fails the bind ("claim ... got deleted in the meantime");
2. with an allocation to store: a claim allocated meanwhile fails it ("got allocated
   elsewhere in the meantime"); else kube-scheduler's finalizer
   (`resource.kubernetes.io/delete-protection`) is added by a normal update, then
   `status.allocation` is written (with `allocationTimestamp`: DRADeviceBindingConditions
   and DRAResourceClaimDeviceStatus are on by default in v1.36);
3. the pod is appended to `status.reservedFor` in the same status update;
4. a conflict (409) reads the claim again and retries (retry.DefaultRetry: 5 tries);
5. when a device of the pod's claims has binding conditions, `AwaitBindingConditions` waits
   for them after every claim is written, before the pod is bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extender.dra.objects import Allocation, ConsumerRef, ResourceClaim
from extender.model.fields import Namespaced
from extender.policy.dra_view import EXTENDED_ANNOTATION

FINALIZER = "resource.kubernetes.io/delete-protection"
CONFLICT_RETRIES = 5


@dataclass(frozen=True)
class BindClaim(Namespaced):
    namespace: str
    name: str
    uid: str
    raw: Mapping[str, Any]  # the claim as Reserve saw it: the first write is made on it
    pod: ConsumerRef
    allocation: Allocation | None  # None: allocated already, only reserve it for the pod

    @classmethod
    def of(cls, claim: ResourceClaim, pod: ConsumerRef, allocation: Allocation | None) -> BindClaim:
        return cls(claim.namespace, claim.name, claim.uid, claim.raw, pod, allocation)

    def undo(self) -> UnreserveClaim:
        return UnreserveClaim(self.namespace, self.name, self.uid, self.pod.uid)


@dataclass(frozen=True)
class UnreserveClaim(Namespaced):
    """Unreserve's API write: the pod out of the claim's `status.reservedFor` (a strategic merge
    patch deleting the entry by uid, so the latest claim need not be read). The allocation
    stays: a retry of the pod finds it there; PostFilter deallocates it if no node fits."""

    namespace: str
    name: str
    uid: str
    pod_uid: str

    def patch(self) -> dict[str, Any]:
        return {"metadata": {"uid": self.uid}, "status": {"reservedFor": [{"$patch": "delete", "uid": self.pod_uid}]}}


@dataclass(frozen=True)
class DeallocateClaim(Namespaced):
    """PostFilter's API write: the claim's allocation, reservations and device status cleared, on
    the claim as the scheduler saw it (its resourceVersion: a claim changed meanwhile is left as
    it is, and the pod is retried)."""

    namespace: str
    name: str
    uid: str
    raw: Mapping[str, Any]

    def deallocated(self) -> dict[str, Any]:
        status = {k: v for k, v in (self.raw.get("status") or {}).items()
                  if k not in ("allocation", "reservedFor", "devices")}
        return {**self.raw, "status": status}


@dataclass(frozen=True)
class CreateExtendedClaim:
    """PreBind for a pod's extended resources backed by DRA: create the claim (owned by the pod,
    annotated), then allocate and reserve it as BindClaim does, then name it in
    `pod.status.extendedResourceClaimStatus` with the container-to-request mappings."""

    namespace: str
    pod: ConsumerRef
    requests: tuple[Mapping[str, Any], ...]
    allocation: Allocation
    mappings: tuple[Mapping[str, str], ...]  # containerName, resourceName, requestName

    def claim(self) -> dict[str, Any]:
        """The claim to create (createExtendedResourceClaimInAPI)."""
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"generateName": f"{self.pod.name}-extended-resources-", "namespace": self.namespace,
                             "annotations": {EXTENDED_ANNOTATION: "true"},
                             "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": self.pod.name,
                                                  "uid": self.pod.uid, "controller": True}]},
                "spec": {"devices": {"requests": [dict(r) for r in self.requests]}}}

    def bind(self, created: Mapping[str, Any]) -> BindClaim:
        meta = created.get("metadata") or {}
        return BindClaim(self.namespace, str(meta.get("name") or ""), str(meta.get("uid") or ""), created, self.pod,
                         self.allocation)

    def pod_status(self, claim_name: str) -> dict[str, Any]:
        return {"status": {"extendedResourceClaimStatus": {"requestMappings": [dict(m) for m in self.mappings],
                                                           "resourceClaimName": claim_name}}}


@dataclass(frozen=True)
class DeleteExtendedClaim:
    """Unreserve for CreateExtendedClaim: the claim made for the pod's extended resources is
    deleted (finalizer first), so that no orphan holds its devices (unreserveExtendedResourceClaim)."""

    namespace: str
    pod_uid: str


@dataclass(frozen=True)
class DeleteClaim:
    """PostFilter: a stale extended-resource claim from an earlier attempt is deleted (finalizer
    first), and the next attempt makes a new one."""

    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class AwaitBindingConditions:
    """PreBind's last step when a device of the pod's claims has binding conditions: post the
    `BindingConditionsPending` event, then wait until every binding condition is true, failing on
    a failure condition or once `timeout` seconds have passed (since the wait began, or since a
    claim's allocationTimestamp), as kube-scheduler's PreBind polls (extender/dra/binding_conditions.py).
    `extended`: the pod's extended-resource claim is among them (named in its status by then)."""

    namespace: str
    pod: ConsumerRef
    node: str
    claims: tuple[str, ...]  # names, in the pod's namespace
    extended: bool
    timeout: float

    @property
    def event_message(self) -> str:
        return f"waiting for binding conditions for device on node {self.node}"


class ClaimWriteRefused(ValueError):
    """The claim changed so that this bind cannot go on (deleted, allocated elsewhere, recreated)."""


def check_claim(action: BindClaim, current: Mapping[str, Any]) -> None:
    """Whether `current` can still take this bind; ClaimWriteRefused when it cannot."""
    meta = current.get("metadata") or {}
    if action.uid and meta.get("uid") not in (None, action.uid):
        raise ClaimWriteRefused(f"claim {action.key} was recreated in the meantime")
    if meta.get("deletionTimestamp"):
        raise ClaimWriteRefused(f"claim {action.key} got deleted in the meantime")
    allocated = bool((current.get("status") or {}).get("allocation"))
    if action.allocation is not None and allocated:
        raise ClaimWriteRefused(f"claim {action.key} got allocated elsewhere in the meantime")
    if action.allocation is None and not allocated:
        raise ClaimWriteRefused(f"claim {action.key} got deallocated elsewhere in the meantime")


def with_finalizer(action: BindClaim, current: Mapping[str, Any]) -> dict[str, Any] | None:
    """The claim with kube-scheduler's finalizer added (for a normal update), or None when no
    update is needed (nothing to allocate, or the finalizer is there from an interrupted try)."""
    meta = current.get("metadata") or {}
    finalizers = list(meta.get("finalizers") or [])
    if action.allocation is None or FINALIZER in finalizers:
        return None
    return {**current, "metadata": {**meta, "finalizers": [*finalizers, FINALIZER]}}


def with_status(action: BindClaim, current: Mapping[str, Any], now: str) -> dict[str, Any]:
    """The claim with the allocation (if any) and the pod in reservedFor, for the status update."""
    status = dict(current.get("status") or {})
    if action.allocation is not None:
        allocation = action.allocation.to_api()
        allocation.setdefault("allocationTimestamp", now)
        status["allocation"] = allocation
    elif isinstance(status.get("allocation"), Mapping) and not status["allocation"].get("allocationTimestamp"):
        status["allocation"] = {**status["allocation"], "allocationTimestamp": now}  # bindClaim sets it if missing
    reserved = list(status.get("reservedFor") or [])
    if not any(isinstance(r, Mapping) and r.get("uid") == action.pod.uid for r in reserved):
        reserved.append({"resource": action.pod.resource, "name": action.pod.name, "uid": action.pod.uid})
    status["reservedFor"] = reserved
    return {**current, "status": status}
