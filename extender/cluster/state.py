"""The cluster state: nodes, the pods on each node with their requests summed, and assumed pods.

One instance per process, shared by the request threads (webhook) or the
scheduling loop (standalone). Writers (watch threads, binders) hold a lock;
readers never do: every NodeInfo is immutable and replaced whole, and single
dict reads are atomic under the GIL, so a request sees each node either before
or after an update, never in between.

Assumed pods are ours: a bind we issued that the watch has not confirmed yet.
They count on their node so that the next pod does not land on the same free
space; they expire after `assume_ttl` seconds if the watch never confirms them.

`ClusterState` is kube-scheduler's cache (nodes, pods, assumed pods, and the indexes the
plugins read); what kube-scheduler keeps apart is apart here too, as attributes:

    state.nominator    preemption's nominated pods           (cluster/nominator.py)
    state.namespaces   namespaces' labels                    (cluster/kinds.py: state.kind_stores)
    state.budgets      PodDisruptionBudgets                  (cluster/kinds.py: state.kind_stores)
    state.volumes      claims, volumes, classes, CSI objects (cluster/volume_store.py)
    state.dra_store    DRA classes, slices, claims, in flight (cluster/dra_store.py)
    state.devices      shared-device use and claims          (cluster/deviceusage.py)
    state.listeners    who hears of each change              (cluster/listeners.py)

Its public surface, in one place:
* the engine reads it only as a `ClusterView` (policy/cluster_view.py): node infos, the
  pod indexes, `memo`, node usage, device use and claims, and the read side of the
  parts above (`namespace_labels`, `nominations`, `disruption_budgets`, `storage`);
* reflectors and snapshots write it: `replace_/upsert_/delete_` nodes and pods, and
  `state.namespaces`/`state.budgets`/`state.volumes` of their own kinds;
* binders: `assume`, `forget`, `confirm`, `expire_assumed`; the standalone scheduler:
  `state.nominator`, `state.listeners`; the usage loop: `set_usage_provider`, pod hooks;
* everyone: `ready`, `pod`, `pods_on`, `node_info(s)`, counts.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from extender.cluster import kinds
from extender.cluster.deviceusage import DeviceUsage
from extender.cluster.dra_store import DraStore
from extender.cluster.gate import ServingGate
from extender.cluster.listeners import (
    KIND_CHANGED,
    NODE_ADDED,
    NODE_DELETED,
    NODE_UPDATED,
    POD_ADDED,
    POD_DELETED,
    POD_PLACED,
    POD_RELABELED,
    POD_SCALED_DOWN,
    POD_UPDATED,
    PODS_LISTED,
    Listeners,
)
from extender.cluster.nominator import Nominator
from extender.cluster.objectstore import ObjectStore
from extender.cluster.podindex import PodIndex
from extender.cluster.topologycounts import GroupCounts
from extender.cluster.volume_store import VolumeStore
from extender.errors import InvalidObject
from extender.model.affinity import AffinityTerm, PodAffinity
from extender.model.budgets import DisruptionBudget
from extender.model.devices import NodeDeviceUse, Shares
from extender.model.nodes import NodeInfo, NodeView
from extender.model.pods import TERMINAL_PHASES, PodView
from extender.model.ports import HostPort
from extender.model.records import PodRecord, devices_held, record_from_dict, record_from_view
from extender.model.resources import Resources, add_into, subtract
from extender.model.selectors import LabelSelector
from extender.model.usage_samples import EMPTY_USAGE, UsageTable

log = logging.getLogger(__name__)

# Called under the state's lock with a pod's record before and after a change (None: absent),
# so a hook sees exactly when a pod starts or stops counting on a node. Keep it short.
PodHook = Callable[[PodRecord | None, PodRecord | None], None]


@dataclass(slots=True)
class _Usage:
    """Mutable per-node totals, only touched under the state's lock."""

    requested: Resources = field(default_factory=dict)
    score_requested: Resources = field(default_factory=dict)
    pods: dict[str, PodRecord] = field(default_factory=dict)
    # The host ports of the pods that have some, by pod key: few pods have any, and a node's
    # NodeInfo must not walk all of its pods to find them (SchedulingWhileGated: 30,000 on one).
    ports: dict[str, tuple[HostPort, ...]] = field(default_factory=dict)


