"""The faults of a chaos run, each injected once on request, with its seeded parameters.

``Injector.inject(kind)`` returns when the fault itself is over (a paused process continued,
a restarted server ready again, a delay lifted) with ``(started, ended, detail)``; the
run then measures recovery from ``ended``, or from ``started`` for the leader's faults,
where the follower must take over while the fault lasts. A fault with nothing to aim at (no live leader
yet) raises :class:`NoTarget` and is skipped.

| kind | what |
|---|---|
| leader-sigkill | SIGKILL the replica holding the lease (the supervisor starts it again) |
| leader-sigstop | SIGSTOP it for 1 s .. 1.5 x the lease, then SIGCONT |
| worker-sigkill | SIGKILL one gunicorn worker of the webhook (its master forks another) |
| worker-sigstop | SIGSTOP one worker 1..6 s |
| master-sigkill | SIGKILL the gunicorn master (its workers must notice and exit; the supervisor starts it again) |
| master-sigstop | SIGSTOP the master 1..6 s |
| apiserver-restart | kube-apiserver stopped, down 0.5..4 s, started again (etcd kept) |
| etcd-restart | etcd stopped, down 0.5..4 s, started again (kube-apiserver kept) |
| etcd-compaction | etcd compacted at its current revision, then every proxied connection cut: each watch resumes from a compacted revision and gets 410 Gone |
| watch-cut | every proxied connection reset |
| slow-apiserver | every reply chunk held 0.2..1 s, for 3..10 s |
| claim-write-refused | the next 1..3 writes to ``resourceclaims/status`` answered 409, 500, or held past the writer's timeout and then let through or refused (claimgate.py) |
| claim-controller-restart | kube-controller-manager stopped 2..8 s (template claims are late, gone pods stay in ``reservedFor``), then started again |
| slice-republish | a node's ResourceSlice published again with the next pool generation (a new slice, then the old one deleted), as a driver restart does |
| device-taint | a NoSchedule taint on one device of a node's slice for 3..10 s, then removed |
| leader-sigkill-in-prebind | the standalone pool's next allocating claim write held at the API server, the leader SIGKILLed meanwhile, then the write let through or refused |

Not in the default set (``EXTRA_KINDS``, ``--kinds`` chooses): watch-blackhole, every open
proxied connection silently swallowed (nothing passes, nothing closes): only a client's
own idle timeout gets it out (docs/reliability.md, "Chaos under load").
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.chaos.cluster import ChaosCluster
from bench.chaos.workload import DRA_DRIVER, DRA_PATHS, NODES_PER_POOL, POOLS, dra_slices, node_name

LEADER_KINDS = ("leader-sigkill", "leader-sigstop", "leader-sigkill-in-prebind")
DRA_FAULTS = ("claim-write-refused", "claim-controller-restart", "slice-republish", "device-taint",
              "leader-sigkill-in-prebind")
KINDS = (*LEADER_KINDS[:2], "worker-sigkill", "worker-sigstop", "master-sigkill", "master-sigstop",
         "apiserver-restart", "etcd-restart", "etcd-compaction", "watch-cut", "slow-apiserver", *DRA_FAULTS)
TAINT = {"key": "chaos.example/broken", "value": "true", "effect": "NoSchedule"}
EXTRA_KINDS = ("watch-blackhole",)


class NoTarget(Exception):
    """Nothing to aim this fault at right now."""


@dataclass
class Injector:
    cluster: ChaosCluster
    rng: random.Random
    clock: Callable[[], float]
    compactions: int = 0
    generations: dict[str, int] = field(default_factory=dict)  # node -> its slice's pool generation
    taints: list[tuple[tuple[str, str, str], float, float]] = field(default_factory=list)  # device, from, to
    _on_start: Callable[[], None] = lambda: None
    _began: float | None = None

    def inject(self, kind: str, on_start: Callable[[], None] = lambda: None) -> tuple[float, float, str]:
        """Inject one fault; `on_start` runs as soon as it has begun (the process stopped or killed)."""
        method = getattr(self, "_" + kind.replace("-", "_"))
        started = self.clock()
        self._on_start = on_start
        self._began = None
        detail = method()
        return self._began if self._began is not None else started, self.clock(), detail

    # ---- processes -------------------------------------------------------------------------------

    def _leader_pid(self) -> tuple[str, int]:
        leader = self.cluster.leader()
        if leader is None or leader.pid is None:
            raise NoTarget("no live replica holds the lease")
        return leader.name, leader.pid

    def _worker_pid(self) -> tuple[str, int]:
        workers = sorted(self.cluster.webhook_workers())
        if not workers:
            raise NoTarget("no webhook worker")
        pid = self.rng.choice(workers)
        return f"webhook worker {pid}", pid

    def _master_pid(self) -> tuple[str, int]:
        pid = self.cluster.webhook_master()
        if pid is None:
            raise NoTarget("no webhook master")
        return f"webhook master {pid}", pid

    def _pause(self, target: tuple[str, int], low: float, high: float) -> str:
        name, pid = target
        seconds = self.rng.uniform(low, high)
        os.kill(pid, signal.SIGSTOP)
        try:
            self._on_start()
            time.sleep(seconds)
        finally:
            os.kill(pid, signal.SIGCONT)
        return f"{name} stopped {seconds:.1f} s"

    def _kill(self, target: tuple[str, int]) -> str:
        name, pid = target
        os.kill(pid, signal.SIGKILL)
        self._on_start()
        return f"{name} killed"

    def _leader_sigkill(self) -> str:
        return self._kill(self._leader_pid())

    def _leader_sigstop(self) -> str:
        return self._pause(self._leader_pid(), 1.0, 1.5 * self.cluster.election.lease)

    def _worker_sigkill(self) -> str:
        return self._kill(self._worker_pid())

    def _worker_sigstop(self) -> str:
        return self._pause(self._worker_pid(), 1.0, 6.0)

    def _master_sigkill(self) -> str:
        return self._kill(self._master_pid())

    def _master_sigstop(self) -> str:
        return self._pause(self._master_pid(), 1.0, 6.0)

    # ---- the control plane -------------------------------------------------------------------------

    def _restart(self, restart: Callable[[float], None], back: str) -> str:
        """Stop a control-plane process for 0.5 to 4 s (``restart(downtime)``); say how long
        it took to be ``back`` (ready, healthy)."""
        downtime = self.rng.uniform(0.5, 4.0)
        began = time.monotonic()
        restart(downtime)
        return f"down {downtime:.1f} s, {back} again after {time.monotonic() - began:.1f} s"

    def _apiserver_restart(self) -> str:
        assert self.cluster.plane is not None
        return self._restart(self.cluster.plane.restart_apiserver, "ready")

    def _etcd_restart(self) -> str:
        assert self.cluster.plane is not None
        return self._restart(self.cluster.plane.restart_etcd, "healthy")

    def _etcd_compaction(self) -> str:
        assert self.cluster.plane is not None and self.cluster.proxy is not None
        self.compactions += 1
        self.cluster.plane.etcd_put("/chaos/marker", str(self.compactions))  # a revision no watch saw
        revision = self.cluster.plane.compact_etcd()
        cut = self.cluster.proxy.cut()
        return f"compacted at revision {revision}, {cut} connections cut"

    def _watch_cut(self) -> str:
        assert self.cluster.proxy is not None
        return f"{self.cluster.proxy.cut()} connections reset"

    def _watch_blackhole(self) -> str:
        assert self.cluster.proxy is not None
        return f"{self.cluster.proxy.blackhole()} connections swallowed"

    def _slow_apiserver(self) -> str:
        assert self.cluster.proxy is not None
        delay, seconds = self.rng.uniform(0.2, 1.0), self.rng.uniform(3.0, 10.0)
        self.cluster.proxy.slow(delay)
        try:
            time.sleep(seconds)
        finally:
            self.cluster.proxy.slow(0.0)
        return f"replies held {delay:.2f} s per chunk for {seconds:.1f} s"

    # ---- dynamic resource allocation -------------------------------------------------------------

    def _claim_write_refused(self) -> str:
        assert self.cluster.gate is not None
        return self.cluster.gate.refuse(self.rng)

    def _leader_sigkill_in_prebind(self) -> str:
        assert self.cluster.gate is not None
        self._leader_pid()  # NoTarget now rather than at the write

        def kill() -> str:
            self._began = self.clock()
            try:
                return self._kill(self._leader_pid())
            except NoTarget as exc:
                return f"no leader to kill ({exc})"

        detail = self.cluster.gate.kill_in_prebind(kill, self.rng)
        if self._began is None:
            raise NoTarget(detail)
        return detail

    def _claim_controller_restart(self) -> str:
        manager = self.cluster.controller_manager
        if manager is None or manager.process is None or manager.process.poll() is not None:
            raise NoTarget("kube-controller-manager is not running")
        downtime = self.rng.uniform(2.0, 8.0)
        self.cluster.controller_manager_paused = True
        try:
            manager.stop()
            time.sleep(downtime)
            manager.start()
        except (RuntimeError, TimeoutError) as exc:  # the supervisor starts it again; recovery waits for it
            return f"kube-controller-manager down {downtime:.1f} s, did not start again: {str(exc).splitlines()[0]}"
        finally:
            self.cluster.controller_manager_paused = False
        return f"kube-controller-manager down {downtime:.1f} s"

    def _node(self) -> str:
        pool = self.rng.choice(sorted(POOLS.values()))
        return node_name(pool, self.rng.randrange(NODES_PER_POOL))

    def _slice_path(self, node: str) -> str:
        """The slice of `node`'s devices (its first)."""
        name = dra_slices(node, self.generations.get(node, 1))[0]["metadata"]["name"]
        return f"{DRA_PATHS['ResourceSlice']}/{name}"

    def _slice_republish(self) -> str:
        """The pool's slices of the next generation created, then the old ones deleted: for a
        moment both are there (the newest generation wins)."""
        node = self._node()
        old = self.generations.get(node, 1)
        kube = self.cluster.kube
        for body in dra_slices(node, old + 1):
            kube.call("POST", DRA_PATHS["ResourceSlice"], body)
        self.generations[node] = old + 1
        for body in dra_slices(node, old):
            kube.call("DELETE", f"{DRA_PATHS['ResourceSlice']}/{body['metadata']['name']}")
        return f"{node}: pool generation {old} -> {old + 1}"

    def _set_taint(self, node: str, device: str, taint: dict[str, Any] | None) -> None:
        kube = self.cluster.kube
        for _ in range(10):  # a conflict with nothing else writing slices is unlikely: retried anyway
            current = kube.call("GET", self._slice_path(node))
            for entry in current["spec"]["devices"]:
                if entry["name"] == device:
                    entry.pop("taints", None)
                    if taint is not None:
                        entry["taints"] = [dict(taint)]
            try:
                kube.call("PUT", self._slice_path(node), current)
                return
            except Exception:  # noqa: BLE001 - a conflict: read again
                time.sleep(0.2)
        raise RuntimeError(f"could not update the slice of {node}")

    def _device_taint(self) -> str:
        node = self._node()
        device = self.rng.choice(("acc-0", "acc-1", "nic"))
        seconds = self.rng.uniform(3.0, 10.0)
        self._set_taint(node, device, TAINT)
        tainted = self.clock()
        try:
            time.sleep(seconds)
        finally:
            self._set_taint(node, device, None)
            self.taints.append(((DRA_DRIVER, node, device), tainted, self.clock()))
        return f"{node}/{device} tainted {TAINT['key']}={TAINT['value']}:NoSchedule for {seconds:.1f} s"
