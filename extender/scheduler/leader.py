"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

Only one replica may bind pods, or two would race for the same free space. The Lease is
read and written as raw JSON (kube_client.request_json); every write is a PUT carrying
the resourceVersion just read, so of two candidates that both see an expired lease, the
API server lets exactly one write succeed (the other gets 409 Conflict).

Expiry is judged like client-go: not by comparing the lease's `renewTime` with our own
wall clock (clock skew between nodes would let a candidate steal a live lease), but by
how long *we* have seen the same record unchanged, on our monotonic clock. A renewed
lease changes the record, so a live leader is never expired; a dead one is, one
`leaseDurationSeconds` after its last renewal was first seen.

The leader renews every `retry_period`; if no renewal succeeds for `renew_deadline` it
stops leading at once (`is_leader` turns False even before the elector's thread notices,
so a stalled thread cannot keep a stale leader binding). `release()` on shutdown empties
`holderIdentity` and sets `leaseDurationSeconds` to 1 (client-go's ReleaseOnCancel), so a
follower takes over within a retry period instead of a lease duration.
"""

from __future__ import annotations

import logging
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from extender import metrics
from extender.errors import ClusterError, ConflictError, NotFoundError
from extender.kube import client as kube_client
from extender.model.fields import metadata_of, part_of

log = logging.getLogger(__name__)

LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0
JITTER_FACTOR = 1.2  # client-go: renewDeadline must exceed retryPeriod * JitterFactor

Callback = Callable[[], None]


def default_identity() -> str:
    """`hostname_uuid`, as kube-scheduler names itself in the Lease."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def _micro_time(moment: datetime | None = None) -> str:
    return (moment or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_path(namespace: str, name: str = "") -> str:
    base = f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace, safe='')}/leases"
    return f"{base}/{quote(name, safe='')}" if name else base


