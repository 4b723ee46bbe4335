"""The scheduler_perf runner end to end, on the smallest variants of six workloads (two DRA).

Each run starts its own etcd and kube-apiserver (with scheduler_perf's admission flags),
then kube-scheduler or ``extender schedule``; the whole file takes one to two minutes.
It checks that the runner measures what it should (every measured pod scheduled, the
counts and the invariants read from the final cluster), not any timing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.scheduler_perf import corpus, runner
from tests.fakeapi.envtest import find_assets

pytestmark = [pytest.mark.e2e]

SMALL = ["SchedulingBasic/5Nodes_AsyncAPICallsEnabled", "SchedulingPodAntiAffinity/5Nodes_QueueingHintsEnabled",
         "TopologySpreading/5Nodes_QueueingHintsEnabled",
         # the NodeDeclaredFeatures gate on both, our filter listed, 5 features on each node
         "NodeDeclaredFeaturesEnabled/5Nodes5DeclaredFeatures"]
#: DRA: 10 pods sharing 2 claims (5 each) on one node with 2 devices, and 10 pods whose
#: template claims kube-controller-manager creates, one device each.
DRA = ["SchedulingWithResourceClaim/fast_QueueingHintsEnabled",
       "SchedulingWithResourceClaimTemplate/fast_QueueingHintsEnabled"]


@pytest.fixture(scope="module")
def workloads() -> list[corpus.Workload]:
    assets = find_assets()
    if assets is None or assets.kube_scheduler is None:
        pytest.skip("needs a real control plane: set KUBEBUILDER_ASSETS to a folder with etcd, kube-apiserver "
                    "and kube-scheduler (bash ../shared/tools/k8s-test-binaries.sh prints the export line)")
    try:
        return corpus.select(corpus.load_workloads(corpus.locate()), SMALL + DRA)
    except corpus.CorpusError as exc:
        pytest.skip(f"no kubernetes v1.36.3 source in the Go module cache: {exc}")


@pytest.mark.parametrize("key", SMALL + DRA)
def test_both_schedulers_schedule_every_measured_pod(workloads: list[corpus.Workload], key: str,
                                                     tmp_path: Path) -> None:
    (workload,) = [w for w in workloads if w.key == key]
    runs = {kind: runner.run_one(workload, kind, tmp_path, stall=30.0) for kind in ("kube", "ours")}
    for kind, row in runs.items():
        assert row["error"] is None, (kind, row["error"])
        assert row["expected"] == workload.ops[-1]["count"], kind
        assert row["scheduled"] == row["expected"], (kind, row)
        assert row["_violations"] == [], (kind, row["_violations"])
        # cpu_s counts clock ticks (10 ms): kube-scheduler may place 5 nodes' pods in less.
        assert row["cpu_s"] >= 0 and row["rss_mb"] > 0, (kind, row)
    assert runner.parity(runs["kube"], runs["ours"]) == "same"
    # at least one successful cycle per measured pod, read from each scheduler's /metrics
    for kind, row in runs.items():
        assert row["attempts"].get("scheduled", 0) >= row["expected"], (kind, row["attempts"])
    if key in DRA:  # every claim there, each allocated, under both
        claims = 2 if key.startswith("SchedulingWithResourceClaim/") else 10
        assert runs["kube"]["_claims"] == runs["ours"]["_claims"] == {"test": (claims, claims)}
