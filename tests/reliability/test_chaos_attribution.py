"""bench/chaos/attribution.py: kube-scheduler's own wait for the webhook probe, read from the
webhook's access log, is taken out of a fault's recovery; nothing else is."""

from __future__ import annotations

from datetime import datetime

from bench.chaos.attribution import attribute, first_filters
from bench.chaos.checker import FaultRecord

WALL_ORIGIN = datetime(2026, 12, 1, 18, 0, 0).timestamp()  # the run's clock 0, local time as the log's
LOG = """\
2026-12-01 18:00:10,000 INFO extender.access: filter ok verb=filter pod=chaos/other nodes=5 result=ok duration_ms=1.0
2026-12-01 18:00:21,500 INFO extender.access: filter ok verb=filter pod=chaos/probe-0-wh nodes=5 result=ok duration_ms=1.0
2026-12-01 18:00:21,600 INFO extender.access: prioritize ok verb=prioritize pod=chaos/probe-0-wh nodes=5 result=ok
2026-12-01 18:00:21,700 INFO extender.access: bind ok verb=bind pod=chaos/probe-0-wh nodes=1 result=ok note=bound to wh-1
2026-12-01 18:00:30,000 INFO extender.access: filter ok verb=filter pod=chaos/probe-0-wh nodes=5 result=ok duration_ms=1.0
"""


def compaction(probes: dict[str, tuple[float | None, float | None]]) -> FaultRecord:
    """An etcd compaction over at 10 s, every process serving again at 10.5 s."""
    return FaultRecord("etcd-compaction", 9.9, 10.0, max(10.5, *(b for _, b in probes.values() if b)),
                       healthy_at=10.5, probes=probes)


def test_first_filter_per_pod_on_the_run_clock() -> None:
    assert first_filters(LOG, WALL_ORIGIN) == {"chaos/other": 10.0, "chaos/probe-0-wh": 21.5}


def test_kube_schedulers_wait_is_taken_out_of_the_webhook_probe_only() -> None:
    # Both probes created at 10.2 s; ours bound at 11 s; kube-scheduler asked at 21.5 s, bound at 21.7 s.
    record = compaction({"chaos/probe-0-sa": (10.2, 11.0), "chaos/probe-0-wh": (10.2, 21.7)})
    (found,) = attribute([record], ["chaos/probe-0-wh"], LOG, WALL_ORIGIN)
    assert round(found.recovery_s or 0, 2) == 11.7
    assert found.scheduler_wait_s == 11.0  # from 10.5 s (the probe there, every process serving) to 21.5 s
    assert round(found.ours_s or 0, 2) == 1.0  # the standalone probe is now the last


def test_our_own_slowness_stays_ours() -> None:
    # The standalone probe bound late: that is ours whatever kube-scheduler did.
    record = compaction({"chaos/probe-0-sa": (10.2, 25.0), "chaos/probe-0-wh": (10.2, 21.7)})
    (found,) = attribute([record], ["chaos/probe-0-wh"], LOG, WALL_ORIGIN)
    assert round(found.ours_s or 0, 2) == 15.0
    # kube-scheduler asked at once but the webhook probe bound 11 s later: ours too.
    quick = LOG.replace("18:00:21,500", "18:00:10,600")
    record = compaction({"chaos/probe-0-sa": (10.2, 11.0), "chaos/probe-0-wh": (10.2, 21.7)})
    (found,) = attribute([record], ["chaos/probe-0-wh"], quick, WALL_ORIGIN)
    assert round(found.ours_s or 0, 2) == 11.6 and found.scheduler_wait_s == 0.1


def test_a_fault_never_recovered_stays_so() -> None:
    record = FaultRecord("etcd-compaction", 9.9, 10.0, None, healthy_at=None,
                         probes={"chaos/probe-0-wh": (10.2, None)})
    (found,) = attribute([record], ["chaos/probe-0-wh"], LOG, WALL_ORIGIN)
    assert found.recovery_s is None and found.ours_s is None
