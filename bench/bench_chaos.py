"""Chaos under load on a real control plane: faults during a pod stream, then a verdict
(python -m bench chaos [--minutes N] [--seed S] [--json]).

One run (package ``bench/chaos/``):

1. etcd, kube-apiserver, the fault proxy in front of it (``proxy.py``), two pools of
   nodes, storage classes and local volumes (``workload.py``), the storage controllers
   (``storage.py``); the checker's own pod watch starts before the first pod (``history.py``);
2. two ``extender schedule`` replicas with leader election, and kube-scheduler calling
   ``extender serve`` (2 workers, ``bindVerb``), each for its own pool (``cluster.py``);
3. the pod stream, both pools, every kind, created and deleted at a steady rate for
   ``--minutes``; meanwhile faults of every kind, one after another at seeded random
   moments (``faults.py``). After each fault is over, one probe pod per scheduler is
   created: the fault has **recovered** once both probes are bound and every process is
   back and serving (the replicas ready and one of them holding the lease, the master with
   both workers, kube-scheduler ready). Recovery is timed from the end of the fault (a
   kill's end is the kill; a pause's is the SIGCONT; a restart's is the server ready again;
   a slow spell's is the delay lifted), and capped at ``RECOVERY_TIMEOUT``. The leader's
   faults are failovers: their probes are created as the leader is stopped or killed, and
   recovery is timed from then (the follower has to take over meanwhile). Each recovery is
   also given as **ours**, kube-scheduler's own wait for the webhook probe taken out
   (``attribution.py``: its reflectors back off after a restart or a compaction);
4. the stream stops; after ``--grace`` quiet seconds the cluster is read and the checker
   (``checker.py``) judges the history and the final cluster; a Pending pod "could fit"
   when the project's engine places it alone on the final cluster (``oracle.py``).

Targets (issue 27): no violation; recovery (ours) within 2 x the lease duration after a
leader fault and 10 s after any other. The figures say which faults missed it. The seed decides
the workload, the order of the faults (each kind in turn, shuffled), the gaps between
them and their parameters; the machine decides the timing, so a replay is close, not
identical. The workdir (logs of every process) is kept when a violation is found, or
with ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.chaos.attribution import attribute  # noqa: E402
from bench.chaos.checker import FaultRecord, Run, check, group_of, node_of, uid  # noqa: E402
from bench.chaos.cluster import ChaosCluster, Election  # noqa: E402
from bench.chaos.dra_checks import replay_claims  # noqa: E402
from bench.chaos.faults import EXTRA_KINDS, KINDS, LEADER_KINDS, Injector, NoTarget  # noqa: E402
from bench.chaos.history import ClaimWatch, PodWatch  # noqa: E402
from bench.chaos.oracle import Oracle  # noqa: E402
from bench.chaos.storage import ChaosStorage  # noqa: E402
from bench.chaos.workload import (  # noqa: E402
    DRA_EXTENDED,
    DRA_KINDS,
    DRA_PATHS,
    GROUP_PATHS,
    NAMESPACE,
    POOLS,
    WEBHOOK,
    Stream,
    create_cluster,
    create_dra,
    probe_body,
)
from extender.model.devices import ASSIGNMENT_ANNOTATION  # noqa: E402
from tests.fakeapi.client import KubeApiError  # noqa: E402
from tests.fakeapi.patches import MERGE_PATCH  # noqa: E402

RECOVERY_TIMEOUT = 120.0
OTHER_TARGET = 10.0
WARMUP = 15.0  # seconds of stream before the first fault
GAP = (0.5, 3.0)  # seconds between a recovery and the next fault
NO_BINARIES = ("bench chaos skipped: set KUBEBUILDER_ASSETS to a folder with etcd, kube-apiserver, "
               "kube-scheduler and kube-controller-manager (bash ../shared/tools/k8s-test-binaries.sh prints the "
               "export line)")


def deck(rng: random.Random, kinds: Sequence[str]) -> Iterator[str]:
    """Every kind once in a shuffled round, round after round: all kinds come up evenly."""
    while True:
        round_ = list(kinds)
        rng.shuffle(round_)
        yield from round_


@dataclass
class Probes:
    """One probe pod per scheduler for one fault: bound again means that scheduler is back."""

    cluster: ChaosCluster
    watch: PodWatch
    index: int
    clock: Callable[[], float]
    created: dict[str, str] = field(default_factory=dict)  # name -> uid
    created_at: dict[str, float] = field(default_factory=dict)  # name -> the run's clock

    @property
    def names(self) -> dict[str, str]:
        return {scheduler: f"probe-{self.index}-{pool}" for scheduler, pool in POOLS.items()}

    def create(self) -> None:
        """Create the probes not created yet (the API server may be down: tried again later)."""
        for scheduler, name in self.names.items():
            if name not in self.created:
                try:
                    reply = self.cluster.kube.call("POST", f"/api/v1/namespaces/{NAMESPACE}/pods",
                                                   probe_body(name, scheduler))
                    self.created[name] = reply["metadata"]["uid"]
                    self.created_at[name] = self.clock()
                except Exception:  # noqa: BLE001 - the API server is not back yet
                    pass

    def bound(self) -> float | None:
        """When the last probe was bound, once all are."""
        times = [self.watch.bound_at.get(f"{NAMESPACE}/{name}") for name in self.names.values()]
        return None if any(t is None for t in times) else max(t for t in times if t is not None)

    def times(self) -> dict[str, tuple[float | None, float | None]]:
        """``namespace/name`` -> (created, bound) of each probe."""
        return {f"{NAMESPACE}/{name}": (self.created_at.get(name), self.watch.bound_at.get(f"{NAMESPACE}/{name}"))
                for name in self.names.values()}

    def delete(self, stream: Stream) -> None:
        for name, pod_uid in self.created.items():
            stream.deleted_uids.add(pod_uid)  # the workload's deletion, not an eviction
            for _ in range(20):
                try:
                    self.cluster.kube.delete_pod(name, NAMESPACE, grace_period_seconds=0, uid=pod_uid)
                    break
                except KubeApiError as exc:
                    if exc.code in (404, 409):
                        break
                except Exception:  # noqa: BLE001 - the API server is not back yet
                    pass
                time.sleep(0.5)


def recover(cluster: ChaosCluster, probes: Probes, clock: Callable[[], float],
            timeout: float = RECOVERY_TIMEOUT) -> tuple[float | None, float | None]:
    """When both probes are bound and every process is back and serving (None after `timeout`),
    and when every process was (None: never)."""
    deadline = clock() + timeout
    healthy_at = None
    while clock() < deadline:
        probes.create()
        if healthy_at is None and not cluster.problems():
            healthy_at = clock()
        bound = probes.bound()
        if healthy_at is not None and bound is not None:
            return max(healthy_at, bound), healthy_at
        time.sleep(0.2)
    return None, healthy_at


def final_cluster(cluster: ChaosCluster) -> dict[str, list[dict[str, Any]]]:
    kube = cluster.kube
    return {
        "nodes": kube.call("GET", "/api/v1/nodes")["items"],
        "pods": kube.call("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")["items"],
        "claims": kube.call("GET", f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims")["items"],
        "volumes": kube.call("GET", "/api/v1/persistentvolumes")["items"],
        "classes": kube.call("GET", "/apis/storage.k8s.io/v1/storageclasses")["items"],
        "events": kube.call("GET", f"/api/v1/namespaces/{NAMESPACE}/events")["items"],
        "podgroups": [group for path in GROUP_PATHS.values() for group in kube.call("GET", path)["items"]],
        "resourceclaims": kube.call("GET", DRA_PATHS["ResourceClaim"])["items"],
        "resourceslices": kube.call("GET", DRA_PATHS["ResourceSlice"])["items"],
        "deviceclasses": kube.call("GET", DRA_PATHS["DeviceClass"])["items"],
    }


def min_counts(groups: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Map "namespace/name" to the minCount of both APIs' pod groups (v1alpha2's gang policy,
    Coscheduling's minMember)."""
    counts = {}
    for group in groups:
        spec = group.get("spec") or {}
        count = ((spec.get("schedulingPolicy") or {}).get("gang") or {}).get("minCount") or spec.get("minMember")
        if count:
            counts[f"{group['metadata']['namespace']}/{group['metadata']['name']}"] = int(count)
    return counts


