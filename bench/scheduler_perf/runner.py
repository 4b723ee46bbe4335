"""python -m bench scheduler-perf: scheduler_perf's workloads against kube-scheduler and ours.

Each (workload, scheduler) run gets a fresh control plane (etcd + kube-apiserver from
KUBEBUILDER_ASSETS): the scheduler starts first, as in scheduler_perf, then the
workload's operations run, then the final cluster is read and checked
(bench/scheduler_perf/invariants.py). ``--scheduler both`` runs kube-scheduler, then ours
on a rebuilt cluster, and compares: the same measured pods scheduled, and the same pods
scheduled per namespace.

Columns: ``pods_per_s`` is SchedulingThroughput's Average as scheduler_perf computes it
(1 s samples over the measured pods; empty when the measured pods were all scheduled
within one sample, as for most of the smallest variants), ``p50``/``p90``/``p99`` its
percentiles; ``scheduled``/``expected`` the measured pods; ``measured_s`` the time from
the start of the measurement to its end (creation included, as in scheduler_perf);
``create_per_s`` the rate this harness created the measured pods at (a ceiling on
``pods_per_s``: scheduler_perf's Go creators are faster); ``cpu_s`` and ``rss_mb`` the
scheduler process's CPU seconds over the whole workload and
its peak resident memory; ``cp_cpu_s`` what etcd and kube-apiserver used meanwhile; ``attempts``
the scheduler's cycles and preemption attempts by result (read from its /metrics); ``claims`` the ResourceClaims
at the end of a DRA workload (whose runs also start kube-controller-manager's
resource-claim controller and check the DRA invariants). The
machine's cores are shared with whatever else runs: compare the two schedulers' rows of
the same run, not runs of different days.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_e2e import _sampled
from bench.scheduler_perf import corpus, invariants, schedulers
from bench.scheduler_perf.executor import Executor, WorkloadFailed
from bench.scheduler_perf.informer import ClaimWatch, PodCache, ThroughputCollector
from bench.tables import print_table


def _throughput(collectors: list[ThroughputCollector]) -> dict[str, float] | None:
    merged = ThroughputCollector("all", frozenset())
    merged.samples = [s for c in collectors for s in c.samples]
    return merged.summary()


def _snapshot(kube: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, dict[str, str]]]:
    pods = kube.call("GET", "/api/v1/pods").get("items") or []
    nodes = kube.call("GET", "/api/v1/nodes").get("items") or []
    namespaces = {n["metadata"]["name"]: n["metadata"].get("labels") or {}
                  for n in kube.call("GET", "/api/v1/namespaces").get("items") or []}
    return pods, nodes, namespaces


def run_one(workload: corpus.Workload, kind: str, workdir: Path, stall: float,
            profile: Path | None = None) -> dict[str, Any]:
    """One workload under one scheduler on a fresh control plane: the table's row.
    ``profile``: py-spy's collapsed stacks of our scheduler (the GIL holder) written there."""
    row: dict[str, Any] = {"workload": workload.name, "variant": workload.variant, "scheduler": kind,
                           "pods_per_s": None, "scheduled": None, "expected": None, "cpu_s": None,
                           "rss_mb": None, "skipped": workload.skip or None}
    if workload.skip:
        return row
    started = time.monotonic()
    holders = invariants.DeviceHolders()
    with contextlib.ExitStack() as stack:
        cp = stack.enter_context(schedulers.control_plane(workload.apiserver_args))
        if workload.uses_dra:
            stack.enter_context(schedulers.claim_controller(cp, workdir / kind))
        running = stack.enter_context(schedulers.scheduler(cp, kind, workdir / kind,
                                                           feature_gates=workload.kube_scheduler_gates,
                                                           config=workload.scheduler_config,
                                                           filters=workload.our_policy_plugins))
        cache = PodCache(cp.client).start()
        claims_watch = ClaimWatch(cp.client, holders.observe).start() if workload.uses_dra else None
        control_cpu = schedulers.trees_cpu(cp.plane.pids)
        executor = Executor(cp.client, cache, workload, running.scheduler_name, stall=stall)
        error = None
        ops_started = time.monotonic()
        try:
            with _sampled(running.pid if kind == schedulers.OURS else None, profile):
                executor.run()
        except WorkloadFailed as exc:
            error = str(exc)
        except Exception as exc:  # noqa: BLE001 (one broken workload must not end the table)
            error = f"{type(exc).__name__}: {exc}"
        row["ops_s"] = round(time.monotonic() - ops_started, 1)
        row["cp_cpu_s"] = round(schedulers.trees_cpu(cp.plane.pids) - control_cpu, 1)
        cache.close()
        pods, nodes, namespaces = _snapshot(cp.client)
        claims, slices = _dra_snapshot(cp.client) if workload.uses_dra else ([], [])
        if claims_watch is not None:
            time.sleep(1.0)  # the last status writes' events, before the watch stops
            claims_watch.close()
    row.update(running.figures)
    measured = executor.measurements
    summary = _throughput([m.collector for m in measured])
    if summary:
        row["pods_per_s"] = round(summary["Average"], 1)
        row.update({k: round(summary[f"Perc{k[1:]}"], 1) for k in ("p50", "p90", "p99")})
    row["scheduled"] = sum(m.scheduled for m in measured) if measured else None
    row["expected"] = sum(m.expected or 0 for m in measured) if measured else None
    row["measured_s"] = round(sum(m.wall_s for m in measured), 2) if measured else None
    created = [m for m in measured if m.create_s]
    if created:  # the rate this harness creates the measured pods at: no scheduler can beat it
        row["create_per_s"] = round(sum(m.expected or 0 for m in created) / sum(m.create_s for m in created), 1)
    row["total_s"] = round(time.monotonic() - started, 1)
    violations = invariants.check(pods, nodes, namespaces)
    if workload.uses_dra:
        violations += holders.report() + invariants.check_claims(pods, claims, slices)
        row["claims"] = len(claims)
        row["_claims"] = invariants.claim_counts(claims)
    row["violations"] = len(violations)
    row["_violations"] = violations
    row["_per_namespace"] = _scheduled_per_namespace(pods)
    row["_steady"] = {ns for m in measured if m.steady for ns in m.namespaces}
    row["_volatile"] = _volatile(workload, row["_per_namespace"], measured)
    row["error"] = error
    return row


