"""Carrying out VolumeBinding's bind-time actions: against the API server, or in memory.

Against the API server (kube-scheduler's bindAPIUpdate and checkBindings):

* `CheckVolumes`: read the claims that were bound when the node was chosen, their
  volumes and the node: each claim must still exist, not be being deleted and be bound
  to the same volume, whose node affinity must still match the node;
* `BindVolume`: read the PV; if its claimRef already names the claim (uid included)
  there is nothing to write; if it changed since it was chosen, or another claim took
  it, fail (the pod is scheduled again); else PUT it with the claimRef and the
  bound-by-controller annotation. The PUT carries the resourceVersion just read, so a
  concurrent change is a conflict, never an overwrite.
* `SelectNode`: the same for a claim and its `volume.kubernetes.io/selected-node`, after
  checking that its storage class still exists, provisions and allows the node;
* `AwaitVolumes`: poll the API server every second (the objects themselves, not the
  watch cache, which our own writes may not have reached) until every claim is bound,
  failing as soon as the pod is gone or bound elsewhere, the node is gone, a claimRef
  was reset, a provisioner gave up (it removes the selected-node annotation), or a
  volume cannot be reached from the node; at most the action's timeout. The wait ends
  early when the binder is stopping (`prebinding.wait`).

Failures raise `VolumeBindingError`, a plain ClusterError: the bind pool then releases
the reservations, reports FailedScheduling with the message and retries the pod after
its backoff. Nothing written is rolled back, as kube-scheduler does not roll back: a
claimRef or a selected-node annotation left behind is what the PV controller, the
provisioner or the next attempt works from. A pod that is gone or recreated raises
NotFoundError / ConflictError, which the bind pool treats as final.

In memory (simulate, the snapshot webhook), nobody else will complete a binding, so the
handlers play the PV controller as well: a static binding is completed at once (the PV
Bound to the claim, the claim bound to the PV); a claim to provision only gets its
selected-node annotation, which pins every later pod using it to that node.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from extender import metrics
from extender.cluster import kube_client, prebinding
from extender.cluster.state import ClusterState
from extender.cluster.volumes import CLAIMS, VOLUMES
from extender.errors import ClusterError, ConflictError, InvalidObject, NotFoundError
from extender.model.volumes import (
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    Claim,
    ClaimRef,
    StorageClass,
    Volume,
)
from extender.policy.volume_actions import AwaitVolumes, BindVolume, CheckVolumes, SelectNode

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0  # kube-scheduler's PollUntilContextTimeout interval
_TIMEOUT = (5.0, 30.0)


class VolumeBindingError(ClusterError):
    """A volume could not be bound for the pod: schedule it again (never final)."""

    def __init__(self, message: str, status: int | None = None, reason: str = "volume-binding") -> None:
        super().__init__(message, status=status, reason=reason)


def _pv_path(name: str) -> str:
    return f"/api/v1/persistentvolumes/{quote(name, safe='')}"


def _pvc_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/persistentvolumeclaims/{quote(name, safe='')}"


def _get(api_client: Any, path: str, what: str) -> dict[str, Any] | None:
    """GET an object; None when it does not exist. Other failures raise VolumeBindingError."""
    try:
        return kube_client.request_json(api_client, "GET", path, timeout=_TIMEOUT)
    except NotFoundError:
        return None
    except ClusterError as exc:
        raise VolumeBindingError(f"reading {what} failed: {exc}", status=exc.status) from None


def _put(api_client: Any, path: str, body: dict[str, Any], what: str, kind: str) -> None:
    try:
        kube_client.request_json(api_client, "PUT", path, body=body, timeout=_TIMEOUT)
    except ConflictError:
        metrics.VOLUME_WRITES.labels(kind=kind, result="conflict").inc()
        raise VolumeBindingError(f"{what} changed while it was being updated; will retry", status=409) from None
    except ClusterError as exc:
        metrics.VOLUME_WRITES.labels(kind=kind, result="error").inc()
        raise VolumeBindingError(f"updating {what} failed: {exc}", status=exc.status) from None
    metrics.VOLUME_WRITES.labels(kind=kind, result="written").inc()


def _parse(parse: Any, raw: dict[str, Any], what: str) -> Any:
    try:
        return parse(raw)
    except InvalidObject as exc:
        raise VolumeBindingError(f"{what} cannot be read: {exc}") from None


def _names_claim(volume: Volume, ref: ClaimRef) -> bool:
    bound = volume.claim_ref
    return bound is not None and (bound.namespace, bound.name, bound.uid) == (ref.namespace, ref.name, ref.uid)


def _provisions_on(cls: StorageClass | None, action: SelectNode, labels: Mapping[str, str]) -> None:
    """The claim's class must still exist and provision volumes the node can reach."""
    name = action.storage_class
    if cls is None:
        raise VolumeBindingError(f"storageclass {name} of {action.claim.key} no longer exists")
    if not cls.provisions or not cls.topology_matches(labels):
        raise VolumeBindingError(f"storageclass {name} no longer provisions volumes for node {action.node}")


