"""The device ledger: the API server as arbiter, so no two processes hand out the same GPU share.

Every gunicorn worker and every replica has its own cluster state. Two of them can each
see a device share free and bind a pod to it, because each learns of the other's bind
only when its watch delivers the pod, some milliseconds later. A file lock would cover
the workers of one pod but not two replicas; one binding worker is not something
gunicorn can do. So before the Binding (PreBind), the share is recorded in a ledger
every process reads and writes with optimistic concurrency, as HAMi's node lock does,
but without a lock to leak and without write access to nodes:

* one `coordination.k8s.io/v1` Lease per GPU node, `gpu-ledger.<node>`, in the extender's
  namespace, whose annotation `extender.example/gpu-ledger` lists the shares handed out
  recently: pod UID -> {pod, devices: {id: [MiB, cores]}, by, at, expires};
* a writer reads the Lease, adds what the ledger holds that its own state does not know
  yet (binds by other processes, not watched yet) to what its state counts, checks the
  pod's shares still fit, adds its entry and PUTs the Lease with the resourceVersion it
  read: a concurrent writer gets 409 Conflict and starts over from a fresh read;
* an entry protects its shares for LEDGER_TTL_SECONDS, by which time every watch has
  delivered the bound pod and its assignment annotation (which is then what counts).
  Entries of pods that left the node, and of claims this process gave up after a
  failed bind, are dropped at the next write.

The check is skipped for nothing: if the shares are taken, the bind is refused with a
ConflictError (the pod is retried), and nothing was written to the pod.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import socket
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from extender import metrics
from extender.errors import ClusterError, ConflictError, NotFoundError
from extender.kube.client import request_json
from extender.model.devices import (
    LEDGER_TTL_SECONDS,
    PREFIX,
    LedgerClaim,
    Shares,
    Use,
    add_shares,
    shortage,
)

log = logging.getLogger(__name__)

LEDGER_ANNOTATION = f"{PREFIX}/gpu-ledger"
NODE_ANNOTATION = f"{PREFIX}/gpu-ledger-node"
LEASE_PREFIX = "gpu-ledger."
MANAGED_BY = {"app.kubernetes.io/managed-by": "extender"}
NAMESPACE_ENV = "EXTENDER_LEASE_NAMESPACE"
IN_CLUSTER_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
FALLBACK_NAMESPACE = "scheduler-extender"
ATTEMPTS = 8
# A given-up bind's entry stays this long at least: a bind that timed out on our side may
# still be in the API server's hands, and must not lose its protection before it lands.
RELEASE_GRACE = 10.0
_UNREAD = object()  # the Lease must be read first (None would mean: read, and it does not exist)
_TIMEOUT = (5.0, 10.0)


def default_namespace() -> str:
    """$EXTENDER_LEASE_NAMESPACE, else the pod's own namespace, else scheduler-extender."""
    explicit = os.environ.get(NAMESPACE_ENV, "").strip()
    if explicit:
        return explicit
    try:
        return Path(IN_CLUSTER_NAMESPACE_FILE).read_text(encoding="utf-8").strip() or FALLBACK_NAMESPACE
    except OSError:
        return FALLBACK_NAMESPACE


def lease_request(api_client: Any, method: str, path: str, body: Any, *, ledger: str, namespace: str,
                  gone_on_get: bool) -> dict[str, Any]:
    """One request for a ledger's Lease (the device ledger's or the gang ledger's), its failures
    named after `ledger`: a Lease deleted since it was read is a conflict (start over), as a
    missing one on GET is when `gone_on_get` (else NotFoundError); a missing namespace or a
    refusal to write Leases there says which flag or grant is missing."""
    try:
        return request_json(api_client, method, path, body=body, timeout=_TIMEOUT)
    except ConflictError:
        raise
    except NotFoundError as exc:
        if method == "GET" and not gone_on_get:
            raise
        if method in ("GET", "PUT"):  # PUT: deleted since we read it, start over as after a conflict
            raise ConflictError(f"{ledger} {path} is gone", status=404, reason="NotFound") from exc
        raise ClusterError(f"{ledger}: namespace {namespace} does not exist "
                           f"(set --lease-namespace): {exc}", status=404) from exc
    except ClusterError as exc:
        if exc.status == 403:
            raise ClusterError(f"{ledger}: not allowed to write Leases in namespace {namespace} "
                               "(grant get, create, update on leases.coordination.k8s.io there): "
                               f"{exc}", status=403) from exc
        raise ClusterError(f"{ledger}: {exc}", status=exc.status) from exc


