"""python -m bench gang-pairs: competing gangs through the webhook, time to the first whole gang.

Issue 46's targets, on the real control plane (needs KUBEBUILDER_ASSETS): a stock kube-scheduler
v1.36.3 (no gang gates) with `extender serve` registered as config/kube-scheduler-gangs.yaml
(bindVerb, Coscheduling PodGroups, `--gang-hold 20`), one node with room for 4 CPUs.

* **pairs**: rounds of two gangs of 3 members x 1 CPU each (room for one gang), all six members
  created at once, interleaved (a1, b1, a2, b2, ...) by parallel POSTs;
* **fours**: rounds of four such gangs for the same room.

Each round times, from its last member's creation (POST answered) to one gang whole (all its
members bound; the pods are polled every 50 ms), then waits `--settle` seconds more and counts
the gangs left partly bound (0 < bound < minMember: must be 0). The pods and groups are deleted
(and gone) before the next round. At the end the webhook's /metrics give the holds that timed
out (`extender_gang_holds_total{outcome="timeout"}`, target 0) and the give-ways by reason.

Targets: every round has a whole gang within 5 s of its last member's creation, no hold times
out, no partly bound gang. Printed: one row per scenario (rounds, median, worst, partly bound,
rounds without a whole gang), and the metrics.

`run_round` is also what tests/e2e/test_gangs_webhook.py runs, once per scenario.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEDULER = "gang-pairs"
NAMESPACE = "gang-pairs"
LEASES = "scheduler-extender"
COSCHEDULING = "scheduling.x-k8s.io/v1alpha1"
LABEL = "scheduling.x-k8s.io/pod-group"


@dataclass(frozen=True)
class GangShape:
    name: str
    members: int
    cpu: str = "1"


@dataclass
class Round:
    """One round's outcome: seconds from the last creation to the first whole gang (None: none
    within the timeout), which gang, and each gang's bound members at the end."""

    first_whole_s: float | None
    winner: str
    bound: dict[str, int]
    partial: list[str]


def create_groups(kube: Any, namespace: str, gangs: Sequence[GangShape]) -> None:
    for gang in gangs:
        kube.call("POST", f"/apis/{COSCHEDULING}/namespaces/{namespace}/podgroups",
                  {"apiVersion": COSCHEDULING, "kind": "PodGroup", "metadata": {"name": gang.name},
                   "spec": {"minMember": gang.members}})


def _pod_names(gangs: Sequence[GangShape]) -> list[tuple[str, GangShape]]:
    """Interleaved: the first member of every gang, then the second of every gang, ..."""
    order = []
    for index in range(max(g.members for g in gangs)):
        order += [(f"{g.name}-{index + 1}", g) for g in gangs if index < g.members]
    return order


def run_round(kube: Any, namespace: str, scheduler: str, gangs: Sequence[GangShape], *,
              timeout: float = 60.0, settle: float = 3.0) -> Round:
    """Create the groups, then every member at once; time the first whole gang; count partial ones."""
    create_groups(kube, namespace, gangs)
    pods = _pod_names(gangs)

    def create(item: tuple[str, GangShape]) -> float:
        name, gang = item
        kube.create_pod(name, namespace, cpu=gang.cpu, scheduler_name=scheduler, labels={LABEL: gang.name})
        return time.monotonic()

    with ThreadPoolExecutor(max_workers=len(pods)) as pool:
        last_created = max(pool.map(create, pods))
    sizes = {g.name: g.members for g in gangs}
    first_whole: float | None = None
    winner = ""
    bound: dict[str, int] = {}
    deadline = last_created + timeout
    while time.monotonic() < deadline:
        bound = _bound(kube, namespace, sizes)
        whole = [name for name, count in bound.items() if count >= sizes[name]]
        if whole:
            first_whole, winner = time.monotonic() - last_created, whole[0]
            break
        time.sleep(0.05)
    if first_whole is not None:
        time.sleep(settle)  # a member bound alone after the winner would show by now
        bound = _bound(kube, namespace, sizes)
    partial = sorted(name for name, count in bound.items() if 0 < count < sizes[name])
    return Round(first_whole, winner, bound, partial)


def _bound(kube: Any, namespace: str, sizes: dict[str, int]) -> dict[str, int]:
    counts = dict.fromkeys(sizes, 0)
    for pod in kube.list_pods(namespace):
        group = ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL)
        if group in counts and (pod.get("spec") or {}).get("nodeName"):
            counts[group] += 1
    return counts


def clean(kube: Any, namespace: str, timeout: float = 60.0) -> None:
    """Delete the round's groups, then its pods (at once: no kubelet), and wait until they are
    gone. Groups first: a losing gang must not bind into the room its winner's deletion frees."""
    for group in kube.call("GET", f"/apis/{COSCHEDULING}/namespaces/{namespace}/podgroups").get("items") or []:
        kube.call("DELETE", f"/apis/{COSCHEDULING}/namespaces/{namespace}/podgroups/{group['metadata']['name']}")
    for pod in kube.list_pods(namespace):
        kube.delete_pod(pod["metadata"]["name"], namespace, grace_period_seconds=0)
    kube.wait_for(lambda: not kube.list_pods(namespace), timeout=timeout, message="the round's pods deleted")


