"""Pod groups for a stock kube-scheduler (no gang gates): refused at /filter until they can
complete, held at /bind until their quorum has reached /bind (docs/gangs.md, section 3).

* `refusal(pod)`: Coscheduling's PreFilter from outside. A member is refused while its group
  does not admit it (missing, too few members, mixed schedulerNames) or while the members still
  to place certainly cannot fit (`extender.gangs.fitting.fits_at_all`, `minResources`); the
  verb answers FailedAndUnresolvableNodes so that kube-scheduler does not preempt for it.
* `wait_to_bind(pod, node)`: kube-scheduler's Permit from outside. The member is held in the
  group's Lease ledger (extender/kube/gangledger.py: one count across workers and replicas)
  until the quorum is held or bound and every process holding members has answered the call
  for the release (a killed process's holds never release anyone), then binds; its poll says
  which members this process holds now. A group not complete within `hold_seconds`
  (shorter than kube-scheduler's httpTimeout for the extender) gets an error for every held
  member, and kube-scheduler forgets their places and retries them.
* Competing gangs are decided early (`extender.gangs.giveway`): a thread of each process holding
  members compares every held gang of the Lease namespace (`GangLedgerView`), and a gang that
  cannot complete beside a better-ranked one gives way at once: its ledger releases every hold
  (their binds answer "gave way to pod group X") and backs the group off (refused at /filter and
  /bind until then), so the winner's remaining members fit and bind.

A pod of no group costs `pod.group is None` in each verb, nothing more.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from extender import metrics
from extender.cluster import listeners
from extender.cluster.state import ClusterState
from extender.errors import ClusterError
from extender.gangs import giveway
from extender.gangs import ledger as pure
from extender.gangs.coordinator import GangCoordinator, Member
from extender.gangs.fitting import PODS, fits_at_all
from extender.gangs.ledger import Outcome
from extender.kube.client import MERGE_PATCH, request_json
from extender.kube.events import post_event, rfc3339
from extender.kube.gangledger import GangLeases, GangLedgerView
from extender.kube.podgroup_source import PodGroupSource
from extender.model.devices import PREFIX as DEVICE_PREFIX
from extender.model.podgroups import (
    API_V1ALPHA2,
    REASON_SCHEDULED,
    GroupKey,
    PodGroup,
    scheduled_condition_patch,
)
from extender.model.pods import TERMINAL_PHASES, PodView
from extender.model.records import PodRecord
from extender.model.resources import Resources, add_into

log = logging.getLogger(__name__)

DEFAULT_HOLD_SECONDS = 25.0
POLL_SECONDS = 0.2
#: The give-way check runs on every change of a gang ledger, and at least this often while holding.
RECHECK_SECONDS = 1.0
MIN_CHECK_GAP = 0.05
#: How long a gang that gave way is refused (at /filter and /bind) before it may hold again.
DEFAULT_GIVE_WAY_BACKOFF = 5.0
REASON_GAVE_WAY = "pod group gave way to a competing gang"
EVENT_GAVE_WAY = "GaveWay"  # the Event's reason on each member whose hold was released
#: Set on members refused at /filter while their group was incomplete, once it is complete: the
#: pod update makes kube-scheduler retry them.
WAKE_ANNOTATION = f"{DEVICE_PREFIX}/pod-group-admitted"


def _free(state: ClusterState) -> list[dict[str, int]]:
    """Each node's free room (allocatable minus requests; pods minus the pod count)."""
    rooms = []
    for info in state.all_node_infos():
        room = {name: info.free(name) for name in info.node.allocatable}
        if PODS in info.node.allocatable:
            room[PODS] = info.free(PODS)
        rooms.append(room)
    return rooms


def _take(rooms: Iterable[dict[str, int]], request: Resources) -> None:
    """Take `request` out of the rooms, each resource from the nodes with most of it first."""
    rooms = list(rooms)
    for name, amount in request.items():
        for room in sorted(rooms, key=lambda r: -r.get(name, 0)):
            if amount <= 0:
                break
            taken = min(amount, max(0, room.get(name, 0)))
            room[name] = room.get(name, 0) - taken
            amount -= taken


