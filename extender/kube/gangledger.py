"""The gang ledger's Leases: read-modify-PUT around the pure transitions of extender.gangs.ledger.

One `coordination.k8s.io/v1` Lease per pod group (`gang.<group uid>`) in the extender's Lease
namespace (the device ledger's: --lease-namespace, else the pod's own namespace). Every change
is a PUT with the resourceVersion read (a POST when there is none yet), so of two writers, in
two gunicorn workers or two replicas, one gets 409 Conflict and starts over from a fresh read:
the write that completes the quorum and every holding process's answer to its call releases
every hold at once, and a member's withdrawal cannot undo a release another writer made. A
poll is a GET, and a PUT only when this process must answer a call or show it is alive (the
holds of a process that stopped writing are dropped; docs/gangs.md, section 3).
"""

from __future__ import annotations

import logging
import os
import random
import socket
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from extender.errors import ClusterError, ConflictError
from extender.gangs import ledger as pure
from extender.kube.deviceledger import MANAGED_BY, default_namespace, lease_request

log = logging.getLogger(__name__)

ATTEMPTS = 20


class GangLeases:
    """The ledgers of one API server, for one process (`instance` names its holds)."""

    def __init__(self, api_client: Any, *, namespace: str | None = None,
                 wall: Callable[[], float] = time.time) -> None:
        self.api_client = api_client
        self.namespace = namespace or default_namespace()
        self.instance = f"{socket.gethostname()}/{os.getpid()}/{random.getrandbits(32):08x}"
        self._wall = wall

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
                self._write(group_uid, lease, after)
            except ConflictError:
                continue  # another writer got there first: read again
            if released is not None and after.released.keys() - before.released.keys():
                released()
            return after.outcome(uid)
        raise ClusterError(f"gang ledger {pure.lease_name(group_uid)} kept changing under {ATTEMPTS} attempts",
                           status=None)

    # ---- API calls ----------------------------------------------------------------------------

    def _path(self, group_uid: str = "") -> str:
        base = f"/apis/coordination.k8s.io/v1/namespaces/{quote(self.namespace, safe='')}/leases"
        return f"{base}/{quote(pure.lease_name(group_uid), safe='')}" if group_uid else base

    def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        return lease_request(self.api_client, method, path, body, ledger="gang ledger", namespace=self.namespace,
                             gone_on_get=True)

    def _read(self, group_uid: str) -> dict[str, Any] | None:
        try:
            return self._call("GET", self._path(group_uid))
        except ConflictError:
            return None

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