def _volatile(workload: corpus.Workload, namespaces: dict[str, int], measured: list[Any]) -> set[str]:
    """Namespaces whose count of scheduled pods depends on timing: those churned or deleted
    from in the background and, when a churn runs, every unmeasured one (a churned
    high-priority pod preempts as many victims as it had time to)."""
    volatile = {op.get("namespace") or f"namespace-{i}" for i, op in enumerate(workload.ops)
                if op["opcode"] in ("churn", "deletePods") or (op["opcode"] == "createPods" and op.get("steadyState"))}
    if any(op["opcode"] == "churn" for op in workload.ops):
        kept = {ns for m in measured for ns in m.namespaces}
        volatile |= set(namespaces) - kept
    return volatile


def _dra_snapshot(kube: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    api = "/apis/resource.k8s.io/v1"
    return (kube.call("GET", f"{api}/resourceclaims").get("items") or [],
            kube.call("GET", f"{api}/resourceslices").get("items") or [])


def _scheduled_per_namespace(pods: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for pod in pods:
        ns = pod["metadata"]["namespace"]
        counts[ns] = counts.get(ns, 0) + bool((pod.get("spec") or {}).get("nodeName"))
    return counts


def parity(kube: dict[str, Any], ours: dict[str, Any]) -> str:
    """"same" or what differs between the two runs of one workload."""
    if kube.get("skipped") or ours.get("skipped") or "_violations" not in kube or "_violations" not in ours:
        return ""
    differences = []
    # a steady state's measured count is how many pods its duration let through: the
    # throughput, not a result to share
    if kube["scheduled"] != ours["scheduled"] and not kube.get("_steady"):
        differences.append(f"measured scheduled {kube['scheduled']} vs {ours['scheduled']}")
    # namespaces churned or deleted from in the background hold a number of pods that
    # depends on timing: there, only "none scheduled" (Unschedulable's churn) must agree
    for ns in sorted(set(kube["_per_namespace"]) | set(ours["_per_namespace"])):
        if ns in kube.get("_steady", ()):  # its last batch, caught at any point of its cycle
            continue
        a, b = kube["_per_namespace"].get(ns, 0), ours["_per_namespace"].get(ns, 0)
        volatile = ns in kube.get("_volatile", ())
        if (a != b and not volatile) or (volatile and (a == 0) != (b == 0)):
            differences.append(f"{ns} scheduled {a} vs {b}")
    for ns in sorted(set(kube.get("_claims") or {}) | set(ours.get("_claims") or {})):
        a, b = (kube.get("_claims") or {}).get(ns, (0, 0)), (ours.get("_claims") or {}).get(ns, (0, 0))
        if a != b and ns not in kube.get("_volatile", ()):
            differences.append(f"{ns} claims (all, allocated) {a} vs {b}")
    if ours.get("violations") and not kube.get("violations"):
        differences.append("violations only under ours")
    return "same" if not differences else "; ".join(differences[:4])


PUBLIC = ("workload", "variant", "scheduler", "pods_per_s", "p50", "p90", "p99", "scheduled", "expected",
          "create_per_s", "measured_s", "ops_s", "cpu_s", "rss_mb", "cp_cpu_s", "claims", "violations", "parity",
          "attempts", "skipped", "error")


def public(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row.get(k) for k in PUBLIC}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench scheduler-perf", description=__doc__.splitlines()[0])
    parser.add_argument("--workload", action="append", default=[], metavar="NAME/VARIANT",
                        help="a workload variant (repeatable; NAME alone: all its variants)")
    parser.add_argument("--smallest", action="store_true", help="each covered workload's smallest variant")
    parser.add_argument("--folder", action="append", default=[],
                        help=f"only workloads of these folders ({', '.join(corpus.FOLDERS)})")
    parser.add_argument("--scheduler", choices=("kube", "ours", "both"), default="both")
    parser.add_argument("--max-nodes", type=int, default=None,
                        help="bound the largest variant to this many nodes (default: none; each bounded case is printed)")
    parser.add_argument("--max-pods", type=int, default=None,
                        help="bound the largest variant to this many pods created (default: none)")
    parser.add_argument("--stall", type=float, default=60.0,
                        help="give a wait up after this many seconds without a pod scheduled")
    parser.add_argument("--source", type=Path, help="kubernetes source tree (default: the Go module cache)")
    parser.add_argument("--json", action="store_true", help="one JSON object per line instead of the table")
    parser.add_argument("--py-spy", type=Path, default=None, metavar="DIR",
                        help="sample `extender schedule` with py-spy into DIR/<workload>.txt (slows it)")
    parser.add_argument("--list", action="store_true", help="list the workloads and variants, run nothing")
    parser.add_argument("--startup", action="store_true",
                        help="time the start of `extender schedule` and `extender serve` on 15,000 nodes and 150,000 pods")
    parser.add_argument("--startup-nodes", type=int, default=15_000)
    parser.add_argument("--startup-pods", type=int, default=150_000)
    parser.add_argument("--report", nargs="+", type=Path, metavar="FILE",
                        help="print the Markdown comparison table of earlier --json runs (medians over repeats); run nothing")
    options = parser.parse_args(argv)
    if options.report:
        from bench.scheduler_perf import report

        return report.main(options.report)
    try:
        root = corpus.locate(options.source)
        everything = corpus.load_workloads(root)
    except corpus.CorpusError as exc:
        parser.exit(2, f"scheduler-perf: {exc}\n")
    if options.folder:
        everything = [w for w in everything if w.folder.split("/")[0] in options.folder]
    if options.list:
        for w in everything:
            nodes, pods = w.size
            print(f"{w.key}\t{nodes} nodes\t{pods} pods\t{w.skip and 'skipped: ' + w.skip}")
        return 0
    from tests.fakeapi.envtest import find_assets

    assets = find_assets()
    if assets is None or assets.kube_scheduler is None:
        parser.exit(2, "scheduler-perf: set KUBEBUILDER_ASSETS to a folder with etcd, kube-apiserver and "
                       "kube-scheduler (bash ../shared/tools/k8s-test-binaries.sh prints the export line)\n")
    if options.startup:
        from bench.scheduler_perf import startup

        rows = startup.run(options.startup_nodes, options.startup_pods)
        _print(rows, options.json, "scheduler-perf --startup")
        return 0
    try:
        if options.workload:
            chosen = corpus.select(everything, options.workload)
        elif options.smallest:
            chosen = corpus.smallest(everything)
        else:
            chosen = []
            for workload, left_out in corpus.largest_with_bounds(everything, options.max_nodes, options.max_pods):
                chosen.append(workload)
                if left_out is not None:
                    print(f"# bounded: {left_out.key} ({left_out.size[0]} nodes, {left_out.size[1]} pods) is above "
                          f"--max-nodes {options.max_nodes} / --max-pods {options.max_pods}: running {workload.key}",
                          file=sys.stderr)
    except KeyError as exc:
        parser.exit(2, f"scheduler-perf: no workload {exc.args[0]!r} (--list shows them)\n")
    kinds = ["kube", "ours"] if options.scheduler == "both" else [options.scheduler]
    rows = []
    with tempfile.TemporaryDirectory(prefix="scheduler-perf-") as tmp:
        for workload in chosen:
            runs = {}
            for kind in kinds:
                print(f"# {workload.key} under {kind} ...", file=sys.stderr, flush=True)
                try:
                    profile = None
                    if options.py_spy is not None and kind == "ours":
                        options.py_spy.mkdir(parents=True, exist_ok=True)
                        profile = options.py_spy / f"{workload.key.replace('/', '_')}.txt"
                    row = run_one(workload, kind, Path(tmp) / workload.key.replace("/", "_"), options.stall, profile)
                except Exception as exc:  # noqa: BLE001 (a scheduler that does not start: its row says so)
                    row = {"workload": workload.name, "variant": workload.variant, "scheduler": kind,
                           "error": f"{type(exc).__name__}: {str(exc)[:300]}", "_per_namespace": {}}
                runs[kind] = row
                for line in row.get("_violations") or []:
                    print(f"#   violation ({kind}): {line}", file=sys.stderr)
                print(f"#   {json.dumps(public(row))}", file=sys.stderr, flush=True)
            if len(runs) == 2:
                runs["ours"]["parity"] = parity(runs["kube"], runs["ours"])
            rows += [public(r) for r in runs.values()]
            if options.json:
                for r in runs.values():
                    print(json.dumps(public(r)), flush=True)
    if not options.json:
        _print(rows, False, "scheduler-perf")
    return 0


def _print(rows: list[dict[str, Any]], as_json: bool, title: str) -> None:
    if as_json:
        for row in rows:
            print(json.dumps(row))
        return
    print_table(title, rows)