def save_history(path: Path, run: Run, final: dict[str, Any]) -> None:
    """The checker's input, to judge again offline (bench.chaos.checker.Run without `fits`)."""
    path.write_text(json.dumps({
        "events": [{"at": e.at, "type": e.type, "pod": e.pod} for e in run.events],
        "claim_events": [{"at": e.at, "type": e.type, "claim": e.claim} for e in run.claim_events],
        "device_taints": [list(t) for t in run.device_taints],
        "final": final,
        "faults": [asdict(f) for f in run.faults],
        "workload_deleted": sorted(run.workload_deleted),
        "processes_down": list(run.processes_down),
        "final_at": run.final_at,
        "pod_groups": dict(run.pod_groups),
    }))


NUDGE = "chaos.example/nudge"
OPINION_TIMEOUT = 20.0


def webhook_pool_pending(violations: Sequence[Any]) -> list[str]:
    """The webhook pool's pods (``namespace/name``) that ``pending-but-fits`` flagged: kube-scheduler
    places those, and its answer is the reference where it and the oracle disagree."""
    prefix = f"{NAMESPACE}/{POOLS[WEBHOOK]}-"
    return [v.subject for v in violations if v.kind == "pending-but-fits" and v.subject.startswith(prefix)
            and " members Pending " not in v.detail]  # a gang is judged whole, by the oracle alone


