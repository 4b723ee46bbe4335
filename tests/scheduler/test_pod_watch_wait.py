"""A popped pod is decided only once the cluster state's pod watch has it too (Scheduler._await_pod_watch).

The pending pods and all pods come on two watches; only the second fills the nodes. A pod bound
just before the pending one may still be on its way there, and deciding at once placed a
preemptor beside the victim it had not seen (the real control plane's side-by-side scenario
preemption-picks-the-cheapest-node, once in three runs).
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from extender.cluster.memory_binder import MemoryBinder
from extender.cluster.state import ClusterState
from extender.model.pods import PodView
from extender.scheduler.queueing import QueuedPod, SchedulingQueue
from extender.scheduler.standalone import Scheduler
from tests.scheduler.conftest import SCHEDULER_NAME, standalone_profile

RAW = {"metadata": {"name": "p", "namespace": "default", "uid": "uid-p"},
       "spec": {"schedulerName": SCHEDULER_NAME, "containers": [{"name": "c"}]}}


def scheduler(pods_watched: bool) -> Scheduler:
    state = ClusterState()
    state.replace_nodes([])
    state.replace_pods([])
    made = Scheduler(None, [standalone_profile()], state=state, binder=MemoryBinder(state),
                     queue=SchedulingQueue(publish_metrics=False))
    made.source = SimpleNamespace(pods_watched=pods_watched)
    return made


def entry() -> QueuedPod:
    queue = SchedulingQueue(publish_metrics=False)
    queue.add(PodView.from_dict(RAW), SCHEDULER_NAME)
    popped = queue.pop(timeout=0)
    assert popped is not None
    return popped


def test_the_cycle_waits_for_the_pod_watch_to_deliver_the_pod() -> None:
    s = scheduler(pods_watched=True)
    timer = threading.Timer(0.1, lambda: s.state.upsert_pod(RAW))
    started = time.monotonic()
    timer.start()
    s._await_pod_watch(entry())
    waited = time.monotonic() - started
    timer.join()
    assert s.state.pod("default/p") is not None
    assert waited >= 0.09  # it returned only once the pod was there


def test_no_wait_without_a_pod_watch_or_once_the_pod_is_known() -> None:
    s = scheduler(pods_watched=False)
    started = time.monotonic()
    s._await_pod_watch(entry())
    assert time.monotonic() - started < 0.05
    known = scheduler(pods_watched=True)
    known.state.upsert_pod(RAW)
    started = time.monotonic()
    known._await_pod_watch(entry())
    assert time.monotonic() - started < 0.05