def lease_name(node: str) -> str:
    """`gpu-ledger.<node>`; node names of up to 253 characters are hashed to stay a valid name."""
    name = LEASE_PREFIX + node
    if len(name) <= 253:
        return name
    return LEASE_PREFIX + hashlib.sha256(node.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Entry:
    pod: str
    shares: Shares
    by: str  # the writing process
    at: float  # wall-clock time written
    expires: float

    def to_json(self) -> dict[str, Any]:
        return {"pod": self.pod, "devices": {d: [m, c] for d, m, c in self.shares}, "by": self.by,
                "at": round(self.at, 3), "expires": round(self.expires, 3)}


def _entry(raw: Any) -> Entry | None:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("devices"), Mapping):
        return None
    shares = []
    for device_id, amounts in raw["devices"].items():
        if not (isinstance(amounts, list) and len(amounts) == 2
                and all(isinstance(a, int) and not isinstance(a, bool) for a in amounts)):
            return None
        shares.append((str(device_id), amounts[0], amounts[1]))
    try:
        return Entry(str(raw.get("pod", "")), tuple(shares), str(raw.get("by", "")),
                     float(raw.get("at", 0)), float(raw["expires"]))
    except (KeyError, TypeError, ValueError):
        return None


def read_entries(lease: Mapping[str, Any] | None, where: str) -> dict[str, Entry]:
    """The ledger's entries by pod UID; unreadable ones are logged and left out."""
    if lease is None:
        return {}
    annotations = (lease.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(LEDGER_ANNOTATION)
    if not text:
        return {}
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        log.error("device ledger %s is not JSON (%s); starting it afresh", where, exc)
        return {}
    entries = {}
    for ident, raw in ((doc.get("entries") or {}) if isinstance(doc, Mapping) else {}).items():
        entry = _entry(raw)
        if entry is None:
            log.error("device ledger %s: dropping unreadable entry %s", where, ident)
        else:
            entries[str(ident)] = entry
    return entries


def _instance() -> str:
    return f"{socket.gethostname()}/{os.getpid()}/{random.getrandbits(32):08x}"


class Ledger:
    """The ledgers of one API server: a lock per node (this process's threads queue up instead of
    colliding) and the last Lease written per node (so a write usually needs no read first)."""

    def __init__(self, api_client: Any, *, namespace: str | None = None, ttl: float = LEDGER_TTL_SECONDS,
                 wall: Callable[[], float] = time.time) -> None:
        self.api_client = api_client
        self.namespace = namespace or default_namespace()
        self.ttl = ttl
        self.instance = _instance()
        self._wall = wall
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._last: dict[str, dict[str, Any]] = {}

    def _lock(self, node: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(node, threading.Lock())

    def _path(self, node: str = "") -> str:
        base = f"/apis/coordination.k8s.io/v1/namespaces/{quote(self.namespace, safe='')}/leases"
        return f"{base}/{quote(lease_name(node), safe='')}" if node else base

    def record(self, claim: LedgerClaim) -> None:
        """Check the claim against the ledger and add it, or raise (ConflictError: shares taken)."""
        shares, capacity = claim.shares, claim.capacity
        with self._lock(claim.node):
            lease: Any = self._last.get(claim.node, _UNREAD)  # our last write is usually still the latest
            fresh = False
            for _ in range(ATTEMPTS):
                if lease is _UNREAD:
                    lease, fresh = self._read(claim.node), True
                now = self._wall()
                kept = self._kept(read_entries(lease, lease_name(claim.node)), claim, now)
                others = self._counted(claim, kept)
                problem = shortage(capacity, others, shares)
                if problem and not fresh:  # our copy may hold entries pruned since: look again first
                    lease = _UNREAD
                    continue
                if problem and claim.rechoose is not None:  # other devices of the node may have room
                    moved = claim.rechoose({ident: entry.shares for ident, entry in kept.items()})
                    if moved is not None and not shortage(moved[1], others, moved[0]):
                        shares, capacity = moved
                        problem = ""
                        metrics.DEVICE_LEDGER_WRITES.labels(result="moved").inc()
                if problem:
                    metrics.DEVICE_LEDGER_WRITES.labels(result="refused").inc()
                    raise ConflictError(f"GPU shares on node {claim.node} were handed out by another "
                                        f"scheduler process meanwhile ({problem}); the pod will be retried",
                                        status=409, reason="Conflict")
                written = self._wall()
                kept[claim.ident] = Entry(claim.pod, shares, self.instance, written, written + self.ttl)
                try:
                    lease = self._write(claim.node, lease, kept)
                except ConflictError:  # another writer got there first (or the Lease was deleted)
                    metrics.DEVICE_LEDGER_WRITES.labels(result="conflict").inc()
                    self._last.pop(claim.node, None)
                    lease, fresh = _UNREAD, False
                    continue
                self._last[claim.node] = lease
                metrics.DEVICE_LEDGER_WRITES.labels(result="written").inc()
                return
        metrics.DEVICE_LEDGER_WRITES.labels(result="error").inc()
        raise ClusterError(f"device ledger for node {claim.node} kept changing under {ATTEMPTS} attempts; "
                           "the pod will be retried", status=None)

    def _kept(self, entries: dict[str, Entry], claim: LedgerClaim, now: float) -> dict[str, Entry]:
        """The entries still holding something: not expired, pod not gone, not a claim we gave up."""
        use = claim.use
        kept = {}
        for ident, entry in entries.items():
            if entry.expires <= now or ident in use.gone or ident == claim.ident:
                continue
            released = use.released.get(ident)
            if released is not None and entry.by == self.instance and entry.at <= released \
                    and now - released > RELEASE_GRACE and self._not_bound(entry.pod, ident):
                continue
            kept[ident] = entry
        return kept

    def _not_bound(self, pod: str, ident: str) -> bool:
        """Whether a pod whose bind we gave up on is indeed not bound: a bind that timed out may
        still have happened, and then its entry must stay until every watch has seen the pod."""
        namespace, _, name = pod.partition("/")
        try:
            found = self._call("GET", f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}")
        except NotFoundError:
            return True
        except ClusterError as exc:
            log.warning("device ledger: cannot check pod %s (%s); keeping its entry", pod, exc)
            return False
        meta, spec = found.get("metadata") or {}, found.get("spec") or {}
        return meta.get("uid") != ident or not spec.get("nodeName")

    @staticmethod
    def _counted(claim: LedgerClaim, entries: Mapping[str, Entry]) -> dict[str, Use]:
        """What the node's devices hold besides this pod, each pod counted once (by UID): what
        the ledger says, and what our state holds that the ledger does not. For a pod in both,
        the ledger wins: its entry is the bind's latest choice (a claim may have moved since
        our state's snapshot), and for a bound pod it is the same as its annotation."""
        totals: dict[str, Use] = {}
        for ident, shares in claim.use.holders.items():
            if ident != claim.ident and ident not in entries:
                add_shares(totals, shares)
        for entry in entries.values():
            add_shares(totals, entry.shares)
        return totals

    # ---- API calls ------------------------------------------------------------------------

    def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        return lease_request(self.api_client, method, path, body, ledger="device ledger", namespace=self.namespace,
                             gone_on_get=False)

    def _read(self, node: str) -> dict[str, Any] | None:
        try:
            return self._call("GET", self._path(node))
        except NotFoundError:
            return None

    def _write(self, node: str, lease: dict[str, Any] | None, entries: Mapping[str, Entry]) -> dict[str, Any]:
        text = orjson.dumps({"version": 1, "entries": {k: v.to_json() for k, v in entries.items()}}).decode()
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": lease_name(node), "namespace": self.namespace, "labels": dict(MANAGED_BY),
                             "annotations": {LEDGER_ANNOTATION: text, NODE_ANNOTATION: node}},
                "spec": {"holderIdentity": self.instance},
            }
            return self._call("POST", self._path(), body)
        meta = dict(lease.get("metadata") or {})
        meta.pop("managedFields", None)
        meta["annotations"] = {**(meta.get("annotations") or {}), LEDGER_ANNOTATION: text, NODE_ANNOTATION: node}
        spec = {**(lease.get("spec") or {}), "holderIdentity": self.instance}
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}
        return self._call("PUT", self._path(node), body)


_ledgers: weakref.WeakKeyDictionary[Any, Ledger] = weakref.WeakKeyDictionary()
_ledgers_lock = threading.Lock()


def configure(api_client: Any, *, namespace: str | None = None, ttl: float = LEDGER_TTL_SECONDS) -> Ledger:
    """Say where `api_client`'s ledgers live (the default namespace otherwise)."""
    ledger = Ledger(api_client, namespace=namespace, ttl=ttl)
    with _ledgers_lock:
        _ledgers[api_client] = ledger
    log.info("device ledger: Leases gpu-ledger.<node> in namespace %s", ledger.namespace)
    return ledger


def ledger_for(api_client: Any) -> Ledger:
    with _ledgers_lock:
        ledger = _ledgers.get(api_client)
        if ledger is None:
            ledger = _ledgers[api_client] = Ledger(api_client)
        return ledger
