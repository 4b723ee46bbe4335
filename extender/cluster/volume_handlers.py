"""VolumeBinding's bind-time actions in memory, and the checks shared with the API-server handlers.

In memory (simulate, the snapshot webhook), nobody else will complete a binding, so the
handlers play the PV controller as well: a static binding is completed at once (the PV
Bound to the claim, the claim bound to the PV); a claim to provision only gets its
selected-node annotation, which pins every later pod using it to that node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import partial

from extender.cluster import prebinding
from extender.cluster.state import ClusterState
from extender.cluster.volume_store import CLAIMS, VOLUMES
from extender.errors import ClusterError
from extender.model.volumes import Claim, ClaimRef, StorageClass, Volume
from extender.policy.volume_actions import AwaitVolumes, BindVolume, CheckVolumes, SelectNode


class VolumeBindingError(ClusterError):
    """A volume could not be bound for the pod: schedule it again (never final)."""

    def __init__(self, message: str, status: int | None = None, reason: str = "volume-binding") -> None:
        super().__init__(message, status=status, reason=reason)


def names_claim(volume: Volume, ref: ClaimRef) -> bool:
    bound = volume.claim_ref
    return bound is not None and (bound.namespace, bound.name, bound.uid) == (ref.namespace, ref.name, ref.uid)


def provisions_on(cls: StorageClass | None, action: SelectNode, labels: Mapping[str, str]) -> None:
    """The claim's class must still exist and provision volumes the node can reach."""
    name = action.storage_class
    if cls is None:
        raise VolumeBindingError(f"storageclass {name} of {action.claim.key} no longer exists")
    if not cls.provisions or not cls.topology_matches(labels):
        raise VolumeBindingError(f"storageclass {name} no longer provisions volumes for node {action.node}")


def still_bound(claim: Claim | None, volume: Volume | None, volume_name: str, ref: ClaimRef) -> Volume:
    """The volume of a claim that was bound when its pod's node was chosen, if it still is."""
    what = f"persistentvolumeclaim {ref.key}"
    if claim is None:
        raise VolumeBindingError(f"{what} no longer exists")
    if ref.uid and claim.uid != ref.uid:
        raise VolumeBindingError(f"{what} was recreated since the node was chosen")
    if claim.deleting:
        raise VolumeBindingError(f"{what} is being deleted")
    if claim.volume_name != volume_name or not claim.fully_bound:
        raise VolumeBindingError(f"{what} is no longer bound to persistentvolume {volume_name}")
    if volume is None:
        raise VolumeBindingError(f"persistentvolume {volume_name}, bound to {ref.key}, no longer exists")
    return volume


def reachable(volume: Volume, node: str, labels: dict[str, str]) -> None:
    if not volume.affinity_matches(labels):
        affinity = volume.node_affinity.describe() if volume.node_affinity else ""
        raise VolumeBindingError(f"pv {volume.name!r} node affinity doesn't match node {node!r} ({affinity})")


def check_volumes_in_memory(state: ClusterState, action: CheckVolumes) -> None:
    info = state.node_info(action.node)
    if info is None:
        raise VolumeBindingError(f"node {action.node} no longer exists")
    store = state.volumes
    for volume_name, ref in action.bound:
        claim = store.stored_claim(ref.namespace, ref.name)
        volume = still_bound(claim, store.stored_volume(volume_name), volume_name, ref)
        reachable(volume, action.node, info.node.labels)


def _stored_claim(state: ClusterState, ref: ClaimRef) -> Claim:
    claim = state.volumes.stored_claim(ref.namespace, ref.name)
    if claim is None:
        raise ClusterError(f"persistentvolumeclaim {ref.key} no longer exists")
    if ref.uid and claim.uid != ref.uid:
        raise ClusterError(f"persistentvolumeclaim {ref.key} was recreated since it was chosen")
    return claim


def bind_volume_in_memory(state: ClusterState, action: BindVolume) -> None:
    store = state.volumes
    volume = store.stored_volume(action.volume)
    if volume is None:
        raise ClusterError(f"persistentvolume {action.volume} no longer exists")
    claim = _stored_claim(state, action.claim)
    if volume.claim_ref is not None and not volume.bound_to(claim):
        raise ClusterError(f"persistentvolume {action.volume} is already bound to claim {volume.claim_ref.key}")
    if volume.resource_version != action.volume_version and not volume.bound_to(claim):
        raise ClusterError(f"persistentvolume {action.volume} changed since it was chosen")
    store.write(VOLUMES, replace(volume, claim_ref=claim.ref(), phase="Bound",
                                 bound_by_controller=volume.bound_by_controller or volume.claim_ref is None))
    store.write(CLAIMS, replace(claim, volume_name=volume.name, bind_completed=True, phase="Bound"))


def select_node_in_memory(state: ClusterState, action: SelectNode) -> None:
    claim = _stored_claim(state, action.claim)
    if claim.fully_bound or claim.selected_node == action.node:
        return
    if action.storage_class:
        info = state.node_info(action.node)
        provisions_on(state.volumes.storage_class(action.storage_class), action,
                       info.node.labels if info is not None else {})
    state.volumes.write(CLAIMS, replace(claim, selected_node=action.node))


def await_volumes_in_memory(state: ClusterState, action: AwaitVolumes) -> None:
    """Nothing provisions in memory: check the claims are still there, and go on."""
    for _, ref in action.bindings:
        _stored_claim(state, ref)
    for ref in action.provisions:
        _stored_claim(state, ref)


def in_memory_handlers(state: ClusterState) -> dict[type, prebinding.Handler]:
    """The volume actions applied to `state` itself (simulate, the snapshot webhook)."""
    return {CheckVolumes: partial(check_volumes_in_memory, state), BindVolume: partial(bind_volume_in_memory, state),
            SelectNode: partial(select_node_in_memory, state), AwaitVolumes: partial(await_volumes_in_memory, state)}
