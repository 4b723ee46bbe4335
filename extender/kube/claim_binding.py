"""DynamicResources' PreBind against the API server: write a claim's allocation and reservation (bindClaim).

The steps and their order are extender/policy/claim_actions.py's; this module only sends
them. The first try writes on the claim as Reserve saw it; a 409 reads the claim again and
tries again, up to CONFLICT_RETRIES times, as kube-scheduler's retry.RetryOnConflict does.
A claim that cannot take the bind any more (deleted, allocated elsewhere, recreated, gone)
fails the bind with a ClusterError: the binder then gives the reservations back, does not
bind, and the pod is retried after its backoff.

Two replicas cannot both allocate one claim: each status update carries the
resourceVersion it read, and the API server accepts only the first; the other reads the
claim again, finds it allocated, and fails its bind.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from functools import partial
from typing import Any
from urllib.parse import quote

from extender import metrics
from extender.cluster import prebinding
from extender.dra.binding_conditions import TIMEOUT as BINDING_TIMEOUT
from extender.dra.binding_conditions import Readiness, pod_readiness
from extender.dra.objects import ResourceClaim
from extender.errors import ClusterError, ConflictError, InvalidObject, NotFoundError
from extender.kube import client as kube_client
from extender.kube.events import post_event
from extender.policy.claim_actions import (
    CONFLICT_RETRIES,
    AwaitBindingConditions,
    BindClaim,
    ClaimWriteRefused,
    CreateExtendedClaim,
    DeallocateClaim,
    DeleteClaim,
    DeleteExtendedClaim,
    UnreserveClaim,
    check_claim,
    with_finalizer,
    with_status,
)
from extender.policy.dra_view import extended_claim_owner

log = logging.getLogger(__name__)

REASON = "resource-claim"  # BIND_ERRORS' label for a refused claim write
TIMEOUT = (5.0, 15.0)
# Binding conditions are read from the API server at 0.5 s, then twice as long each time up to
# kube-scheduler's 5 s: a quick driver is met quickly, and a thousand waiting pods cost 200 GETs/s.
FIRST_POLL, MAX_POLL = 0.5, 5.0


def claim_path(namespace: str, name: str) -> str:
    return f"/apis/resource.k8s.io/v1/namespaces/{quote(namespace, safe='')}/resourceclaims/{quote(name, safe='')}"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def bind_claim(api_client: Any, action: BindClaim) -> None:
    """Carry out one BindClaim, or raise ClusterError (reason `resource-claim`) saying why not."""
    path = claim_path(action.namespace, action.name)
    current: dict[str, Any] = dict(action.raw)
    for attempt in range(CONFLICT_RETRIES):
        if attempt:
            try:
                current = kube_client.request_json(api_client, "GET", path, timeout=TIMEOUT)
            except NotFoundError:
                raise ClusterError(f"claim {action.key} got deleted in the meantime", reason=REASON) from None
            log.debug("retrying the status update of claim %s after a conflict", action.key)
        try:
            check_claim(action, current)
            updated = with_finalizer(action, current)
            if updated is not None:
                current = kube_client.request_json(api_client, "PUT", path, body=updated, timeout=TIMEOUT)
            kube_client.request_json(api_client, "PUT", path + "/status", body=with_status(action, current, _now()),
                                     timeout=TIMEOUT)
            metrics.DRA_CLAIM_WRITES.labels(result="allocated" if action.allocation is not None else "reserved").inc()
            return
        except ClaimWriteRefused as exc:
            metrics.DRA_CLAIM_WRITES.labels(result="refused").inc()
            raise ClusterError(str(exc), reason=REASON) from None
        except ConflictError:
            metrics.DRA_CLAIM_WRITES.labels(result="conflict").inc()
            continue
        except NotFoundError:
            raise ClusterError(f"claim {action.key} got deleted in the meantime", reason=REASON) from None
        except ClusterError as exc:
            what = "add allocation and reservation to" if action.allocation is not None else "add reservation to"
            raise ClusterError(f"{what} claim {action.key}: {exc}", status=exc.status, reason=exc.reason) from exc
    raise ClusterError(f"claim {action.key}: still conflicting after {CONFLICT_RETRIES} tries", reason=REASON)


def unreserve_claim(api_client: Any, action: UnreserveClaim) -> None:
    """Unreserve: the pod out of the claim's reservedFor. A claim gone has nothing to undo; a failure
    is logged and left (kube-scheduler does the same: the pod's retry meets the reservation again)."""
    try:
        kube_client.request_json(api_client, "PATCH", claim_path(action.namespace, action.name) + "/status",
                                 body=action.patch(), content_type=kube_client.STRATEGIC_MERGE_PATCH, timeout=TIMEOUT)
    except NotFoundError:
        return
    except ClusterError as exc:
        log.warning("unreserve of claim %s failed: %s", action.key, exc)


def deallocate_claim(api_client: Any, action: DeallocateClaim) -> None:
    """PostFilter: clear the claim's allocation on the version the scheduler saw (a conflict means
    it changed meanwhile: the pod's retry sees the new one). Raises ClusterError when refused."""
    try:
        kube_client.request_json(api_client, "PUT", claim_path(action.namespace, action.name) + "/status",
                                 body=action.deallocated(), timeout=TIMEOUT)
    except ClusterError as exc:
        raise ClusterError(f"deallocating claim {action.key}: {exc}", status=exc.status, reason=REASON) from exc
    log.info("deallocated resource claim %s: its pod fits on no node while it stays allocated", action.key)


def claims_path(namespace: str) -> str:
    return f"/apis/resource.k8s.io/v1/namespaces/{quote(namespace, safe='')}/resourceclaims"


def create_extended_claim(api_client: Any, action: CreateExtendedClaim) -> None:
    """Create the claim of a pod's extended resources, allocate and reserve it, then name it in
    the pod's status; a failure after the create deletes the claim again before raising."""
    try:
        created = kube_client.request_json(api_client, "POST", claims_path(action.namespace), body=action.claim(),
                                           timeout=TIMEOUT)
    except ClusterError as exc:
        raise ClusterError(f"create claim for extended resources of pod {action.namespace}/{action.pod.name}: "
                           f"{exc}", status=exc.status, reason=REASON) from exc
    bind = action.bind(created)
    try:
        bind_claim(api_client, bind)
        kube_client.request_json(
            api_client, "PATCH",
            f"/api/v1/namespaces/{quote(action.namespace, safe='')}/pods/{quote(action.pod.name, safe='')}/status",
            body=action.pod_status(bind.name), content_type=kube_client.STRATEGIC_MERGE_PATCH, timeout=TIMEOUT)
    except ClusterError:
        _delete(api_client, action.namespace, bind.name, bind.uid)
        raise


def delete_extended_claim(api_client: Any, action: DeleteExtendedClaim) -> None:
    """Unreserve: delete the claim made for the pod's extended resources, if it was made."""
    try:
        listed = kube_client.request_json(api_client, "GET", claims_path(action.namespace), timeout=TIMEOUT)
    except ClusterError as exc:
        log.warning("listing claims to delete the extended-resource claim of pod %s failed: %s", action.pod_uid, exc)
        return
    for item in listed.get("items") or []:
        try:
            claim = ResourceClaim.parse(item)
        except InvalidObject:
            continue
        if extended_claim_owner(claim) == action.pod_uid:
            _delete(api_client, action.namespace, claim.name, claim.uid)


def delete_claim(api_client: Any, action: DeleteClaim) -> None:
    """PostFilter: delete a stale extended-resource claim (finalizer first)."""
    _delete(api_client, action.namespace, action.name, action.uid)


def _delete(api_client: Any, namespace: str, name: str, uid: str) -> None:
    """Remove kube-scheduler's finalizer, then delete the claim (this uid only); errors are logged."""
    path = claim_path(namespace, name)
    try:
        kube_client.request_json(api_client, "PATCH", path, body={"metadata": {"finalizers": None}},
                                 content_type=kube_client.MERGE_PATCH, timeout=TIMEOUT)
        kube_client.request_json(api_client, "DELETE", path, body={
            "apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}} if uid else None,
            timeout=TIMEOUT)
    except NotFoundError:
        return
    except ClusterError as exc:
        log.warning("deleting resource claim %s/%s failed: %s", namespace, name, exc)


def _pod_claims(api_client: Any, action: AwaitBindingConditions) -> list[ResourceClaim]:
    """The pod's claims with binding conditions as the API server has them now."""
    names = list(action.claims)
    if action.extended:
        pod = kube_client.request_json(
            api_client, "GET", f"/api/v1/namespaces/{quote(action.namespace, safe='')}/pods/"
                               f"{quote(action.pod.name, safe='')}", timeout=TIMEOUT)
        name = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        if isinstance(name, str) and name:
            names.append(name)
    claims = []
    for name in names:
        try:
            raw = kube_client.request_json(api_client, "GET", claim_path(action.namespace, name), timeout=TIMEOUT)
        except NotFoundError:
            raise ClusterError(f"claim {action.namespace}/{name} got deleted in the meantime", reason=REASON) from None
        try:
            claims.append(ResourceClaim.parse(raw))
        except InvalidObject as exc:
            raise ClusterError(f"claim {action.namespace}/{name}: {exc}", reason=REASON) from None
    return claims


def await_binding_conditions(api_client: Any, action: AwaitBindingConditions) -> None:
    """PreBind's wait for binding conditions: ClusterError on a failure condition, on the timeout,
    or when the scheduler stops; the binder then gives the reservations back and the pod is
    retried, and Filter's next look at a failed claim lets PostFilter deallocate it."""
    post_event(api_client, {"metadata": {"namespace": action.namespace, "name": action.pod.name,
                                         "uid": action.pod.uid}},
               reason="BindingConditionsPending", message=action.event_message)
    started = time.monotonic()
    deadline, delay, outcome = started + action.timeout, FIRST_POLL, "error"
    state = Readiness(False)
    try:
        while True:
            state = pod_readiness(_pod_claims(api_client, action), action.timeout, datetime.now(UTC))
            if state.ready or state.failed:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                outcome = "timeout"
                raise ClusterError(f"{BINDING_TIMEOUT}: context deadline exceeded (still waiting for "
                                   f"{', '.join(state.pending)})", reason=REASON)
            if prebinding.wait(min(delay, left)):
                outcome = "stopped"
                raise ClusterError("stopped waiting for binding conditions: the scheduler is shutting down",
                                   reason=REASON)
            delay = min(delay * 2, MAX_POLL)
        if state.failed:
            outcome = "timeout" if state.failed.startswith(BINDING_TIMEOUT) else "failed"
            raise ClusterError(state.failed, reason=REASON)
        outcome = "ready"
        log.info("binding conditions of pod %s/%s met on node %s", action.namespace, action.pod.name, action.node)
    finally:
        metrics.DRA_BINDING_WAITS.labels(outcome=outcome).inc()
        metrics.DRA_BINDING_WAIT_SECONDS.labels(outcome=outcome).observe(time.monotonic() - started)


def api_server_handlers(api_client: Any) -> dict[type, prebinding.Handler]:
    """The DRA bind-time actions carried out against the API server through `api_client`."""
    return {BindClaim: partial(bind_claim, api_client), UnreserveClaim: partial(unreserve_claim, api_client),
            DeallocateClaim: partial(deallocate_claim, api_client),
            CreateExtendedClaim: partial(create_extended_claim, api_client),
            DeleteExtendedClaim: partial(delete_extended_claim, api_client), DeleteClaim: partial(delete_claim, api_client),
            AwaitBindingConditions: partial(await_binding_conditions, api_client)}
