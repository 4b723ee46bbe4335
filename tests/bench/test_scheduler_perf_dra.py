"""scheduler_perf's DRA workloads as the runner reads and builds them: which variants run or
are skipped and why, the ResourceSlices of createResourceDriver, the allocations of
allocResourceClaims, and the DRA invariants. No control plane: the objects are checked as
built, against the facts of dra.go and the v1.36.3 corpus read off by hand."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from bench.scheduler_perf import corpus, dra, invariants
from tests.bench import load_config

DRIVER = "test-driver.cdi.k8s.io"
CLASS = {"apiVersion": dra.API, "kind": "DeviceClass", "metadata": {"name": "test-class"},
         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}
SCHEDULED = [{"type": "PodScheduled", "status": "True"}]


@pytest.fixture(scope="module")
def workloads() -> list[corpus.Workload]:
    try:
        root = corpus.locate()
    except corpus.CorpusError as exc:
        pytest.skip(f"no kubernetes v1.36.3 source in the Go module cache: {exc}")
    return [w for w in corpus.load_workloads(root) if w.uses_dra]


def by_key(workloads: list[corpus.Workload]) -> dict[str, corpus.Workload]:
    return {w.key: w for w in workloads}


def test_issue_workloads_run_at_their_largest_default_gate_variant(workloads: list[corpus.Workload]) -> None:
    found = by_key(workloads)
    for key in ("SchedulingWithResourceClaimTemplate/5000pods_500nodes_QueueingHintsEnabled",
                "SteadyStateClusterResourceClaimTemplate/full_500nodes_QueueingHintsEnabled",
                "SchedulingWithResourceClaim/5000pods_500nodes", "FirstAvailable/fast_QueueingHintsEnabled"):
        assert found[key].skip == "", key
    driver = next(op for op in found["SchedulingWithResourceClaim/5000pods_500nodes"].ops
                  if op["opcode"] == "createResourceDriver")
    assert driver == {"opcode": "createResourceDriver", "driverName": DRIVER, "nodes": "scheduler-perf-dra-*",
                      "maxClaimsPerNode": 2}
    chosen = {w.key for w in corpus.largest(workloads, 5000, 8000)}
    assert "SchedulingWithResourceClaimTemplate/5000pods_500nodes_QueueingHintsEnabled" in chosen


def test_gates_off_by_default_or_locked_and_unimplemented_features_skipped(workloads: list[corpus.Workload]) -> None:
    found = by_key(workloads)
    assert found["SchedulingWithResourceClaimTemplate/5000pods_500nodes"].skip == \
        "needs feature gate SchedulerQueueingHints=false, locked to true in v1.36.3"
    # partitionable devices are implemented: their default-gate variants run; the device-taint
    # workload creates a DeviceTaintRule: its control plane serves them, and kube-scheduler applies them
    assert found["Partitionable/2000pods_100nodes"].skip == ""
    assert found["ConsumableCapacity/fast"].skip == ""
    assert found["ExtendedResource_50Classes/5000pods_500nodes"].skip == ""
    taints = found["DeviceTaintToleration/fast_QueueingHintsEnabled"]
    assert taints.skip == "" and taints.taint_rules
    assert "--feature-gates=DRADeviceTaintRules=true" in taints.apiserver_args
    assert taints.kube_scheduler_gates == "DRADeviceTaintRules=true"
    assert not found["ConsumableCapacity/fast"].taint_rules and found["ConsumableCapacity/fast"].apiserver_args == []
    assert corpus._gate_skip({"DRADeviceTaintRules": True}) == \
        "needs feature gate DRADeviceTaintRules=true, off by default, default false in v1.36.3"
    assert "not recorded" in corpus._gate_skip({"SomeNewGate": True})


def test_resource_slice_is_dra_go_resource_slice() -> None:
    built = dra.resource_slice(DRIVER, "scheduler-perf-dra-abcde", 3)
    assert built["metadata"] == {"name": "scheduler-perf-dra-abcde"}
    assert built["spec"]["nodeName"] == "scheduler-perf-dra-abcde"
    assert built["spec"]["pool"] == {"name": "scheduler-perf-dra-abcde", "resourceSliceCount": 1}
    assert [d["name"] for d in built["spec"]["devices"]] == ["instance-0", "instance-1", "instance-2"]
    assert built["spec"]["devices"][2] == {
        "name": "instance-2",
        "attributes": {"model": {"string": "A100"}, "family": {"string": "GPU"}, "driverVersion": {"version": "1.2.3"},
                       "dra.example.com/numa": {"int": 2}},
        "capacity": {"memory": {"value": "1Gi"}}}
    assert dra.resource_slice(DRIVER, "n", 0)["spec"]["devices"] == []


def test_driver_nodes_match_the_glob() -> None:
    names = ["node-0-abcde", "scheduler-perf-dra-x1", "scheduler-perf-dra-", "other-scheduler-perf-dra-1"]
    assert dra.driver_nodes("scheduler-perf-dra-*", names) == ["scheduler-perf-dra-x1", "scheduler-perf-dra-"]


def claim(name: str, namespace: str = "init", allocation: dict[str, Any] | None = None,
          reserved: list[str] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if allocation:
        status["allocation"] = allocation
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": uid, "uid": uid} for uid in reserved]
    return {"apiVersion": dra.API, "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}", "resourceVersion": "1"},
            "spec": {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": "test-class"}}]}},
            "status": status}


def allocation(node: str, *devices: str) -> dict[str, Any]:
    return {"devices": {"results": [{"request": "req-0", "driver": DRIVER, "pool": node, "device": d} for d in devices]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}


def cluster(nodes: int, devices: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    names = [f"scheduler-perf-dra-{i}" for i in range(nodes)]
    return ([{"metadata": {"name": n, "labels": {}}} for n in names],
            [{**dra.resource_slice(DRIVER, n, devices), "metadata": {"name": n, "resourceVersion": "1"}} for n in names])


def test_alloc_resource_claims_fills_the_devices_once_each_and_skips_allocated_claims() -> None:
    nodes, slices = cluster(3, 2)
    done = claim("done", allocation=allocation("scheduler-perf-dra-0", "instance-0"))
    elsewhere = claim("elsewhere", namespace="other", allocation=allocation("scheduler-perf-dra-1", "instance-0"))
    pending = [claim(f"test-claim-{i}") for i in range(4)]
    planned = list(dra.plan_allocations([done, *pending], nodes, slices, [CLASS], [elsewhere], random.Random(7)))
    assert [c["metadata"]["name"] for c, _ in planned] == [f"test-claim-{i}" for i in range(4)]
    taken = [(a["devices"]["results"][0]["pool"], a["devices"]["results"][0]["device"]) for _, a in planned]
    assert len(set(taken)) == 4
    assert ("scheduler-perf-dra-0", "instance-0") not in taken and ("scheduler-perf-dra-1", "instance-0") not in taken
    for _, result in planned:  # pinned to the device's node, nothing but the allocation
        pool = result["devices"]["results"][0]["pool"]
        assert result["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [pool]
        assert set(result) == {"devices", "nodeSelector"}
    with pytest.raises(dra.AllocationFailed, match="could not allocate claim 1 out of 2"):
        list(dra.plan_allocations([claim("a"), claim("b")], nodes[:1], slices[:1], [CLASS], [done]))


def test_device_holders_catch_a_device_given_twice_even_briefly() -> None:
    holders = invariants.DeviceHolders()
    first = claim("first", allocation=allocation("n", "instance-0"))
    holders.observe("ADDED", first)
    holders.observe("MODIFIED", first)  # the same claim again is no conflict
    holders.observe("DELETED", first)
    second = claim("second", allocation=allocation("n", "instance-0"))
    holders.observe("ADDED", second)  # freed first: fine
    assert holders.report() == []
    holders.observe("ADDED", claim("third", allocation=allocation("n", "instance-0")))
    holders.observe("DELETED", claim("third"))  # gone again, but it happened
    assert holders.report() == ["device shared: device test-driver.cdi.k8s.io/n/instance-0 allocated to "
                                "init/third while init/second holds it"]


def pod(name: str, uid: str, node: str, claims: list[tuple[str, str | None]], template: bool = False) -> dict[str, Any]:
    spec_claims = [{"name": entry, "resourceClaimTemplateName": "t"} if template else
                   {"name": entry, "resourceClaimName": claim_name} for entry, claim_name in claims]
    status: dict[str, Any] = {"conditions": SCHEDULED}
    if template:
        status["resourceClaimStatuses"] = [{"name": e, "resourceClaimName": c} for e, c in claims if c]
    return {"metadata": {"name": name, "namespace": "test", "uid": uid}, "spec": {"nodeName": node, "resourceClaims": spec_claims},
            "status": status}


def test_check_claims_sound_and_each_violation() -> None:
    _, slices = cluster(2, 2)
    n0, n1 = "scheduler-perf-dra-0", "scheduler-perf-dra-1"
    shared = claim("shared", "test", allocation(n0, "instance-0"), reserved=["p1", "p2"])
    own = claim("own", "test", allocation(n1, "instance-1"), reserved=["p3"])
    pods = [pod("p1", "p1", n0, [("resource", "shared")]), pod("p2", "p2", n0, [("resource", "shared")]),
            pod("p3", "p3", n1, [("resource", "own")], template=True)]
    assert invariants.check_claims(pods, [shared, own], slices) == []
    assert invariants.claim_counts([shared, own, claim("idle", "test")]) == {"test": (3, 2)}

    wrong_node = pods[:1] + [pod("p2", "p2", n1, [("resource", "shared")])] + pods[2:]
    assert [v.split(":")[0] for v in invariants.check_claims(wrong_node, [shared, own], slices)] == ["claim node"]
    twice = claim("twice", "test", allocation(n0, "instance-0"))
    assert invariants.check_claims(pods, [shared, own, twice], slices) == [
        "device shared: test-driver.cdi.k8s.io/scheduler-perf-dra-0/instance-0 in test/shared and test/twice"]
    ghost = claim("ghost", "test", allocation(n0, "instance-9"))
    assert invariants.check_claims([], [ghost], slices) == [
        "unknown device: test/ghost: test-driver.cdi.k8s.io/scheduler-perf-dra-0/instance-9 is in no ResourceSlice"]
    unreserved = claim("own", "test", allocation(n1, "instance-1"))
    missing = pod("p4", "p4", n1, [("resource", None)], template=True)
    assert invariants.check_claims(pods[2:] + [missing], [unreserved], slices) == [
        "pod claims: test/p3: claim own is not reserved for it",
        "pod claims: test/p4: claim resource (None) does not exist"]
    pending = claim("own", "test")
    assert invariants.check_claims(pods[2:], [pending], slices) == ["pod claims: test/p3: claim own is not allocated"]


def test_max_claims_per_node_param_resolved(tmp_path: Path) -> None:
    (small,) = load_config(tmp_path, "dra", "- name: X\n  workloadTemplate:\n  - opcode: createResourceDriver\n"
                           "    driverName: d\n    nodes: n-*\n    maxClaimsPerNodeParam: $m\n"
                           "  - opcode: allocResourceClaims\n  workloads:\n  - name: small\n    params: {m: 4}\n")
    assert small.skip == "" and small.uses_dra
    assert small.ops[0] == {"opcode": "createResourceDriver", "driverName": "d", "nodes": "n-*", "maxClaimsPerNode": 4}


def test_beta_dra_templates_are_created_as_v1() -> None:
    from bench.scheduler_perf.executor import served_version

    assert served_version({"apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceClass"})["apiVersion"] == \
        "resource.k8s.io/v1"
    assert served_version({"apiVersion": "v1", "kind": "Pod"}) == {"apiVersion": "v1", "kind": "Pod"}