def summary(label: str, rounds: Sequence[Round]) -> dict[str, Any]:
    times = [r.first_whole_s for r in rounds if r.first_whole_s is not None]
    return {
        "scenario": label, "rounds": len(rounds),
        "median_s": round(statistics.median(times), 2) if times else None,
        "worst_s": round(max(times), 2) if times else None,
        "over_5s": sum(1 for t in times if t > 5.0),
        "no_whole_gang": len(rounds) - len(times),
        "partly_bound": sum(len(r.partial) for r in rounds),
    }


def run(pairs: int = 8, fours: int = 4, hold: float = 20.0, workers: int = 1, settle: float = 3.0,
        gap: float = 1.0) -> list[dict[str, Any]]:
    import yaml

    from tests.e2e import configs, processes
    from tests.e2e.controlplane import ControlPlane
    from tests.fakeapi.envtest import find_assets
    from tests.gangs.test_podgroup_api import CRD_FILE, wait_served

    assets = find_assets()
    if assets is None or assets.kube_scheduler is None:
        print("bench gang-pairs skipped: set KUBEBUILDER_ASSETS to a folder with etcd, kube-apiserver and "
              "kube-scheduler (bash ../shared/tools/k8s-test-binaries.sh prints the export line)")
        return []
    rows: list[dict[str, Any]] = []
    with ControlPlane(assets) as cp:
        kube = cp.client
        workdir = Path(tempfile.mkdtemp(prefix="gang-pairs-"))
        kube.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", yaml.safe_load(CRD_FILE.read_text()))
        wait_served(kube, f"/apis/{COSCHEDULING}/namespaces/default/podgroups")
        kube.ensure_namespace(NAMESPACE)
        kube.ensure_namespace(LEASES)
        kube.create_node("room", cpu="4")
        webhook = processes.serve(cp.kubeconfig, workdir, scheduler_names=[SCHEDULER],
                                  extra=["--gang-hold", f"{hold:g}", "--workers", str(workers)])
        webhook.start(timeout=120)
        try:
            config = configs.kube_scheduler_config(
                "kube-scheduler-gangs.yaml", kubeconfig=cp.plane.user_kubeconfig("system:kube-scheduler"),  # type: ignore[union-attr]
                scheduler_name=SCHEDULER, port=webhook.port)
            cp.start_kube_scheduler(config, name="kube-scheduler-gangs")
            for label, count, shapes in (
                    ("pairs: 2 gangs of 3 x 1 CPU, room for 4", pairs, 2),
                    ("fours: 4 gangs of 3 x 1 CPU, room for 4", fours, 4)):
                rounds = []
                for index in range(count):
                    gangs = [GangShape(f"r{index}-{chr(ord('a') + g)}", 3) for g in range(shapes)]
                    result = run_round(kube, NAMESPACE, SCHEDULER, gangs, settle=settle)
                    rounds.append(result)
                    print(f"# {label.split(':')[0]} round {index + 1}: first whole gang "
                          f"{'none' if result.first_whole_s is None else f'{result.first_whole_s:.2f} s'} "
                          f"({result.winner}), bound {result.bound}, partly bound {result.partial}", flush=True)
                    clean(kube, NAMESPACE)
                    time.sleep(gap)  # kube-scheduler's queue and the webhook's watches settle
                rows.append(summary(label, rounds))
            figures = {  # the whole run's, from the webhook's /metrics
                "hold_timeouts": webhook.metric("extender_gang_holds_total", outcome="timeout"),
                "holds_released": webhook.metric("extender_gang_holds_total", outcome="released"),
                "holds_gave_way": webhook.metric("extender_gang_holds_total", outcome="gave-way"),
                "give_ways": webhook.metric("extender_gang_give_way_total"),
                # the same time-outs from the log (a webhook without the metric, e.g. before issue 46)
                "timeouts_logged": sum("verb=bind" in line and "did not reach minCount" in line
                                       for line in webhook.log().splitlines()),
            }
            print(f"# webhook metrics over the run: {figures}", flush=True)
            for row in rows:
                row.update(figures)
        finally:
            webhook.stop()
    return rows


def main(argv: list[str] | None = None) -> int:
    from bench.tables import print_table

    parser = argparse.ArgumentParser(prog="python -m bench gang-pairs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=8, help="rounds of two competing gangs")
    parser.add_argument("--fours", type=int, default=4, help="rounds of four competing gangs")
    parser.add_argument("--hold", type=float, default=20.0, help="the webhook's --gang-hold")
    parser.add_argument("--workers", type=int, default=1, help="the webhook's gunicorn workers")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds watched after the first whole gang")
    options = parser.parse_args(argv)
    started = time.perf_counter()
    rows = run(options.pairs, options.fours, options.hold, options.workers, options.settle)
    print_table(f"gang-pairs ({time.perf_counter() - started:.0f} s)", rows)
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