def kube_scheduler_opinion(cluster: ChaosCluster, violations: list[Any],
                           log: Callable[[str], None]) -> tuple[list[Any], list[str]]:
    """Ask kube-scheduler about the webhook pool's pods the oracle says fit: a no-op label on the
    pool's nodes and ResourceSlices (events every plugin that rejected them listens to) makes it
    try them again on the same final state. A pod it then binds within ``OPINION_TIMEOUT`` was
    Pending only because no event had woken it (kube-scheduler does not requeue pods when another
    pod's in-flight claim allocation is dropped, e.g. when that pod is deleted during its PreBind):
    not a violation, reported as ``pending_until_requeued``. The rest stay violations."""
    flagged = webhook_pool_pending(violations)
    if not flagged:
        return violations, []
    kube = cluster.kube
    pool = POOLS[WEBHOOK]
    label = {"metadata": {"labels": {NUDGE: str(int(time.time()))}}}
    for node in kube.call("GET", "/api/v1/nodes", params={"labelSelector": f"chaos.example/pool={pool}"})["items"]:
        kube.call("PATCH", f"/api/v1/nodes/{node['metadata']['name']}", label, content_type=MERGE_PATCH)
    for item in kube.call("GET", DRA_PATHS["ResourceSlice"])["items"]:
        if str(item["spec"].get("nodeName", "")).startswith(f"{pool}-"):
            kube.call("PATCH", f"{DRA_PATHS['ResourceSlice']}/{item['metadata']['name']}", label,
                      content_type=MERGE_PATCH)
    deadline = time.monotonic() + OPINION_TIMEOUT
    bound: set[str] = set()
    while time.monotonic() < deadline and len(bound) < len(flagged):
        for subject in flagged:
            name = subject.split("/", 1)[1]
            try:
                pod = kube.call("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")
            except KubeApiError:
                continue
            if (pod.get("spec") or {}).get("nodeName"):
                bound.add(subject)
        time.sleep(0.5)
    if bound:
        log(f"# kube-scheduler bound {len(bound)} of {len(flagged)} pods the oracle said fit once woken: "
            + ", ".join(sorted(bound)))
    return [v for v in violations if not (v.kind == "pending-but-fits" and v.subject in bound)], sorted(bound)


