"""A small HTTP client for test set-up and assertions, identical against the fake and a real server.

It goes through the API (never into the fake's memory), so a test written with it runs
unchanged on envtest. It deliberately builds objects the way a cluster would have them:
a node is created and then its status patched (its status is the kubelet's to report),
and a pod is created without status (the server sets ``Pending``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

import requests

from tests.helpers import present

from .patches import MERGE_PATCH, STRATEGIC_MERGE_PATCH

T = TypeVar("T")

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
# Cluster-scoped storage objects, cleared between tests on a real server.
STORAGE_COLLECTIONS = (
    "/apis/storage.k8s.io/v1/storageclasses",
    "/apis/storage.k8s.io/v1/csinodes",
    "/apis/storage.k8s.io/v1/csidrivers",
    "/apis/storage.k8s.io/v1/volumeattachments",
    "/api/v1/persistentvolumes",
)
# Dynamic resource allocation (resource.k8s.io/v1), purged where the server serves it.
DRA_COLLECTIONS = ("/apis/resource.k8s.io/v1/deviceclasses", "/apis/resource.k8s.io/v1/resourceslices")
DRA_NAMESPACED = ("resourceclaims", "resourceclaimtemplates")
NOT_READY_TAINT_KEY = "node.kubernetes.io/not-ready"


class KubeApiError(Exception):
    """A non-2xx reply; ``status`` is the ``Status`` object the server sent (when it sent one)."""

    def __init__(self, code: int, status: dict[str, Any] | None, text: str = "") -> None:
        self.code = code
        self.status = status or {}
        self.reason = self.status.get("reason", "")
        message = self.status.get("message") or text
        super().__init__(f"{code} {self.reason}: {message}")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_taint(taint: str | Mapping[str, Any]) -> dict[str, Any]:
    """Accept ``key=value:Effect``, ``key:Effect`` or a taint dict."""
    if isinstance(taint, Mapping):
        return dict(taint)
    spec, _, effect = taint.rpartition(":")
    key, _, value = spec.partition("=")
    out = {"key": key, "effect": effect}
    if value:
        out["value"] = value
    return out


class KubeTestClient:
    """Thin, explicit REST helpers; every method maps to one or two API calls."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        verify: bool | str = True,
        timeout: float = 10.0,
        cert: tuple[str, str] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        # Given with every request, not as ``session.verify``: requests lets the environment
        # ($REQUESTS_CA_BUNDLE, $CURL_CA_BUNDLE) override a session's setting, so a CA file or
        # False on the session is silently replaced by the system bundle, which does not hold
        # the control plane's CA (psf/requests#3829).
        self.verify = verify
        self.session = requests.Session()
        if cert:
            self.session.cert = cert  # a client certificate (the environment does not touch this)
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"
        self.session.headers["Accept"] = "application/json"

    def close(self) -> None:
        self.session.close()

    # -- raw access --------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> requests.Response:
        """Send one request and return the raw response (no status check)."""
        headers = {}
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = content_type
        return self.session.request(
            method,
            self.base_url + path,
            data=data,
            params=params,
            headers=headers,
            timeout=timeout or self.timeout,
            verify=self.verify,
        )

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        """Send one request; return the JSON body or raise :class:`KubeApiError`."""
        resp = self.request(method, path, body, params, content_type)
        try:
            payload = resp.json()
        except ValueError:
            payload = None
        if resp.status_code >= 300:
            raise KubeApiError(
                resp.status_code, payload if isinstance(payload, dict) else None, resp.text
            )
        return payload if isinstance(payload, dict) else {}

    # -- namespaces ----------------------------------------------------------------------------

    def create_namespace(
        self, name: str, labels: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name}
        if labels:
            meta["labels"] = dict(labels)
        return self.call(
            "POST",
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": meta},
        )

    def ensure_namespace(self, name: str) -> dict[str, Any]:
        """Create the namespace unless it exists (namespaces cannot be reused quickly on a real
        server: deleting one leaves it Terminating while its content is removed)."""
        try:
            return self.create_namespace(name)
        except KubeApiError as err:
            if err.reason != "AlreadyExists":
                raise
            return self.call("GET", f"/api/v1/namespaces/{name}")

    # -- nodes -----------------------------------------------------------------------------------

    def create_node(
        self,
        name: str,
        cpu: str = "4",
        memory: str = "8Gi",
        pods: str = "110",
        labels: Mapping[str, str] | None = None,
        taints: Iterable[str | Mapping[str, Any]] = (),
        ready: bool = True,
        unschedulable: bool = False,
        extra_resources: Mapping[str, str] | None = None,
        allocatable: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Create a node, then report its status as a kubelet would (capacity, allocatable,
        conditions), then do the node lifecycle controller's part: the API server taints
        every new node ``node.kubernetes.io/not-ready:NoSchedule`` and only that controller
        removes the taint, so a Ready node gets it removed here and a NotReady one keeps it,
        as in a real cluster. ``allocatable`` defaults to the capacity."""
        meta: dict[str, Any] = {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                **(labels or {}),
            },
        }
        if annotations:
            meta["annotations"] = dict(annotations)
        spec: dict[str, Any] = {}
        taint_list = [parse_taint(t) for t in taints]
        if taint_list:
            spec["taints"] = taint_list
        if unschedulable:
            spec["unschedulable"] = True
        self.call(
            "POST",
            "/api/v1/nodes",
            {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec},
        )
        capacity = {
            "cpu": cpu,
            "memory": memory,
            "pods": pods,
            "ephemeral-storage": "100Gi",
            **(extra_resources or {}),
        }
        status = {
            "capacity": capacity,
            "allocatable": dict(allocatable) if allocatable is not None else dict(capacity),
            "conditions": self._node_conditions(ready),
            "addresses": [{"type": "Hostname", "address": name}],
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "v1.34.0",
                "containerRuntimeVersion": "containerd://2.0.0",
                "kernelVersion": "6.1.0",
                "osImage": "Test Linux",
                "kubeProxyVersion": "",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            },
        }
        node = self.patch_node(name, {"status": status}, status_subresource=True)
        return self._set_not_ready_taint(node, present=not ready)

    def _set_not_ready_taint(self, node: dict[str, Any], present: bool) -> dict[str, Any]:
        """The node lifecycle controller's NoSchedule tainting for the Ready condition."""
        taints = list((node.get("spec") or {}).get("taints") or [])
        has = any(t.get("key") == NOT_READY_TAINT_KEY and t.get("effect") == "NoSchedule" for t in taints)
        if has == present:
            return node
        if present:
            taints.append({"key": NOT_READY_TAINT_KEY, "effect": "NoSchedule"})
        else:
            taints = [t for t in taints if not (t.get("key") == NOT_READY_TAINT_KEY and t.get("effect") == "NoSchedule")]
        patch = {
            "metadata": {"resourceVersion": node["metadata"]["resourceVersion"]},
            "spec": {"taints": taints or None},
        }
        return self.patch_node(node["metadata"]["name"], patch, content_type=MERGE_PATCH)

    @staticmethod
    def _node_conditions(ready: bool) -> list[dict[str, Any]]:
        now = _now()
        reasons = {
            "MemoryPressure": "KubeletHasSufficientMemory",
            "DiskPressure": "KubeletHasNoDiskPressure",
            "PIDPressure": "KubeletHasSufficientPID",
        }
        conditions = [
            {
                "type": t,
                "status": "False",
                "reason": reason,
                "message": f"kubelet reports no {t}",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
            for t, reason in reasons.items()
        ]
        conditions.append(
            {
                "type": "Ready",
                "status": "True" if ready else "False",
                "reason": "KubeletReady" if ready else "KubeletNotReady",
                "message": "kubelet is posting ready status"
                if ready
                else "kubelet stopped posting",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
        )
        return conditions

    def get_node(self, name: str) -> dict[str, Any] | None:
        try:
            return self.call("GET", f"/api/v1/nodes/{name}")
        except KubeApiError as err:
            if err.code == 404:
                return None
            raise

    def list_nodes(self, label_selector: str | None = None) -> list[dict[str, Any]]:
        params = {"labelSelector": label_selector} if label_selector else None
        return self.call("GET", "/api/v1/nodes", params=params)["items"]

    def patch_node(
        self,
        name: str,
        patch: Mapping[str, Any],
        status_subresource: bool = False,
        content_type: str = STRATEGIC_MERGE_PATCH,
    ) -> dict[str, Any]:
        suffix = "/status" if status_subresource else ""
        return self.call(
            "PATCH", f"/api/v1/nodes/{name}{suffix}", dict(patch), content_type=content_type
        )

    def set_node_ready(self, name: str, ready: bool) -> dict[str, Any]:
        """Report the Ready condition as the kubelet would, then taint or untaint the node as
        the node lifecycle controller would."""
        now = _now()
        condition = {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": "KubeletReady" if ready else "KubeletNotReady",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        node = self.patch_node(
            name, {"status": {"conditions": [condition]}}, status_subresource=True
        )
        return self._set_not_ready_taint(node, present=not ready)

    def cordon_node(self, name: str, unschedulable: bool = True) -> dict[str, Any]:
        return self.patch_node(
            name, {"spec": {"unschedulable": unschedulable or None}}, content_type=MERGE_PATCH
        )

    def delete_node(self, name: str) -> dict[str, Any]:
        return self.call("DELETE", f"/api/v1/nodes/{name}")

    # -- pods ------------------------------------------------------------------------------------

    def create_pod(
        self,
        name: str,
        namespace: str = "default",
        *,
        cpu: str | None = None,
        memory: str | None = None,
        requests: Mapping[str, str] | None = None,
        limits: Mapping[str, str] | None = None,
        scheduler_name: str | None = None,
        node_name: str | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        node_selector: Mapping[str, str] | None = None,
        tolerations: Iterable[Mapping[str, Any]] = (),
        affinity: Mapping[str, Any] | None = None,
        scheduling_gates: Iterable[str] = (),
        priority_class_name: str | None = None,
        finalizers: Iterable[str] = (),
        containers: list[dict[str, Any]] | None = None,
        init_containers: list[dict[str, Any]] | None = None,
        spec: Mapping[str, Any] | None = None,
        image: str = PAUSE_IMAGE,
    ) -> dict[str, Any]:
        """Create a pod with one container (unless ``containers`` is given). ``cpu``/``memory``
        are shorthands for container requests; ``spec`` entries override everything else."""
        if containers is None:
            reqs = {**(requests or {}), **present(cpu=cpu, memory=memory)}
            resources = present(requests=reqs, limits=dict(limits or {}))
            containers = [{"name": "main", "image": image, "resources": resources}]
        pod_spec: dict[str, Any] = {
            "containers": containers,
            **present(
                initContainers=init_containers,
                schedulerName=scheduler_name,
                nodeName=node_name,
                nodeSelector=dict(node_selector or {}),
                tolerations=[dict(t) for t in tolerations],
                affinity=dict(affinity or {}),
                schedulingGates=[{"name": g} for g in scheduling_gates],
                priorityClassName=priority_class_name,
            ),
            **(spec or {}),
        }
        meta = {
            "name": name,
            "namespace": namespace,
            **present(labels=dict(labels or {}), annotations=dict(annotations or {}), finalizers=list(finalizers)),
        }
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}
        return self.call("POST", f"/api/v1/namespaces/{namespace}/pods", body)

    def get_pod(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        try:
            return self.call("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        except KubeApiError as err:
            if err.code == 404:
                return None
            raise

    def list_pods(
        self,
        namespace: str | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        params = {
            k: v
            for k, v in (("fieldSelector", field_selector), ("labelSelector", label_selector))
            if v
        }
        return self.call("GET", path, params=params)["items"]

    def patch_pod(
        self,
        name: str,
        patch: Mapping[str, Any],
        namespace: str = "default",
        status_subresource: bool = False,
        content_type: str = STRATEGIC_MERGE_PATCH,
    ) -> dict[str, Any]:
        suffix = "/status" if status_subresource else ""
        return self.call(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/{name}{suffix}",
            dict(patch),
            content_type=content_type,
        )

    def set_pod_phase(self, name: str, phase: str, namespace: str = "default") -> dict[str, Any]:
        """What a kubelet would report, e.g. ``Running`` or ``Succeeded``."""
        return self.patch_pod(
            name, {"status": {"phase": phase}}, namespace, status_subresource=True
        )

    def delete_pod(
        self,
        name: str,
        namespace: str = "default",
        grace_period_seconds: int | None = None,
        uid: str | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        if uid:
            body["preconditions"] = {"uid": uid}
        return self.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body)

    def bind_pod(
        self,
        name: str,
        node: str,
        namespace: str = "default",
        uid: str | None = None,
        annotations: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> requests.Response:
        """POST a Binding exactly as a scheduler does; returns the raw response for assertions."""
        meta: dict[str, Any] = {"name": name}
        if uid:
            meta["uid"] = uid
        if annotations:
            meta["annotations"] = dict(annotations)
        if labels:
            meta["labels"] = dict(labels)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        return self.request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body)

    # -- priority classes and disruption budgets ------------------------------------------------

    def ensure_priority_class(self, name: str, value: int, preemption_policy: str | None = None
                              ) -> dict[str, Any]:
        """Create a PriorityClass unless one of that name exists (they are cluster-wide and
        outlive a test's clean-up on a real server)."""
        body: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                "metadata": {"name": name}, "value": value}
        if preemption_policy:
            body["preemptionPolicy"] = preemption_policy
        try:
            return self.call("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body)
        except KubeApiError as err:
            if err.reason != "AlreadyExists":
                raise
            return self.call("GET", f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")

    def create_pdb(self, name: str, selector: Mapping[str, str], *, disruptions_allowed: int,
                   namespace: str = "default") -> dict[str, Any]:
        """A PodDisruptionBudget with its status set as the disruption controller would."""
        body = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": dict(selector)}}}
        created = self.call("POST", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", body)
        status = {"disruptionsAllowed": disruptions_allowed, "currentHealthy": 1, "desiredHealthy": 1,
                  "expectedPods": 1, "observedGeneration": created["metadata"].get("generation", 1)}
        return self.call("PATCH", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}/status",
                         {"status": status}, content_type=MERGE_PATCH)

    # -- events and leases -------------------------------------------------------------------

    def list_events(
        self,
        namespace: str | None = None,
        api: str = "core",
        reason: str | None = None,
        involved_name: str | None = None,
    ) -> list[dict[str, Any]]:
        """Events through the core API (``api="core"``) or ``events.k8s.io`` — the same objects."""
        prefix = "/api/v1" if api == "core" else "/apis/events.k8s.io/v1"
        path = f"{prefix}/namespaces/{namespace}/events" if namespace else f"{prefix}/events"
        selectors = []
        if reason:
            selectors.append(f"reason={reason}")
        if involved_name:
            selectors.append(f"involvedObject.name={involved_name}")
        params = {"fieldSelector": ",".join(selectors)} if selectors else None
        return self.call("GET", path, params=params)["items"]

    def get_lease(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        try:
            return self.call(
                "GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
            )
        except KubeApiError as err:
            if err.code == 404:
                return None
            raise

    # -- clean-up and waiting --------------------------------------------------------------------

    def delete_all(self, namespaces: Iterable[str] | None = None) -> None:
        """Remove test objects from a real server: pods (at once), nodes, events, leases,
        disruption budgets, storage and DRA objects (their protection finalizers first: no
        controller would release them). Namespaces stay, since a deleted one lingers as
        Terminating without a controller; so do PriorityClasses, which tests ensure."""
        if namespaces is None:
            namespaces = [
                ns["metadata"]["name"] for ns in self.call("GET", "/api/v1/namespaces")["items"]
            ]
        for collection in [*(f"/api/v1/namespaces/{ns}/persistentvolumeclaims" for ns in namespaces),
                           *(f"/apis/storage.k8s.io/v1/namespaces/{ns}/csistoragecapacities" for ns in namespaces),
                           *STORAGE_COLLECTIONS]:
            self.purge(collection)
        for collection in [*(f"/apis/resource.k8s.io/v1/namespaces/{ns}/{kind}" for ns in namespaces
                             for kind in DRA_NAMESPACED), *DRA_COLLECTIONS]:
            self.purge(collection, missing_ok=True)
        for ns in namespaces:
            for path in (
                f"/api/v1/namespaces/{ns}/pods",
                f"/api/v1/namespaces/{ns}/events",
                f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
                f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
            ):
                if ns == "kube-node-lease" or (ns == "kube-system" and "leases" in path):
                    continue
                self.call(
                    "DELETE",
                    path,
                    {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
                )
        self.call("DELETE", "/api/v1/nodes", {"apiVersion": "v1", "kind": "DeleteOptions"})

    def purge(self, collection: str, *, missing_ok: bool = False) -> None:
        """Delete every object of a collection, removing finalizers first; `missing_ok`: a
        collection the server does not serve (404) holds nothing to delete."""
        try:
            items = self.call("GET", collection).get("items") or []
        except KubeApiError as err:
            if missing_ok and err.code == 404:
                return
            raise
        for item in items:
            path = f"{collection}/{item['metadata']['name']}"
            try:
                if item["metadata"].get("finalizers"):
                    self.call("PATCH", path, {"metadata": {"finalizers": None}}, content_type=MERGE_PATCH)
                self.call("DELETE", path)
            except KubeApiError as err:
                if err.code != 404:
                    raise

    @staticmethod
    def wait_for(
        predicate: Callable[[], T],
        timeout: float = 5.0,
        interval: float = 0.05,
        message: str = "condition",
    ) -> T:
        """Poll until ``predicate()`` is truthy and return its value; AssertionError on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {message}")
            time.sleep(interval)