class LeaderElector:
    """Campaigns for one Lease in a daemon thread; `is_leader` says whether we may act now."""

    def __init__(
        self,
        api_client: Any,
        *,
        namespace: str,
        name: str,
        identity: str | None = None,
        lease_duration: float = LEASE_DURATION,
        renew_deadline: float = RENEW_DEADLINE,
        retry_period: float = RETRY_PERIOD,
        on_started_leading: Callback | None = None,
        on_stopped_leading: Callback | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not lease_duration > renew_deadline:
            raise ValueError("lease duration must be greater than the renew deadline")
        if not renew_deadline > retry_period * JITTER_FACTOR:
            raise ValueError(f"renew deadline must be greater than retry period * {JITTER_FACTOR}")
        if retry_period <= 0:
            raise ValueError("retry period must be positive")
        self.api_client = api_client
        self.namespace = namespace
        self.name = name
        self.identity = identity or default_identity()
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self._clock = clock
        self._timeout = (min(5.0, renew_deadline / 2), max(0.2, renew_deadline / 2))
        self._leading = False
        self._last_renew = 0.0
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._observed_holder = ""
        self._resource_version = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._became_leader = threading.Event()
        metrics.LEADER.set(0)

    # ---- state ------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """True only while the last successful renewal is younger than the renew deadline."""
        return self._leading and self._clock() - self._last_renew < self.renew_deadline

    @property
    def holder(self) -> str:
        """The holder we last saw in the Lease ("" if none or not read yet)."""
        return self._observed_holder

    def wait_for_leadership(self, timeout: float | None = None) -> bool:
        return self._became_leader.wait(timeout)

    # ---- lifecycle -----------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("leader elector already started")
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._thread.start()

    def stop(self, *, release: bool = True, timeout: float = 5.0) -> None:
        """Stop campaigning; with `release`, hand the lease back so a follower takes over now."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        was_leading = self._leading
        self._set_leading(False)
        if release and was_leading:
            self.release()

    # ---- the campaign --------------------------------------------------------------------

    def _run(self) -> None:
        log.info("leader election: campaigning for lease %s/%s as %s", self.namespace, self.name, self.identity)
        while not self._stop.is_set():
            if not self._acquire():
                return
            self._set_leading(True)
            self._renew_until_lost()
            if self._stop.is_set():
                return
            self._set_leading(False)

    def _acquire(self) -> bool:
        """Try every retry period (jittered) until we hold the lease; False if stopped."""
        while not self._stop.is_set():
            if self.try_acquire_or_renew():
                return True
            self._stop.wait(self.retry_period * (1 + random.uniform(0, JITTER_FACTOR - 1)))
        return False

    def _renew_until_lost(self) -> None:
        while not self._stop.wait(self.retry_period):
            renewed = self.try_acquire_or_renew()
            if renewed:
                continue
            if self._observed_holder and self._observed_holder != self.identity:
                log.error("leader election: lease %s/%s taken over by %s", self.namespace, self.name,
                          self._observed_holder)
                return
            if self._clock() - self._last_renew >= self.renew_deadline:
                log.error("leader election: could not renew lease %s/%s within %.1f s; stopping",
                          self.namespace, self.name, self.renew_deadline)
                return

    def _set_leading(self, leading: bool) -> None:
        if leading == self._leading:
            return
        self._leading = leading
        metrics.LEADER.set(1 if leading else 0)
        callback = self.on_started_leading if leading else self.on_stopped_leading
        if leading:
            log.info("leader election: now leading (lease %s/%s)", self.namespace, self.name)
            self._became_leader.set()
        else:
            level = logging.INFO if self._stop.is_set() else logging.WARNING
            log.log(level, "leader election: stopped leading (lease %s/%s)", self.namespace, self.name)
            self._became_leader.clear()
        if callback is not None:
            try:
                callback()
            except Exception:  # a callback must not kill the election thread
                log.exception("leader election callback failed")

    # ---- one step ----------------------------------------------------------------------------

    def try_acquire_or_renew(self) -> bool:
        """Read the Lease; take it if free or expired, renew it if ours. True if we hold it now."""
        now = datetime.now(UTC)
        try:
            lease = kube_client.request_json(self.api_client, "GET", lease_path(self.namespace, self.name),
                                             timeout=self._timeout)
        except NotFoundError:
            return self._create(now)
        except ClusterError as exc:
            log.warning("leader election: cannot read lease %s/%s: %s", self.namespace, self.name, exc)
            return False
        spec = part_of(lease, "spec")
        holder = str(spec.get("holderIdentity") or "")
        self._observe(lease, spec)
        duration = spec.get("leaseDurationSeconds")
        duration = duration if isinstance(duration, int | float) and duration > 0 else self.lease_duration
        if holder and holder != self.identity and self._observed_at + duration > self._clock():
            return False  # held by someone else, and alive as far as we can tell
        new_spec = dict(spec)
        if holder != self.identity:
            new_spec["acquireTime"] = _micro_time(now)
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if holder else 0)
        new_spec["holderIdentity"] = self.identity
        new_spec["leaseDurationSeconds"] = max(1, round(self.lease_duration))
        new_spec["renewTime"] = _micro_time(now)
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": dict(metadata_of(lease)), "spec": new_spec}
        return self._write("PUT", lease_path(self.namespace, self.name), body)

    def _create(self, now: datetime) -> bool:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": max(1, round(self.lease_duration)),
                "acquireTime": _micro_time(now),
                "renewTime": _micro_time(now),
                "leaseTransitions": 0,
            },
        }
        return self._write("POST", lease_path(self.namespace), body)

    def _write(self, method: str, path: str, body: dict[str, Any]) -> bool:
        started = self._clock()
        try:
            reply = kube_client.request_json(self.api_client, method, path, body=body, timeout=self._timeout)
        except ConflictError:
            log.info("leader election: lost the race for lease %s/%s", self.namespace, self.name)
            return False
        except ClusterError as exc:
            log.warning("leader election: cannot write lease %s/%s: %s", self.namespace, self.name, exc)
            return False
        spec = part_of(reply, "spec")
        self._observe(reply, spec)
        # Count from when we sent it: the renewal is only known to be in place from then on.
        self._last_renew = started
        return True

    def _observe(self, lease: Mapping[str, Any], spec: Mapping[str, Any]) -> None:
        """Remember when the record last changed, on our clock (client-go's observedTime)."""
        meta = metadata_of(lease)
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("acquireTime"),
                  spec.get("leaseDurationSeconds"), spec.get("leaseTransitions"))
        if record != self._observed:
            self._observed = record
            self._observed_at = self._clock()
        self._observed_holder = str(spec.get("holderIdentity") or "")
        self._resource_version = str(meta.get("resourceVersion") or "")

    def release(self) -> bool:
        """Give the lease up if we hold it: empty holder, 1 s duration (client-go ReleaseOnCancel)."""
        try:
            lease = kube_client.request_json(self.api_client, "GET", lease_path(self.namespace, self.name),
                                             timeout=self._timeout)
        except ClusterError as exc:
            log.warning("leader election: cannot release lease %s/%s: %s", self.namespace, self.name, exc)
            return False
        spec = part_of(lease, "spec")
        if spec.get("holderIdentity") != self.identity:
            return False
        now = _micro_time()
        new_spec = dict(spec, holderIdentity="", leaseDurationSeconds=1, renewTime=now, acquireTime=now)
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": dict(metadata_of(lease)), "spec": new_spec}
        try:
            kube_client.request_json(self.api_client, "PUT", lease_path(self.namespace, self.name), body=body,
                                     timeout=self._timeout)
        except ClusterError as exc:
            log.warning("leader election: cannot release lease %s/%s: %s", self.namespace, self.name, exc)
            return False
        log.info("leader election: released lease %s/%s", self.namespace, self.name)
        return True
