"""Telling people why a pod is (not) scheduled: Events and the pod's PodScheduled condition.

A failed scheduling attempt must never be silent, but failing to *report* it must
never stop scheduling either: these functions log API errors and return False
instead of raising. Events go through events.k8s.io/v1, as kube-scheduler posts
them; clusters (or RBAC rules) without that API get a core v1 Event instead.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from kubernetes import client as k8s_client

from extender.errors import ClusterError
from extender.kube import client as kube_client
from extender.model.fields import metadata_of

log = logging.getLogger(__name__)

DEFAULT_CONTROLLER = "extender"
EVENT_TIMEOUT = (5.0, 10.0)
_NOTE_LIMIT = 1024  # events.k8s.io validation: note at most 1 kB
_FIELD_LIMIT = 128  # reason, action, reportingInstance
# Clients whose server does not serve events.k8s.io/v1 (404): go straight to core Events.
_CORE_ONLY: weakref.WeakSet[k8s_client.ApiClient] = weakref.WeakSet()


def micro_time(moment: datetime | None = None) -> str:
    """metav1.MicroTime: RFC 3339 with exactly six fractional digits, UTC."""
    moment = moment or datetime.now(UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339(moment: datetime | None = None) -> str:
    """metav1.Time: RFC 3339 to the second, UTC."""
    moment = moment or datetime.now(UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _event_name(pod_name: str) -> str:
    # kube-scheduler's recorder: "<object name>.<unix nanoseconds in hex>"
    return f"{pod_name}.{time.time_ns():x}"


def _pod_ref(pod: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = metadata_of(pod) if "metadata" in pod else pod
    return (str(meta.get("namespace") or "default"), str(meta.get("name") or ""), str(meta.get("uid") or ""))


@dataclass(frozen=True, slots=True)
class _Event:
    """One Event about a pod, written in either API's shape."""

    namespace: str
    name: str
    uid: str
    reason: str
    message: str
    type: str
    action: str
    controller: str
    instance: str
    now: datetime

    def regarding(self) -> dict[str, str]:
        return {"apiVersion": "v1", "kind": "Pod", "namespace": self.namespace, "name": self.name, "uid": self.uid}

    def events_v1(self) -> dict[str, Any]:
        """events.k8s.io/v1, with its length limits."""
        return {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": _event_name(self.name), "namespace": self.namespace},
            "eventTime": micro_time(self.now),
            "reportingController": self.controller,
            "reportingInstance": self.instance[:_FIELD_LIMIT],
            "action": self.action[:_FIELD_LIMIT],
            "reason": self.reason[:_FIELD_LIMIT],
            "regarding": self.regarding(),
            "note": self.message[:_NOTE_LIMIT],
            "type": self.type,
        }

    def core_v1(self) -> dict[str, Any]:
        """The core v1 Event, for API servers that refuse events.k8s.io/v1."""
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": _event_name(self.name), "namespace": self.namespace},
            "involvedObject": self.regarding(),
            "reason": self.reason,
            "message": self.message,
            "type": self.type,
            "action": self.action,
            "source": {"component": self.controller},
            "reportingComponent": self.controller,
            "reportingInstance": self.instance,
            "firstTimestamp": rfc3339(self.now),
            "lastTimestamp": rfc3339(self.now),
            "count": 1,
        }


def post_event(
    api_client: k8s_client.ApiClient,
    pod: Mapping[str, Any],
    *,
    reason: str,
    message: str,
    type: str = "Normal",
    action: str = "Scheduling",
    reporting_controller: str = DEFAULT_CONTROLLER,
    reporting_instance: str = "",
) -> bool:
    """Post an Event about `pod` (a pod dict, or a mapping with namespace, name, uid).

    Returns whether an Event was created; API errors are logged, never raised.
    """
    try:
        return _post(api_client, pod, reason=reason, message=message, type=type, action=action,
                     controller=reporting_controller, instance=reporting_instance)
    except Exception:  # reporting must never break the scheduling loop
        log.exception("cannot post %s event", reason)
        return False


def _post(api_client: k8s_client.ApiClient, pod: Mapping[str, Any], *, reason: str, message: str, type: str,
          action: str, controller: str, instance: str) -> bool:
    namespace, name, uid = _pod_ref(pod)
    if not name:
        log.warning("not posting event %s: the pod has no name", reason)
        return False
    event = _Event(namespace, name, uid, reason, message, type, action, controller, instance or controller,
                   datetime.now(UTC))
    ns = quote(namespace, safe="")
    if api_client not in _CORE_ONLY:
        try:
            kube_client.request_json(api_client, "POST", f"/apis/events.k8s.io/v1/namespaces/{ns}/events",
                                     body=event.events_v1(), timeout=EVENT_TIMEOUT)
            return True
        except ClusterError as exc:
            if exc.status == 404:
                _CORE_ONLY.add(api_client)
            elif exc.status != 403:
                log.warning("cannot post %s event for pod %s/%s: %s", reason, namespace, name, exc)
                return False
            log.info("events.k8s.io/v1 refused (%s); posting a core v1 Event instead", exc.status)
    try:
        kube_client.request_json(api_client, "POST", f"/api/v1/namespaces/{ns}/events",
                                 body=event.core_v1(), timeout=EVENT_TIMEOUT)
        return True
    except ClusterError as exc:
        log.warning("cannot post %s event for pod %s/%s: %s", reason, namespace, name, exc)
        return False


def set_pod_scheduled_condition(
    api_client: k8s_client.ApiClient,
    namespace: str,
    name: str,
    *,
    status: str = "False",
    reason: str = "Unschedulable",
    message: str = "",
    nominated_node: str | None = None,
) -> bool:
    """Set the pod's PodScheduled condition (what `kubectl describe pod` shows) by a strategic
    merge patch of pods/status; conditions merge by type, so other conditions stay.
    `nominated_node` also sets status.nominatedNodeName ("" clears it), in the same patch,
    as kube-scheduler's updatePod does after a preemption.

    Returns whether the patch succeeded; API errors are logged, never raised.
    """
    condition = {
        "type": "PodScheduled",
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": None,
        "lastTransitionTime": rfc3339(),
    }
    body: dict[str, Any] = {"status": {"conditions": [condition]}}
    if nominated_node is not None:
        body["status"]["nominatedNodeName"] = nominated_node or None
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}/status"
    try:
        kube_client.request_json(api_client, "PATCH", path, body=body,
                                 content_type=kube_client.STRATEGIC_MERGE_PATCH, timeout=EVENT_TIMEOUT)
        return True
    except ClusterError as exc:
        log.warning("cannot set PodScheduled=%s on pod %s/%s: %s", status, namespace, name, exc)
        return False
    except Exception:  # reporting must never break the scheduling loop
        log.exception("cannot set PodScheduled=%s on pod %s/%s", status, namespace, name)
        return False