class ClusterState:
    def __init__(self, *, assume_ttl: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.assume_ttl = assume_ttl
        self._clock = clock
        self._lock = threading.RLock()
        # Verb requests in flight: the watches feeding this state let them go first.
        self.serving = ServingGate()
        self._views: dict[str, NodeView] = {}
        self._infos: dict[str, NodeInfo] = {}
        # The names of `_views` as a set: `screen` checks hundreds of a request's names in one
        # C call (set.issuperset), which a dict's keys cannot do without copying them.
        self._names: set[str] = set()
        # Nodes whose pods changed since their NodeInfo was built: built again when next read
        # (ClusterState._fresh), so a bind, its watch event and a deletion between two cycles
        # cost one copy of the node's pods, not three.
        self._stale: set[str] = set()
        # Nodes that are not all clear (NodeView.all_clear) or unreadable: few, usually none.
        # Replaced, never changed in place, so lock-free readers see a whole set.
        self._unclear: frozenset[str] = frozenset()
        self._usage: dict[str, _Usage] = {}
        self._pods: dict[str, PodRecord] = {}
        self._assumed: dict[str, float] = {}  # pod key -> expiry (monotonic seconds)
        self._index = PodIndex()
        self.listeners = Listeners()
        self.nominator = Nominator()
        # The keyed kinds (cluster/kinds.py), by resource; each also under its reader's name.
        self.kind_stores: dict[str, ObjectStore[Any]] = {
            kind.resource: kind.new_store(partial(self._kind_changed, kind.resource)) for kind in kinds.KINDS}
        self.namespaces: ObjectStore[dict[str, str]] = self.kind_stores[kinds.NAMESPACES.resource]
        self.budgets: ObjectStore[DisruptionBudget] = self.kind_stores[kinds.BUDGETS.resource]
        # Device use follows every pod change (see extender.cluster.deviceusage); a change of a
        # node's use builds its NodeInfo again, as a change of its pods does.
        self.devices = DeviceUsage(claim_ttl=assume_ttl, clock=clock, on_change=self._invalidate)
        self._pod_hooks: tuple[PodHook, ...] = (self.devices.pod_changed,)
        self._usage_provider: Callable[[], UsageTable] | None = None
        self.volumes = VolumeStore(self.listeners.notify)  # claims, volumes, classes, CSI objects
        # DRA: device classes, resource slices and claims; a change of a node's shared devices builds its NodeInfo again.
        self.dra_store = DraStore(self.listeners.notify, on_nodes=self._devices_changed)
        # Bumped whenever the node set or a node's labels or taints change: what
        # topology domains are made of. `memo` results are only valid within one value.
        self.node_generation = 0
        self._memo: dict[Any, Any] = {}
        self._memo_generation = -1
        self.nodes_synced = False
        self.pods_synced = False
        self.last_event = clock()
        self._rejected = 0

    # ---- reads (lock-free) -------------------------------------------------

    @property
    def ready(self) -> bool:
        return (self.nodes_synced and self.pods_synced and all(store.synced for store in self.kind_stores.values())
                and self.volumes.synced and self.dra_store.synced)

    @property
    def rejected_objects(self) -> int:
        """Objects skipped as unreadable, of every kind the state stores."""
        return self._rejected + sum(store.rejected for store in self.kind_stores.values())

    def node_info(self, name: str) -> NodeInfo | None:
        if self._stale:
            self._fresh()
        return self._infos.get(name)

    def node_infos(self, names: Iterable[str]) -> tuple[list[NodeInfo], list[str]]:
        """The infos for `names`, in order, and the names the state does not hold."""
        if self._stale:
            self._fresh()
        infos = self._infos
        found: list[NodeInfo] = []
        unknown: list[str] = []
        for name in names:
            info = infos.get(name)
            if info is None:
                unknown.append(name)
            else:
                found.append(info)
        return found, unknown

    def screen(self, names: Sequence[str]) -> tuple[list[str], list[str]]:
        """Of `names`, the nodes that are not all clear and the names the state does not hold,
        each in request order: the only ones a filter whose checks pass every all-clear node
        (FilterCycle.passes_clear_nodes) has to look at. The usual answer, ([], []) for
        hundreds of names, is two C calls that build nothing: at 5,000 nodes, the set and dict
        look-ups this replaced were a seventh of a webhook's CPU."""
        known, unclear = self._names, self._unclear
        if known.issuperset(names) and (not unclear or unclear.isdisjoint(names)):
            return [], []
        return [n for n in names if n in unclear], [n for n in names if n not in known]

    def all_node_infos(self) -> list[NodeInfo]:
        if self._stale:
            self._fresh()
        return list(self._infos.values())

    def node_count(self) -> int:
        return len(self._infos)

    def pod_count(self) -> int:
        return len(self._pods)

    def pod(self, key: str) -> PodRecord | None:
        return self._pods.get(key)

    def pods_on(self, node: str) -> list[PodRecord]:
        info = self.node_info(node)
        return list(info.pods) if info is not None else []

    # ---- reads for the inter-pod plugins (the policy layer's ClusterView) ----------------

    def matching_pods(self, namespaces: Iterable[str], selector: LabelSelector) -> list[PodRecord]:
        """Placed pods (bound or assumed, not finished) of `namespaces` whose labels match."""
        found = []
        pods = self._pods
        for namespace in namespaces:
            for key in self._index.candidates(namespace, selector):
                record = pods.get(key)
                # PodRecord.counts written out: this runs for every matching pod of every cycle.
                if (record is not None and record.node_name and record.phase not in TERMINAL_PHASES
                        and selector.matches(record.labels)):
                    found.append(record)
        return found

    def owned_pods(self, namespace: str, kind: str, name: str) -> list[PodRecord]:
        """Placed pods whose controller is `kind`/`name` in `namespace`."""
        pods = self._pods
        return [r for r in (pods.get(k) for k in self._index.owned(namespace, kind, name))
                if r is not None and r.counts]

    def affinity_groups(self) -> list[PodGroup]:
        """Placed pods that carry pod (anti-)affinity terms, grouped by identical terms.

        A group's pods are looked up only when asked for: most groups' terms do not concern
        the pod being scheduled, and 150,000-pod clusters have tens of thousands of such pods."""
        return [PodGroup(terms, group, self._pods) for terms, group in self._index.affinity_groups()]

    def matching_counts(self, terms: Sequence[AffinityTerm], topology_keys: Sequence[str]) -> dict[str, dict[str, int]]:
        """Placed pods matching every one of `terms` (namespaces as names: a namespaceSelector
        is not read), per domain: topology key -> value -> pods, for each of `topology_keys`.
        Kept up to date by the pod index once asked for, so this costs a copy, not a count."""
        if not terms:
            return {}
        selection = tuple((t.namespaces, t.selector) for t in terms)
        with self._lock:  # a new counter must not miss a pod added while it is filled
            return self._index.counts(selection, tuple(topology_keys), self._pods)

    def spread_counts(self, namespace: str, selector: LabelSelector | None,
                      owner: tuple[str, str] | None = None) -> dict[str, int]:
        """The placed, not terminating pods of `namespace` matching `selector` (or controlled
        by `owner`, the default spread rule's selector), per node name. Kept up to date by the
        pod index once asked for, so PodTopologySpread sums node counts instead of walking pods."""
        with self._lock:  # a new counter must not miss a pod added while it is filled
            return self._index.node_counts((namespace, selector, owner), self._pods)

    def namespace_labels(self, name: str) -> dict[str, str] | None:
        """The labels of namespace `name`, or None when the state does not know it."""
        return self.namespaces.get(name)

    def namespaces_matching(self, selector: LabelSelector) -> frozenset[str]:
        """Names of the namespaces whose labels match. Namespaces only known through their
        pods (a snapshot without Namespace objects) count with no labels."""
        labels = self.namespaces.items
        names = set(labels) | set(self._index.namespaces())
        return frozenset(n for n in names if selector.matches(labels.get(n) or {}))

    def nominations(self) -> dict[str, tuple[PodRecord, ...]]:
        return self.nominator.nominations()

    def nominated_node(self, key: str) -> str:
        return self.nominator.nominated_node(key)

    def disruption_budgets(self) -> list[DisruptionBudget]:
        return self.budgets.values()

    def kind_objects(self, resource: str) -> Mapping[str, Any]:
        store = self.kind_stores.get(resource)
        return store.items if store is not None else {}

    def storage(self) -> VolumeStore:
        """Claims, volumes, classes and CSI objects, for the volume plugins."""
        return self.volumes

    def dra(self) -> DraStore:
        """Device classes, resource slices, resource claims and allocations in flight, for DynamicResources."""
        return self.dra_store

    def claim_users(self, namespace: str, claim: str) -> list[PodRecord]:
        """Placed pods with a `persistentVolumeClaim` volume of `namespace/claim`."""
        pods = self._pods
        return [r for r in (pods.get(k) for k in self._index.claim_users(namespace, claim))
                if r is not None and r.counts]

    def memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        """A value derived from node labels and taints only, computed once per node generation."""
        if self._memo_generation != self.node_generation:
            self._memo = {}
            self._memo_generation = self.node_generation
        memo = self._memo
        try:
            return memo[key]
        except KeyError:
            value = compute()
            if len(memo) < 1024:
                memo[key] = value
            return value

    def node_usage(self) -> UsageTable:
        """The usage samples a usage source published (extender/usage), or an empty table."""
        provider = self._usage_provider
        return provider() if provider is not None else EMPTY_USAGE

    def set_usage_provider(self, provider: Callable[[], UsageTable] | None) -> None:
        self._usage_provider = provider

    def add_pod_hook(self, hook: PodHook) -> None:
        with self._lock:
            self._pod_hooks = (*self._pod_hooks, hook)

    def remove_pod_hook(self, hook: PodHook) -> None:
        with self._lock:
            self._pod_hooks = tuple(h for h in self._pod_hooks if h != hook)  # bound methods: equal, not identical

    # ---- shared devices (see extender.cluster.deviceusage) ------------------------------

    def device_use(self, node: str) -> NodeDeviceUse:
        """What the pods on `node` (bound, and being bound by this process) hold of its devices."""
        return self.devices.use(node)

    def claim_devices(self, node: str, key: str, uid: str, shares: Shares, capacity: Mapping[str, tuple[int, int]],
                      replacing: int | None = None) -> tuple[int, NodeDeviceUse] | None:
        """Take device shares for a pod being bound, if they still fit; None when they do not.
        `replacing` is the pod's current claim, swapped for the new one in the same step."""
        with self._lock:
            return self.devices.claim(node, key, uid or key, shares, capacity, replacing)

    def release_devices(self, token: int) -> None:
        with self._lock:
            self.devices.release(token)

    def assumed_keys(self) -> list[str]:
        return list(self._assumed)

    # ---- nodes -----------------------------------------------------------

    def upsert_node(self, raw: Mapping[str, Any]) -> NodeView:
        """Add or replace a node; a node with unreadable fields is kept but marked unusable."""
        view = NodeView.from_dict(raw)
        if view.error:
            log.warning("node %s kept as unusable: %s", view.name, view.error)
        with self._lock:
            before = self._views.get(view.name)
            if before is None or before.labels != view.labels or before.taints != view.taints:
                self.node_generation += 1
            self._views[view.name] = view
            self._names.add(view.name)
            if before is None or before.labels != view.labels:
                self._index.relabel_node(view.name, view.labels, self._pods_counted_on(view.name))
            self._stale.discard(view.name)
            self._build_info(view.name)
            self._unclear = self._unclear - {view.name} if _clear(view) else self._unclear | {view.name}
            self.last_event = self._clock()
        self.listeners.notify(NODE_UPDATED if before is not None else NODE_ADDED, view)
        return view

    def delete_node(self, name: str) -> None:
        with self._lock:
            view = self._views.pop(name, None)
            self._names.discard(name)
            self._infos.pop(name, None)
            self._stale.discard(name)
            self._index.relabel_node(name, None, self._pods_counted_on(name))
            self._unclear = self._unclear - {name}
            self.nominator.node_deleted(name)
            self.node_generation += 1
            self.last_event = self._clock()
        if view is not None:
            self.listeners.notify(NODE_DELETED, view)

    def replace_nodes(self, raws: Iterable[Mapping[str, Any]]) -> None:
        """Swap in a full node list (initial list or re-list after 410)."""
        views = {view.name: view for view in self._listed(raws, NodeView.from_dict, "node")}
        with self._lock:
            previous = self._views
            self._views = views
            self._names = _compact_names(views)
            for name in previous.keys() | views.keys():
                before, after = previous.get(name), views.get(name)
                if before is None or after is None or before.labels != after.labels:
                    self._index.relabel_node(name, after.labels if after is not None else None,
                                             self._pods_counted_on(name))
            self._unclear = frozenset(name for name, view in views.items() if not _clear(view))
            self._infos = {}
            self._stale = set()
            for name in views:
                self._build_info(name)
            self.node_generation += 1
            self.nodes_synced = True
            self.last_event = self._clock()
        _settle_heap()
        for name, view in views.items():
            before = previous.get(name)
            if before is None:
                self.listeners.notify(NODE_ADDED, view)
            elif before != view:  # a re-list may carry changes the broken watch missed (an uncordon)
                self.listeners.notify(NODE_UPDATED, view)
        for name in previous.keys() - views.keys():
            self.listeners.notify(NODE_DELETED, previous[name])

    def _kind_changed(self, resource: str, key: str) -> None:
        self._touch()
        self.listeners.notify(KIND_CHANGED, (resource, key))

    def _touch(self) -> None:
        self.last_event = self._clock()

    # ---- pods ------------------------------------------------------------

    def upsert_pod(self, raw: Mapping[str, Any]) -> PodRecord | None:
        """Add or replace a pod; a pod that cannot be read is logged and skipped."""
        try:
            record = record_from_dict(raw)
        except InvalidObject as exc:
            self._rejected += 1
            log.warning("skipping pod: %s", exc)
            return None
        with self._lock:
            old = self._pods.get(record.key)
            if record.key in self._assumed:
                if record.node_name:  # the watch confirmed our bind (or someone else's)
                    del self._assumed[record.key]
                elif old is not None and old.assumed and record.uid == old.uid:
                    record = replace(record, node_name=old.node_name, assumed=True)
            self._put(record)
            self.nominator.follow(record)
            self.last_event = self._clock()
        self.listeners.notify(POD_UPDATED if old else POD_ADDED, record)
        if record.node_name:
            if old is None or not old.node_name or old.assumed:
                self.listeners.notify(POD_PLACED, record)
            elif old.labels != record.labels:
                self.listeners.notify(POD_RELABELED, record)
        if old is not None and old.node_name and record.node_name and _scaled_down(old.requests, record.requests):
            self.listeners.notify(POD_SCALED_DOWN, record)
        return record

    def delete_pod(self, key: str) -> None:
        with self._lock:
            old = self._pods.get(key)
            self._assumed.pop(key, None)
            self._remove(key)
            self.nominator.placed(key)
            self.last_event = self._clock()
        if old is not None:
            self.listeners.notify(POD_DELETED, old)

    def replace_pods(self, raws: Iterable[Mapping[str, Any]]) -> None:
        """Swap in a full pod list, keeping assumptions the new list does not contradict."""
        records = {record.key: record for record in self._listed(raws, record_from_dict, "pod")}
        with self._lock:
            gone = [self._pods[k] for k in self._pods.keys() - records.keys()]
            for key in list(self._assumed):
                listed = records.get(key)
                old = self._pods.get(key)
                if listed is not None and not listed.node_name and old is not None and old.uid == listed.uid:
                    records[key] = replace(listed, node_name=old.node_name, assumed=True)
                else:
                    del self._assumed[key]
            self._pods = records
            self._usage = {}
            self._index = PodIndex({name: view.labels for name, view in self._views.items()})
            self.devices.reset(records.values())
            self.nominator.follow_all(records.values(), records)
            for record in records.values():
                if record.counts:
                    self._account(record)
            self._infos = {}
            self._stale = set()
            for name in self._views:
                self._build_info(name)
            self.pods_synced = True
            self.last_event = self._clock()
            for record in gone:
                self._hook(record, None)
        _settle_heap()
        for record in gone:
            self.listeners.notify(POD_DELETED, record)
        self.listeners.notify(PODS_LISTED, list(records.values()))

    # ---- assumptions -------------------------------------------------------

    def assume(self, key: str, node_name: str, *, uid: str = "", view: PodView | None = None,
               scheduler_name: str = "") -> PodRecord:
        """Count a pod on `node_name` before the API server confirms the bind.

        `view` describes a pod the state does not hold yet (a bind racing the watch)."""
        with self._lock:
            old = self._pods.get(key)
            if old is not None and old.node_name == node_name:
                # Already counted there. Confirmed by the watch before the binder got its reply:
                # assuming again would let expire_assumed() unbind a pod really on the node.
                # Assumed by the scheduling cycle: the binder's success only restarts the clock.
                if old.assumed:
                    self._assumed[key] = self._clock() + self.assume_ttl
                return old
            if old is not None:
                record = replace(old, node_name=node_name, assumed=True)
            elif view is not None:
                record = record_from_view(view, node_name=node_name, assumed=True)
            else:
                record = PodRecord(key, uid, node_name, scheduler_name or "default-scheduler", "Pending", False,
                                   False, {}, {}, True, namespace=key.partition("/")[0])
            self._put(record)
            self.nominator.placed(key)  # it no longer waits for room anywhere
            self._assumed[key] = self._clock() + self.assume_ttl
        return record

    def forget(self, key: str) -> None:
        """Undo an assumption after a failed bind: the pod is pending again."""
        with self._lock:
            if self._assumed.pop(key, None) is None:
                return
            old = self._pods.get(key)
            if old is not None:
                self._put(replace(old, node_name="", assumed=False))

    def confirm(self, key: str, node_name: str, *, annotations: Mapping[str, str] | None = None) -> None:
        """Record a bind as done without waiting for a watch (snapshot mode: we are the server).

        `annotations` are the Binding's, which the API server would copy onto the pod."""
        with self._lock:
            self._assumed.pop(key, None)
            old = self._pods.get(key)
            if old is not None:
                self._put(replace(old, node_name=node_name, assumed=False, view=None,
                                  devices=devices_held(annotations, node_name, key)))

    def expire_assumed(self) -> list[str]:
        """Drop assumptions the watch never confirmed within the TTL; returns their keys."""
        now = self._clock()
        expired = [key for key, deadline in list(self._assumed.items()) if deadline <= now]
        for key in expired:
            log.warning("assumed pod %s expired without confirmation from the watch", key)
            self.forget(key)
        with self._lock:
            for key in self.devices.expire():
                log.warning("device claim of pod %s expired without its bind showing up", key)
        return expired

    # ---- internals ---------------------------------------------------------------

    def _listed(self, raws: Iterable[Mapping[str, Any]], parse: Callable[[Mapping[str, Any]], Any],
                kind: str) -> Iterator[Any]:
        """The objects of a full list that can be read; the others are counted and logged."""
        for raw in raws:
            try:
                yield parse(raw)
            except InvalidObject as exc:
                self._rejected += 1
                log.warning("skipping %s from list: %s", kind, exc)

    # ---- internals (caller holds the lock) ----------------------------------

    def _put(self, record: PodRecord) -> None:
        old = self._pods.get(record.key)
        if old is not None and old.counts:
            self._unaccount(old)
        self._pods[record.key] = record
        if record.counts:
            self._account(record)
            self._invalidate(record.node_name)
        if self._pod_hooks:
            self._hook(old, record)

    def _remove(self, key: str) -> None:
        old = self._pods.pop(key, None)
        if old is not None and old.counts:
            self._unaccount(old)
        if old is not None and self._pod_hooks:
            self._hook(old, None)

    def _hook(self, old: PodRecord | None, new: PodRecord | None) -> None:
        for hook in self._pod_hooks:
            try:
                hook(old, new)
            except Exception:  # a hook must never break the watch or a bind
                log.exception("cluster state pod hook failed")

    def _account(self, record: PodRecord) -> None:
        """Count a placed pod on its node and in the indexes (the caller invalidates its NodeInfo)."""
        usage = self._usage.setdefault(record.node_name, _Usage())
        add_into(usage.requested, record.requests)
        add_into(usage.score_requested, record.score_requests)
        usage.pods[record.key] = record
        if record.host_ports:
            usage.ports[record.key] = record.host_ports
        self._index.add(record)

    def _unaccount(self, record: PodRecord) -> None:
        usage = self._usage.get(record.node_name)
        if usage is None or record.key not in usage.pods:
            return
        self._index.remove(usage.pods.pop(record.key))
        usage.ports.pop(record.key, None)
        usage.requested = subtract(usage.requested, record.requests)
        usage.score_requested = subtract(usage.score_requested, record.score_requests)
        if not usage.pods:
            del self._usage[record.node_name]
        self._invalidate(record.node_name)

    def _pods_counted_on(self, node: str) -> Iterable[PodRecord]:
        usage = self._usage.get(node)
        return usage.pods.values() if usage is not None else ()

    def _invalidate(self, name: str) -> None:
        """The node's pods changed: its NodeInfo is built again when next read."""
        self._stale.add(name)

    def _devices_changed(self, names: Collection[str] | None) -> None:
        """The DRA devices (slices, shares) of these nodes changed (None: of any node)."""
        self._stale.update(self._views if names is None else (n for n in names if n in self._views))

    def _fresh(self) -> None:
        """Build the NodeInfos of the nodes whose pods changed since they were last read."""
        with self._lock:
            for name in self._stale:
                self._build_info(name)
            self._stale.clear()

    def _build_info(self, name: str) -> None:
        view = self._views.get(name)
        if view is None:
            return
        usage = self._usage.get(name)
        if usage is None:
            self._infos[name] = NodeInfo(view)
        else:
            pods = tuple(usage.pods.values())
            ports = tuple(port for ported in usage.ports.values() for port in ported)
            # Copies, not interned: a node's totals are its own and change with every pod.
            self._infos[name] = NodeInfo(view, dict(usage.requested), dict(usage.score_requested), len(pods),
                                         pods, ports)


class PodGroup:
    """Placed pods sharing one set of affinity terms (see ClusterState.affinity_groups)."""

    __slots__ = ("terms", "_group", "_pods")

    def __init__(self, terms: PodAffinity, group: GroupCounts, pods: dict[str, PodRecord]) -> None:
        self.terms = terms
        self._group = group
        self._pods = pods

    def pods(self) -> list[PodRecord]:
        pods = self._pods
        return [r for r in (pods.get(k) for k in tuple(self._group.pods)) if r is not None and r.counts]

    def counts(self, topology_key: str) -> dict[str, int]:
        """How many of the group's pods sit in each domain of `topology_key` (a copy)."""
        return dict(self._group.counts.get(topology_key, _NO_COUNTS))


_NO_COUNTS: dict[str, int] = {}


def _compact_names(names: Iterable[str]) -> set[str]:
    """A set of fresh copies of `names`, allocated one after another. Each look-up of a request's
    name compares it with the stored string, and between two requests the other processes of a
    busy machine evict the caches: the names as decoded lie scattered among their nodes'
    objects, copies lie together (at 5,000 nodes, cold, issuperset of 500 names took half
    the time)."""
    return {name.encode().decode() for name in names}


def _settle_heap() -> None:
    """Move the freshly listed objects out of the cyclic GC's reach.

    A full list leaves millions of long-lived objects; every later gen-2 collection
    would walk them all in the middle of some request (tens of ms at 5000 nodes).
    They are freed by reference counting as usual when replaced.
    """
    gc.freeze()


def _clear(view: NodeView) -> bool:
    return view.all_clear and not view.error


def infos_from_views(views: Sequence[NodeView], state: ClusterState | None) -> list[NodeInfo]:
    """NodeInfos for nodes sent in a request body, with usage from the state when it knows the node."""
    result = []
    for view in views:
        known = state.node_info(view.name) if state is not None else None
        if known is None:
            result.append(NodeInfo(view))
        elif known.node is view:
            result.append(known)
        else:
            result.append(replace(known, node=view))
    return result


def _scaled_down(before: Mapping[str, int], after: Mapping[str, int]) -> bool:
    """Did any request go down (kube-scheduler's UpdatePodScaleDown)?"""
    return any(after.get(name, 0) < amount for name, amount in before.items())