def _still_bound(claim: Claim | None, volume: Volume | None, volume_name: str, ref: ClaimRef) -> Volume:
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


# ---- against the API server --------------------------------------------------------------


def check_volumes(api_client: Any, action: CheckVolumes) -> None:
    labels = _node_labels(api_client, action.node)
    for volume_name, ref in action.bound:
        raw_claim = _get(api_client, _pvc_path(ref.namespace, ref.name), f"persistentvolumeclaim {ref.key}")
        raw_volume = _get(api_client, _pv_path(volume_name), f"persistentvolume {volume_name}")
        claim = None if raw_claim is None else _parse(Claim.from_dict, raw_claim, f"persistentvolumeclaim {ref.key}")
        volume = None if raw_volume is None else _parse(Volume.from_dict, raw_volume, f"persistentvolume {volume_name}")
        _reachable(_still_bound(claim, volume, volume_name, ref), action.node, labels)


def bind_volume(api_client: Any, action: BindVolume) -> None:
    ref = action.claim
    what = f"persistentvolume {action.volume}"
    raw = _get(api_client, _pv_path(action.volume), what)
    if raw is None:
        raise VolumeBindingError(f"{what}, chosen for claim {ref.key}, no longer exists")
    volume = _parse(Volume.from_dict, raw, what)
    if _names_claim(volume, ref):
        return  # done already (an earlier attempt, or kube-scheduler's own PreBind in webhook mode)
    if volume.resource_version != action.volume_version:
        raise VolumeBindingError(f"{what} changed since it was chosen for claim {ref.key} "
                                 f"(resourceVersion {action.volume_version} -> {volume.resource_version}); "
                                 "will retry", status=409)
    if volume.claim_ref is not None and (volume.claim_ref.namespace, volume.claim_ref.name) != (ref.namespace,
                                                                                               ref.name):
        raise VolumeBindingError(f"{what} is already bound to claim {volume.claim_ref.key}", status=409)
    body = copy.deepcopy(raw)
    body["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": ref.namespace,
                                "name": ref.name, "uid": ref.uid, "resourceVersion": ref.resource_version}
    if volume.claim_ref is None and not volume.bound_by_controller:
        body.setdefault("metadata", {}).setdefault("annotations", {})[ANN_BOUND_BY_CONTROLLER] = "yes"
    _put(api_client, _pv_path(action.volume), body, what, "persistentvolume")
    log.info("bound %s to claim %s; waiting for the PV controller", what, ref.key)


def select_node(api_client: Any, action: SelectNode) -> None:
    ref = action.claim
    what = f"persistentvolumeclaim {ref.key}"
    raw = _get(api_client, _pvc_path(ref.namespace, ref.name), what)
    if raw is None:
        raise VolumeBindingError(f"{what} no longer exists")
    claim = _parse(Claim.from_dict, raw, what)
    if ref.uid and claim.uid != ref.uid:
        raise VolumeBindingError(f"{what} was recreated since it was chosen", status=409)
    if claim.selected_node == action.node:
        return
    if claim.resource_version != ref.resource_version:
        raise VolumeBindingError(f"{what} changed since node {action.node} was chosen for it "
                                 f"(resourceVersion {ref.resource_version} -> {claim.resource_version}); "
                                 "will retry", status=409)
    if action.storage_class:
        raw_class = _get(api_client, f"/apis/storage.k8s.io/v1/storageclasses/{quote(action.storage_class, safe='')}",
                         f"storageclass {action.storage_class}")
        cls = None if raw_class is None else _parse(StorageClass.from_dict, raw_class,
                                                    f"storageclass {action.storage_class}")
        _provisions_on(cls, action, _node_labels(api_client, action.node))
    body = copy.deepcopy(raw)
    body.setdefault("metadata", {}).setdefault("annotations", {})[ANN_SELECTED_NODE] = action.node
    _put(api_client, _pvc_path(ref.namespace, ref.name), body, what, "persistentvolumeclaim")
    log.info("selected node %s for %s; waiting for the provisioner", action.node, what)


def _check_pod(api_client: Any, action: AwaitVolumes) -> None:
    key = f"{action.namespace}/{action.pod}"
    raw = _get(api_client, f"/api/v1/namespaces/{quote(action.namespace, safe='')}/pods/"
                           f"{quote(action.pod, safe='')}", f"pod {key}")
    if raw is None:
        raise NotFoundError(f"pod {key} not found", status=404, reason="NotFound")
    meta = raw.get("metadata") or {}
    if action.pod_uid and meta.get("uid") != action.pod_uid:
        raise ConflictError(f"pod {key} was recreated (UID mismatch)", status=409, reason="Conflict")
    node = (raw.get("spec") or {}).get("nodeName")
    if node:
        raise ConflictError(f"pod {key} is already assigned to node {node}", status=409, reason="Conflict")


def _node_labels(api_client: Any, node: str) -> dict[str, str]:
    raw = _get(api_client, f"/api/v1/nodes/{quote(node, safe='')}", f"node {node}")
    if raw is None:
        raise VolumeBindingError(f"node {node} no longer exists")
    labels = (raw.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, dict) else {}


