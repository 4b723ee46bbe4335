"""DynamicResources: a pod's `spec.resourceClaims`, allocated from ResourceSlices as kube-scheduler v1.36 does.

The facts, from pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go:

* PreEnqueue (`pre_enqueue`, asked by the standalone queue before a pod is tried) and
  PreFilter: every claim the pod names must exist (a template's claim is
  found through `pod.status.resourceClaimStatuses`, and must be owned by the pod), must not
  be being deleted, and, when allocated already, must still take the pod (reservedFor
  below its 256 limit, or the pod in it); a claim to allocate must not be in flight for
  another pod, and every class its requests name must exist. Each is
  UnschedulableAndUnresolvable for every node, with kube-scheduler's words.
* Filter: an allocated claim pins the pod to its allocation's nodeSelector ("resourceclaim
  not available on the node"); the claims to allocate go through the structured allocator
  (extender/dra/allocator.py) over the node's ResourceSlices, with every device held by
  another allocation (stored or in flight) taken ("cannot allocate all claims").
* Score: the firstAvailable subrequests chosen (earlier is better), normalized to 0..100.
* Reserve: the allocation is held in flight in the cluster state, so the next pod sees the
  devices taken; Unreserve gives it back.
* PreBind (a `BindClaim` action per claim, carried out by the binder): kube-scheduler's
  finalizer, then `status.allocation` and the pod in `status.reservedFor`, retried on
  conflict; a claim allocated elsewhere meanwhile fails the bind (and the pod is retried).
  Unreserve's API side (`UnreserveClaim`, a Reservation's `undo`): the pod out of reservedFor.
* PostFilter (no node fits): an allocated claim that kept the pod off a node ("not available
  on the node") and that no other pod holds is deallocated (`DeallocateClaim`), so that the
  next attempt may allocate it elsewhere. Preemption runs after it, as in kube-scheduler.
* Preemption's dry runs change nothing here: the plugin has no PreFilterExtensions, so a
  victim's devices stay taken, and its refusals are UnschedulableAndUnresolvable.

A CEL runtime error in a selector aborts the attempt (an error Status: the pod is retried
with backoff), as the allocator's error does in kube-scheduler.

Extended resources that a DeviceClass serves (DRAExtendedResource) go through the same steps
with one more claim, the scheduler's own, built per node and created at PreBind: see
dra_extended.py.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from extender.dra.allocator import (
    CANNOT_ALLOCATE,
    NOTHING_TO_ALLOCATE,
    AllocationError,
    NodeAllocation,
    Unallocatable,
    allocate,
    first_available_score,
)
from extender.dra.binding_conditions import DEFAULT_TIMEOUT, readiness, unusable
from extender.dra.objects import Allocation, ConsumerRef, ResourceClaim
from extender.model.nodes import NodeInfo
from extender.model.pods import PodView
from extender.policy import enqueue, names
from extender.policy.builtin import arguments, dra_extended
from extender.policy.claim_actions import (
    AwaitBindingConditions,
    BindClaim,
    CreateExtendedClaim,
    DeallocateClaim,
    DeleteClaim,
    DeleteExtendedClaim,
)
from extender.policy.cluster_view import EMPTY_CLUSTER, ClusterView
from extender.policy.dra_view import DraView, extended_key
from extender.policy.enqueue import EventHint
from extender.policy.plugins import (
    FilterPlugin,
    FilterResult,
    NodeCheck,
    NodeScore,
    PostFilterPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
)
from extender.policy.reservations import Reservation
from extender.policy.status import Code, Status

NAME = names.DYNAMIC_RESOURCES
NOT_AVAILABLE = "resourceclaim not available on the node"
IN_USE = "resourceclaim in use"


def _unresolvable(reason: str, detail: str = "") -> Status:
    return Status(Code.UNRESOLVABLE, (reason,), detail, NAME)


def _claim_refs(pod: PodView) -> list[Mapping[str, Any]]:
    spec = pod.raw.get("spec") if isinstance(pod.raw, Mapping) else None
    refs = spec.get("resourceClaims") if isinstance(spec, Mapping) else None
    return [ref for ref in refs if isinstance(ref, Mapping)] if isinstance(refs, list) else []


def _generated_names(pod: PodView) -> dict[str, str | None]:
    status = pod.raw.get("status") if isinstance(pod.raw, Mapping) else None
    entries = status.get("resourceClaimStatuses") if isinstance(status, Mapping) else None
    found: dict[str, str | None] = {}
    for entry in entries if isinstance(entries, list) else ():
        if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
            name = entry.get("resourceClaimName")
            found[entry["name"]] = name if isinstance(name, str) and name else None
    return found


def _owned_by(claim: ResourceClaim, pod: PodView) -> bool:
    return any(owner.kind == "Pod" and owner.uid == pod.uid and owner.controller for owner in claim.owner_uids)


@dataclass(frozen=True, slots=True)
class Waiting:
    """Why the pod cannot be tried yet (PreEnqueue), and what it waits for: the key of the claim
    whose arrival or change may let it in, or "" when it waits for its own status (a template's
    claim name, which kube-controller-manager writes there)."""

    reason: str
    claim: str


def pod_claims(pod: PodView, dra: DraView) -> list[ResourceClaim] | Waiting:
    """foreachPodResourceClaim: the pod's claims, or why the pod cannot be scheduled yet."""
    generated: dict[str, str | None] | None = None
    claims = []
    for ref in _claim_refs(pod):
        name = ref.get("resourceClaimName")
        must_own = False
        if not (isinstance(name, str) and name):
            if not ref.get("resourceClaimTemplateName"):
                return Waiting(f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim "{ref.get("name")}": '
                               "none of the supported fields are set", "")
            generated = _generated_names(pod) if generated is None else generated
            if ref.get("name") not in generated:
                return Waiting(f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet', "")
            name = generated[ref.get("name")]  # type: ignore[index]  # a str: it is in `generated`, checked above
            if name is None:
                continue  # no claim is needed for this entry (resourceclaim.Name)
            must_own = True
        key = f"{pod.namespace}/{name}"
        claim = dra.claim(pod.namespace, name)
        if claim is None:
            return Waiting(f'could not find ResourceClaim "{key}"', key)
        if claim.deleting:
            return Waiting(f'resourceclaim "{claim.name}" is being deleted', key)
        if must_own and not _owned_by(claim, pod):
            return Waiting(f"ResourceClaim {claim.key} was not created for Pod {pod.namespace}/{pod.name} "
                           "(Pod is not owner)", key)
        claims.append(claim)
    return claims


def pre_enqueue(pod: PodView, dra: DraView) -> Waiting | None:
    """PreEnqueue: None when the pod may be tried (no claims, DRA off: PreFilter says why, or every
    claim there), else what it waits for, so that the queue holds it without an attempt."""
    if not dra.enabled or not _claim_refs(pod):
        return None
    found = pod_claims(pod, dra)
    return found if isinstance(found, Waiting) else None


def _classes_missing(claim: ResourceClaim, dra: DraView) -> Status | None:
    for request in claim.requests:
        for alternative in request.alternatives():
            if dra.device_class(alternative.device_class) is None:
                return _unresolvable(f"request {alternative.name}: device class {alternative.device_class} "
                                     "does not exist")
    return None


@dataclass(frozen=True)
class PodClaims:
    """The claims of one pod, as PreFilter found them: allocated ones, and those to allocate; and
    its extended resources that DeviceClasses serve (dra_extended.py), with the claim an earlier
    attempt made for them, if any (`stale`)."""

    pod: PodView
    claims: tuple[ResourceClaim, ...]
    to_allocate: tuple[ResourceClaim, ...]
    served: Mapping[str, int] = field(default_factory=dict)
    stale: ResourceClaim | None = None
    # Allocated claims whose devices failed their binding conditions or timed out waiting:
    # available on no node, so that PostFilter deallocates them (binding_conditions.py).
    unusable: Mapping[str, str] = field(default_factory=dict)  # claim uid -> why
    _node_claims: dict[frozenset[tuple[str, int]], dra_extended.NodeClaim] = field(
        default_factory=dict, repr=False, compare=False)

    def extended_on(self, node: NodeInfo, dra: DraView) -> dra_extended.NodeClaim | None:
        """The claim the node must serve the pod's extended resources with (None: it has them all
        in its allocatable, or the pod asks for none); one per set of resources, not per node."""
        if not self.served:
            return None
        needed = dra_extended.on_node(self.served, node.node.allocatable)
        if not needed:
            return None
        key = frozenset(needed.items())
        made = self._node_claims.get(key)
        if made is None:
            made = self._node_claims[key] = dra_extended.node_claim(self.pod, needed, dra)
        return made


def prepare(pod: PodView, dra: DraView, binding_timeout: float = DEFAULT_TIMEOUT) -> PodClaims | Status | None:
    """PreFilter: None when the pod names no claim and asks for no extended resource a class
    serves, else its claims or the reason it waits."""
    refs = _claim_refs(pod)
    served = dra_extended.served(pod, dra) if dra.enabled else {}
    if not refs and not served:
        return None
    if not dra.enabled:
        return _unresolvable("pod uses dynamic resource claims, but the API server does not serve "
                             "resource.k8s.io/v1")
    found = pod_claims(pod, dra) if refs else []
    if isinstance(found, Waiting):
        return _unresolvable(found.reason)
    if not found and not served:
        return None
    to_allocate = []
    now: datetime | None = None
    failed: dict[str, str] = {}
    for claim in found:
        if claim.allocation is not None:
            if not claim.can_be_reserved() and not claim.reserved_for_pod(pod.uid):
                return _unresolvable(IN_USE)
            if claim.allocation.binding_conditions:
                now = now or datetime.now(UTC)
                if unusable(claim, binding_timeout, now):
                    failed[claim.uid] = (f"claim {claim.key}: " + (readiness(claim).failed or
                                         f"binding conditions not met within {binding_timeout:g}s of the allocation"))
            continue
        if dra.pending_allocation(claim.uid) is not None:
            return _unresolvable(f"resource claim {claim.key} is in the process of being allocated")
        missing = _classes_missing(claim, dra)
        if missing is not None:
            return missing
        to_allocate.append(claim)
    stale = dra.extended_claim_of(pod.uid) if served else None
    return PodClaims(pod, tuple(found), tuple(to_allocate), served, stale, failed)


def allocate_on(claims: PodClaims, node: NodeInfo, dra: DraView) -> NodeAllocation | Status:
    """Filter, on one node: the allocation of the claims still to allocate, or the refusal."""
    view = node.node
    if claims.stale is not None:
        return _unresolvable(dra_extended.STALE)
    for claim in claims.claims:
        if claim.uid in claims.unusable:
            return _unresolvable(NOT_AVAILABLE, claims.unusable[claim.uid])
        if claim.allocation is not None and not claim.allocation.available_on(view.name, view.labels):
            return _unresolvable(NOT_AVAILABLE)
    extended = claims.extended_on(node, dra)
    to_allocate = claims.to_allocate if extended is None else (*claims.to_allocate, extended.claim)
    if not to_allocate:
        return NOTHING_TO_ALLOCATE
    started = time.perf_counter()  # for the allocator's metrics only, never for a decision
    pools = dra.pools_for(view.name, view.labels)
    try:
        result = allocate(to_allocate, view.name, view.labels, pools, dra.device_class, dra.in_use(),
                          consumed=dra.consumed())
    except AllocationError as exc:
        dra.record_allocation("error", time.perf_counter() - started, 0)
        return Status(Code.ERROR, (str(exc),), "", NAME)
    if isinstance(result, Unallocatable):
        dra.record_allocation("unallocatable", time.perf_counter() - started, 0)
        return Status(Code.UNRESOLVABLE, (result.status_reason,), lambda: "; ".join(result.reasons), NAME)
    dra.record_allocation("allocated", time.perf_counter() - started, result.backtracks)
    return result


def node_score(claims: PodClaims, allocation: NodeAllocation) -> int:
    """computeScore over every claim of the pod: allocated ones with their stored allocation."""
    fresh = iter(allocation.allocations)
    used = [claim.allocation if claim.allocation is not None else next(fresh) for claim in claims.claims]
    return first_available_score(claims.claims, used)


def claim_to_deallocate(pod: PodView, failed: Mapping[str, Status], cluster: ClusterView,
                        binding_timeout: float = DEFAULT_TIMEOUT) -> DeallocateClaim | None:
    """PostFilter: the first allocated claim of the pod that is not available on a node it was
    refused for (its devices failed their binding conditions, or its node selector leaves the
    node out), and reserved for nobody else; None when there is none."""
    refused = [name for name, status in failed.items() if status.plugin == NAME and status.reasons == (NOT_AVAILABLE,)]
    dra = cluster.dra()
    if not refused or not dra.enabled or not _claim_refs(pod):
        return None
    claims = pod_claims(pod, dra)
    if isinstance(claims, Waiting):
        return None
    now = datetime.now(UTC)
    for claim in claims:
        allocation = claim.allocation
        if allocation is None or any(ref.uid != pod.uid for ref in claim.reserved_for):
            continue
        if unusable(claim, binding_timeout, now):
            return DeallocateClaim(claim.namespace, claim.name, claim.uid, claim.raw)
        for name in refused:
            info = cluster.node_info(name)
            if info is not None and not allocation.available_on(name, info.node.labels):
                return DeallocateClaim(claim.namespace, claim.name, claim.uid, claim.raw)
    return None


def _pod_ref(pod: PodView) -> ConsumerRef:
    return ConsumerRef("pods", pod.name, pod.uid)


_ARGS = arguments.schema({
    "bindingTimeout": arguments.value(lambda raw: arguments.read_duration(raw, minimum=1.0), default=DEFAULT_TIMEOUT),
})
_SCORE_ARGS = arguments.schema({})


_EVENTS = (enqueue.NODE_ADDED,
           enqueue.on(enqueue.NODES, enqueue.UPDATE_NODE_LABEL, enqueue.UPDATE_NODE_TAINT, enqueue.UPDATE_NODE_UNSCHEDULABLE,
                     enqueue.UPDATE_NODE_ALLOCATABLE),
           *enqueue.on_each(enqueue.DRA))


@dataclass(frozen=True)
class DynamicResources(PreFilterPlugin, FilterPlugin, ReservePlugin, PostFilterPlugin):
    """kube-scheduler's DynamicResources plugin: PreFilter, Filter, Reserve, PreBind and PostFilter.

    Args: `bindingTimeout` (a duration such as `600s` or `10m`, or seconds; at least 1 s; default
    600 s, as DynamicResourcesArgs): how long PreBind waits for devices' binding conditions."""

    name: ClassVar[str] = NAME
    binding_timeout: float = DEFAULT_TIMEOUT

    def events_to_register(self) -> Sequence[EventHint]:
        """A node added or changed in what the allocator reads of it, and any change of a device
        class, slice, claim or taint rule."""
        return _EVENTS

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> DynamicResources:
        return cls(arguments.load(_ARGS, args)["bindingTimeout"])

    def prefilter(self, pod: PodView, cluster: ClusterView) -> NodeCheck | Status | None:
        dra = cluster.dra()
        claims = prepare(pod, dra, self.binding_timeout)
        if claims is None or isinstance(claims, Status):
            return claims

        def check(info: NodeInfo) -> FilterResult:
            result = allocate_on(claims, info, dra)
            return result if isinstance(result, Status) else None

        return check

    def filter(self, pod: PodView, node: NodeInfo, cluster: ClusterView | None = None) -> FilterResult:
        check = self.prefilter(pod, cluster if cluster is not None else EMPTY_CLUSTER)
        return check if check is None or isinstance(check, Status) else check(node)

    def post_filter(self, pod: PodView, failed: Mapping[str, Status], cluster: ClusterView) -> Sequence[Any]:
        deallocate = claim_to_deallocate(pod, failed, cluster, self.binding_timeout)
        if deallocate is not None:
            return (deallocate,)
        stale = cluster.dra().extended_claim_of(pod.uid) if dra_extended.served(pod, cluster.dra()) else None
        return (DeleteClaim(stale.namespace, stale.name, stale.uid),) if stale is not None else ()

    def reserve(self, pod: PodView, node: NodeInfo, cluster: ClusterView) -> Reservation | Status | None:
        dra = cluster.dra()
        claims = prepare(pod, dra, self.binding_timeout)
        if claims is None or isinstance(claims, Status):
            return claims
        result = allocate_on(claims, node, dra)
        if isinstance(result, Status):
            return result
        assumed: list[str] = []

        def release() -> None:
            for uid in assumed:
                dra.release_allocation(uid)

        allocations = dict(zip((c.uid for c in claims.to_allocate), result.allocations, strict=False))
        extended = claims.extended_on(node, dra)
        try:
            for claim in claims.to_allocate:
                dra.assume_allocation(claim, allocations[claim.uid])
                assumed.append(claim.uid)
            if extended is not None:
                dra.assume_extended(pod.uid, result.allocations[-1])
                assumed.append(extended_key(pod.uid))
        except ValueError as exc:
            release()
            return _unresolvable(CANNOT_ALLOCATE, str(exc))
        pod_ref = _pod_ref(pod)
        binds = tuple(BindClaim.of(claim, pod_ref, allocations.get(claim.uid))
                      for claim in claims.claims if not claim.reserved_for_pod(pod.uid))
        actions: tuple[Any, ...] = binds
        undo: tuple[Any, ...] = tuple(action.undo() for action in binds)
        if extended is not None:
            actions += (CreateExtendedClaim(pod.namespace, pod_ref, extended.requests, result.allocations[-1],
                                            tuple(m.to_api() for m in extended.mappings)),)
            undo += (DeleteExtendedClaim(pod.namespace, pod.uid),)
        waiting = self._await(pod_ref, pod.namespace, node.name, claims, allocations,
                              result.allocations[-1] if extended is not None else None)
        if waiting is not None:
            actions += (waiting,)
        return Reservation(NAME, actions=actions, release=release if assumed else None, undo=undo)

    def _await(self, pod: ConsumerRef, namespace: str, node: str, claims: PodClaims,
               allocations: Mapping[str, Allocation], extended: Allocation | None) -> AwaitBindingConditions | None:
        """hasBindingConditions: the wait PreBind ends with when a device of the pod's claims
        (allocated now or before, the extended-resource claim included) has binding conditions."""
        names = tuple(claim.name for claim in claims.claims
                      if (allocation := claim.allocation or allocations.get(claim.uid)) is not None
                      and allocation.binding_conditions)
        waits_extended = extended is not None and extended.binding_conditions
        if not names and not waits_extended:
            return None
        return AwaitBindingConditions(namespace, pod, node, names, waits_extended, self.binding_timeout)


@dataclass(frozen=True)
class DynamicResourcesScore(PreScorePlugin, ScorePlugin):
    """DynamicResources' Score (weight 2 in kube-scheduler's default profile): for pods with
    firstAvailable requests, nodes where an earlier subrequest can be allocated score higher."""

    name: ClassVar[str] = NAME

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> DynamicResourcesScore:
        arguments.load(_SCORE_ARGS, args)
        return cls()

    def prescore(self, pod: PodView, cluster: ClusterView, nodes: Sequence[NodeInfo]) -> NodeScore | None:
        dra = cluster.dra()
        claims = prepare(pod, dra)
        if not isinstance(claims, PodClaims) or not any(r.first_available for c in claims.claims for r in c.requests):
            return None

        def score(info: NodeInfo) -> float:
            result = allocate_on(claims, info, dra)
            return 0.0 if isinstance(result, Status) else float(node_score(claims, result))

        return score

    def score(self, pod: PodView, node: NodeInfo, cluster: ClusterView | None = None) -> float:
        fn = self.prescore(pod, cluster if cluster is not None else EMPTY_CLUSTER, [node])
        return 0 if fn is None else fn(node)