def settled_problems(cluster: ChaosCluster, timeout: float = 30.0) -> list[str]:
    """What is still not back after up to `timeout` seconds."""
    deadline = time.monotonic() + timeout
    problems = cluster.problems()
    while problems and time.monotonic() < deadline:
        time.sleep(1.0)
        problems = cluster.problems()
    return problems


def figures(seed: int, minutes: float, records: Sequence[FaultRecord], run: Run, violations: Sequence[Any],
            extra: dict[str, Any], election: Election) -> dict[str, Any]:
    kinds = {uid(e.pod): (e.pod["metadata"].get("labels") or {}).get("chaos.example/kind", "") for e in run.events}
    scheduled = {uid(e.pod) for e in run.events if node_of(e.pod) and kinds[uid(e.pod)] != "probe"}
    gpu_assigned = {uid(e.pod) for e in run.events if node_of(e.pod)
                    and ASSIGNMENT_ANNOTATION in (e.pod["metadata"].get("annotations") or {})}
    gang_bound: dict[str, set[str]] = {}
    for event in run.events:
        if uid(event.pod) in scheduled and group_of(event.pod):
            gang_bound.setdefault(group_of(event.pod), set()).add(uid(event.pod))
    recovery: dict[str, dict[str, float]] = {}
    targets = {kind: 2 * election.lease if kind in LEADER_KINDS else OTHER_TARGET for kind in (*KINDS, *EXTRA_KINDS)}
    ours: dict[str, dict[str, float]] = {}
    figure: Callable[[FaultRecord], float | None]
    for figure, into in ((lambda r: r.recovery_s, recovery), (lambda r: r.ours_s, ours)):
        by_kind: dict[str, list[float]] = {}
        for record in records:
            if figure(record) is not None:
                by_kind.setdefault(record.kind, []).append(figure(record))
        for kind, values in sorted(by_kind.items()):
            into[kind] = {"p50": round(statistics.median(values), 2), "max": round(max(values), 2)}
    over = [f"{r.kind} at {r.started:.0f} s: {r.ours_s:.1f} s > {targets[r.kind]:.0f} s ({r.detail})"
            for r in records if r.ours_s is not None and r.ours_s > targets[r.kind]]
    over_end_to_end = [f"{r.kind} at {r.started:.0f} s: {r.recovery_s:.1f} s, of which kube-scheduler's wait "
                       f"{r.scheduler_wait_s:.1f} s ({r.detail})"
                       for r in records if r.recovery_s is not None and r.recovery_s > targets[r.kind]]
    pools = {uid(e.pod): str(e.pod["metadata"].get("name", "")).split("-", 1)[0] for e in run.events}
    created = Counter(kinds[u] for u in kinds if kinds[u] != "probe")
    bound = Counter(kinds[u] for u in scheduled)
    created_in = Counter((kinds[u], pools[u]) for u in kinds if kinds[u] != "probe")
    bound_in = Counter((kinds[u], pools[u]) for u in scheduled)
    return {
        "seed": seed,
        "pods_scheduled": len(scheduled),
        # Pods created (as the checker's watch saw them) and bound, per workload kind and pool;
        # the DRA kinds are those named dra-*.
        "pods_by_kind": {kind: {"created": created[kind], "bound": bound[kind],
                                "by_pool": {pool: {"created": created_in[(kind, pool)], "bound": bound_in[(kind, pool)]}
                                            for pool in sorted(POOLS.values())}}
                         for kind in sorted(created)},
        "dra_pods": {"created": sum(created[k] for k in created if k in DRA_KINDS),
                     "bound": sum(bound[k] for k in bound if k in DRA_KINDS)},
        # What the checks had to look at: pods bound per kind (probes apart), GPU pods bound
        # with their assignment, evictions by preemption.
        "bound_by_kind": dict(sorted(Counter(kinds[u] for u in scheduled).items())),
        "gpu_pods_assigned": len(gpu_assigned),
        # Gangs whose members were bound, and those of them that reached their minCount (the
        # rest of the groups were deleted or left with none bound).
        "gangs_bound": len(gang_bound),
        "gangs_bound_to_min_count": sum(1 for g, bound in gang_bound.items()
                                        if len(bound) >= run.pod_groups.get(g, len(bound) + 1)),
        "preemptions": sum(1 for e in run.kube_events if e.get("reason") == "Preempted"),
        "faults": dict(sorted(Counter(r.kind for r in records).items())),
        "violations": [v.to_dict() for v in violations],
        "recovery_s": recovery,  # end to end: both probes bound, every process back
        "recovery_ours_s": ours,  # kube-scheduler's own wait for the webhook probe taken out
        "minutes": minutes,
        "recovery_target_s": targets,
        "recovery_over_target": over,  # ours
        "recovery_over_target_end_to_end": over_end_to_end,
        "fault_log": [{"kind": r.kind, "started": round(r.started, 2), "ended": round(r.ended, 2),
                       "recovery_s": None if r.recovery_s is None else round(r.recovery_s, 2),
                       "ours_s": None if r.ours_s is None else round(r.ours_s, 2),
                       "scheduler_wait_s": r.scheduler_wait_s, "detail": r.detail}
                      for r in records],
        **extra,
    }


