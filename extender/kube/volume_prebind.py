"""Carrying out VolumeBinding's bind-time actions against the API server.

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
  early when the binder is stopping (`prebinding.wait`). The checks shared with the in-memory handlers are in
`extender.cluster.volume_handlers`.

Failures raise `VolumeBindingError`, a plain ClusterError: the bind pool then releases
the reservations, reports FailedScheduling with the message and retries the pod after
its backoff. Nothing written is rolled back, as kube-scheduler does not roll back: a
claimRef or a selected-node annotation left behind is what the PV controller, the
provisioner or the next attempt works from. A pod that is gone or recreated raises
NotFoundError / ConflictError, which the bind pool treats as final.
"""

from __future__ import annotations

import copy
import logging
import time
from functools import partial
from typing import Any
from urllib.parse import quote

from extender import metrics
from extender.cluster import prebinding
from extender.cluster.volume_handlers import (
    VolumeBindingError,
    names_claim,
    provisions_on,
    reachable,
    still_bound,
)
from extender.errors import ClusterError, ConflictError, InvalidObject, NotFoundError
from extender.kube import client as kube_client
from extender.model.volumes import (
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    Claim,
    StorageClass,
    Volume,
)
from extender.policy.volume_actions import AwaitVolumes, BindVolume, CheckVolumes, SelectNode

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0  # kube-scheduler's PollUntilContextTimeout interval
_TIMEOUT = (5.0, 30.0)


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


def check_volumes(api_client: Any, action: CheckVolumes) -> None:
    labels = _node_labels(api_client, action.node)
    for volume_name, ref in action.bound:
        raw_claim = _get(api_client, _pvc_path(ref.namespace, ref.name), f"persistentvolumeclaim {ref.key}")
        raw_volume = _get(api_client, _pv_path(volume_name), f"persistentvolume {volume_name}")
        claim = None if raw_claim is None else _parse(Claim.from_dict, raw_claim, f"persistentvolumeclaim {ref.key}")
        volume = None if raw_volume is None else _parse(Volume.from_dict, raw_volume, f"persistentvolume {volume_name}")
        reachable(still_bound(claim, volume, volume_name, ref), action.node, labels)


def bind_volume(api_client: Any, action: BindVolume) -> None:
    ref = action.claim
    what = f"persistentvolume {action.volume}"
    raw = _get(api_client, _pv_path(action.volume), what)
    if raw is None:
        raise VolumeBindingError(f"{what}, chosen for claim {ref.key}, no longer exists")
    volume = _parse(Volume.from_dict, raw, what)
    if names_claim(volume, ref):
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
        provisions_on(cls, action, _node_labels(api_client, action.node))
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
        reachable(volume, action.node, labels)
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
            reachable(_parse(Volume.from_dict, raw_volume, f"persistentvolume {claim.volume_name}"),
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


def api_server_handlers(api_client: Any) -> dict[type, prebinding.Handler]:
    """The volume actions carried out against the API server through `api_client`."""
    return {CheckVolumes: partial(check_volumes, api_client), BindVolume: partial(bind_volume, api_client),
            SelectNode: partial(select_node, api_client), AwaitVolumes: partial(await_volumes, api_client)}
