"""The standalone scheduler: watches, queue, loop, binds and leader election, tied together.

One loop thread pops a pod, runs the pure cycle with its profile's engine, assumes the
pod on the chosen node and hands the bind to the pool; it never waits for the API
server. Watches (cluster state, pending pods) run on their own threads in every
replica, so a follower that becomes leader starts with a warm cache and a full queue;
only the loop and the binds are gated on leadership.

Cluster events that may make waiting pods fit (a node added or changed, a pod deleted
or finished, a claim, volume, storage class or CSI object added or changed) move back into
play the unschedulable pods that a plugin which refused them registered for (its queueing
hints: scheduler/hints.py); node heartbeats that change nothing scheduling reads do not.

Shutdown (SIGTERM) is graceful: stop taking pods, finish the binds in flight, stop
the watches, then release the lease so a follower takes over at once.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from extender import metrics
from extender.cluster import kinds, listeners
from extender.cluster.dra_store import CLAIMS, DRA_CHANGED
from extender.cluster.state import ClusterState
from extender.cluster.volume_store import STORAGE_CHANGED
from extender.cycle import steps
from extender.cycle.pod import CycleResult, schedule_one
from extender.errors import ExtenderError
from extender.kube import dra_source
from extender.kube.binder import KubeBinder
from extender.kube.source import KubeSource
from extender.kube.volume_source import STORAGE_PATHS
from extender.model.devices import node_inventory, raw_annotations
from extender.model.nodes import NodeInfo, NodeView
from extender.policy import enqueue
from extender.policy.engine import Engine
from extender.policy.reservations import Reservation
from extender.policy.status import Status
from extender.scheduler.bind_pool import BindPool
from extender.scheduler.claim_gate import ClaimGate
from extender.scheduler.gang_scheduling import GangScheduling
from extender.scheduler.hints import QueueingHints
from extender.scheduler.leader import LeaderElector
from extender.scheduler.pending import PendingPods
from extender.scheduler.preemptor import PREEMPT_WORKERS, Preemptor
from extender.scheduler.profiles import Profile
from extender.scheduler.queueing import QueuedPod, SchedulingQueue
from extender.scheduler.reporting import REPORT_WORKERS, Reporter
from extender.usage.service import UsageService

log = logging.getLogger(__name__)

_IDLE_WAIT = 0.2
# Long-lived streams besides the pending-pod watches (one per profile): nodes, pods, the
# keyed kinds (cluster/kinds.py) and the storage kinds; plus the lease, the usage source,
# the volume waits (each polls once a second, so only a few at once) and a margin.
_WATCHES = 2 + len(kinds.watched_in(kinds.STANDALONE)) + len(STORAGE_PATHS)
_OTHER_CONNECTIONS = 12
_POD_EVENTS = frozenset({listeners.POD_ADDED, listeners.POD_UPDATED, listeners.POD_DELETED})


# How long a popped pod waits for the pod watch to deliver it (`Scheduler._await_pod_watch`):
# a lag of milliseconds normally; past this the cycle runs on what the state knows.
POD_WATCH_WAIT = 1.0


def connections_needed(parallel_binds: int, profiles: int) -> int:
    """The API connections a Scheduler may hold at once: its client's pools must keep that many.

    Binds, Events, PodScheduled patches and evictions each take a kept-alive connection
    (extender/kube/keepalive.py) for one request, watches a urllib3 one for as long as
    they stream; both pools get this size. A pool smaller than its share opens extra
    connections under load and throws each away after one request ("Connection pool is
    full, discarding connection"), so every burst pays new TLS handshakes.
    """
    return parallel_binds + REPORT_WORKERS + PREEMPT_WORKERS + _WATCHES + profiles + _OTHER_CONNECTIONS


def _node_signature(view: NodeView) -> dict[str, Any]:
    """What a node update must change to be worth retrying unschedulable pods (not heartbeats):
    what every filter may read, by part, each under the node update event it makes
    (policy/enqueue.py: the plugins register for these)."""
    return {enqueue.UPDATE_NODE_LABEL: view.labels, enqueue.UPDATE_NODE_TAINT: view.taints,
            enqueue.UPDATE_NODE_UNSCHEDULABLE: view.unschedulable, enqueue.UPDATE_NODE_CONDITION: view.conditions,
            enqueue.UPDATE_NODE_ALLOCATABLE: view.allocatable, enqueue.UPDATE_NODE_READABLE: view.error,
            enqueue.UPDATE_NODE_DEVICES: node_inventory(raw_annotations(view.raw)),
            enqueue.UPDATE_NODE_DECLARED_FEATURE: view.declared_features}


class Scheduler:
    """Schedules the pods of every profile's schedulerName; `start()` returns at once."""

    def __init__(
        self,
        api_client: Any,
        profiles: Iterable[Profile],
        *,
        state: ClusterState | None = None,
        source: Any = None,
        binder: Any = None,
        leader: LeaderElector | None = None,
        parallel_binds: int = 16,
        percentage_of_nodes_to_score: int = 0,
        queue: SchedulingQueue | None = None,
        reporter: Reporter | None = None,
        rng: random.Random | None = None,
        instance: str = "",
        watch_options: dict[str, Any] | None = None,
        preemption: bool = True,
    ) -> None:
        """`source` and `binder` default to the live ones (KubeSource, KubeBinder) for `api_client`;
        `watch_options` go to every Reflector (backoff, page size...). `preemption`: evict
        lower-priority pods for pods that fit nowhere (kube-scheduler's DefaultPreemption)."""
        self.api_client = api_client
        self.profiles = {profile.name: profile for profile in profiles}
        if not self.profiles:
            raise ValueError("a scheduler needs at least one profile")
        self.state = state if state is not None else ClusterState()
        self.state.nominator.tracking = preemption
        options = dict(watch_options or {})
        if source is None and api_client is not None:
            source = KubeSource(self.state, api_client, mode=kinds.STANDALONE, dra_kinds=dra_source.ALL, **options)
        self.source = source
        if binder is None:
            binder = KubeBinder(api_client, self.state)
        self.binder = binder
        self.queue = queue if queue is not None else SchedulingQueue()
        self.gangs = GangScheduling(self, api_client, **options)
        if self.gangs.enabled:
            self.queue.pre_enqueue = self.gangs.pre_enqueue
        self.claim_gate = ClaimGate(self.state.dra_store)
        self.queue.claims_ready = self.claim_gate.admits
        self.reporter = reporter if reporter is not None else Reporter(
            api_client, instance=instance or (leader.identity if leader else ""), is_placed=self._is_placed)
        self.binds = BindPool(binder, self.state, self.queue, self.reporter, workers=parallel_binds,
                              may_bind=self._may_bind, on_undone=self.gangs.undone if self.gangs.enabled else None)
        self.preemptor = Preemptor(api_client, self.state, self.queue, rng=rng,
                                   instance=instance or (leader.identity if leader else "")) if preemption else None
        if self.preemptor is not None:
            self.queue.preempting = self.preemptor.running
        self.pending = [
            PendingPods(api_client, name, self.queue, on_invalid=self.reporter.invalid_pod,
                        on_member=self.gangs.member_queued if self.gangs.enabled else None, **options)
            for name in self.profiles
        ] if api_client is not None else []
        self.leader = leader
        if leader is not None:
            leader.on_started_leading = self._started_leading
            leader.on_stopped_leading = self._stopped_leading
        self.usage = UsageService(self.state, api_client, [profile.policy for profile in self.profiles.values()])
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self.rng = rng or random.Random()
        self._next_start = 0
        self._leading = threading.Event()
        self._stopping = threading.Event()
        self._abandon = False
        self._stopped = False
        self._thread: threading.Thread | None = None
        self._node_signatures: dict[str, dict[str, Any]] = {}
        self._hints_of: tuple[Any, ...] = ()
        self._hints_for = QueueingHints({})

    # ---- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("scheduler already started")
        self.state.listeners.add(self._on_cluster_event)
        for profile in self.profiles.values():
            profile.policy.start_watching()
        if self.source is not None:
            self.source.start()
        self.gangs.start()
        self.usage.start()
        for watch in self.pending:
            watch.start()
        self._thread = threading.Thread(target=self._loop, name="scheduler-loop", daemon=True)
        self._thread.start()
        if self.leader is not None:
            self.leader.start()
        else:
            self._started_leading()
        log.info("scheduler started", extra={"fields": {
            "profiles": ",".join(self.profiles), "leader_election": self.leader is not None}})

    def stop(self, *, release_lease: bool = True, finish_binds: bool = True, timeout: float = 10.0) -> None:
        """Stop taking pods, finish (or abandon) binds in flight, stop watching, release the lease.

        `release_lease=False, finish_binds=False` is what a crash looks like to the
        others: tests use it to check a follower takes over after the lease expires.
        """
        if self._stopped:
            return
        self._stopped = True
        self._stopping.set()
        self._abandon = not finish_binds
        if self._thread is not None:
            self._thread.join(timeout)
        self.binds.shutdown(timeout)
        for watch in self.pending:
            watch.stop()
        if self.leader is not None:
            self.leader.stop(release=release_lease)
        self._leading.clear()
        self.queue.close()
        if self.preemptor is not None:
            self.preemptor.close(timeout if finish_binds else 0)
        self.reporter.close(timeout if finish_binds else 0.5)
        self.usage.stop()
        self.gangs.stop()
        if self.source is not None:
            self.source.stop()
        for profile in self.profiles.values():
            profile.policy.stop_watching()
        log.info("scheduler stopped")

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until the cluster state and every pending-pod watch have their first list."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.ready:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    @property
    def ready(self) -> bool:
        return self.state.ready and all(watch.synced for watch in self.pending) and self.gangs.synced

    @property
    def leading(self) -> bool:
        return self._may_schedule()

    def health(self) -> tuple[bool, str]:
        alive = self._thread is not None and self._thread.is_alive() and not self._stopping.is_set()
        return alive, "" if alive else "scheduling loop not running"

    def readiness(self) -> tuple[bool, str]:
        if not self.state.ready:
            return False, "cluster state not synced"
        if not all(watch.synced for watch in self.pending):
            return False, "pending pods not listed"
        role = "leader" if self.leading else "follower"
        usage = self.usage.describe()  # informational: no usage means placement by requests alone
        return True, f"{role}; {usage}" if usage else role

    # ---- leadership -------------------------------------------------------------------------

    def _started_leading(self) -> None:
        self._leading.set()
        self.queue.move_all("leader-elected")

    def _stopped_leading(self) -> None:
        self._leading.clear()

    def _may_schedule(self) -> bool:
        if not self._leading.is_set() or self._stopping.is_set():
            return False
        return self.leader is None or self.leader.is_leader

    def _may_bind(self) -> bool:
        if self._abandon:
            return False
        return self.leader is None or self.leader.is_leader

    # ---- the loop -----------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stopping.is_set():
            if not self._may_schedule():
                self._leading.wait(_IDLE_WAIT)
                if self._leading.is_set() and not self._may_schedule():
                    time.sleep(_IDLE_WAIT)  # flagged leader but the lease is stale: wait for the elector
                continue
            if not self.state.ready or not self.usage.settled:  # usage: its first fetch, bounded
                time.sleep(0.05)
                continue
            entry = self.queue.pop(timeout=_IDLE_WAIT)
            if self.gangs.enabled:
                self.gangs.tick()
            if entry is None:
                continue
            if not self._may_schedule():
                self.queue.give_back(entry)
                continue
            try:
                self.schedule(entry)
            except Exception:  # the loop must survive anything one pod can do
                log.exception("scheduling %s failed unexpectedly", entry.key)
                self.queue.requeue_backoff(entry)

    def schedule(self, entry: QueuedPod) -> None:
        """One attempt for a popped pod: decide, then assume and hand off, or report and requeue."""
        started = time.perf_counter()
        pod = entry.pod
        self._await_pod_watch(entry)
        if self.placed_already(entry):
            return
        profile = self.profiles.get(entry.profile)
        if profile is None:
            self.queue.done(entry)
            return
        if pod.group is not None and self.gangs.handles(pod):
            self.gangs.schedule_group(entry, profile)
            return
        result = self.decide(entry, profile.engine, started)
        if result is None:
            return
        if result.node is None:
            self.unschedulable(entry, profile.engine, result, started)
            return
        reservations = self.reserve(entry, profile.engine, result.node, started)
        if reservations is None:
            return
        steps.assume(self.state, pod, result.node, reservations)
        metrics.SCHEDULING_LATENCY.labels(profile=entry.profile).observe(time.perf_counter() - started)
        self.binds.submit(entry, result.node, started, reservations)

    def _await_pod_watch(self, entry: QueuedPod) -> None:
        """Wait (at most POD_WATCH_WAIT) until the cluster state's pod watch has delivered the
        popped pod too. kube-scheduler reads every pod from one informer, so it never decides a
        pod before the pods created ahead of it are known; here the pending pods come on a watch
        of their own, which may run ahead. Once the pod watch has this pod, it has applied every
        event before it in etcd's order (a pod bound just before: the side-by-side preemption
        scenario bound its preemptor beside the victim it had not seen yet). Without a pod watch
        (tests, a source that lists no pods) there is nothing to wait for."""
        if self.state.pod(entry.key) is not None or not getattr(self.source, "pods_watched", False):
            return
        deadline = time.monotonic() + POD_WATCH_WAIT
        while self.state.pod(entry.key) is None and time.monotonic() < deadline:
            if self._stopping.wait(0.002):
                return

    def placed_already(self, entry: QueuedPod) -> bool:
        """Bound (or being bound) already, the pending watch lagging: the attempt ends."""
        record = self.state.pod(entry.key)
        if record is not None and record.node_name and record.uid == entry.uid:
            self.queue.done(entry)
            return True
        return False

    def decide(self, entry: QueuedPod, engine: Engine, started: float,
               nodes: Sequence[NodeInfo] | None = None) -> CycleResult | None:
        """Run the cycle for one pod (among `nodes` if given); None when the policy failed
        (reported, requeued)."""
        try:
            result = schedule_one(engine, self.state, entry.pod, rng=self.rng,
                                  percentage_of_nodes_to_score=self.percentage_of_nodes_to_score,
                                  start_index=self._next_start, nodes=nodes)
        except Exception as exc:
            self.reporter.failed(entry, f"running the policy failed: {exc}", duration=time.perf_counter() - started)
            self.queue.requeue_backoff(entry)
            return None
        self._next_start = result.next_start_index
        return result

    def unschedulable(self, entry: QueuedPod, engine: Engine, result: CycleResult, started: float, *,
                      preempt: bool = True) -> None:
        """No node fits: try preemption (unless told not to), report, wait for a cluster event."""
        entry.rejected_by = result.decision.refusing_plugins()
        self.post_filter(entry, engine, result.decision.failed)
        outcome, nominated = self.preemptor.attempt(entry, engine, result.decision) \
            if self.preemptor is not None and preempt else (None, None)
        self.reporter.unschedulable(entry, result.decision, duration=time.perf_counter() - started,
                                    preemption=outcome, nominated_node=nominated)
        self.queue.requeue_unschedulable(entry)

    def post_filter(self, entry: QueuedPod, engine: Engine, failed: Mapping[str, Status]) -> None:
        """The PostFilter plugins' API writes (an idle claim deallocated), carried out by the binder's
        action table as PreBind's are; a refusal is logged: the pod waits for its next attempt anyway."""
        try:
            actions = engine.post_filter(entry.pod, failed, self.state)
            if actions:
                self.binder.prebind(actions)
        except ExtenderError as exc:
            log.warning("post-filter of %s failed: %s", entry.key, exc)

    def reserve(self, entry: QueuedPod, engine: Engine, node: str, started: float
                ) -> tuple[Reservation, ...] | None:
        """Let the plugins claim what the pod needs on `node` (Reserve); None when one refuses
        or fails (reported, requeued with backoff)."""
        try:
            outcome = steps.reserve(engine, self.state, entry.pod, node)
        except Exception as exc:
            self.reporter.failed(entry, f"reserving on node {node} failed: {exc}",
                                 duration=time.perf_counter() - started)
            self.queue.requeue_backoff(entry)
            return None
        if isinstance(outcome, Status):
            self.reporter.failed(entry, f"node {node} refused at reserve: {outcome.reason}", node=node,
                                 duration=time.perf_counter() - started)
            self.queue.requeue_backoff(entry)
            return None
        return outcome

    # ---- cluster events ------------------------------------------------------------------------

    def _on_cluster_event(self, event: str, obj: Any) -> None:
        """Runs on the watch threads: move the unschedulable pods that a plugin which refused them
        says the change may help (scheduler/hints.py, from the plugins' own registrations)."""
        if event in _POD_EVENTS and obj.group is not None:
            self.gangs.pod_event(event, obj)
        if event == listeners.NODE_ADDED:
            self._node_signatures[obj.name] = _node_signature(obj)
            self._move(event, enqueue.NODES, enqueue.ADD, obj)
        elif event == listeners.NODE_UPDATED:
            signature = _node_signature(obj)
            before = self._node_signatures.get(obj.name)
            if before != signature:
                self._node_signatures[obj.name] = signature
                changed = enqueue.ADD if before is None else frozenset(
                    part for part, value in signature.items() if before[part] != value)
                self._move(event, enqueue.NODES, changed, obj)
        elif event == listeners.NODE_DELETED:
            self._node_signatures.pop(obj.name, None)
        elif event == listeners.POD_DELETED or (
                event == listeners.POD_UPDATED and obj.phase in ("Succeeded", "Failed")):
            if obj.node_name:  # a finished pod frees its node as a deleted one does
                self._move(event, enqueue.PODS, enqueue.DELETE, obj)
        elif event == listeners.POD_PLACED and obj.counts:
            # A placed pod can satisfy a waiting pod's affinity or even out a spread.
            self._move(event, enqueue.PODS, enqueue.ADD, obj, unrefused=False)
        elif event == listeners.POD_RELABELED:
            self._move(event, enqueue.PODS, enqueue.UPDATE_POD_LABEL, obj, unrefused=False)
        elif event == listeners.POD_SCALED_DOWN:
            self._move(event, enqueue.PODS, enqueue.UPDATE_POD_SCALE_DOWN, obj, unrefused=False)
        elif event == listeners.KIND_CHANGED:
            resource, key = obj
            watched = kinds.BY_RESOURCE.get(resource)
            if watched is not None and watched.event is not None:  # the resource its filters registered for
                self._move(event, watched.event, enqueue.UPDATE, key, unrefused=False)
        elif event == STORAGE_CHANGED:
            resource, key = obj
            self._move(event, resource, enqueue.UPDATE, key)
        elif event == DRA_CHANGED:
            resource, key = obj
            if resource == CLAIMS:  # the pods held for that claim are let in (PreEnqueue)
                self.queue.ungate(self.claim_gate.waiting_on(key))
            self._move(event, resource, enqueue.UPDATE, key, unrefused=False)

    def _move(self, event: str, resource: str, action: str | frozenset[str], obj: Any, *,
              unrefused: bool = True) -> None:
        """Move the waiting pods the refusing plugins' hints wake (`unrefused`: and those no
        plugin refused, refused for want of any node)."""
        self.queue.move_all(event, wakes=self._hints().wakes(resource, action, obj, unrefused=unrefused))

    def _hints(self) -> QueueingHints:
        """The queueing hints of the profiles' current policies (rebuilt after a policy reload)."""
        policies = tuple(profile.engine.policy for profile in self.profiles.values())
        known = self._hints_of
        if len(known) != len(policies) or any(a is not b for a, b in zip(known, policies, strict=True)):
            self._hints_for = QueueingHints.of(policies)
            self._hints_of = policies
        return self._hints_for

    def _is_placed(self, key: str) -> bool:
        """Bound or being bound. A gang member is assumed by every group cycle that tries it and
        given back when its gang cannot complete, so only its bind counts: an earlier attempt's
        failure report must not be dropped because a later attempt assumed it again."""
        record = self.state.pod(key)
        return bool(record is not None and record.node_name and not (record.assumed and record.group is not None))
