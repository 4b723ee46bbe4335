"""The API calls of a preemption: mark a victim, delete it, clear stale nominations.

kube-scheduler first gives the victim the condition DisruptionTarget=True (reason
PreemptionByScheduler), so that controllers and the victim's owner see why it goes, then
deletes it with its own grace period, then posts a `Preempted` Event on it. A victim
already gone is not an error (someone else evicted it); any other refusal is raised as a
ClusterError for the caller to count and retry.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

from kubernetes import client as k8s_client

from extender.errors import ClusterError, NotFoundError
from extender.kube import client as kube_client
from extender.kube.events import rfc3339
from extender.model.records import DISRUPTION_TARGET, PREEMPTION_BY_SCHEDULER

log = logging.getLogger(__name__)

TIMEOUT = (5.0, 30.0)


def _pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"


def mark_disruption_target(api_client: k8s_client.ApiClient, namespace: str, name: str, message: str) -> bool:
    """Add the DisruptionTarget condition; False when the pod is already gone."""
    condition = {"type": DISRUPTION_TARGET, "status": "True", "reason": PREEMPTION_BY_SCHEDULER,
                 "message": message, "lastTransitionTime": rfc3339()}
    try:
        kube_client.request_json(api_client, "PATCH", _pod_path(namespace, name) + "/status",
                                 body={"status": {"conditions": [condition]}},
                                 content_type=kube_client.STRATEGIC_MERGE_PATCH, timeout=TIMEOUT)
    except NotFoundError:
        return False
    return True


def delete_pod(api_client: k8s_client.ApiClient, namespace: str, name: str, uid: str) -> bool:
    """Delete with the pod's own grace period, only if it is still the same pod (UID
    precondition); False when it is already gone."""
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
    if uid:
        body["preconditions"] = {"uid": uid}
    try:
        kube_client.request_json(api_client, "DELETE", _pod_path(namespace, name), body=body, timeout=TIMEOUT)
    except NotFoundError:
        return False
    return True


def clear_nominated_node(api_client: k8s_client.ApiClient, namespace: str, name: str) -> None:
    """Remove status.nominatedNodeName (a lower-priority pod loses its claim to a node)."""
    try:
        kube_client.request_json(api_client, "PATCH", _pod_path(namespace, name) + "/status",
                                 body={"status": {"nominatedNodeName": None}},
                                 content_type=kube_client.STRATEGIC_MERGE_PATCH, timeout=TIMEOUT)
    except NotFoundError:
        pass
    except ClusterError as exc:
        log.warning("cannot clear the nominated node of pod %s/%s: %s", namespace, name, exc)
