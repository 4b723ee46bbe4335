"""The gang ledger's Leases: read-modify-PUT around the pure transitions of extender.gangs.ledger.

One `coordination.k8s.io/v1` Lease per pod group (`gang.<group uid>`) in the extender's Lease
namespace (the device ledger's: --lease-namespace, else the pod's own namespace). Every change
is a PUT with the resourceVersion read (a POST when there is none yet), so of two writers, in
two gunicorn workers or two replicas, one gets 409 Conflict and starts over from a fresh read:
the write that completes the quorum and every holding process's answer to its call releases
every hold at once, and a member's withdrawal cannot undo a release another writer made. A
poll is a GET, and a PUT only when this process must answer a call or show it is alive (the
holds of a process that stopped writing are dropped; docs/gangs.md, section 3).

`GangLedgerView` watches every gang Lease of the namespace, so that each process sees the holds
of every group, whoever holds them: the room the other gangs' held members take, and which
held gangs compete for the same room (extender.gangs.giveway).
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote

from extender.errors import ClusterError, ConflictError
from extender.gangs import ledger as pure
from extender.kube.deviceledger import MANAGED_BY, default_namespace, lease_request
from extender.kube.watching import Reflector

log = logging.getLogger(__name__)

ATTEMPTS = 20


def leases_path(namespace: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace, safe='')}/leases"


def _metadata(lease: dict[str, Any]) -> dict[str, Any]:
    meta = lease.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _ledger_of(lease: dict[str, Any]) -> tuple[str, pure.GangLedger] | None:
    meta = _metadata(lease)
    name = str(meta.get("name") or "")
    if not name.startswith(pure.LEASE_PREFIX):
        return None
    return name, pure.read(meta.get("annotations"))


class GangLedgerView:
    """Every gang ledger of the Lease namespace, by Lease name, as the watch last delivered it
    (or as this process last wrote it: `put`), read as the next writer would leave it (expired
    holds and dead processes' holds dropped, an ended backoff gone). Callbacks run on the watch
    thread; `changed` is called after each change (to wake the give-way check)."""

    def __init__(self, api_client: Any, namespace: str, *, changed: Callable[[], None] | None = None,
                 wall: Callable[[], float] = time.time, **reflector_options: Any) -> None:
        # name -> (resourceVersion, ledger), only ledgers with something in them: a group's Lease
        # stays after the group is bound (or gone), and every /filter of a member reads this.
        self._ledgers: dict[str, tuple[str, pure.GangLedger]] = {}
        self._versions: dict[str, str] = {}  # name -> the newest resourceVersion seen, empty ones too
        self._lock = threading.Lock()
        self._changed = changed
        self._wall = wall
        selector = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
        self.reflector = Reflector(api_client, leases_path(namespace), resource="leases-gang",
                                   on_list=self._listed, on_event=self._event, label_selector=selector,
                                   **reflector_options)

    def start(self) -> None:
        self.reflector.start()

    def stop(self) -> None:
        self.reflector.stop()

    @property
    def synced(self) -> bool:
        return self.reflector.synced

    def ledgers(self) -> dict[str, pure.GangLedger]:
        with self._lock:
            found = [(name, ledger) for name, (_rv, ledger) in self._ledgers.items()]
        now = self._wall()
        return {name: pure.expire(ledger, now=now) for name, ledger in found}

    def get(self, name: str) -> pure.GangLedger:
        with self._lock:
            found = self._ledgers.get(name)
        return pure.expire(found[1], now=self._wall()) if found is not None else pure.GangLedger()

    def put(self, lease: dict[str, Any]) -> None:
        """A Lease this process read or wrote: newer than the watch may have delivered yet."""
        self._event("MODIFIED", lease)

    def _listed(self, items: Iterable[dict[str, Any]]) -> None:
        found, versions = {}, {}
        for lease in items:
            parsed = _ledger_of(lease)
            if parsed is not None:
                versions[parsed[0]] = _version(lease)
                if _in_use(parsed[1]):
                    found[parsed[0]] = (versions[parsed[0]], parsed[1])
        with self._lock:
            self._ledgers, self._versions = found, versions
        self._notify()

    def _event(self, kind: str, lease: dict[str, Any]) -> None:
        parsed = _ledger_of(lease)
        if parsed is None:
            return
        name, ledger = parsed
        version = _version(lease)
        with self._lock:
            if kind == "DELETED":
                self._ledgers.pop(name, None)
                self._versions.pop(name, None)
            else:
                seen = self._versions.get(name, "")
                if _newer(seen, version) or (version and seen == version):
                    return  # the watch is behind what this process wrote, or nothing new (a poll's read)
                self._versions[name] = version
                if _in_use(ledger):
                    self._ledgers[name] = (version, ledger)
                elif self._ledgers.pop(name, None) is None:
                    return  # empty before and after: nothing changed
        self._notify()

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed()


def _in_use(ledger: pure.GangLedger) -> bool:
    return bool(ledger.holds or ledger.released or ledger.gave_way is not None)


def _version(lease: dict[str, Any]) -> str:
    meta = _metadata(lease)
    return str(meta.get("resourceVersion") or "")


def _newer(have: str, got: str) -> bool:
    """Whether resourceVersion `have` is newer than `got` (both etcd revisions, decimal; anything
    else compares as not newer, so the event is taken)."""
    return have.isdigit() and got.isdigit() and int(have) > int(got)


class GangLeases:
    """The ledgers of one API server, for one process (`instance` names its holds)."""

    def __init__(self, api_client: Any, *, namespace: str | None = None,
                 wall: Callable[[], float] = time.time, view: GangLedgerView | None = None) -> None:
        self.api_client = api_client
        self.namespace = namespace or default_namespace()
        self.instance = f"{socket.gethostname()}/{os.getpid()}/{random.getrandbits(32):08x}"
        self._wall = wall
        self.view = view

    def wall(self) -> float:
        return self._wall()

    def hold(self, group_uid: str, uid: str, node: str, *, min_count: int, bound: frozenset[str],
             hold_seconds: float, released: Callable[[], None] | None = None) -> pure.Outcome:
        """Hold `uid` on `node` until `hold_seconds` from now (a retried request keeps its first
        expiry, and takes the hold over from the process that had it); RELEASED when this hold
        completes the quorum and every holding process has answered the call, or an earlier
        write released it."""
        now = self._wall()
        entry = pure.Entry(node, self.instance, now + hold_seconds)
        return self._update(group_uid, uid, lambda doc, at: pure.hold(doc, uid, entry, min_count=min_count,
                                                                      bound=bound, now=at), released)

    def check(self, group_uid: str, uid: str, *, mine: frozenset[str], min_count: int,
              bound: frozenset[str], released: Callable[[], None] | None = None) -> pure.Outcome:
        """Where `uid` stands now, by a read; written to only when this process, holding the
        members `mine` of the group, must answer a call for a release or say it is still alive
        (extender.gangs.ledger: a holder that stops writing is taken for dead)."""
        lease = self._read(group_uid)
        annotations = ((lease or {}).get("metadata") or {}).get("annotations")
        now = self._wall()
        doc = pure.expire(pure.read(annotations), now=now)
        if doc.outcome(uid) is not pure.Outcome.WAITING or not doc.needs_word_from(self.instance, now):
            return doc.outcome(uid)
        return self._update(group_uid, uid, lambda doc, at: pure.confirm(doc, self.instance, mine, min_count=min_count,
                                                                         bound=bound, now=at), released)

    def give_way(self, group_uid: str, to: str, reason: str, message: str, *, backoff: float,
                 still: Callable[[pure.GangLedger], bool] | None = None) -> pure.GangLedger | None:
        """Release every hold of the group at once and back it off for `backoff` seconds
        (extender.gangs.giveway); `still(ledger)`, asked of the ledger as read just before the
        write, may call it off (the holds changed since the decision). The ledger written, or
        None when nothing was (no hold left, or called off)."""
        written: list[pure.GangLedger] = []

        def change(read: pure.GangLedger, at: float) -> pure.GangLedger:
            doc = pure.expire(read, now=at)
            if still is not None and not still(doc):
                written.clear()
                return read
            after = pure.give_way(doc, to, reason, message, until=at + backoff, now=at)
            written[:] = [after] if after.gave_way is not None and doc.gave_way is None else []
            return after

        self._update(group_uid, "", change)
        return written[0] if written else None

    def withdraw(self, group_uid: str, uid: str) -> pure.Outcome:
        """Give up `uid`'s hold; RELEASED if a release got there first (then it must bind)."""
        return self._update(group_uid, uid, lambda doc, at: pure.withdraw(doc, uid, self.instance, now=at))

    def _update(self, group_uid: str, uid: str, change: Callable[[pure.GangLedger, float], pure.GangLedger],
                released: Callable[[], None] | None = None) -> pure.Outcome:
        """Read, change, write (again on 409); `released()` once this write is the one that
        released the group's holds (one write in all the processes, for each release)."""
        for _ in range(ATTEMPTS):
            lease = self._read(group_uid)
            annotations = ((lease or {}).get("metadata") or {}).get("annotations")
            now = self._wall()
            before = pure.read(annotations)
            after = change(before, now)
            if after == before and lease is not None:
                return after.outcome(uid)
            try:
                written = self._write(group_uid, lease, after)
            except ConflictError:
                continue  # another writer got there first: read again
            if self.view is not None:
                self.view.put(written)
            if released is not None and after.released.keys() - before.released.keys():
                released()
            return after.outcome(uid)
        raise ClusterError(f"gang ledger {pure.lease_name(group_uid)} kept changing under {ATTEMPTS} attempts",
                           status=None)

    # ---- API calls ----------------------------------------------------------------------------

    def _path(self, group_uid: str = "") -> str:
        base = leases_path(self.namespace)
        return f"{base}/{quote(pure.lease_name(group_uid), safe='')}" if group_uid else base

    def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        return lease_request(self.api_client, method, path, body, ledger="gang ledger", namespace=self.namespace,
                             gone_on_get=True)

    def _read(self, group_uid: str) -> dict[str, Any] | None:
        try:
            lease = self._call("GET", self._path(group_uid))
        except ConflictError:
            return None
        if self.view is not None:
            self.view.put(lease)
        return lease

    def read(self, group_uid: str) -> pure.GangLedger:
        """The group's ledger as the API server has it now (expired holds dropped)."""
        lease = self._read(group_uid)
        return pure.expire(pure.read(((lease or {}).get("metadata") or {}).get("annotations")), now=self._wall())

    def _write(self, group_uid: str, lease: dict[str, Any] | None, doc: pure.GangLedger) -> dict[str, Any]:
        text = pure.dump(doc)
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": pure.lease_name(group_uid), "namespace": self.namespace,
                             "labels": dict(MANAGED_BY), "annotations": {pure.LEDGER_ANNOTATION: text}},
                "spec": {"holderIdentity": self.instance},
            }
            return self._call("POST", self._path(), body)
        meta = dict(lease.get("metadata") or {})
        meta.pop("managedFields", None)
        meta["annotations"] = {**(meta.get("annotations") or {}), pure.LEDGER_ANNOTATION: text}
        spec = {**(lease.get("spec") or {}), "holderIdentity": self.instance}
        return self._call("PUT", self._path(group_uid), {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                                          "metadata": meta, "spec": spec})