def run(minutes: float, seed: int, *, rate: float = 2.0, grace: float = 30.0, election: Election | None = None,
        keep: Path | None = None, kinds: Sequence[str] = KINDS,
        log: Callable[[str], None] = print) -> dict[str, Any] | None:
    """One chaos run (faults of `kinds` only); its figures, or None without the binaries."""
    from tests.e2e.controlplane import find_kube_controller_manager
    from tests.fakeapi.envtest import find_assets

    assets = find_assets()
    if assets is None or assets.kube_scheduler is None or find_kube_controller_manager() is None:
        log(NO_BINARIES)
        return None
    election = election or Election()
    rng = random.Random(seed)
    origin = time.monotonic()
    wall_origin = time.time()

    def clock() -> float:
        return time.monotonic() - origin

    workdir = keep or Path(tempfile.mkdtemp(prefix="chaos-"))
    cluster = ChaosCluster(assets, workdir, election, log)
    violations: list[Any] = []
    try:
        cluster.start_control_plane()
        assert cluster.plane is not None
        watch = PodWatch(cluster.plane.url, cluster.plane.token, str(cluster.plane.ca_file), clock).start()
        claim_watch = ClaimWatch(cluster.plane.url, cluster.plane.token, str(cluster.plane.ca_file), clock).start()
        create_cluster(cluster.kube)
        create_dra(cluster.kube)
        cluster.register_claim_gate()
        cluster.start_schedulers()
        log(f"# chaos: seed {seed}, {minutes} min, workdir {workdir}; cluster up at {clock():.0f} s")
        with ChaosStorage(cluster.client(), interval=0.5) as storage:
            stream = Stream(cluster.client(), random.Random(rng.getrandbits(32)), clock, rate=rate).start()
            injector = Injector(cluster, random.Random(rng.getrandbits(32)), clock)
            records = inject_faults(cluster, watch, stream, rng, clock, clock() + minutes * 60, log, kinds, injector)
            stream.stop()
            stopped = clock()
            quiet_until = max([stopped, *(r.ended for r in records)]) + grace
            while clock() < quiet_until:
                time.sleep(0.5)
            down = settled_problems(cluster)
            final = final_cluster(cluster)
        watch.stop()
        claim_watch.stop()
        assert cluster.webhook is not None
        records = attribute(records, [f"{NAMESPACE}/probe-{i}-{POOLS[WEBHOOK]}" for i in range(len(records))],
                            cluster.webhook.process.log(), wall_origin)
        storage_objects = {"PersistentVolumeClaim": final["claims"], "PersistentVolume": final["volumes"],
                           "StorageClass": final["classes"]}
        dra_objects = {"deviceclasses": final["deviceclasses"], "resourceslices": final["resourceslices"],
                       "resourceclaims": final["resourceclaims"]}
        oracle = Oracle(final["nodes"], final["pods"], storage_objects, dra=dra_objects)
        history = Run(events=watch.snapshot(), nodes=final["nodes"], pods=final["pods"], claims=final["claims"],
                      volumes=final["volumes"], kube_events=final["events"],
                      pod_groups=min_counts(final["podgroups"]), faults=records,
                      workload_deleted=frozenset(stream.deleted_uids), processes_down=down,
                      final_at=clock(), pending_grace=grace, fits=oracle.fits, fits_together=oracle.together,
                      claim_events=claim_watch.snapshot_claims(), resource_claims=final["resourceclaims"],
                      resource_slices=final["resourceslices"], device_taints=list(injector.taints),
                      dra_extended=frozenset({DRA_EXTENDED}))
        violations = check(history)
        violations, requeued = kube_scheduler_opinion(cluster, violations, log)
        if keep is not None or violations:
            save_history(workdir / "history.json", history, final)
        extra = {"pods_created": stream.created, "gangs_created": stream.gangs, "stream_errors": len(stream.errors),
                 "watch_gaps": watch.gaps, "watch_reconnects": watch.reconnects, "restarts": cluster.restarts(),
                 "volumes_recycled": storage.recycled,
                 "claims_seen": len({e.claim["metadata"]["uid"] for e in history.claim_events}),
                 "claim_allocations": sum(1 for _, _, changed in replay_claims(history.claim_events) if changed),
                 "claim_gate": {"seen": cluster.gate.seen if cluster.gate else 0,
                                "refused": cluster.gate.refused if cluster.gate else 0},
                 "pending_until_requeued": requeued,
                 "claim_watch_gaps": claim_watch.gaps, "proxy_connections_cut": cluster.proxy.cuts
                 if cluster.proxy else 0, "workdir": str(workdir)}
        return figures(seed, minutes, records, history, violations, extra, election)
    finally:
        cluster.stop()
        if keep is None and not violations:
            shutil.rmtree(workdir, ignore_errors=True)


