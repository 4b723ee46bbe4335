"""scheduler_perf's operations run against a real API server (executor.go, operations.go).

One :class:`Executor` runs one workload's operations in order, with the same meaning as
executor.go: pods of ``createPods`` go to ``namespace-<op index>`` unless the op names a
namespace; ``skipWaitToCompletion`` adds the count to what a later ``barrier`` waits for,
otherwise the op waits until its pods are scheduled; ``collectMetrics`` (or a
``startCollectingMetrics``/``stopCollectingMetrics`` pair) measures the throughput of those
pods; ``churn`` and a ``deletePods`` that does not wait run in the background until the
workload ends. Every pod we create or update names ``scheduler_name`` when one is given
(our standalone scheduler only takes pods of its schedulerName; the templates name none,
which is kube-scheduler's ``default-scheduler``).

What differs, on purpose: objects are created by 16 threads (client-go's creators use up
to 30; createAny's objects, created one by one in operations.go, too), the wait for
scheduled pods gives up after ``stall`` seconds without progress (executor.go waits 10
minutes, then fails the test), and there is no fake PV controller: the volumes of
``createPods`` are created bound, as test/utils does, so none is needed; a node template with
no status.conditions gets Ready=True (:data:`READY`); a workload with the NodeDeclaredFeatures
gate gets its nodes' status.declaredFeatures written after createNodes, as its Go
nodeUpdateFn does (:meth:`Executor._declare_features`). The DRA opcodes
(createResourceDriver, allocResourceClaims) build their objects in dra.py; the
ResourceClaims of pods' templates come from kube-controller-manager (schedulers.py).
"""

from __future__ import annotations

import random
import re
import string
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import requests

from bench.scheduler_perf import corpus, dra
from bench.scheduler_perf.informer import PodCache, ThroughputCollector

WORKERS = 16
PAUSE = "registry.k8s.io/pause:3.10.2"


#: resource.k8s.io's beta versions, which some DRA templates name: kube-apiserver v1.36 serves only
#: v1 by default (scheduler_perf's own test server enables every API), and v1 is v1beta2 promoted,
#: field for field, so the objects are created as v1.
_DRA_BETA = ("resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2")


def served_version(obj: dict[str, Any]) -> dict[str, Any]:
    """The object under the API version the control plane serves (see _DRA_BETA)."""
    return {**obj, "apiVersion": "resource.k8s.io/v1"} if obj.get("apiVersion") in _DRA_BETA else obj


class WorkloadFailed(Exception):
    """An operation could not complete (as a failed scheduler_perf test); the message says which."""


def base_pod() -> dict[str, Any]:
    """util.go's makeBasePod: test/utils MakePodSpec under generateName pod-."""
    resources = {"cpu": "100m", "memory": "500Mi"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "pod-"},
            "spec": {"containers": [{"name": "pause", "image": PAUSE, "ports": [{"containerPort": 80}],
                                     "resources": {"limits": dict(resources), "requests": dict(resources)}}]}}


#: The condition a node without any gets (nodedeclaredfeatures' node-base.yaml has none): a kubelet
#: would report it, kube-scheduler reads no condition, and our NodeReady refuses a node not Ready
#: (in a real cluster the node lifecycle controller, not run here, would taint it not-ready).
READY = ({"type": "Ready", "status": "True"},)


def base_node(prefix: str) -> dict[str, Any]:
    """util.go's makeBaseNode: 110 pods, 4 CPU, 32Gi, Ready."""
    capacity = {"pods": "110", "cpu": "4", "memory": "32Gi"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"generateName": prefix},
            "status": {"capacity": dict(capacity), "allocatable": dict(capacity), "phase": "Running",
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def parse_duration(text: str) -> float:
    """A Go duration ("500ms", "1m30s") in seconds."""
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"invalid duration {text!r}")
    return sum(float(n) * units[u] for n, u in parts)


