"""VolumeBinding: the pod's claims must be bound, or bindable, to volumes its node can reach.

kube-scheduler v1.36's VolumeBinding plugin (pkg/scheduler/framework/plugins/volumebinding),
step by step:

* PreFilter, once per pod: every claim must exist, not be Lost nor being deleted, and a
  generic ephemeral volume's claim (`<pod>-<volume>`) must be owned by the pod. A claim
  is *bound* when it has a volume name and the bind-completed annotation; an unbound
  claim whose class binds on first consumer (`WaitForFirstConsumer`) is left to this
  plugin; any other unbound claim (class Immediate, no class, unknown class, or
  pre-bound by name) must be bound by the PV controller first: "pod has unbound
  immediate PersistentVolumeClaims", for every node.
* Filter, per node: a bound claim's volume must exist and its `nodeAffinity` match the
  node; a claim already annotated with a selected node only fits that node; the other
  unbound claims get the smallest available volume of their class that satisfies size,
  access modes, volume mode, attributes class, selector and node affinity; those left
  over must be provisionable there (a provisioner, the class's `allowedTopologies`,
  and, for CSI drivers that publish it, enough CSIStorageCapacity). Every refusal is
  UnschedulableAndUnresolvable, with kube-scheduler's reasons.
* Reserve: the chosen volumes are taken (their `claimRef` set) and the claims to
  provision carry the node, in the cluster state's assume cache, so the next pod does
  not pick the same volume; the reservation's actions make the API writes and wait
  for the binding before the pod is bound (see `extender.policy.volume_actions`). Claims
  already bound are checked again at bind time (kube-scheduler does not): a claim deleted
  or a volume changed meanwhile sends the pod back to the queue instead of to a node
  where its volume cannot be mounted.

The opt-in scorer of the same name is in volume_scoring.py.

Not done: translating in-tree PVs to CSI (CSI migration) before matching their node
affinity; their zone labels are still checked by VolumeZone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from extender.model.nodes import NodeInfo, NodeView
from extender.model.pods import PodView
from extender.model.quantities import format_units
from extender.model.volumes import Claim, StorageCapacity, StorageClass, Volume
from extender.policy import enqueue, names
from extender.policy.builtin import arguments
from extender.policy.builtin.base import STORAGE_EVENTS
from extender.policy.builtin.volume_matching import VolumeCandidates
from extender.policy.cluster_view import EMPTY_CLUSTER, ClusterView
from extender.policy.engine import PluginError
from extender.policy.enqueue import EventHint
from extender.policy.plugins import (
    FilterPlugin,
    FilterResult,
    NodeCheck,
    PreFilterPlugin,
    ReservePlugin,
)
from extender.policy.reservations import Reservation
from extender.policy.status import Code, Status
from extender.policy.storage import StorageView
from extender.policy.volume_actions import AwaitVolumes, BindVolume, CheckVolumes, SelectNode

NAME = names.VOLUME_BINDING
REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
REASON_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
DEFAULT_BIND_TIMEOUT = 600
MAX_BIND_TIMEOUT = 24 * 3600


def claim_not_found(name: str) -> str:
    """The lister's NotFound error, which kube-scheduler's plugins pass on as the reason."""
    return f'persistentvolumeclaim "{name}" not found'



# ---- PreFilter: the pod's claims, sorted out once -------------------------------------------


@dataclass(frozen=True, slots=True)
class PodClaims:
    """GetPodVolumeClaims, plus everything the per-node step reads, looked up once."""

    bound: tuple[Claim, ...]
    delayed: tuple[Claim, ...]  # unbound, WaitForFirstConsumer
    bound_volumes: Mapping[str, Volume | None]  # volume name -> volume (None: missing)
    classes: Mapping[str, StorageClass]  # of the delayed claims
    candidates: Mapping[str, VolumeCandidates]  # claim key -> the volumes it could get (no selected node yet)
    capacities: Mapping[str, Sequence[StorageCapacity] | None]  # class -> capacities; None: unchecked

    @property
    def unconstrained(self) -> bool:
        """Every claim is bound to an existing volume without node affinity: every node fits."""
        return not self.delayed and all(v is not None and v.node_affinity is None
                                        for v in self.bound_volumes.values())


def pod_claims(pod: PodView, storage: StorageView) -> PodClaims | Status:
    """podHasPVCs and GetPodVolumeClaims; a Status refuses every node."""
    claims = []
    for ref in pod.volumes.claims:
        claim = storage.claim(pod.namespace, ref.name)
        if claim is None:
            if ref.ephemeral:
                return _unresolvable("waiting for ephemeral volume controller to create the "
                                     f'persistentvolumeclaim "{ref.name}"')
            return _unresolvable(claim_not_found(ref.name))
        if claim.phase == "Lost":
            return _unresolvable(f'persistentvolumeclaim "{claim.name}" bound to non-existent '
                                 f'persistentvolume "{claim.volume_name}"')
        if claim.deleting:
            return _unresolvable(f'persistentvolumeclaim "{claim.name}" is being deleted')
        if ref.ephemeral and claim.controller_uid != pod.uid:
            return _unresolvable(f"PVC {claim.namespace}/{claim.name} was not created for pod "
                                 f"{pod.namespace}/{pod.name} (pod is not owner)")
        claims.append(claim)
    bound: list[Claim] = []
    delayed: list[Claim] = []
    immediate: list[Claim] = []
    classes: dict[str, StorageClass] = {}
    for claim in claims:
        if claim.fully_bound:
            bound.append(claim)
            continue
        cls = storage.storage_class(claim.class_name) if claim.class_name else None
        if cls is not None and cls.delays_binding and not claim.volume_name:
            delayed.append(claim)
            classes[cls.name] = cls
        else:
            immediate.append(claim)
    if immediate:
        detail = "unbound claims the PV controller must bind first: " + ", ".join(
            _immediate_detail(c, storage) for c in immediate)
        return Status(Code.UNRESOLVABLE, (REASON_UNBOUND_IMMEDIATE,), detail, NAME)
    return PodClaims(
        bound=tuple(bound),
        delayed=tuple(delayed),
        bound_volumes={c.volume_name: storage.volume(c.volume_name) for c in bound},
        classes=classes,
        candidates=_candidates(delayed, storage),
        capacities={name: _capacities(cls, storage) for name, cls in classes.items()},
    )


def _candidates(delayed: Sequence[Claim], storage: StorageView) -> dict[str, VolumeCandidates]:
    """The volumes each unbound claim could get, filed by node (see volume_matching)."""
    found: dict[str, VolumeCandidates] = {}
    by_class: dict[str, Sequence[Volume]] = {}
    for claim in delayed:
        if claim.selected_node is None:
            volumes = by_class.get(claim.class_name)
            if volumes is None:
                volumes = by_class[claim.class_name] = storage.volumes_of_class(claim.class_name)
            found[claim.key] = VolumeCandidates.of(claim, volumes)
    return found


def _immediate_detail(claim: Claim, storage: StorageView) -> str:
    if claim.volume_name:
        return f"{claim.key} (names volume {claim.volume_name}, not bound yet)"
    if not claim.class_name:
        return f"{claim.key} (no storage class)"
    if storage.storage_class(claim.class_name) is None:
        return f"{claim.key} (storage class {claim.class_name} does not exist)"
    return f"{claim.key} (class {claim.class_name} binds immediately)"


def _capacities(cls: StorageClass, storage: StorageView) -> Sequence[StorageCapacity] | None:
    """The CSIStorageCapacity objects to check, None when the provisioner does not publish them."""
    driver = storage.csi_driver(cls.provisioner)
    if driver is None or not driver.storage_capacity:
        return None
    return storage.capacities_of_class(cls.name)


def _unresolvable(reason: str) -> Status:
    return Status(Code.UNRESOLVABLE, (reason,), "", NAME)


# ---- Filter: FindPodVolumes for one node ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeVolumes:
    """What one node would give the pod: volumes to bind and claims to provision, or why not.

    `facts` are what explain shows, kept raw and formatted only when read."""

    reasons: tuple[str, ...] = ()
    facts: tuple[tuple[Any, ...], ...] = ()
    static: tuple[tuple[Claim, Volume], ...] = ()
    provisions: tuple[tuple[Claim, StorageCapacity | None], ...] = ()

    def detail(self) -> str:
        return "; ".join(_describe(fact) for fact in self.facts)


def _wants(claim: Claim) -> str:
    size = format_units("memory", claim.size) if claim.request is not None else "no size"
    modes = ", ".join(sorted(claim.access_modes)) or "no access mode"
    return f"{size}, {modes}"


def _describe(fact: tuple[Any, ...]) -> str:
    what = fact[0]
    if what == "missing":
        _, claim = fact
        return f"claim {claim.key} is bound to PV {claim.volume_name}, which does not exist"
    if what == "affinity":
        _, claim, volume = fact
        affinity = volume.node_affinity.describe() if volume.node_affinity else ""
        return f"claim {claim.key} is bound to PV {volume.name}, whose node affinity ({affinity}) does not match"
    if what == "selected":
        _, claim = fact
        return f"claim {claim.key} is being provisioned for node {claim.selected_node} (selected-node annotation)"
    if what == "no-provisioner":
        _, claim, cls, matched = fact
        head = f"no available PV of class {cls.name} fits claim {claim.key} ({_wants(claim)}) here" if matched \
            else f"claim {claim.key} waits for provisioning"
        return f"{head}, and class {cls.name} does not provision volumes (provisioner {cls.provisioner or 'none'!r})"
    if what == "topology":
        _, claim, cls, matched = fact
        head = f"no available PV of class {cls.name} fits claim {claim.key} ({_wants(claim)}) here" if matched \
            else f"claim {claim.key} waits for provisioning"
        return f"{head}, and this node is outside class {cls.name}'s allowedTopologies"
    if what == "capacity":
        _, claim, cls = fact
        return (f"no CSIStorageCapacity of class {cls.name} reachable from this node can hold claim "
                f"{claim.key} ({_wants(claim)})")
    return str(fact)


def find_pod_volumes(claims: PodClaims, node: NodeView) -> NodeVolumes:
    """FindPodVolumes: every reason the node cannot serve the pod's claims, or what it would use."""
    bound_ok = found = unbound_ok = enough = True
    facts: list[tuple[Any, ...]] = []
    labels = node.labels
    for claim in claims.bound:
        volume = claims.bound_volumes.get(claim.volume_name)
        if volume is None:
            found = False
            facts.append(("missing", claim))
            break
        if not volume.affinity_matches(labels):
            bound_ok = False
            facts.append(("affinity", claim, volume))
            break
    static: list[tuple[Claim, Volume]] = []
    provisions: list[tuple[Claim, StorageCapacity | None]] = []
    if claims.delayed:
        unbound_ok, enough = _unbound(claims, node, facts, static, provisions)
    reasons = []
    if not bound_ok:
        reasons.append(REASON_NODE_CONFLICT)
    if not unbound_ok:
        reasons.append(REASON_BIND_CONFLICT)
    if not enough:
        reasons.append(REASON_NOT_ENOUGH_SPACE)
    if not found:
        reasons.append(REASON_PV_NOT_EXIST)
    if reasons:
        return NodeVolumes(tuple(reasons), tuple(facts))
    return NodeVolumes(static=tuple(static), provisions=tuple(provisions))