def _reachable(volume: Volume, node: str, labels: dict[str, str]) -> None:
    if not volume.affinity_matches(labels):
        affinity = volume.node_affinity.describe() if volume.node_affinity else ""
        raise VolumeBindingError(f"pv {volume.name!r} node affinity doesn't match node {node!r} ({affinity})")


def bindings_done(api_client: Any, action: AwaitVolumes) -> bool:
    """checkBindings: True when every claim is fully bound; raises when the binding cannot happen."""
    _check_pod(api_client, action)
    labels = _node_labels(api_client, action.node)
    for volume_name, ref in action.bindings:
        raw_volume = _get(api_client, _pv_path(volume_name), f"persistentvolume {volume_name}")
        if raw_volume is None:
            raise VolumeBindingError(f"failed to check binding: persistentvolume {volume_name!r} not found")
        raw_claim = _get(api_client, _pvc_path(ref.namespace, ref.name), f"persistentvolumeclaim {ref.key}")
        if raw_claim is None:
            raise VolumeBindingError(f"failed to check binding: persistentvolumeclaim {ref.key!r} not found")
        volume = _parse(Volume.from_dict, raw_volume, f"persistentvolume {volume_name}")
        _reachable(volume, action.node, labels)
        if volume.claim_ref is None or not volume.claim_ref.uid:
            raise VolumeBindingError(f"ClaimRef got reset for pv {volume_name!r}")
        if not _parse(Claim.from_dict, raw_claim, f"persistentvolumeclaim {ref.key}").fully_bound:
            return False
    for ref in action.provisions:
        raw_claim = _get(api_client, _pvc_path(ref.namespace, ref.name), f"persistentvolumeclaim {ref.key}")
        if raw_claim is None:
            raise VolumeBindingError(f"failed to check provisioning pvc: persistentvolumeclaim {ref.key!r} not found")
        claim = _parse(Claim.from_dict, raw_claim, f"persistentvolumeclaim {ref.key}")
        if claim.selected_node != action.node:
            now = "was removed" if claim.selected_node is None else f"now names node {claim.selected_node!r}"
            raise VolumeBindingError(f"provisioning failed for PVC {ref.name!r} (its {ANN_SELECTED_NODE} "
                                     f"annotation {now})")
        if claim.volume_name:
            raw_volume = _get(api_client, _pv_path(claim.volume_name), f"persistentvolume {claim.volume_name}")
            if raw_volume is None:
                return False  # created a moment ago, or deleted: the claim will say
            _reachable(_parse(Volume.from_dict, raw_volume, f"persistentvolume {claim.volume_name}"),
                       action.node, labels)
        if not claim.fully_bound:
            return False
    return True


def await_volumes(api_client: Any, action: AwaitVolumes) -> None:
    started = time.monotonic()
    deadline = started + action.timeout
    claims = ", ".join(action.claims)
    outcome = "failed"
    try:
        while not bindings_done(api_client, action):
            left = deadline - time.monotonic()
            if left <= 0:
                outcome = "timeout"
                raise VolumeBindingError(f"binding volumes: timed out after {action.timeout:g}s waiting for "
                                         f"claim(s) {claims} to be bound")
            if prebinding.wait(min(POLL_SECONDS, left)):
                outcome = "stopped"
                raise VolumeBindingError(f"stopped waiting for claim(s) {claims} to be bound: "
                                         "the scheduler is shutting down")
        outcome = "bound"
    finally:
        metrics.VOLUME_WAITS.labels(outcome=outcome).inc()
        metrics.VOLUME_WAIT_SECONDS.labels(outcome=outcome).observe(time.monotonic() - started)


# ---- in memory ------------------------------------------------------------------------------


def check_volumes_in_memory(state: ClusterState, action: CheckVolumes) -> None:
    info = state.node_info(action.node)
    if info is None:
        raise VolumeBindingError(f"node {action.node} no longer exists")
    store = state.volumes
    for volume_name, ref in action.bound:
        claim = store.stored_claim(ref.namespace, ref.name)
        volume = _still_bound(claim, store.stored_volume(volume_name), volume_name, ref)
        _reachable(volume, action.node, info.node.labels)


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
        _provisions_on(state.volumes.storage_class(action.storage_class), action,
                       info.node.labels if info is not None else {})
    state.volumes.write(CLAIMS, replace(claim, selected_node=action.node))


def await_volumes_in_memory(state: ClusterState, action: AwaitVolumes) -> None:
    """Nothing provisions in memory: check the claims are still there, and go on."""
    for _, ref in action.bindings:
        _stored_claim(state, ref)
    for ref in action.provisions:
        _stored_claim(state, ref)


prebinding.register(CheckVolumes, kube=check_volumes, memory=check_volumes_in_memory)
prebinding.register(BindVolume, kube=bind_volume, memory=bind_volume_in_memory)
prebinding.register(SelectNode, kube=select_node, memory=select_node_in_memory)
prebinding.register(AwaitVolumes, kube=await_volumes, memory=await_volumes_in_memory)
