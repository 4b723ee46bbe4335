"""The live cluster source: node and pod reflectors feeding the ClusterState, plus housekeeping.

The state reports ready only after both initial lists are in (replace_nodes and
replace_pods set the flags), so a webhook or scheduler never decides on a cluster
it has only half seen. Terminal pods are filtered server-side: they hold no
resources, and on a big cluster they are most of the pod objects.

Pods are watched only when something reads them: the standalone scheduler always; the
webhook when its policy has a plugin that reads placed pods or when it binds
(`watch_pods`, decided by the runtime). kube-scheduler sends each call its pod, so a
webhook with a node-only policy and no bind verb (the default policy, registered without
`bindVerb`) keeps no pods: on kube-scheduler's path every bind would otherwise be a
watch event to decode and apply, about as much CPU as answering the pod's filter call,
and a big cluster's pods would sit in memory for nothing. A reloaded policy that reads
pods starts the watch (`start_pod_watch`) before it replaces the old one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection, Iterable, Mapping
from functools import partial
from typing import Any

from kubernetes import client as k8s_client

from extender import metrics
from extender.cluster import kinds
from extender.cluster.kinds import WatchedKind
from extender.cluster.state import ClusterState
from extender.errors import ClusterError, InvalidObject, NotFoundError
from extender.kube import client as kube_client
from extender.kube import devicemetrics, dra_source
from extender.kube.store_reflectors import apply_event, count_rejected
from extender.kube.volume_source import publish_counts, storage_reflectors
from extender.kube.watching import Reflector
from extender.model.fields import object_key
from extender.model.pods import TERMINAL_PHASES

log = logging.getLogger(__name__)

NODES_PATH = "/api/v1/nodes"
PODS_PATH = "/api/v1/pods"
DEFAULT_POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
# Pods are listed in one reply, read an object at a time (extender/kube/liststream.py), not in
# pages: kube-apiserver serves each page from its watch cache by walking every object from the
# page's start to the end of the resource, so a paginated list costs it (objects)^2 / (2 x page
# size) steps. At 150,000 pods in pages of 500, 16 s of its CPU; in one reply, 3 s.
POD_PAGE_SIZE = 0

# Node fields no policy reads, dropped from watched nodes before the state keeps them
# (NodeView keeps the raw dict). status.images alone is often half of a node's size.
_NODE_METADATA_DROP = ("managedFields",)
_NODE_STATUS_DROP = ("images",)


def slim_node(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A shallow copy of a node without managedFields and status.images, to save memory."""
    node = dict(raw)
    meta = node.get("metadata")
    if isinstance(meta, dict) and any(k in meta for k in _NODE_METADATA_DROP):
        node["metadata"] = {k: v for k, v in meta.items() if k not in _NODE_METADATA_DROP}
    status = node.get("status")
    if isinstance(status, dict) and any(k in status for k in _NODE_STATUS_DROP):
        node["status"] = {k: v for k, v in status.items() if k not in _NODE_STATUS_DROP}
    return node


