"""The standalone scheduler's API connections: enough pooled for its concurrency, and reused."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from extender.kube import keepalive
from extender.kube.client import build_api_client
from extender.scheduler.preemptor import PREEMPT_WORKERS
from extender.scheduler.reporting import REPORT_WORKERS
from extender.scheduler.standalone import connections_needed
from tests.scheduler.conftest import SCHEDULER_NAME

pytestmark = pytest.mark.apiserver

PARALLEL_BINDS = 16
PODS = 200


def test_the_pool_holds_every_thread_and_watch_that_may_talk_at_once() -> None:
    needed = connections_needed(PARALLEL_BINDS, profiles=2)
    watches = 4 + 2  # nodes, pods, namespaces, budgets; a pending-pod watch per profile
    assert needed >= PARALLEL_BINDS + REPORT_WORKERS + PREEMPT_WORKERS + watches + 1  # + the lease


def test_a_backlog_drains_without_throwing_connections_away(apiserver: Any, kube: Any, make_scheduler: Any,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """Binds, Scheduled Events and watches at full concurrency: every connection the pools
    open is kept for the next request (both pools warn when they have to drop one)."""
    size = connections_needed(PARALLEL_BINDS, profiles=1)
    client = build_api_client(kubeconfig=str(apiserver.kubeconfig), pool_size=size)
    for i in range(4):
        kube.create_node(f"n{i}", cpu="64", memory="256Gi", pods="110")
    for i in range(PODS):
        kube.create_pod(f"p{i}", cpu="10m", memory="16Mi", scheduler_name=SCHEDULER_NAME)
    caplog.set_level(logging.WARNING, logger="urllib3.connectionpool")
    caplog.set_level(logging.WARNING, logger=keepalive.__name__)
    try:
        scheduler = make_scheduler(client=client, parallel_binds=PARALLEL_BINDS)
        kube.wait_for(lambda: all((p.get("spec") or {}).get("nodeName") for p in kube.list_pods("default"))
                      and len(kube.list_pods("default")) == PODS, timeout=60, interval=0.2,
                      message=f"{PODS} pods bound")
        scheduler.stop(timeout=20)  # the Scheduled Events still queued go out before this returns
        pool = client.rest_client.pool_manager.connection_from_url(client.configuration.host)
        dropped = [r.getMessage() for r in caplog.records if "Connection pool is full" in r.getMessage()]
        assert not dropped, dropped[:3]
        assert 1 <= pool.num_connections <= size  # the watches
        requests = keepalive.for_client(client)  # binds, Events
        assert requests is not None and 1 <= requests.opened <= size and requests.discarded == 0
    finally:
        client.close()