def _unbound(claims: PodClaims, node: NodeView, facts: list[tuple[Any, ...]],
             static: list[tuple[Claim, Volume]], provisions: list[tuple[Claim, StorageCapacity | None]],
             ) -> tuple[bool, bool]:
    """(unbound claims satisfied, enough storage) for the WaitForFirstConsumer claims."""
    to_match: list[Claim] = []
    to_provision: list[Claim] = []
    for claim in claims.delayed:
        if claim.selected_node is None:
            to_match.append(claim)
        elif claim.selected_node == node.name:
            to_provision.append(claim)
        else:  # already being provisioned for another node
            facts.append(("selected", claim))
            return False, True
    unmatched: set[str] = set()
    if to_match:
        chosen: set[str] = set()
        for claim in sorted(to_match, key=lambda c: c.size):  # smallest first, stable
            volume = claims.candidates[claim.key].match(node.labels, chosen)
            if volume is None:
                to_provision.append(claim)
                unmatched.add(claim.key)
                continue
            chosen.add(volume.name)
            static.append((claim, volume))
    if not to_provision:
        return True, True
    return _provisionable(claims, to_provision, node, unmatched, facts, provisions)


def _provisionable(claims: PodClaims, to_provision: list[Claim], node: NodeView, unmatched: set[str],
                   facts: list[tuple[Any, ...]], provisions: list[tuple[Claim, StorageCapacity | None]],
                   ) -> tuple[bool, bool]:
    """checkVolumeProvisions: each claim's class provisions, on this node, with enough capacity."""
    for claim in to_provision:
        if not claim.class_name:
            raise PluginError(f'{NAME}: no class for claim "{claim.key}"')
        cls = claims.classes.get(claim.class_name)
        if cls is None:
            raise PluginError(f'{NAME}: failed to find storage class "{claim.class_name}"')
        if not cls.provisions:
            facts.append(("no-provisioner", claim, cls, claim.key in unmatched))
            return False, True
        if not cls.topology_matches(node.labels):
            facts.append(("topology", claim, cls, claim.key in unmatched))
            return False, True
        enough, capacity = _capacity_for(claims, claim, cls, node.labels)
        if not enough:
            facts.append(("capacity", claim, cls))
            return True, False
        provisions.append((claim, capacity))
    return True, True


