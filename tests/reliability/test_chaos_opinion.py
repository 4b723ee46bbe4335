"""bench/bench_chaos.py's second opinion: the webhook pool's pods the oracle says fit are put to
kube-scheduler again by a no-op label on the pool's nodes and ResourceSlices; one bound then is
no violation (``pending_until_requeued``), one still Pending stays a violation. Here a thread
plays kube-scheduler: it binds one pod once it sees the label (API server: fake or real)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest

from bench import bench_chaos
from bench.chaos.checker import Violation
from bench.chaos.workload import DRA_PATHS, NAMESPACE, POOL, dra_slices
from tests.fakeapi.client import KubeTestClient


@dataclass
class Cluster:
    kube: KubeTestClient


def test_kube_scheduler_binding_a_pod_once_woken_excuses_it(kube: KubeTestClient,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_chaos, "OPINION_TIMEOUT", 3.0)
    kube.ensure_namespace(NAMESPACE)
    for name in ("wh-0", "sa-0"):
        kube.create_node(name, labels={POOL: name.split("-")[0]})
    kube.call("POST", DRA_PATHS["ResourceSlice"], dra_slices("wh-0")[0])
    for name in ("wh-dra-template-1", "wh-dra-template-2"):
        kube.create_pod(name, NAMESPACE, cpu="100m")
    stop = threading.Event()

    def play_kube_scheduler() -> None:  # binds wh-dra-template-1 once the nudge is there
        while not stop.wait(0.1):
            node = kube.call("GET", "/api/v1/nodes/wh-0")
            if bench_chaos.NUDGE in (node["metadata"].get("labels") or {}):
                kube.bind_pod("wh-dra-template-1", "wh-0", NAMESPACE)
                return

    thread = threading.Thread(target=play_kube_scheduler, daemon=True)
    thread.start()
    found = [Violation("pending-but-fits", f"{NAMESPACE}/wh-dra-template-1", "Pending 40 s ..., yet it fits wh-0"),
             Violation("pending-but-fits", f"{NAMESPACE}/wh-dra-template-2", "Pending 40 s ..., yet it fits wh-0"),
             Violation("pending-but-fits", f"{NAMESPACE}/sa-dra-template-3", "Pending 40 s ..., yet it fits sa-0")]
    began = time.monotonic()
    try:
        kept, requeued = bench_chaos.kube_scheduler_opinion(Cluster(kube), found, log=lambda line: None)
    finally:
        stop.set()
        thread.join(5)
    assert requeued == [f"{NAMESPACE}/wh-dra-template-1"]
    assert [v.subject for v in kept] == [f"{NAMESPACE}/wh-dra-template-2", f"{NAMESPACE}/sa-dra-template-3"]
    assert time.monotonic() - began < 10
    labels: dict[str, Any] = kube.call("GET", f"{DRA_PATHS['ResourceSlice']}/{dra_slices('wh-0')[0]['metadata']['name']}")[
        "metadata"].get("labels") or {}
    assert bench_chaos.NUDGE in labels
    assert bench_chaos.NUDGE not in (kube.call("GET", "/api/v1/nodes/sa-0")["metadata"].get("labels") or {})


def test_nothing_flagged_asks_nothing() -> None:
    assert bench_chaos.kube_scheduler_opinion(None, [], log=print) == ([], [])  # type: ignore[arg-type]
