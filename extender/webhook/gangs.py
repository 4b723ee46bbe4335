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

A pod of no group costs `pod.group is None` in each verb, nothing more.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from extender.cluster import listeners
from extender.cluster.state import ClusterState
from extender.gangs.coordinator import GangCoordinator, Member
from extender.gangs.fitting import PODS, fits_at_all
from extender.gangs.ledger import Outcome
from extender.kube.events import rfc3339
from extender.kube.gangledger import GangLeases
from extender.kube.podgroup_source import PodGroupSource
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
                 poll_seconds: float = POLL_SECONDS, **watch_options: Any) -> None:
        if hold_seconds <= 0:
            raise ValueError("the gang hold must be positive")
        self.state = state
        self.coordinator = GangCoordinator()
        self.source = PodGroupSource(api_client, self._group_event, apis=apis, **watch_options)
        self.apis = frozenset(self.source.apis)
        self.leases = GangLeases(api_client, namespace=lease_namespace)
        self.hold_seconds = hold_seconds
        self.poll_seconds = poll_seconds
        # Members this process holds at /bind: uid -> (group, node, requests).
        self._holding: dict[str, tuple[GroupKey, str, Resources]] = {}
        self._holding_lock = threading.Lock()
        self._draining = threading.Event()
        state.listeners.add(self._cluster_event)

    @property
    def enabled(self) -> bool:
        return bool(self.apis)

    def start(self) -> None:
        self.source.start()

    def drain(self) -> None:
        """Answer every held bind now (withdrawn from the ledger), and hold no new one: the
        process is stopping, and a bind kept waiting would keep it, and its port, alive."""
        self._draining.set()

    def stop(self) -> None:
        self.source.stop()

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

    def _group_event(self, key: GroupKey, group: PodGroup | None) -> None:
        if group is None:
            self.coordinator.delete_group(key)
        else:
            self.coordinator.upsert_group(group)

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
            return f"{admission.reason}: {admission.message}"
        group = self.coordinator.group_of(pod.uid)
        if group is None or not group.is_gang:
            return None
        members = self.coordinator.members(group.key)
        with self._holding_lock:
            holding = dict(self._holding)
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

    def _room(self, holding: dict[str, tuple[GroupKey, str, Resources]], own: GroupKey) -> list[dict[str, int]]:
        """Each node's free room, less what this process's held members take (kube-scheduler has
        them assumed; our state does not), less what every *other* gang holding members here still
        needs for its quorum. That reservation is what lets two gangs competing for the same room
        end with one whole: the first to hold keeps the room its quorum needs, and the other is
        refused until the first is bound or sent back (docs/gangs.md)."""
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
        while outcome is Outcome.WAITING and time.monotonic() < deadline \
                and not self._draining.wait(self.poll_seconds):
            outcome = self.leases.check(group.uid, pod.uid, mine=self._mine(group.key), min_count=group.min_count,
                                        bound=self._bound(group), released=released)
        if outcome is Outcome.WAITING:
            outcome = self.leases.withdraw(group.uid, pod.uid)
        if outcome is Outcome.RELEASED:
            return None
        if self._draining.is_set():
            return f"the webhook is stopping while pod group {group.key} waits for minCount; the pod will be retried"
        return (f"pod group {group.key} did not reach minCount {group.min_count} within "
                f"{self.hold_seconds:g}s; the pod will be retried")

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
