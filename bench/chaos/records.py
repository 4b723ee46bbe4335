"""What a chaos run recorded, as the checks read it: the run (:class:`Run`), its pod events, its
faults, a verdict's :class:`Violation`, and the replay of the history moment by moment. The
checks (checker.py, dra_checks.py) import these; none of this imports a check.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

Pod = Mapping[str, Any]
# Resources a scheduler is told to leave alone (ignoredResourceGroups / ignoredByScheduler):
# shares of devices, checked per device instead.
IGNORED_PREFIXES = ("extender.example/",)
PREEMPTED_BY = re.compile(r"Preempted by pod (\S+) on node (\S+)")
HOSTNAME = "kubernetes.io/hostname"
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"


@dataclass(frozen=True)
class Violation:
    kind: str
    subject: str  # a pod (namespace/name), a node, a process
    detail: str
    at: float | None = None  # seconds into the run, when known

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PodEvent:
    """One event of the checker's pod watch (or of a re-list after a gap), stamped on arrival."""

    at: float
    type: str  # ADDED, MODIFIED, DELETED
    pod: Pod


@dataclass(frozen=True)
class FaultRecord:
    kind: str
    started: float
    ended: float  # when the fault itself was over (a process continued, a server back up)
    recovered: float | None  # when every probe was bound and every process back; None: never
    detail: str = ""
    from_start: bool = False  # recovery timed from the start (a failover) rather than the end
    healthy_at: float | None = None  # when every process was back and serving
    probes: Mapping[str, tuple[float | None, float | None]] = field(default_factory=dict)  # name -> (created, bound)
    ours: float | None = None  # `recovered` less kube-scheduler's own wait (bench.chaos.attribution)
    scheduler_wait_s: float = 0.0  # that wait

    def _since(self, at: float | None) -> float | None:
        return None if at is None else max(0.0, at - (self.started if self.from_start else self.ended))

    @property
    def recovery_s(self) -> float | None:
        return self._since(self.recovered)

    @property
    def ours_s(self) -> float | None:
        """The recovery our components took (kube-scheduler's informer wait taken out)."""
        return self._since(self.ours if self.ours is not None else self.recovered)


@dataclass
class Run:
    events: Sequence[PodEvent]
    nodes: Sequence[Mapping[str, Any]]
    pods: Sequence[Pod]  # at the end
    claims: Sequence[Mapping[str, Any]] = ()
    volumes: Sequence[Mapping[str, Any]] = ()
    kube_events: Sequence[Mapping[str, Any]] = ()  # core/v1 Events at the end
    pod_groups: Mapping[str, int] = field(default_factory=dict)  # "namespace/group" -> minCount
    gang_settle: float = 15.0  # seconds with no fault under way a gang may stay partly bound
    faults: Sequence[FaultRecord] = ()
    workload_deleted: frozenset[str] = frozenset()  # uids the workload deleted itself
    processes_down: Sequence[str] = ()  # "name: why" of processes that did not come back
    final_at: float = 0.0
    pending_grace: float = 30.0
    fits: Callable[[Pod], str] | None = None  # the node a pending pod fits on now, or ""
    fits_together: Callable[[Sequence[Pod]], int] | None = None  # how many of these pods fit at once now
    spread_slack: float = 5.0
    # Dynamic resource allocation (bench/chaos/dra_checks.py): the checker's claim watch, and
    # the claims and slices at the end.
    claim_events: Sequence[Any] = ()  # dra_checks.ClaimEvent
    resource_claims: Sequence[Mapping[str, Any]] = ()
    resource_slices: Sequence[Mapping[str, Any]] = ()
    device_taints: Sequence[tuple[tuple[str, str, str], float, float]] = ()  # (driver, pool, device), from, to
    dra_extended: frozenset[str] = frozenset()  # extended resources a DeviceClass serves (no node has them)


Check = Callable[[Run], list[Violation]]


def key(pod: Pod) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def uid(pod: Pod) -> str:
    return str((pod.get("metadata") or {}).get("uid") or key(pod))


def node_of(pod: Pod) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def terminal(pod: Pod) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


# ---- the replay ---------------------------------------------------------------------------------


@dataclass
class Moment:
    """The cluster right after one event: the pods bound then (uid -> pod), and who just bound."""

    event: PodEvent
    bound: dict[str, Pod]
    newly_bound: Pod | None  # the pod this event bound, if it did
    deleted: list[tuple[float, Pod]]  # (when, pod) of bound pods deleted so far, oldest first


def replay(events: Sequence[PodEvent]) -> Iterator[Moment]:
    bound: dict[str, Pod] = {}
    deleted: list[tuple[float, Pod]] = []
    for event in events:
        pod_uid, node = uid(event.pod), node_of(event.pod)
        was = bound.get(pod_uid)
        newly = None
        if event.type == "DELETED" or terminal(event.pod) or not node:
            if was is not None:
                del bound[pod_uid]
                deleted.append((event.at, was))
        else:
            bound[pod_uid] = event.pod
            if was is None:
                newly = event.pod
        yield Moment(event, bound, newly, deleted)


# ---- checks over the history ----------------------------------------------------------------------