def inject_faults(cluster: ChaosCluster, watch: PodWatch, stream: Stream, rng: random.Random,
                  clock: Callable[[], float], deadline: float, log: Callable[[str], None],
                  kinds: Sequence[str], injector: Injector) -> list[FaultRecord]:
    """Faults one after another until `deadline`: each waits for the previous one's recovery
    and a seeded gap."""
    order = deck(rng, kinds)
    records: list[FaultRecord] = []
    next_at = clock() + WARMUP
    while True:
        while clock() < min(next_at, deadline):
            time.sleep(0.2)
        if clock() >= deadline:
            return records
        kind = next(order)
        probes = Probes(cluster, watch, len(records), clock)
        failover = kind in LEADER_KINDS  # the follower must take over while the fault lasts
        try:
            started, ended, detail = injector.inject(kind, on_start=probes.create if failover else lambda: None)
        except NoTarget as exc:
            log(f"# {clock():6.1f} s {kind}: skipped ({exc})")
            next_at = clock() + 1.0
            continue
        recovered, healthy_at = recover(cluster, probes, clock)
        probes.delete(stream)
        record = FaultRecord(kind, started, ended, recovered, detail, from_start=failover, healthy_at=healthy_at,
                             probes=probes.times())
        records.append(record)
        took = "NOT RECOVERED" if record.recovery_s is None else f"recovered in {record.recovery_s:.1f} s"
        log(f"# {started:6.1f} s {kind}: {detail}; {took}")
        next_at = clock() + rng.uniform(*GAP)


