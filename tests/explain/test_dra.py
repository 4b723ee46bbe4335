"""Dynamic resource allocation offline: simulate allocates claims from the snapshot's slices, explain names
the request that failed on each node and why (config/snapshot-dra.yaml, described in its header)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from extender.cli.explain_command import explain
from extender.cluster.snapshot import Snapshot, read_snapshot
from extender.policy.defaults import default_policy
from extender.simulation.simulating import render_result, simulate
from tests.helpers import ROOT

SNAPSHOT = ROOT / "config" / "snapshot-dra.yaml"


def test_simulate_allocates_claims_and_reports_device_use() -> None:
    result = simulate(read_snapshot(SNAPSHOT), default_policy("standalone"))
    assert {p.pod: p.node for p in result.placements} == {"default/trainer": "gpu-node"}
    assert {u.pod: u.reason.split(".")[0] for u in result.unschedulable} == {
        "default/h100-job": "0/2 nodes are available: 2 cannot allocate all claims",
        "default/late": "0/2 nodes are available: 2 cannot allocate all claims"}
    devices = {n.node: n.devices for n in result.nodes}
    assert devices == {"cpu-node": "", "gpu-node": "gpu.example.com 2/2"}
    assert "gpu.example.com 2/2" in render_result(result)


def test_simulate_does_not_change_the_snapshot() -> None:
    snapshot = read_snapshot(SNAPSHOT)
    simulate(snapshot, default_policy("standalone"))
    claims = [c for c in snapshot.dra["resourceclaims"] if c["metadata"]["name"] == "two-gpus"]
    assert "status" not in claims[0]
    # a second run on the same snapshot places the same pod again
    again = simulate(snapshot, default_policy("standalone"))
    assert [p.pod for p in again.placements] == ["default/trainer"]


def test_explain_names_the_request_and_the_selector_that_failed() -> None:
    out = CliRunner().invoke(explain, ["--snapshot", str(SNAPSHOT), "default/h100-job", "-o", "json"])
    assert out.exit_code == 0, out.output
    nodes = {n["node"]: n for n in json.loads(out.output)["nodes"]}
    assert nodes["gpu-node"]["reason"] == "cannot allocate all claims"
    assert 'no device of class gpu matches selector device.attributes["gpu.example.com"].model == "h100"' \
        in nodes["gpu-node"]["detail"]
    assert "no device on this node matches device class gpu" in nodes["cpu-node"]["detail"]


def test_explain_says_how_many_devices_are_free(tmp_path) -> None:
    pod = tmp_path / "greedy.yaml"
    pod.write_text(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "greedy", "namespace": "default"},
                               "spec": {"containers": [{"name": "c"}],
                                        "resourceClaims": [{"name": "g", "resourceClaimName": "four-gpus"}]}}))
    out = CliRunner().invoke(explain, ["--snapshot", str(SNAPSHOT), str(pod), "-o", "json"])
    assert out.exit_code == 0, out.output
    detail = {n["node"]: n["detail"] for n in json.loads(out.output)["nodes"]}["gpu-node"]
    assert "claim default/four-gpus, request gpus: 4 requested, 2 free" in detail, detail


def _gang_snapshot(members: int, min_count: int) -> Snapshot:
    """config/snapshot-dra.yaml's two GPUs, and a gang of `members` pods, each with a claim of one GPU."""
    snapshot = read_snapshot(SNAPSHOT)
    snapshot.pods = []
    snapshot.pod_groups = [{"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                            "metadata": {"name": "ranks", "namespace": "default"},
                            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}]
    claims = []
    for i in range(members):
        claims.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                       "metadata": {"name": f"rank-{i}", "namespace": "default", "uid": f"c-{i}"},
                       "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}})
        snapshot.pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"rank-{i}", "namespace": "default", "uid": f"p-{i}", "creationTimestamp": f"2026-01-01T00:0{i}:00Z"},
            "spec": {"schedulingGroup": {"podGroupName": "ranks"}, "containers": [{"name": "c"}],
                     "resourceClaims": [{"name": "g", "resourceClaimName": f"rank-{i}"}]},
            "status": {"phase": "Pending"}})
    snapshot.dra["resourceclaims"] = claims
    return snapshot


def test_gang_members_with_claims_are_placed_together() -> None:
    result = simulate(_gang_snapshot(2, 2), default_policy("standalone"))
    assert sorted(p.node for p in result.placements) == ["gpu-node", "gpu-node"]
    assert {n.node: n.devices for n in result.nodes}["gpu-node"] == "gpu.example.com 2/2"


def test_a_gang_whose_claims_do_not_all_fit_holds_no_device() -> None:
    """Three ranks, two GPUs, minCount 3: no rank is placed, and the two reserved for nothing
    are given back (no allocation is left in flight)."""
    result = simulate(_gang_snapshot(3, 3), default_policy("standalone"))
    assert result.placements == ()
    assert {n.node: n.devices for n in result.nodes}["gpu-node"] == "gpu.example.com 0/2"


def test_simulate_applies_a_snapshot_device_taint_rule() -> None:
    """A DeviceTaintRule in the snapshot (kubectl get devicetaintrules -o yaml, where served) taints
    the devices it selects: the trainer's two-GPU claim no longer fits on the node."""
    snapshot = read_snapshot(SNAPSHOT)
    snapshot.dra["devicetaintrules"] = [{
        "apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceTaintRule", "metadata": {"name": "drain-gpu-1"},
        "spec": {"deviceSelector": {"driver": "gpu.example.com", "device": "gpu-1"},
                 "taint": {"key": "maintenance", "effect": "NoSchedule"}}}]
    result = simulate(snapshot, default_policy("standalone"))
    assert "default/trainer" not in {p.pod for p in result.placements}
    reasons = {u.pod: u.reason for u in result.unschedulable}
    assert reasons["default/trainer"].startswith("0/2 nodes are available: 2 cannot allocate all claims")