class WebhookGangs:
    """One per webhook worker: the group watch, the members from the state's pods, the Leases."""

    def __init__(self, state: ClusterState, api_client: Any, *, hold_seconds: float = DEFAULT_HOLD_SECONDS,
                 lease_namespace: str | None = None, apis: Iterable[str] | None = None,
                 poll_seconds: float = POLL_SECONDS, give_way_backoff: float = DEFAULT_GIVE_WAY_BACKOFF,
                 **watch_options: Any) -> None:
        if hold_seconds <= 0:
            raise ValueError("the gang hold must be positive")
        if give_way_backoff < 0:
            raise ValueError("the give-way backoff must not be negative")
        self.state = state
        self.api_client = api_client
        self.coordinator = GangCoordinator()
        self.source = PodGroupSource(api_client, self._group_event, apis=apis, **watch_options)
        self.apis = frozenset(self.source.apis)
        self.leases = GangLeases(api_client, namespace=lease_namespace)
        self.view = GangLedgerView(api_client, self.leases.namespace, changed=self._wake_arbiter, **watch_options)
        self.leases.view = self.view
        self.hold_seconds = hold_seconds
        self.poll_seconds = poll_seconds
        self.give_way_backoff = give_way_backoff
        # Members this process holds at /bind: uid -> (group, node, requests).
        self._holding: dict[str, tuple[GroupKey, str, Resources]] = {}
        self._holding_lock = threading.Lock()
        self._draining = threading.Event()
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._arbiter: threading.Thread | None = None
        self._by_lease: dict[str, PodGroup] = {}  # gang Lease name -> its group
        self._refused: dict[GroupKey, dict[str, str]] = {}  # refused at /filter for admission: uid -> ns/name
        self.checks = 0  # give-way checks made (while holding members)
        state.listeners.add(self._cluster_event)

    @property
    def enabled(self) -> bool:
        return bool(self.apis)

    def start(self) -> None:
        self.source.start()
        if self.enabled:
            self.view.start()
            self._arbiter = threading.Thread(target=self._arbitrate_loop, name="gang-give-way", daemon=True)
            self._arbiter.start()

    def drain(self) -> None:
        """Answer every held bind now (withdrawn from the ledger), and hold no new one: the
        process is stopping, and a bind kept waiting would keep it, and its port, alive."""
        self._draining.set()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        self.source.stop()
        self.view.stop()
        if self._arbiter is not None:
            self._arbiter.join(5.0)

    def handles(self, pod: PodView | PodRecord) -> bool:
        return pod.group is not None and pod.group.api in self.apis

    # ---- members and groups (watch threads) --------------------------------------------------

    def _cluster_event(self, event: str, obj: Any) -> None:
        if event == listeners.PODS_LISTED:
            # The members present when the pod watch (re)starts: after a restart of the webhook, the
            # members held before it may not change again, and must count all the same.
            for record in obj:
                self._pod_event(listeners.POD_UPDATED, record)
        elif event in (listeners.POD_ADDED, listeners.POD_UPDATED, listeners.POD_DELETED):
            self._pod_event(event, obj)

    def _pod_event(self, event: str, record: PodRecord) -> None:
        if record.group is None or record.group.api not in self.apis:
            return
        if event == listeners.POD_DELETED or record.phase in TERMINAL_PHASES:
            self.coordinator.delete_member(record.uid)
        else:
            self.coordinator.upsert_member(self._member(record, "" if record.assumed else record.node_name))
        self._wake_refused(record.group)

    def _group_event(self, key: GroupKey, group: PodGroup | None) -> None:
        with self._holding_lock:
            for name in [n for n, g in self._by_lease.items() if g.key == key]:
                del self._by_lease[name]
            if group is not None and group.is_gang:
                self._by_lease[pure.lease_name(group.uid)] = group
        if group is None:
            self.coordinator.delete_group(key)
        else:
            self.coordinator.upsert_group(group)
        self._wake_refused(key)

    def _wake_refused(self, key: GroupKey) -> None:
        """Members refused at /filter while their group was incomplete (missing, too few members,
        gated, mixed schedulerNames) are annotated once it admits them. kube-scheduler keeps a pod
        an extender refused among the unschedulable until some event moves it, and without its
        gang gates the creation of another pending pod is none: the first members of a gang,
        filtered before the last was created, waited for an unrelated event, while the others
        were held at /bind and nothing else happened until their hold ran out (seen in competing
        runs on the real control plane). An update of the pod itself is such an event."""
        with self._holding_lock:
            if key not in self._refused:
                return
        if not self.coordinator.group_admission(key).admitted:
            return
        with self._holding_lock:
            pods = self._refused.pop(key, {})
        if pods:
            threading.Thread(target=self._annotate, args=(key, sorted(pods.values())), name="gang-wake",
                             daemon=True).start()

    def _annotate(self, key: GroupKey, pods: list[str]) -> None:
        body = {"metadata": {"annotations": {WAKE_ANNOTATION: rfc3339()}}}
        for pod in pods:
            namespace, _, name = pod.partition("/")
            try:
                request_json(self.api_client, "PATCH",
                             f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}",
                             body=body, content_type=MERGE_PATCH, timeout=(5.0, 10.0))
            except ClusterError as exc:  # gone meanwhile, or no permission: it waits for another event
                log.warning("cannot annotate pod %s of pod group %s for a retry: %s", pod, key, exc)
        log.info("pod group %s admits its members: %d refused at /filter annotated for kube-scheduler to retry",
                 key, len(pods))

    @staticmethod
    def _member(pod: PodView | PodRecord, node: str) -> Member:
        assert pod.group is not None
        gated = bool(pod.scheduling_gates) if isinstance(pod, PodView) else pod.gated
        return Member(pod.uid, pod.key, pod.group, pod.scheduler_name, node, gated, dict(pod.requests))

    def _known(self, pod: PodView) -> None:
        if not self.coordinator.is_member(pod.uid):  # the request came before our pod watch
            self.coordinator.upsert_member(self._member(pod, ""))

    # ---- /filter -----------------------------------------------------------------------------

    def refusal(self, pod: PodView) -> str | None:
        """Why the member may not be placed now (for every node), or None."""
        self._known(pod)
        admission = self.coordinator.admission(pod.uid)
        if not admission.admitted:
            assert pod.group is not None
            with self._holding_lock:
                self._refused.setdefault(pod.group, {})[pod.uid] = pod.key
            self._wake_refused(pod.group)  # admitted meanwhile (a member's event between the two reads)
            return f"{admission.reason}: {admission.message}"
        group = self.coordinator.group_of(pod.uid)
        if group is None or not group.is_gang:
            return None
        backed_off = self._backed_off(group)
        if backed_off is not None:
            return f"{REASON_GAVE_WAY}: {backed_off}"
        members = self.coordinator.members(group.key)
        holding = self._all_holds()
        held = {uid for uid, (key, _node, _requests) in holding.items() if key == group.key}
        bound = [m for m in members if m.node]
        usage: Resources = {}
        for member in bound:
            add_into(usage, member.requests)
        misfit = fits_at_all([m.requests for m in members if not m.node and m.uid not in held],
                             group.min_count - len(bound) - len(held), self._room(holding, group.key),
                             min_resources=group.min_resources, min_count=group.min_count,
                             group_usage=usage, placed=len(bound))
        return f"{misfit.reason}: {misfit.message}" if misfit is not None else None

    def _backed_off(self, group: PodGroup) -> str | None:
        """Why the group may not hold now (it gave way, and its backoff runs), or None."""
        gave_way = self.view.get(pure.lease_name(group.uid)).gave_way
        now = self.leases.wall()
        if gave_way is None or gave_way.until <= now:
            return None
        return f"{gave_way.message}; pod group {group.key} backs off for {gave_way.until - now:.1f}s more"

    def _all_holds(self) -> dict[str, tuple[GroupKey, str, Resources]]:
        """Every member held at /bind for a gang, by uid: this process's own, and every process's
        as the gang ledgers show them (members released but not bound yet count too: their
        binds are under way). uid -> (group, node, requests)."""
        with self._holding_lock:
            holding = dict(self._holding)
            by_lease = dict(self._by_lease)
        for name, ledger in self.view.ledgers().items():
            group = by_lease.get(name)
            if group is None:
                continue
            entries = {**ledger.released, **ledger.holds}
            if not entries:
                continue
            members = {m.uid: m for m in self.coordinator.members(group.key)}
            for uid, entry in entries.items():
                member = members.get(uid)
                if uid in holding or (member is not None and member.node):
                    continue
                holding[uid] = (group.key, entry.node, dict(member.requests) if member is not None else {})
        return holding

    def _room(self, holding: dict[str, tuple[GroupKey, str, Resources]], own: GroupKey) -> list[dict[str, int]]:
        """Each node's free room, less what the held members take (kube-scheduler has them
        assumed; our state does not), less what every *other* gang holding members still needs
        for its quorum. That reservation is what lets two gangs competing for the same room end
        with one whole: the first to hold keeps the room its quorum needs, and the other is
        refused until the first is bound or sent back (docs/gangs.md). The holds are every
        process's (the gang ledgers' view), so this holds across workers and replicas too; the
        race it cannot close (two gangs passing /filter before either holds) is decided early
        by the give-way check."""
        rooms = {info.name: room for info, room in zip(self.state.all_node_infos(), _free(self.state), strict=True)}
        others: dict[GroupKey, int] = {}
        for _uid, (key, node, requests) in holding.items():
            room = rooms.get(node)
            if room is not None:
                for name, amount in requests.items():
                    room[name] = room.get(name, 0) - amount
                if PODS in room:
                    room[PODS] -= 1
            if key != own:
                others[key] = others.get(key, 0) + 1
        for key, held in others.items():
            status = self.coordinator.status(key)
            if not status.exists:
                continue
            need = max(0, status.min_count - status.bound - held)
            waiting = [m for m in self.coordinator.members(key) if not m.node and m.uid not in holding]
            for member in sorted(waiting, key=lambda m: sum(m.requests.values()))[:need]:
                _take(rooms.values(), member.requests)
        return list(rooms.values())

    # ---- /bind ---------------------------------------------------------------------------------

    def _hold_here(self, pod: PodView, node: str) -> None:
        assert pod.group is not None
        with self._holding_lock:
            self._holding[pod.uid] = (pod.group, node, dict(pod.requests))
        self._wake.set()

    def _unhold_here(self, uid: str) -> None:
        with self._holding_lock:
            self._holding.pop(uid, None)

    def wait_to_bind(self, pod: PodView, node: str) -> str | None:
        """Hold the member until its group's quorum is held or bound (None: bind now), or say why
        not (its wait ran out, its group is gone): kube-scheduler then retries the pod."""
        self._known(pod)
        group = self.coordinator.group_of(pod.uid)
        if group is None:
            return f"pod group {pod.group} does not exist"
        if not group.is_gang:
            return None
        backed_off = self._backed_off(group)
        if backed_off is not None:
            metrics.GANG_HOLDS.labels(outcome="gave-way").inc()
            return f"{backed_off}; the pod will be retried"
        self._hold_here(pod, node)
        try:
            return self._hold(pod, node, group)
        finally:
            self._unhold_here(pod.uid)

    def _hold(self, pod: PodView, node: str, group: PodGroup) -> str | None:
        deadline = time.monotonic() + self.hold_seconds
        def released() -> None:
            self._report_scheduled(group.key)

        outcome = self.leases.hold(group.uid, pod.uid, node, min_count=group.min_count, bound=self._bound(group),
                                   hold_seconds=self.hold_seconds, released=released)
        gone = None
        while outcome is Outcome.WAITING and time.monotonic() < deadline \
                and not self._draining.wait(self.poll_seconds):
            gone = self._gone(pod, group)
            if gone is not None:
                break
            outcome = self.leases.check(group.uid, pod.uid, mine=self._mine(group.key), min_count=group.min_count,
                                        bound=self._bound(group), released=released)
        if outcome is Outcome.WAITING:
            outcome = self.leases.withdraw(group.uid, pod.uid)
        if outcome is Outcome.RELEASED:
            metrics.GANG_HOLDS.labels(outcome="released").inc()
            return None
        if gone is not None:
            metrics.GANG_HOLDS.labels(outcome="gone").inc()
            return f"{gone}: its held bind is given up"
        if outcome is Outcome.GAVE_WAY:
            metrics.GANG_HOLDS.labels(outcome="gave-way").inc()
            return self._gave_way(pod, group)
        if self._draining.is_set():
            metrics.GANG_HOLDS.labels(outcome="stopping").inc()
            return f"the webhook is stopping while pod group {group.key} waits for minCount; the pod will be retried"
        metrics.GANG_HOLDS.labels(outcome="timeout").inc()
        return (f"pod group {group.key} did not reach minCount {group.min_count} within "
                f"{self.hold_seconds:g}s; the pod will be retried")

    def _gone(self, pod: PodView, group: PodGroup) -> str | None:
        """Why the held member can no longer bind (its pod deleted or finished, its group deleted
        or recreated), or None. kube-scheduler keeps a pod whose bind is in flight assumed on its
        node until the bind returns, so a bind left held for a deleted pod would keep that room
        from every other pod until the hold ran out (seen in `python -m bench gang-pairs`: the
        next gangs waited 19 s for the deleted pods of the round before)."""
        if not self.coordinator.is_member(pod.uid):
            return f"pod {pod.key} was deleted (or finished) while held for pod group {group.key}"
        current = self.coordinator.group_of(pod.uid)
        if current is None or current.uid != group.uid:
            return f"pod group {group.key} was deleted while pod {pod.key} was held"
        return None

    def _gave_way(self, pod: PodView, group: PodGroup) -> str:
        """The answer for a member whose group gave way, and an Event on the pod saying so."""
        gave_way = self.view.get(pure.lease_name(group.uid)).gave_way
        now = self.leases.wall()
        if gave_way is None:
            message = f"pod group {group.key} gave way to a competing gang"
            backoff = 0.0
        else:
            message, backoff = gave_way.message, max(0.0, gave_way.until - now)
        answer = f"{message}; pod group {group.key} backs off for {backoff:.1f}s and the pod will be retried"
        log.info("released held bind: %s", answer, extra={"fields": {"pod": pod.key, "group": str(group.key)}})
        threading.Thread(target=post_event, args=(self.api_client, {"metadata": {
            "namespace": pod.namespace, "name": pod.name, "uid": pod.uid}}), kwargs={
            "reason": EVENT_GAVE_WAY, "message": answer, "type": "Warning", "action": "Binding"},
            name="gang-event", daemon=True).start()
        return answer

    def _report_scheduled(self, key: GroupKey) -> None:
        """PodGroupScheduled True, as kube-scheduler writes it when a group's Permit lets it
        through (v1alpha2 groups; Coscheduling's status is its controller's): called by the one
        write, among all workers and replicas, that released the group, and written off the
        request thread so that the member's bind does not wait for it. A stock kube-scheduler
        without the gang gates writes no status at all; a user asking `kubectl get podgroup`
        whether the gang went through gets the answer here. Not written: Unschedulable (the
        webhook has no group cycle that fails once; each member's refusal is on the pod)."""
        if key.api != API_V1ALPHA2:
            return
        raw = self.source.raw(key)
        if raw is None:
            return
        patch = scheduled_condition_patch(raw, REASON_SCHEDULED, "", rfc3339())
        if patch is not None:
            threading.Thread(target=self.source.patch_status, args=(key, patch), name="podgroup-status",
                             daemon=True).start()

    def _mine(self, key: GroupKey) -> frozenset[str]:
        """The members of group `key` this process holds at /bind now."""
        with self._holding_lock:
            return frozenset(uid for uid, (group, _node, _requests) in self._holding.items() if group == key)

    def _bound(self, group: PodGroup) -> frozenset[str]:
        return frozenset(m.uid for m in self.coordinator.members(group.key) if m.node)

    # ---- competing gangs: give way early (extender.gangs.giveway) ------------------------------

    def _wake_arbiter(self) -> None:
        self._wake.set()

    def _arbitrate_loop(self) -> None:
        """While this process holds members, compare every held gang on each change of the
        ledgers or of this process's holds (and every RECHECK_SECONDS, for what changes elsewhere:
        room freed, a waiting gang's last member created): a gang that must give way is written
        so at once."""
        while not self._stopping.is_set():
            self._wake.wait(RECHECK_SECONDS)
            # Changes come in bursts (several holds, the ledgers' echoes on the watch): take them
            # together, and never spin on a wake that a check's own reads would raise again.
            if self._stopping.wait(MIN_CHECK_GAP):
                return
            self._wake.clear()
            with self._holding_lock:
                holding = bool(self._holding)
            if not holding:
                continue
            try:
                self.arbitrate()
                self.checks += 1
            except Exception:  # an API error or a bug must not end the thread: the holds' timeout still works
                log.exception("the give-way check for competing pod groups failed")

    def contenders(self, ledgers: dict[str, pure.GangLedger] | None = None) -> list[giveway.Contender]:
        """Every gang holding members, from the ledgers (default: the view's) and our members;
        and, when only one holds, a gang whose members wait to be placed (admitted, not backed off)."""
        ledgers = self.view.ledgers() if ledgers is None else ledgers
        with self._holding_lock:
            by_lease = dict(self._by_lease)
        found = []
        for name, ledger in ledgers.items():
            group = by_lease.get(name)
            if group is None or not ledger.holds or not self.coordinator.group_admission(group.key).admitted:
                continue  # not held; or this process does not know the group's members yet: no judging it
            members = self.coordinator.members(group.key)
            requests = {m.uid: dict(m.requests) for m in members}
            bound = sum(1 for m in members if m.node)
            busy = ledger.holds.keys() | ledger.released.keys()
            found.append(giveway.Contender(
                group.key, group.min_count,
                [(entry.node, requests.get(uid, {})) for uid, entry in sorted(ledger.holds.items())],
                [dict(m.requests) for m in members if not m.node and m.uid not in busy],
                bound=bound + len(ledger.released.keys() - {m.uid for m in members if m.node}),
                created=group.created))
        if len(found) != 1:
            return found
        # One gang holds: a gang waiting for the room it keeps (refused at /filter) makes a holder
        # that cannot complete at all give way. One such gang is enough (a waiting gang ranks
        # after every holder, so more of them change nothing), and with two holders or more none
        # is needed: the search over every group runs only here.
        for name, group in by_lease.items():
            if group.key == found[0].key or ledgers.get(name, pure.GangLedger()).gave_way is not None:
                continue
            waiting = self.coordinator.to_place(group.key)
            if waiting and self.coordinator.group_admission(group.key).admitted:
                members = self.coordinator.members(group.key)
                found.append(giveway.Contender(group.key, group.min_count, [], [dict(m.requests) for m in waiting],
                                               bound=sum(1 for m in members if m.node), created=group.created))
                break
        return found

    def _decide(self, ledgers: dict[str, pure.GangLedger]) -> list[giveway.GiveWay]:
        contenders = self.contenders(ledgers)
        if len(contenders) < 2:  # nothing to compare: skip the room's computation
            return []
        free = {info.name: room for info, room in zip(self.state.all_node_infos(), _free(self.state), strict=True)}
        with self._holding_lock:
            by_lease = dict(self._by_lease)
        taken = []
        for name, ledger in ledgers.items():
            group = by_lease.get(name)
            if group is None or not ledger.released:
                continue
            members = {m.uid: m for m in self.coordinator.members(group.key)}
            taken += [(entry.node, dict(members[uid].requests)) for uid, entry in ledger.released.items()
                      if uid in members and not members[uid].node]
        return giveway.decide(free, contenders, taken=taken)

    def arbitrate(self) -> list[giveway.GiveWay]:
        """Decide on the view; each loser's ledger is then read afresh with its winner's, decided
        again on those, and written as given way (one compare-and-swap: of the processes that
        decide the same, one writes, the others find no hold left). Returns what this process wrote."""
        ledgers = self.view.ledgers()
        decided = self._decide(ledgers)
        written: list[giveway.GiveWay] = []
        with self._holding_lock:
            uid_of = {g.key: g.uid for g in self._by_lease.values()}
        for verdict in decided:
            loser_uid = uid_of.get(verdict.loser)
            if loser_uid is None:
                continue
            if verdict.winner is not None and verdict.winner in uid_of:  # the winner as it is now
                ledgers[pure.lease_name(uid_of[verdict.winner])] = self.leases.read(uid_of[verdict.winner])
            loser_lease = pure.lease_name(loser_uid)

            def still(doc: pure.GangLedger, verdict: giveway.GiveWay = verdict, lease: str = loser_lease,
                      known: dict[str, pure.GangLedger] = ledgers) -> bool:
                fresh = {**known, lease: doc}
                return any(v.loser == verdict.loser for v in self._decide(fresh))

            done = self.leases.give_way(loser_uid, str(verdict.winner or ""), verdict.reason, verdict.message,
                                        backoff=self.give_way_backoff, still=still)
            if done is not None:
                metrics.GANG_GIVE_WAY.labels(reason=verdict.reason).inc()
                log.info("pod group %s gave way: %s", verdict.loser, verdict.message, extra={"fields": {
                    "group": str(verdict.loser), "winner": str(verdict.winner or ""), "reason": verdict.reason,
                    "members": len(done.gave_way.members) if done.gave_way else 0}})
                written.append(verdict)
            ledgers = self.view.ledgers()
        return written