def _capacity_for(claims: PodClaims, claim: Claim, cls: StorageClass, labels: Mapping[str, str],
                  ) -> tuple[bool, StorageCapacity | None]:
    """hasEnoughCapacity: a capacity object of the class, reachable from the node, big enough."""
    if claim.request is None:
        return True, None
    capacities = claims.capacities.get(cls.name)
    if capacities is None:
        return True, None
    for capacity in capacities:
        limit = capacity.limit
        if limit is not None and limit >= claim.request and capacity.topology is not None \
                and capacity.topology.matches(labels):
            return True, capacity
    return False, None


# ---- Reserve --------------------------------------------------------------------------------


def bind_volume_to_claim(volume: Volume, claim: Claim) -> tuple[Volume, bool]:
    """GetBindVolumeToClaim: the volume with its claimRef on the claim, and whether that changed it."""
    bound = volume
    dirty = False
    ref = volume.claim_ref
    if ref is None or ref.name != claim.name or ref.namespace != claim.namespace or ref.uid != claim.uid:
        bound = replace(bound, claim_ref=claim.ref())
        dirty = True
    if not volume.bound_to(claim) and not volume.bound_by_controller:
        bound = replace(bound, bound_by_controller=True)
        dirty = True
    return bound, dirty


def _reserve(pod: PodView, node: NodeView, storage: StorageView, timeout: float) -> Reservation | Status | None:
    """AssumePodVolumes, and the bind-time actions that make it real."""
    claims = pod_claims(pod, storage)
    if isinstance(claims, Status):
        return claims
    found = find_pod_volumes(claims, node)
    if found.reasons:
        return Status(Code.UNRESOLVABLE, found.reasons, found.detail, NAME)
    check = CheckVolumes(node.name, tuple((c.volume_name, c.ref()) for c in claims.bound))
    if not claims.delayed:  # every claim is bound: only make sure they still are at bind time
        return Reservation(NAME, actions=(check,))
    volumes: list[Volume] = []
    provisioned: list[Claim] = []

    def release() -> None:
        for volume in volumes:
            storage.restore_volume(volume)
        for claim in provisioned:
            storage.restore_claim(claim)

    try:
        for claim, volume in found.static:
            bound, dirty = bind_volume_to_claim(volume, claim)
            if dirty:
                storage.assume_volume(bound)
                volumes.append(bound)
        for claim, _ in found.provisions:
            selected = replace(claim, selected_node=node.name)
            storage.assume_claim(selected)
            provisioned.append(selected)
    except ValueError as exc:
        release()
        raise PluginError(f"{NAME}: cannot assume volumes of pod {pod.key} on node {node.name}: {exc}") from None
    actions: list[Any] = [check] if check.bound else []
    actions += [BindVolume(volume.name, volume.resource_version, claim.ref()) for claim, volume in found.static]
    actions += [SelectNode(claim.ref(), node.name, claim.class_name) for claim, _ in found.provisions]
    actions.append(AwaitVolumes(
        namespace=pod.namespace, pod=pod.name, pod_uid=pod.uid, node=node.name,
        bindings=tuple((volume.name, claim.ref()) for claim, volume in found.static),
        provisions=tuple(claim.ref() for claim, _ in found.provisions),
        timeout=timeout,
    ))
    return Reservation(NAME, actions=tuple(actions), release=release)


