"""The API-server faults a real control plane produces, each on a private control plane.

The fake injects its faults (test_api_faults.py); these are the ones a real etcd and
kube-apiserver produce by themselves, on a control plane of the test's own so that the
shared one is not disturbed:

* kube-apiserver stopped for a while and started again, etcd kept: every watch is cut,
  the scheduler cannot reach the server, then must converge on what is there;
* etcd compacted past the revision every watch would resume from: on a kube-apiserver
  without its watch cache (``--watch-cache=false``: the watch cache serves old revisions
  from memory and hides compaction), each resumed watch ends with 410 Gone, and the
  reflectors must list again;
* the leader of two ``extender schedule`` replicas killed with SIGKILL: the follower takes
  the lease once it expires and schedules the rest, no pod bound twice.

Without the binaries every test is skipped, saying so. The figures join the summary,
marked [real].
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import processes
from tests.fakeapi.envtest import EnvtestControlPlane, find_assets
from tests.fakeapi.fixtures import ApiServerHandle, start_envtest_handle
from tests.reliability.convergence import (
    SCHEDULER_NAME,
    bound_more_than_once,
    finish,
    lists,
    restarts,
    running_harness,
    settle,
)
from tests.reliability.figures import FIGURES

pytestmark = [pytest.mark.apiserver, pytest.mark.slow]

NO_BINARIES = (
    "needs etcd and kube-apiserver binaries (KUBEBUILDER_ASSETS) for a private control plane; "
    "the fake-server versions of these faults run in test_api_faults.py"
)
API_DOWNTIME = float(os.environ.get("RELIABILITY_API_DOWNTIME", "10"))
# Leader election timings for the replicas: lease 2 s, renew deadline 1.5 s, retry 0.3 s.
ELECTION = ["--leader-elect", "--lease-namespace", "default", "--lease-duration", "2",
            "--renew-deadline", "1.5", "--retry-period", "0.3"]  # fmt: skip


@pytest.fixture
def control_plane() -> Iterator[Callable[..., tuple[EnvtestControlPlane, ApiServerHandle]]]:
    """Start a private control plane (extra kube-apiserver flags as arguments)."""
    assets = find_assets()
    if assets is None:
        pytest.skip(NO_BINARIES)
    started: list[tuple[EnvtestControlPlane, ApiServerHandle]] = []

    def start(*apiserver_args: str) -> tuple[EnvtestControlPlane, ApiServerHandle]:
        plane = EnvtestControlPlane(assets, extra_apiserver_args=apiserver_args).start()
        started.append((plane, start_envtest_handle(plane)))
        return started[-1]

    yield start
    for plane, handle in started:
        handle.client.close()
        plane.stop()


def test_kube_apiserver_restarted(control_plane: Any) -> None:
    plane, server = control_plane()
    with running_harness(str(plane.kubeconfig), server.client, server="real") as h:
        before = lists(h.scheduler)
        h.create_pods(2)  # queued or in flight when the server goes away
        plane.restart_apiserver(downtime=API_DOWNTIME)
        h.churn()
        finish(h, f"kube-apiserver stopped {API_DOWNTIME:.0f} s and restarted, etcd kept", 1,
               lambda: f"{restarts(h.scheduler, 'error')} failed reconnects while down, "
                       f"{lists(h.scheduler) - before} re-lists")
        assert lists(h.scheduler) > before, "the reflectors never listed again"


def test_etcd_compaction_forces_410_gone(control_plane: Any) -> None:
    plane, server = control_plane("--watch-cache=false")
    # Watches end every second (timeoutSeconds=1) and resume from the last version seen.
    with running_harness(str(plane.kubeconfig), server.client, server="real",
                         watch_options={"watch_timeout": (1.0, 2.0)}) as h:
        h.create_pods(2)
        settle(h, "the second batch")
        before = lists(h.scheduler)
        plane.etcd_put("/extender-tests/marker", "moved")  # a revision no watch has seen
        compacted = plane.compact_etcd()
        h.kube.wait_for(lambda: restarts(h.scheduler, "gone") >= 3, timeout=15,
                        message="410 Gone on the resumed watches of nodes, pods and pending pods")
        h.churn()
        finish(h, "etcd compacted past every watch, 410 Gone on resume", 1,
               lambda: f"compacted at revision {compacted}; {restarts(h.scheduler, 'gone')} watches "
                       f"got 410, {lists(h.scheduler) - before} re-lists")


def bound(kube: Any, names: list[str]) -> bool:
    return all(((kube.get_pod(n) or {}).get("spec") or {}).get("nodeName") for n in names)


def leading(replica: processes.ExtenderProcess) -> bool:
    return replica.get("/metrics")[0] == 200 and replica.metric("extender_leader") == 1.0


def test_leader_killed(control_plane: Any, tmp_path: Path) -> None:
    plane, server = control_plane()
    kube = server.client
    kube.create_node("node-0", cpu="8")
    replicas = [processes.schedule(plane.kubeconfig, tmp_path, name=f"replica-{i}", extra=ELECTION)
                for i in range(2)]
    name = "leader SIGKILLed, the follower takes over"
    try:
        for replica in replicas:
            replica.start()
        leader = kube.wait_for(lambda: next((r for r in replicas if leading(r)), None), timeout=15,
                               message="a leader")
        follower = next(r for r in replicas if r is not leader)
        early = [f"early-{i}" for i in range(4)]
        for pod in early:
            kube.create_pod(pod, cpu="100m", scheduler_name=SCHEDULER_NAME)
        kube.wait_for(lambda: bound(kube, early), timeout=20, message="early pods bound")

        assert leader.process is not None
        leader.process.kill()
        killed = time.monotonic()
        late = [f"late-{i}" for i in range(4)]
        for pod in late:
            kube.create_pod(pod, cpu="100m", scheduler_name=SCHEDULER_NAME)
        kube.wait_for(lambda: leading(follower), timeout=15, message="the follower leading")
        took = time.monotonic() - killed
        kube.wait_for(lambda: bound(kube, late), timeout=20, message="late pods bound by the new leader")
        holder = kube.get_lease("extender-scheduler", "default")["spec"]["holderIdentity"]
        assert f"as {holder}" in follower.log(), "the lease is not the follower's"
        twice = bound_more_than_once(kube)
        assert not twice, f"bound more than once: {sorted(twice)}"
        assert follower.stop() == 0
    except AssertionError as exc:
        FIGURES.fault(name, 1, False, " ".join(str(exc).split("\n")[:2])[:300], server="real")
        raise
    finally:
        for replica in replicas:
            replica.stop()
    FIGURES.fault(name, 1, True, f"the follower led {took:.1f} s after the kill (lease 2 s); "
                                 f"{len(early) + len(late)} pods bound once each", server="real")
