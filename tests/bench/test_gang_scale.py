"""`python -m bench gang-scale` at a tiny scale, so that it cannot rot.

The cluster part runs on a real control plane (etcd, kube-apiserver with the pod-group
gates, kube-scheduler v1.36.3 and `extender schedule`): 20 nodes, a gang of 10, and the
no-group control, under both schedulers (about half a minute). The engine part runs in
this process. Both check what the benchmark measures (every member bound, the group
Scheduled, the feature really on in the "on" run), never a timing.
"""

from __future__ import annotations

import pytest

from bench import bench_gang_scale
from tests.fakeapi.envtest import find_assets


@pytest.mark.e2e
def test_both_schedulers_bind_the_gang_and_the_control_on_one_cluster() -> None:
    assets = find_assets()
    if assets is None or assets.kube_scheduler is None:
        pytest.skip("needs a real control plane: set KUBEBUILDER_ASSETS to a folder with etcd, kube-apiserver "
                    "and kube-scheduler (bash ../shared/tools/k8s-test-binaries.sh prints the export line)")
    rows = bench_gang_scale.run_cluster(20, 10, timeout=60, stall=30, progress=False)
    assert [(r["mode"], r["scheduler"]) for r in rows] == [
        ("gang", "kube"), ("gang", "ours"), ("no-group", "kube"), ("no-group", "ours")]
    for row in rows:
        assert row["error"] is None, row
        assert row["bound"] == 10, row
        assert row["last_to_bound_s"] is not None and row["first_to_bound_s"] >= row["last_to_bound_s"], row
        assert row["sched_rss_mb"] > 0, row
        assert row["group"] == ("True/Scheduled" if row["mode"] == "gang" else ""), row
    compared = bench_gang_scale.ratios(rows)
    assert [(c["mode"], c["run"]) for c in compared] == [("gang", "1"), ("no-group", "1")]
    # a ratio wherever kube-scheduler's figure is not 0 (all bound within 5 ms of the last
    # creation rounds to 0.0 s, and the ratio is then undefined, not missing)
    kube_last = {r["mode"]: r["last_to_bound_s"] for r in rows if r["scheduler"] == "kube"}
    assert all(c["last_to_bound_s"] is not None for c in compared if kube_last[c["mode"]]), (compared, kube_last)


def test_the_engine_part_runs_pods_of_no_group_with_the_feature_off_and_on() -> None:
    rows = bench_gang_scale.engine_overhead(nodes=30, pods=10, runs=1)
    off, on, ratio = rows
    assert (off["gang_feature"], off["enabled"], off["gated_members"]) == ("off", False, 0)
    # "on" must really be on, with a gang waiting at the queue's gate while the others are placed
    assert (on["gang_feature"], on["enabled"], on["gated_members"]) == ("on", True, 1000)
    assert ratio["gang_feature"] == "on / off"
    assert off["cpu_us_per_node"] > 0 and on["cpu_us_per_node"] > 0 and ratio["cpu_us_per_node"] > 0


def test_a_member_names_its_group_and_scheduler() -> None:
    pod = bench_gang_scale.member(3, "extender-scheduler", "gang")
    assert pod["metadata"]["name"] == "member-00003"
    assert pod["spec"]["schedulingGroup"] == {"podGroupName": "gang"}
    assert pod["spec"]["schedulerName"] == "extender-scheduler"
    plain = bench_gang_scale.member(3, None, None)
    assert "schedulingGroup" not in plain["spec"] and "schedulerName" not in plain["spec"]