# ---- the plugin -----------------------------------------------------------------------------


_ARGS = arguments.schema({
    "bindTimeoutSeconds": arguments.integer(minimum=1, maximum=MAX_BIND_TIMEOUT, default=DEFAULT_BIND_TIMEOUT),
})


@dataclass(frozen=True)
class VolumeBinding(PreFilterPlugin, FilterPlugin, ReservePlugin):
    """Args: `bindTimeoutSeconds` (default 600, as kube-scheduler's VolumeBindingArgs): how long
    the bind step waits for the claims to be bound before giving up and retrying the pod."""

    name: ClassVar[str] = NAME
    bind_timeout_seconds: int = DEFAULT_BIND_TIMEOUT

    def events_to_register(self) -> Sequence[EventHint]:
        """A node added or relabelled (volume affinities), any storage object changed (a claim:
        for its users)."""
        return (enqueue.NODE_ADDED, enqueue.on(enqueue.NODES, enqueue.UPDATE_NODE_LABEL), *STORAGE_EVENTS)

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> VolumeBinding:
        return cls(arguments.load(_ARGS, args)["bindTimeoutSeconds"])

    def prefilter(self, pod: PodView, cluster: ClusterView) -> NodeCheck | Status | None:
        if not pod.volumes.claims:
            return None
        claims = pod_claims(pod, cluster.storage())
        if isinstance(claims, Status) or claims.unconstrained:
            return claims if isinstance(claims, Status) else None

        def check(info: NodeInfo) -> Status | None:
            found = find_pod_volumes(claims, info.node)
            if not found.reasons:
                return None
            return Status(Code.UNRESOLVABLE, found.reasons, found.detail, NAME)

        return check

    def filter(self, pod: PodView, node: NodeInfo, cluster: ClusterView | None = None) -> FilterResult:
        check = self.prefilter(pod, cluster if cluster is not None else EMPTY_CLUSTER)
        return check if check is None or isinstance(check, Status) else check(node)

    def reserve(self, pod: PodView, node: NodeInfo, cluster: ClusterView) -> Reservation | Status | None:
        if not pod.volumes.claims:
            return None
        return _reserve(pod, node.node, cluster.storage(), float(self.bind_timeout_seconds))
