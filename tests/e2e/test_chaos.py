"""A short chaos run (bench/bench_chaos.py) in the suite: a pod stream for both schedulers on a
control plane of its own, gangs included (kube-scheduler v1.36's pod groups for the standalone
replicas, Coscheduling's through the webhook) and DRA pods (kube-controller-manager making the
template claims), faults of eight kinds in seeded order (three aimed at allocation), and no
violation (a gang partly bound is one, and so is a device given twice or a claim leaked).

The full run (every kind, 10 minutes) is `python -m bench chaos`; this one keeps the suite
bounded (about two minutes with the start-up) and fails on any violation the checker finds,
printing the figures and the fault log.
"""

from __future__ import annotations

import json

import pytest

from bench import bench_chaos
from tests.e2e.conftest import NO_BINARIES
from tests.e2e.controlplane import find_kube_controller_manager
from tests.fakeapi.envtest import find_assets

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SEED = 27
# kube-apiserver's 30 s restart and the claim gate's 17 s holds leave too few faults for a minute:
# the full run has them.
KINDS = ("leader-sigkill", "worker-sigkill", "master-sigkill", "etcd-compaction", "watch-cut",
         "leader-sigkill-in-prebind", "slice-republish", "device-taint")


def test_short_chaos_run_finds_no_violation() -> None:
    assets = find_assets()
    if assets is None or assets.kube_scheduler is None or find_kube_controller_manager() is None:
        pytest.skip(NO_BINARIES)
    result = bench_chaos.run(minutes=1.0, seed=SEED, grace=15.0, kinds=KINDS)
    assert result is not None
    print(json.dumps(result, indent=1))
    assert result["violations"] == []
    assert sum(result["faults"].values()) >= 4, result["fault_log"]
    assert result["pods_scheduled"] >= 30
    assert result["bound_by_kind"].get("gang", 0) >= 2, result["bound_by_kind"]
    assert result["gangs_bound_to_min_count"] >= 1
    assert result["dra_pods"]["bound"] >= 10, result["pods_by_kind"]
    for pool in ("sa", "wh"):  # both schedulers bound DRA pods
        assert sum(v["by_pool"].get(pool, {}).get("bound", 0) for k, v in result["pods_by_kind"].items()
                   if k.startswith("dra-")) >= 3, result["pods_by_kind"]