@dataclass
class Measurement:
    """One metrics collection: its throughput and how many of its pods were scheduled."""

    name: str
    op_index: int
    namespaces: frozenset[str]
    selector: dict[str, str] | None
    collector: ThroughputCollector
    expected: int | None = None  # createPods' count; None: the pods found at the stop
    scheduled: int = 0
    found: int = 0
    wall_s: float = 0.0
    create_s: float | None = None  # how long creating the measured pods took (createPods only)
    steady: bool = False  # createPods' steadyState: ``scheduled`` counts every pod of the duration


def _retryable(exc: Any, body: Any) -> bool:
    """Throttling, a server error, or a name the API server generated that was taken already:
    5 random characters for 5,000 nodes collide about once per cluster, and the API server
    answers 409 AlreadyExists, leaving the retry to the client (as scheduler_perf's does)."""
    if exc.code in (429, 500, 502, 503, 504):
        return True
    meta = body.get("metadata") if isinstance(body, dict) else None
    generated = isinstance(meta, dict) and meta.get("generateName") and not meta.get("name")
    return bool(exc.code == 409 and exc.reason == "AlreadyExists" and generated)


@dataclass
class Executor:
    kube: Any  # tests.fakeapi.client.KubeTestClient
    cache: PodCache
    workload: corpus.Workload
    scheduler_name: str | None = None
    stall: float = 60.0
    timeout: float = 900.0
    measurements: list[Measurement] = field(default_factory=list)
    namespaces: dict[str, int] = field(default_factory=dict)  # numPodsScheduledPerNamespace
    _stop: threading.Event = field(default_factory=threading.Event)
    _background: list[threading.Thread] = field(default_factory=list)
    _errors: list[str] = field(default_factory=list)
    _open: Measurement | None = None
    _resources: dict[tuple[str, str], tuple[str, bool]] = field(default_factory=dict)
    _next_node: int = 0
    _node_names: set[str] = field(default_factory=set)
    _names_lock: threading.Lock = field(default_factory=threading.Lock)

    # ---- running -----------------------------------------------------------------------------

    def run(self) -> None:
        """Every operation in order; raises WorkloadFailed on the first that cannot finish."""
        handlers: dict[str, Callable[[int, dict[str, Any]], None]] = {
            "createNodes": self._create_nodes, "createNamespaces": self._create_namespaces,
            "createPods": self._create_pods_op, "deletePods": self._delete_pods, "churn": self._churn,
            "barrier": self._barrier, "sleep": self._sleep, "createAny": self._create_any,
            "updateAny": self._update_any, "startCollectingMetrics": self._start_collecting,
            "stopCollectingMetrics": self._stop_collecting,
            "createResourceDriver": self._create_resource_driver, "allocResourceClaims": self._alloc_resource_claims,
        }
        try:
            for index, op in enumerate(self.workload.ops):
                handlers[op["opcode"]](index, op)
                if self._errors:
                    raise WorkloadFailed(self._errors[0])
        finally:
            self._stop.set()
            for thread in self._background:
                thread.join(30)
            if self._open is not None:
                self._finish(self._open)
                self._open = None

    # ---- objects -----------------------------------------------------------------------------

    def _resource(self, obj: dict[str, Any]) -> tuple[str, bool]:
        """(collection path prefix, namespaced) of an object's kind, from API discovery."""
        api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
        key = (api_version, kind)
        if key not in self._resources:
            base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            listed = self.kube.call("GET", base)
            for resource in listed.get("resources") or []:
                if resource.get("kind") == kind and "/" not in resource["name"]:
                    self._resources[key] = (f"{base}/{{ns}}{resource['name']}", bool(resource.get("namespaced")))
                    break
            else:
                raise WorkloadFailed(f"no resource of kind {kind} in {api_version}")
        return self._resources[key]

    def _collection(self, obj: dict[str, Any], namespace: str | None) -> str:
        template, namespaced = self._resource(obj)
        if namespaced and not namespace:
            raise WorkloadFailed(f"{obj.get('kind')} is namespaced but no namespace is set")
        if not namespaced and namespace:
            raise WorkloadFailed(f"namespace {namespace} set for cluster-scoped {obj.get('kind')}")
        return template.format(ns=f"namespaces/{namespace}/" if namespaced else "")

    def _ours(self, obj: dict[str, Any]) -> dict[str, Any]:
        if self.scheduler_name and obj.get("kind") == "Pod":
            obj.setdefault("spec", {})["schedulerName"] = self.scheduler_name
        return obj

    def _send(self, method: str, path: str, body: Any, attempts: int = 6, params: Any = None,
              content_type: str = "application/json") -> dict[str, Any]:
        """One API call, retried on throttling, server errors and dropped connections."""
        from tests.fakeapi.client import KubeApiError

        for attempt in range(attempts):
            try:
                if content_type == "application/json":
                    return self.kube.call(method, path, body, params)
                return self.kube.call(method, path, body, params, content_type)
            except KubeApiError as exc:
                if not _retryable(exc, body) or attempt == attempts - 1:
                    raise WorkloadFailed(f"{method} {path}: {str(exc)[:300]}") from exc
            except requests.RequestException as exc:
                if attempt == attempts - 1:
                    raise WorkloadFailed(f"{method} {path}: {exc!r}") from exc
            time.sleep(0.2 * (attempt + 1))
        raise AssertionError("unreachable")

    def _create(self, obj: dict[str, Any], namespace: str | None) -> dict[str, Any]:
        return self._send("POST", self._collection(self._ours(obj), namespace), obj)

    def _parallel(self, fn: Callable[[int], Any], count: int) -> None:
        with ThreadPoolExecutor(min(WORKERS, max(1, count))) as pool:
            for _ in pool.map(fn, range(count)):
                pass

    def ensure_namespace(self, name: str, labels: dict[str, str] | None = None, register: bool = True) -> None:
        """createNamespaceIfNotPresent: create it (an existing one is fine) and track it."""
        if register and name in self.namespaces:
            return
        from tests.fakeapi.client import KubeApiError

        try:
            self.kube.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                          "metadata": {"name": name, "labels": labels or {}}})
        except KubeApiError as exc:
            if exc.code != 409:
                raise WorkloadFailed(f"creating namespace {name}: {exc.code}") from exc
        if register:
            self.namespaces.setdefault(name, 0)

    # ---- operations ----------------------------------------------------------------------------

    def _create_nodes(self, index: int, op: dict[str, Any]) -> None:
        count = op.get("count", 0)
        template = op.get("nodeTemplatePath")
        allocatable = op.get("nodeAllocatableStrategy") or {}
        label = op.get("labelNodePrepareStrategy") or {}
        unique = op.get("uniqueNodeLabelStrategy") or {}

        created: list[str] = []

        def create(i: int) -> None:
            node = corpus.load_object(template, i, count) if template else base_node(f"node-{index}-")
            meta = node.setdefault("metadata", {})
            if not meta.get("name"):
                meta["name"] = self._node_name(meta.pop("generateName", "node-"))
            labels = meta.setdefault("labels", {}) or {}
            meta["labels"] = labels
            labels["kubernetes.io/hostname"] = meta["name"]
            if label:
                values = label["labelValues"]
                labels[label["labelKey"]] = values[i % len(values)]
            if unique:
                labels[unique["labelKey"]] = str(uuid.uuid4())
            status = node.setdefault("status", {})
            if not status.get("conditions"):
                status["conditions"] = [dict(c) for c in READY]
            if allocatable.get("nodeAllocatable"):
                status["allocatable"] = {**(status.get("allocatable") or status.get("capacity") or {}),
                                         **allocatable["nodeAllocatable"]}
            self._send("POST", "/api/v1/nodes", node)
            created.append(meta["name"])
            if allocatable.get("csiNodeAllocatable") or allocatable.get("migratedPlugins"):
                self._send("POST", "/apis/storage.k8s.io/v1/csinodes", {
                    "apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                    "metadata": {"name": meta["name"], "annotations": {
                        "storage.alpha.kubernetes.io/migrated-plugins": ",".join(allocatable.get("migratedPlugins") or [])}},
                    "spec": {"drivers": [{"name": driver, "nodeID": meta["name"], "allocatable": value}
                                         for driver, value in (allocatable.get("csiNodeAllocatable") or {}).items()]}})

        self._parallel(create, count)
        self._next_node += count
        if self.workload.node_declared_features:
            self._declare_features(created)

    def _declare_features(self, nodes: list[str]) -> None:
        """node_declared_features_test.go's nodeUpdateFn: each node's status.declaredFeatures set
        to the workload's feature names after its creation, by a status update (so both schedulers
        see a node update). Go updates every node one by one and then waits until its in-process
        scheduler's cache shows them; here 16 threads patch, each reply is checked (an API server
        without the gate silently drops the field), and no scheduler cache can be read."""
        features = self.workload.declared_features
        body = {"status": {"declaredFeatures": features}}

        def declare(i: int) -> None:
            reply = self._send("PATCH", f"/api/v1/nodes/{nodes[i]}/status", body,
                               content_type="application/merge-patch+json")
            if features and (reply.get("status") or {}).get("declaredFeatures") != features:
                raise WorkloadFailed(f"node {nodes[i]} kept no status.declaredFeatures: kube-apiserver "
                                     f"needs --feature-gates={corpus.NODE_DECLARED_FEATURES_GATE}=true")

        self._parallel(declare, len(nodes))

    def _node_name(self, prefix: str) -> str:
        """A generateName-like name chosen here (the hostname label needs it before the create).
        kube-apiserver retries a generated name that is taken; 5 random characters collide about
        once per 5,000 nodes, so the runner keeps the names it gave out and never repeats one."""
        with self._names_lock:
            while True:
                name = prefix + "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
                if name not in self._node_names:
                    self._node_names.add(name)
                    return name

    def _create_namespaces(self, index: int, op: dict[str, Any]) -> None:
        template = op.get("namespaceTemplatePath")
        labels = (corpus.load_object(template).get("metadata") or {}).get("labels") if template else None
        for i in range(op.get("count", 0)):
            self.ensure_namespace(f"{op.get('prefix', '')}-{i}", labels)

    def _pod(self, template: str | None, i: int, count: int) -> dict[str, Any]:
        return corpus.load_object(template, i, count) if template else base_pod()

    def _create_pod_batch(self, op: dict[str, Any], namespace: str, count: int) -> None:
        template = op.get("podTemplatePath") or self.workload.default_pod_template
        pv_template, pvc_template = op.get("persistentVolumeTemplatePath"), op.get("persistentVolumeClaimTemplatePath")

        def create(i: int) -> None:
            pod = self._pod(template, i, count)
            if pvc_template:
                pod.setdefault("spec", {})["volumes"] = [
                    {"name": "vol", "persistentVolumeClaim": {"claimName": self._volume(pv_template, pvc_template, namespace, i)}}]
            self._create(pod, namespace)

        self._parallel(create, count)

    def _volume(self, pv_template: str | None, pvc_template: str, namespace: str, i: int) -> str:
        """test/utils CreatePodWithPersistentVolume with bindVolume: a claim pvc-i and a volume
        <namespace>-vol-i bound to each other, their statuses Bound."""
        claim_name, volume_name = f"pvc-{i}", f"{namespace}-vol-{i}"
        claim = corpus.load_object(pvc_template)
        claim.setdefault("metadata", {})["name"] = claim_name
        claim.setdefault("spec", {})["volumeName"] = volume_name
        created = self._send("POST", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", claim)
        created["status"] = {**(created.get("status") or {}), "phase": "Bound"}
        self._send("PUT", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim_name}/status", created)
        if pv_template is None:
            raise WorkloadFailed("persistentVolumeClaimTemplatePath without persistentVolumeTemplatePath")
        volume = corpus.load_object(pv_template)
        volume.setdefault("metadata", {})["name"] = volume_name
        spec = volume.setdefault("spec", {})
        if "csi" in spec:
            spec["csi"]["volumeHandle"] = volume_name
        elif "awsElasticBlockStore" in spec:
            spec["awsElasticBlockStore"]["volumeID"] = f"vol-{i}"
        spec["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": namespace, "name": claim_name, "apiVersion": "v1"}
        created = self._send("POST", "/api/v1/persistentvolumes", volume)
        created["status"] = {**(created.get("status") or {}), "phase": "Bound"}
        self._send("PUT", f"/api/v1/persistentvolumes/{volume_name}/status", created)
        return claim_name

    def _create_pods_op(self, index: int, op: dict[str, Any]) -> None:
        namespace = op.get("namespace") or f"namespace-{index}"
        self.ensure_namespace(namespace)
        count = op.get("count", 0)
        measurement = None
        if op.get("collectMetrics"):
            measurement = self._begin(namespace, index, [namespace], None, expected=count)
        if op.get("steadyState"):
            if measurement is not None:
                measurement.steady, measurement.expected = True, 0
            self._steady(op, namespace, count)
        else:
            creating = time.monotonic()
            self._create_pod_batch(op, namespace, count)
            if measurement is not None:
                measurement.create_s = time.monotonic() - creating
            if op.get("skipWaitToCompletion"):
                self.namespaces[namespace] += count
            else:
                self._wait(f"op {index}: pods of {namespace}", namespace, None, count, attempted=False)
        if measurement is not None:
            self._finish(measurement)
            self._open = None

    def _steady(self, op: dict[str, Any], namespace: str, count: int) -> None:
        """createPodsSteadily: keep ``count`` pods; each time ``count`` more got scheduled,
        delete them all and create the next batch, until ``duration`` ends."""
        duration = parse_duration(op.get("duration") or "0s")
        if duration <= 0:
            raise WorkloadFailed("steadyState needs a duration > 0")
        deadline = time.monotonic() + duration
        collector = ThroughputCollector("steady", frozenset([namespace])).start(self.cache)
        try:
            batch = 0
            self._create_pod_batch(op, namespace, count)
            while time.monotonic() < deadline:
                time.sleep(0.1)
                if collector.scheduled >= (batch + 1) * count:
                    batch += 1
                    self._send("DELETE", f"/api/v1/namespaces/{namespace}/pods",
                               {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                                "propagationPolicy": "Background"})
                    self._create_pod_batch(op, namespace, count)
            if collector.scheduled == 0:
                raise WorkloadFailed("no pod at all got scheduled in the steady state")
        finally:
            collector.stop(self.cache)

    def _delete_pods(self, index: int, op: dict[str, Any]) -> None:
        namespace, selector = op.get("namespace", ""), op.get("labelSelector") or {}
        names = self.cache.names(namespace, selector)
        rate = op.get("deletePodsPerSecond", 0)

        def delete() -> None:
            try:
                if rate > 0:
                    for name in names:
                        if self._stop.wait(1.0 / rate):
                            return
                        self._send("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", None)
                else:
                    selector_text = ",".join(f"{k}={v}" for k, v in selector.items())
                    self._send("DELETE", f"/api/v1/namespaces/{namespace}/pods", None,
                               params={"labelSelector": selector_text} if selector_text else None)
            except WorkloadFailed as exc:
                if "404" not in str(exc):
                    self._errors.append(f"op {index}: {exc}")

        self._in_background(delete, op.get("skipWaitToCompletion", False))

    def _in_background(self, fn: Callable[[], None], background: bool) -> None:
        if not background:
            fn()
            return
        thread = threading.Thread(target=fn, daemon=True)
        thread.start()
        self._background.append(thread)

    def _churn(self, index: int, op: dict[str, Any]) -> None:
        """executor.go's runChurnOp: each interval, create one object per template (``create``
        mode, up to ``number`` rounds, 0: no limit) or recreate a ring of ``number`` per
        template (``recreate``: delete the slot's object if it has one, else create)."""
        if op.get("mode") not in ("create", "recreate"):
            raise WorkloadFailed(f"churn mode {op.get('mode')!r}")
        namespace = op.get("namespace") or f"namespace-{index}"
        self.ensure_namespace(namespace, register=False)
        templates = [corpus.load_object(path) for path in op["templatePaths"]]
        collections = [self._collection(t, namespace if self._resource(t)[1] else None) for t in templates]
        interval = (op.get("intervalMilliseconds") or 500) / 1000.0
        number = op.get("number", 0)

        def churn() -> None:
            slots: list[list[str]] = [[""] * max(number, 1) for _ in templates]
            rounds = 0
            while not self._stop.wait(interval):
                if op["mode"] == "create" and number and rounds >= number:
                    return
                for i, template in enumerate(templates):
                    slot = rounds % max(number, 1)
                    try:
                        if op["mode"] == "recreate" and slots[i][slot]:
                            self.kube.call("DELETE", f"{collections[i]}/{slots[i][slot]}")
                            slots[i][slot] = ""
                        else:
                            created = self.kube.call("POST", collections[i], self._ours(dict(template)))
                            slots[i][slot] = created["metadata"]["name"]
                    except Exception:  # noqa: BLE001, S112 (executor.go ignores churn failures too)
                        continue
                rounds += 1

        self._in_background(churn, True)

    def _wait(self, what: str, namespace: str | None, selector: dict[str, str] | None, want: int,
              attempted: bool) -> None:
        """Until ``want`` pods of the namespace are scheduled (or, ``attempted``, scheduled or
        tried); fails after ``stall`` seconds without progress or ``timeout`` in all."""
        started = last_change = time.monotonic()
        last = -1
        while True:
            scheduled, tried, _ = self.cache.counts(namespace, selector)
            done = scheduled + tried if attempted else scheduled
            if done >= want:
                return
            now = time.monotonic()
            if done != last:
                last, last_change = done, now
            if now - last_change > self.stall or now - started > self.timeout:
                stage = "attempted" if attempted else "scheduled"
                raise WorkloadFailed(f"{what}: {done} of {want} {stage} after {now - started:.0f} s")
            if self._errors:
                raise WorkloadFailed(self._errors[0])
            time.sleep(0.2)

    def _barrier(self, index: int, op: dict[str, Any]) -> None:
        namespaces = op.get("namespaces") or list(self.namespaces)
        unknown = [ns for ns in namespaces if ns not in self.namespaces]
        if unknown:
            raise WorkloadFailed(f"op {index}: barrier on unknown namespace {unknown[0]}")
        attempted = op.get("stageRequirement", "Scheduled") == "Attempted"
        selector = op.get("labelSelector")
        for namespace in namespaces:
            self._wait(f"op {index} barrier", namespace, selector, self.namespaces[namespace], attempted)
        if not attempted:
            for namespace in namespaces:
                self.namespaces.pop(namespace, None)

    def _sleep(self, index: int, op: dict[str, Any]) -> None:
        time.sleep(parse_duration(op.get("duration") or "0s"))

    def _create_any(self, index: int, op: dict[str, Any]) -> None:
        namespace = op.get("namespace")
        if namespace:
            self.ensure_namespace(namespace)
        count = op.get("count", 1)
        self._parallel(lambda i: self._create(served_version(corpus.load_object(op["templatePath"], i, count)),
                                              namespace), count)

    def _create_resource_driver(self, index: int, op: dict[str, Any]) -> None:
        """createResourceDriverOp: one ResourceSlice per node matching ``nodes``. The Go op
        then waits for the scheduler's informer to hold them all; neither scheduler here
        exposes its informer, so the wait is for the API server to list them."""
        names = [n["metadata"]["name"] for n in self._list("/api/v1/nodes")]
        matched = dra.driver_nodes(op["nodes"], names)
        driver, capacity = op["driverName"], op["maxClaimsPerNode"]
        self._parallel(lambda i: self._send("POST", f"/apis/{dra.API}/resourceslices",
                                            dra.resource_slice(driver, matched[i], capacity)), len(matched))
        listed = self._list(f"/apis/{dra.API}/resourceslices", {"fieldSelector": f"spec.driver={driver}"})
        if len(listed) != len(matched):
            raise WorkloadFailed(f"op {index}: {len(listed)} of {len(matched)} ResourceSlices listed")

    def _alloc_resource_claims(self, index: int, op: dict[str, Any]) -> None:
        """allocResourceClaimsOp: every unallocated claim of ``namespace`` (all when empty)
        allocated on a random node with room (dra.plan_allocations); each status written as
        soon as it is decided, the writes sent by the pool while the next claims are placed."""
        namespace = op.get("namespace") or ""
        everything = self._list(f"/apis/{dra.API}/resourceclaims")
        claims = [c for c in everything if not namespace or c["metadata"]["namespace"] == namespace]
        others = [c for c in everything if c not in claims]
        nodes = self._list("/api/v1/nodes")
        slices = self._list(f"/apis/{dra.API}/resourceslices")
        classes = self._list(f"/apis/{dra.API}/deviceclasses")

        def write(claim: dict[str, Any], allocation: dict[str, Any]) -> None:
            meta = claim["metadata"]
            body = {**claim, "apiVersion": dra.API, "kind": "ResourceClaim", "status": {**(claim.get("status") or {}), "allocation": allocation}}
            self._send("PUT", f"/apis/{dra.API}/namespaces/{meta['namespace']}/resourceclaims/{meta['name']}/status", body)

        try:
            with ThreadPoolExecutor(WORKERS) as pool:
                writes = [pool.submit(write, claim, allocation)
                          for claim, allocation in dra.plan_allocations(claims, nodes, slices, classes, others)]
                for future in writes:
                    future.result()
        except dra.AllocationFailed as exc:
            raise WorkloadFailed(f"op {index}: {exc}") from exc

    def _list(self, path: str, params: dict[str, str] | None = None) -> list[dict[str, Any]]:
        return self._send("GET", path, None, params=params).get("items") or []

    def _update_any(self, index: int, op: dict[str, Any]) -> None:
        """update.go: PUT each object (and each named subresource), then its status, at
        ``updatePerSecond`` (0: as fast as possible)."""
        namespace = op.get("namespace")
        if namespace:
            self.ensure_namespace(namespace)
        count, rate = op.get("count", 1), op.get("updatePerSecond", 0)
        for i in range(count):
            if rate:
                time.sleep(1.0 / rate)
            obj = self._ours(corpus.load_object(op["templatePath"], i, count))
            path = f"{self._collection(obj, namespace)}/{obj['metadata']['name']}"
            for subresource in op.get("subresources") or [""]:
                self._send("PUT", f"{path}/{subresource}" if subresource else path, obj)
            self._send("PUT", f"{path}/status", obj)

    # ---- metrics -------------------------------------------------------------------------------

    def _begin(self, name: str, index: int, namespaces: list[str], selector: dict[str, str] | None,
               expected: int | None = None) -> Measurement:
        if self._open is not None:
            raise WorkloadFailed("metrics collection is overlapping")
        collector = ThroughputCollector(name, frozenset(namespaces), selector).start(self.cache)
        self._open = Measurement(name, index, frozenset(namespaces), selector, collector, expected)
        self._open.wall_s = time.monotonic()
        return self._open

    def _finish(self, measurement: Measurement) -> None:
        measurement.collector.stop(self.cache)
        measurement.wall_s = time.monotonic() - measurement.wall_s
        found = scheduled = 0
        for namespace in measurement.namespaces:
            s, a, u = self.cache.counts(namespace, measurement.selector)
            found, scheduled = found + s + a + u, scheduled + s
        measurement.found, measurement.scheduled = found, scheduled
        if measurement.steady:  # the batches deleted along the way count too
            measurement.scheduled = measurement.expected = measurement.collector.scheduled
        if measurement.expected is None:
            measurement.expected = found
        self.measurements.append(measurement)

    def _start_collecting(self, index: int, op: dict[str, Any]) -> None:
        if not op.get("namespaces"):
            raise WorkloadFailed(f"op {index}: startCollectingMetrics without namespaces")
        self._begin(op.get("name") or f"op{index}", index, op["namespaces"], op.get("labelSelector"))

    def _stop_collecting(self, index: int, op: dict[str, Any]) -> None:
        if self._open is None:
            raise WorkloadFailed(f"op {index}: stopCollectingMetrics without startCollectingMetrics")
        self._finish(self._open)
        self._open = None