class KubeSource:
    """Keeps a ClusterState in step with the API server: one reflector each for nodes, pods,
    the keyed kinds its mode watches (cluster/kinds.py: namespaces, whose labels pod affinity
    terms select with `namespaceSelector`; PodDisruptionBudgets, which preemption respects
    when it can), the storage objects of the volume plugins (see volume_source.py) and the
    DRA kinds."""

    kind = "kube"

    def __init__(
        self,
        state: ClusterState,
        api_client: k8s_client.ApiClient,
        *,
        pod_field_selector: str = DEFAULT_POD_FIELD_SELECTOR,
        node_label_selector: str | None = None,
        slim_nodes: bool = True,
        mode: str = kinds.WEBHOOK,
        watch_pods: bool = True,
        dra_kinds: Collection[str] = (),
        housekeeping_interval: float = 1.0,
        **reflector_options: Any,
    ) -> None:
        """`reflector_options` go to every Reflector (page_size, backoff, stall_after, ...;
        pods are listed unpaginated (POD_PAGE_SIZE) unless `page_size` is given).
        `mode`: the keyed kinds that mode watches (cluster/kinds.py: namespaces in every mode,
        PodDisruptionBudgets for the standalone scheduler's preemption).
        `watch_pods`: False leaves pods out (the state holds none, and says they are synced)
        until `start_pod_watch`. `dra_kinds`: also these of DeviceClasses, ResourceSlices and
        ResourceClaims (dra_source.ALL: the DynamicResources plugin), where the server serves them."""
        self.state = state
        self.api_client = api_client
        self.slim_nodes = slim_nodes
        reflector_options.setdefault("yield_to", state.serving)
        self.housekeeping_interval = housekeeping_interval
        self.nodes = Reflector(
            api_client, NODES_PATH, resource="nodes", label_selector=node_label_selector,
            on_list=self._list_nodes, on_event=self._node_event, trim_managed_fields=slim_nodes, **reflector_options,
        )
        self.pods = Reflector(  # pods are kept as records (extender/model/records.py): no managedFields
            api_client, PODS_PATH, resource="pods", field_selector=pod_field_selector or None,
            on_list=self._list_pods, on_event=self._pod_event, trim_managed_fields=True,
            **{"page_size": POD_PAGE_SIZE, **reflector_options},
        )
        # One reflector per keyed kind the mode watches, each into its store (cluster/kinds.py).
        self.kinds = {kind.resource: Reflector(
            api_client, kind.path, resource=kind.resource, on_list=state.kind_stores[kind.resource].replace,
            on_event=partial(self._kind_event, kind), **reflector_options) for kind in kinds.watched_in(mode)}
        for resource, store in state.kind_stores.items():
            store.synced = resource not in self.kinds
        self._pods_watched = watch_pods
        self._pod_watch_lock = threading.Lock()
        if not watch_pods:
            state.pods_synced = True  # nothing to wait for: the policy reads no pods
        self.storage = storage_reflectors(state, api_client, **reflector_options)
        self.dra = dra_source.dra_reflectors(state, api_client, dra_kinds, **reflector_options) if dra_kinds else []
        self._stop = threading.Event()
        self._started = False
        self._housekeeper: threading.Thread | None = None
        self._device_gauges = devicemetrics.DeviceGauges()
        self._dra_metrics = dra_source.DraMetrics()

    # ---- lifecycle -------------------------------------------------------------

    def start(self) -> None:
        """Start the watches and housekeeping; returns at once (see wait_synced)."""
        with self._pod_watch_lock:
            self._started = True
            for reflector in self.reflectors:
                reflector.start()
            if not self._pods_watched:
                log.info("pods are not watched: the policy reads no pods on nodes; the first /bind starts the watch")
        self._housekeeper = threading.Thread(target=self._housekeeping, name="cluster-housekeeping",
                                             daemon=True)
        self._housekeeper.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        for reflector in self.reflectors:
            reflector.stop(timeout)
        if self._housekeeper is not None:
            self._housekeeper.join(timeout)

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Block until both initial lists are in the state, or `timeout` seconds pass."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for reflector in self.reflectors:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not reflector.wait_synced(left):
                return False
        return self.state.ready

    @property
    def reflectors(self) -> tuple[Reflector, ...]:
        pods = self.pods if self._pods_watched else None
        found = (self.nodes, pods, *self.kinds.values(), *self.storage, *self.dra)
        return tuple(r for r in found if r is not None)

    @property
    def pods_watched(self) -> bool:
        return self._pods_watched

    def start_pod_watch(self, why: str = "the policy now reads the pods on nodes") -> bool:
        """Watch pods from now on, and wait until they are listed; whether they are (False:
        stopped first). The state stays ready meanwhile: whatever does not read pods goes
        on being answered, and whatever does waits for this to return."""
        if not self.begin_pod_watch(why):
            return True  # start() starts it with the rest, and the state waits for its list
        while not self.pods.wait_synced(0.5):
            if self._stop.is_set():
                return False
        return True

    def begin_pod_watch(self, why: str) -> bool:
        """Start watching pods without waiting for their list; False when start() will (not started yet)."""
        with self._pod_watch_lock:
            if not self._pods_watched:
                log.info("starting the pod watch: %s", why)
                self._pods_watched = True
                if not self._started:
                    self.state.pods_synced = False
                    return False
                self.pods.start()
        return True

    def pods_listed(self, timeout: float) -> bool:
        """Whether the pod watch runs and has listed every pod, waiting up to `timeout` seconds."""
        return self._pods_watched and self.pods.wait_synced(timeout)

    # ---- reflector callbacks (each on its reflector's thread) ------------------------

    def _kind_event(self, watched: WatchedKind[Any], kind: str, obj: dict[str, Any]) -> None:
        store = self.state.kind_stores[watched.resource]
        apply_event(watched.kind, kind, watched.key_of(obj), store.delete, partial(store.upsert, obj))

    def _prepare_node(self, raw: Mapping[str, Any]) -> Mapping[str, Any]:
        return slim_node(raw) if self.slim_nodes else raw

    def _list_nodes(self, items: Iterable[dict[str, Any]]) -> None:
        before = self.state.rejected_objects
        self.state.replace_nodes(self._prepare_node(item) for item in items)
        count_rejected("node", self.state.rejected_objects - before)
        log.info("cluster state: %d nodes", self.state.node_count())

    def _list_pods(self, items: Iterable[dict[str, Any]]) -> None:
        before = self.state.rejected_objects
        self.state.replace_pods(items)
        count_rejected("pod", self.state.rejected_objects - before)
        log.info("cluster state: %d pods", self.state.pod_count())

    def _node_event(self, kind: str, obj: dict[str, Any]) -> None:
        apply_event("node", kind, object_key(obj, namespaced=False), self.state.delete_node, partial(self._upsert_node, obj))

    def _upsert_node(self, obj: dict[str, Any]) -> bool:
        try:
            self.state.upsert_node(self._prepare_node(obj))
        except InvalidObject as exc:
            log.warning("skipping node %s: %s", object_key(obj, namespaced=False), exc)
            return False
        return True

    def _pod_event(self, kind: str, obj: dict[str, Any]) -> None:
        apply_event("pod", kind, object_key(obj), self.state.delete_pod, partial(self.state.upsert_pod, obj))

    def refresh_pod(self, namespace: str, name: str) -> bool:
        """Read one pod from the API server into the state now; whether it was found.

        kube-scheduler's informer and our pod watch are two streams: kube-scheduler can
        filter and bind a pod it has just seen before our watch delivers it. A bind must
        not be refused for that (kube-scheduler would back off for a second or more).
        A pod that has finished is left out, as the watch's field selector leaves it out.
        """
        try:
            obj = kube_client.request_json(self.api_client, "GET", f"/api/v1/namespaces/{namespace}/pods/{name}",
                                           timeout=(5.0, 10.0))
        except NotFoundError:
            return False
        except ClusterError as exc:
            log.warning("could not read pod %s/%s: %s", namespace, name, exc)
            return False
        if (obj.get("status") or {}).get("phase") in TERMINAL_PHASES:
            return False
        return self.state.upsert_pod(obj) is not None

    # ---- housekeeping ---------------------------------------------------------

    def _housekeeping(self) -> None:
        """Expire unconfirmed assumptions, publish cache metrics, warn about silent watches."""
        while not self._stop.wait(self.housekeeping_interval):
            try:
                self.housekeep()
            except Exception:  # housekeeping must outlive any one bad tick
                log.exception("cluster housekeeping failed")

    def housekeep(self) -> None:
        self.state.expire_assumed()
        metrics.CACHE_SYNCED.set(1 if self.state.ready else 0)
        # state.last_event is on the monotonic clock; the gauge wants Unix time.
        metrics.CACHE_LAST_EVENT.set(time.time() - (time.monotonic() - self.state.last_event))
        metrics.CACHE_OBJECTS.labels(kind="node").set(self.state.node_count())
        metrics.CACHE_OBJECTS.labels(kind="pod").set(self.state.pod_count())
        metrics.CACHE_OBJECTS.labels(kind="assumed").set(len(self.state.assumed_keys()))
        publish_counts(self.state.volumes)
        if self.dra:
            self._dra_metrics.publish(self.state.dra_store)
        self._device_gauges.publish(self.state)
        now = time.monotonic()
        for reflector in self.reflectors:
            if reflector.synced:
                reflector.check_stall(now)
