"""Which part of a recovery was ours: kube-scheduler's own wait taken out of the webhook probe's.

After a fault that cut or refused kube-scheduler's watches (a kube-apiserver restart, whose
fresh server answers ``403`` until its authorizer has loaded; an etcd compaction, whose
watches resume with ``410 Gone``), kube-scheduler's reflectors list again only after
client-go's back-off: 0.8 s doubling to 30 s, each wait jittered up to twice as long, and
reset only once two minutes have passed since its last reset (``k8s.io/client-go`` v0.36.3,
``tools/cache/reflector.go``, ``apimachinery/pkg/util/wait/backoff.go`` ``backoffManager``),
so a fault a minute after another may leave it waiting 10 s or more. Until its pod informer
lists again, kube-scheduler does not see the webhook probe at all, whatever our webhook does.

The webhook logs every verb it answers (``extender serve --access-log``), so the first
``/filter`` of the probe is when kube-scheduler first asked about it. ``ours`` is the recovery
without that wait: every process back and serving, the standalone probe bound, and the
webhook probe bound counting from kube-scheduler's first question (less the time between
the probe being there, with every process serving, and that question).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from datetime import datetime

from bench.chaos.checker import FaultRecord

FILTER_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \w+ extender\.access: .*?verb=filter pod=(\S+)",
                         re.MULTILINE)


def first_filters(log: str, wall_origin: float) -> dict[str, float]:
    """``namespace/name`` -> the run's clock at the first ``/filter`` the webhook answered for it
    (its log's local timestamps; `wall_origin` is the wall time at the run's clock 0)."""
    found: dict[str, float] = {}
    for match in FILTER_LINE.finditer(log):
        at = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() - wall_origin
        found.setdefault(match.group(2), at)
    return found


def ours(record: FaultRecord, webhook_probe: str, filters: Mapping[str, float]) -> FaultRecord:
    """`record` with ``ours`` (when our components had recovered) and ``scheduler_wait_s`` set."""
    if record.recovered is None or record.healthy_at is None:
        return record
    bound = {name: times[1] for name, times in record.probes.items()}
    created, webhook_bound = record.probes.get(webhook_probe, (None, None))
    asked = filters.get(webhook_probe)
    wait = 0.0
    if created is not None and webhook_bound is not None and asked is not None:
        wait = max(0.0, min(asked, webhook_bound) - max(created, record.healthy_at))
    times = [record.healthy_at, *(t for name, t in bound.items() if name != webhook_probe and t is not None)]
    if webhook_bound is not None:
        times.append(webhook_bound - wait)
    return dataclasses.replace(record, ours=max(times), scheduler_wait_s=round(wait, 3))


def attribute(records: Sequence[FaultRecord], webhook_probes: Sequence[str], log: str,
              wall_origin: float) -> list[FaultRecord]:
    """Every record with its part of the recovery that was ours (see :func:`ours`)."""
    filters = first_filters(log, wall_origin)
    return [ours(record, probe, filters) for record, probe in zip(records, webhook_probes, strict=True)]