def print_report(result: dict[str, Any]) -> None:
    print(f"\n== chaos (seed {result['seed']}, {result['minutes']} min)")
    print(f"pods created {result['pods_created']}, scheduled {result['pods_scheduled']}; "
          f"faults {sum(result['faults'].values())}: "
          + ", ".join(f"{k} {v}" for k, v in result["faults"].items()))
    print("bound by kind: " + ", ".join(f"{k} {v}" for k, v in result["bound_by_kind"].items())
          + f"; GPU pods with an assignment {result['gpu_pods_assigned']}; preemptions {result['preemptions']}")
    print(f"gangs created {result['gangs_created']}, with members bound {result['gangs_bound']} "
          f"(minCount reached {result['gangs_bound_to_min_count']})")
    print(f"restarts by the supervisor: {result['restarts']}; watch gaps {result['watch_gaps']}, "
          f"connections cut {result['proxy_connections_cut']}, stream errors {result['stream_errors']}")
    print("recovery (s):  " + "; ".join(f"{k} p50 {v['p50']} max {v['max']}"
                                        for k, v in result["recovery_s"].items()))
    print("ours (s):      " + "; ".join(f"{k} p50 {v['p50']} max {v['max']}"
                                        for k, v in result["recovery_ours_s"].items()))
    print("pods by kind (created/bound): " + ", ".join(f"{k} {v['created']}/{v['bound']}"
                                                      for k, v in result["pods_by_kind"].items()))
    print(f"DRA pods created {result['dra_pods']['created']}, bound {result['dra_pods']['bound']}; claims seen "
          f"{result['claims_seen']}, allocations {result['claim_allocations']}; claim writes seen by the gate "
          f"{result['claim_gate']['seen']}, refused {result['claim_gate']['refused']}")
    for line in result["recovery_over_target"]:
        print(f"  over target: {line}")
    for line in result["recovery_over_target_end_to_end"]:
        print(f"  end to end over target: {line}")
    print(f"violations: {len(result['violations'])}")
    for violation in result["violations"]:
        print(f"  {violation['kind']} {violation['subject']}: {violation['detail']}")
    if result["violations"]:
        print(f"logs kept in {result['workdir']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the pod stream and the faults")
    parser.add_argument("--seed", type=int, default=None, help="replay a run (default: a new seed, printed)")
    parser.add_argument("--rate", type=float, default=2.0, help="pods created per second, both pools together")
    parser.add_argument("--grace", type=float, default=30.0,
                        help="quiet seconds after the last fault before a fitting Pending pod is a violation")
    parser.add_argument("--lease", type=float, default=Election.lease, help="the replicas' lease duration, s")
    parser.add_argument("--keep", type=Path, default=None, help="keep every process's log in this directory")
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help=f"comma-separated fault kinds (default: all but {', '.join(EXTRA_KINDS)})")
    parser.add_argument("--json", action="store_true", help="print one JSON object, progress on stderr")
    options = parser.parse_args(argv)
    if options.minutes <= 0 or options.rate <= 0 or options.lease < 2:
        parser.error("--minutes and --rate must be positive, --lease at least 2")
    kinds = [k for k in options.kinds.split(",") if k]
    unknown = sorted(set(kinds) - set(KINDS) - set(EXTRA_KINDS))
    if unknown or not kinds:
        parser.error(f"unknown fault kind(s) {', '.join(unknown)}; choose from {', '.join([*KINDS, *EXTRA_KINDS])}")
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(1 << 31)
    election = Election(lease=options.lease, renew=options.lease * 0.75, retry=options.lease / 8)

    def log(line: str) -> None:
        print(line, file=sys.stderr if options.json else sys.stdout, flush=True)

    result = run(options.minutes, seed, rate=options.rate, grace=options.grace, election=election,
                 keep=options.keep, kinds=kinds, log=log)
    if result is None:
        return 0
    if options.json:
        print(json.dumps(result))
    else:
        print_report(result)
    return 1 if result["violations"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
