"""The chaos checker's DRA invariants (bench/chaos/dra_checks.py) on synthetic histories: a
clean run with shared, partitioned and admin-access devices has none; each violation,
planted in it, is found once, with its subject."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bench.chaos.checker import CHECKS, Run, Violation, check
from bench.chaos.dra_checks import FINALIZER, ClaimEvent
from tests.reliability.test_chaos_checker import NODES, NS, History, pod

DRIVER = "gpu.example.com"


def node_selector(node: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}


def slice_(node: str, *devices: dict[str, Any], counters: dict[str, str] | None = None,
           generation: int = 1) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": DRIVER, "nodeName": node,
                            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
                            "devices": list(devices)}
    if counters:
        spec["sharedCounters"] = [{"name": "mem", "counters": {k: {"value": v} for k, v in counters.items()}}]
    return {"metadata": {"name": f"{node}-{generation}"}, "spec": spec}


SLICES = [
    slice_("a-0", {"name": "gpu-0"}, {"name": "gpu-1"}, {"name": "gpu-2"},
           {"name": "nic", "allowMultipleAllocations": True, "capacity": {"bandwidth": {"value": "10G"}}}),
    # Partitionable: the whole and its halves draw on one counter set of 40Gi.
    slice_("b-0", {"name": "whole", "consumesCounters": [{"counterSet": "mem", "counters": {"memory": {"value": "40Gi"}}}]},
           *({"name": f"half-{i}", "consumesCounters": [{"counterSet": "mem", "counters": {"memory": {"value": "20Gi"}}}]}
             for i in range(2)),
           counters={"memory": "40Gi"}),
]


def result(device: str, pool: str = "a-0", request: str = "gpu", **extra: Any) -> dict[str, Any]:
    return {"request": request, "driver": DRIVER, "pool": pool, "device": device, **extra}


def share(device: str, share_id: str, bandwidth: str) -> dict[str, Any]:
    return result(device, request="nic", shareID=share_id, consumedCapacity={"bandwidth": bandwidth})


def resource_claim(name: str, *results_: dict[str, Any], node: str = "a-0", reserved: tuple[str, ...] = (),
                   owner: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"claim-{name}"}
    if owner:
        meta["ownerReferences"] = [{"kind": "Pod", "name": owner, "uid": f"uid-{owner}", "controller": True}]
    status: dict[str, Any] = {}
    if results_:
        meta["finalizers"] = [FINALIZER]
        status["allocation"] = {"devices": {"results": list(results_)}, "nodeSelector": node_selector(node)}
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in reserved]
    return {"metadata": meta, "spec": {"devices": {"requests": []}}, "status": status}


def dra_pod(name: str, claim: str, template: bool = False) -> dict[str, Any]:
    body = pod(name)
    if template:
        body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
        body["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim}]
    else:
        body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    return body


class DraHistory(History):
    """Pods and claims on one clock: each write one second after the previous."""

    def __init__(self) -> None:
        super().__init__()
        self.claim_events: list[ClaimEvent] = []
        self.claims: dict[str, dict[str, Any]] = {}

    def write(self, claim: dict[str, Any]) -> DraHistory:
        self.clock += 1.0
        kind = "MODIFIED" if claim["metadata"]["name"] in self.claims else "ADDED"
        self.claims[claim["metadata"]["name"]] = claim
        self.claim_events.append(ClaimEvent(self.clock, kind, copy.deepcopy(claim)))
        return self

    def drop(self, name: str) -> DraHistory:
        self.clock += 1.0
        self.claim_events.append(ClaimEvent(self.clock, "DELETED", self.claims.pop(name)))
        return self

    def run(self, **overrides: Any) -> Run:
        fields = {"claim_events": self.claim_events, "resource_claims": list(self.claims.values()),
                  "resource_slices": SLICES, **overrides}
        return super().run(**fields)


def clean() -> DraHistory:
    """Allocations written before binds, a device given back and taken again, shares within
    capacity, admin access over a device in use, halves of a partitionable device."""
    h = DraHistory()
    h.write(resource_claim("c1")).create(dra_pod("p1", "c1"))
    h.write(resource_claim("c1", result("gpu-0"), reserved=("p1",))).bind("p1", "a-0")
    # A template's claim, owned by its pod.
    h.create(dra_pod("p2", "p2-gpu-x", template=True))
    h.write(resource_claim("p2-gpu-x", owner="p2"))
    h.write(resource_claim("p2-gpu-x", result("gpu-1"), reserved=("p2",), owner="p2")).bind("p2", "a-0")
    # p1 ends: its claim is released and deleted, and gpu-0 goes to c3.
    h.delete("p1").write(resource_claim("c1", result("gpu-0"))).write(resource_claim("c1")).drop("c1")
    h.create(dra_pod("p3", "c3")).write(resource_claim("c3", result("gpu-0"), reserved=("p3",))).bind("p3", "a-0")
    # Shares of the NIC within its 10G, and admin access to gpu-0, which c3 holds.
    for i, bandwidth in enumerate(("4G", "6G")):
        h.create(dra_pod(f"n{i}", f"nic-{i}"))
        h.write(resource_claim(f"nic-{i}", share("nic", f"s{i}", bandwidth), reserved=(f"n{i}",))).bind(f"n{i}", "a-0")
    h.create(dra_pod("admin", "watch"))
    h.write(resource_claim("watch", result("gpu-0", adminAccess=True), reserved=("admin",))).bind("admin", "a-0")
    # The two halves of b-0's partitionable device: 40Gi of 40Gi.
    for i in range(2):
        h.create(dra_pod(f"h{i}", f"half-{i}"))
        h.write(resource_claim(f"half-{i}", result(f"half-{i}", pool="b-0"), node="b-0", reserved=(f"h{i}",)))
        h.bind(f"h{i}", "b-0")
    # Pending with its claim not allocated yet: fine.
    h.create(dra_pod("waiting", "w")).write(resource_claim("w"))
    return h


def kinds(found: list[Violation]) -> list[str]:
    return sorted(v.kind for v in found)


def test_a_clean_run_with_devices_has_no_violation() -> None:
    assert check(clean().run()) == []


def test_a_device_in_two_claims_at_once() -> None:
    h = clean()
    h.create(dra_pod("p4", "c4")).write(resource_claim("c4", result("gpu-1"), reserved=("p4",))).bind("p4", "a-0")
    found = check(h.run())
    assert kinds(found) == ["device-twice"], found
    assert found[0].subject == f"{DRIVER}/a-0/gpu-1" and f"{NS}/c4" in found[0].detail
    assert f"{NS}/p2-gpu-x" in found[0].detail


def test_a_device_taken_whole_while_shared_and_twice_in_one_claim() -> None:
    h = clean()
    h.write(resource_claim("whole-nic", result("nic")))
    assert kinds(check(h.run())) == ["claim-leaked", "device-twice"]
    h = clean()
    h.write(resource_claim("greedy", result("gpu-1"), result("gpu-1"), reserved=("p2",)))
    assert "device-twice" in kinds(check(h.run()))


def test_a_device_given_twice_only_for_a_moment_is_still_found() -> None:
    h = clean()
    h.write(resource_claim("brief", result("gpu-1"))).drop("brief")
    found = check(h.run())
    assert kinds(found) == ["device-twice"] and found[0].at is not None


def test_shares_over_the_device_capacity() -> None:
    h = clean()
    h.create(dra_pod("n2", "nic-2")).write(resource_claim("nic-2", share("nic", "s2", "1G"), reserved=("n2",)))
    h.bind("n2", "a-0")
    found = check(h.run())
    assert kinds(found) == ["device-over-capacity"], found
    assert found[0].subject == f"{DRIVER}/a-0/nic" and "bandwidth: 1.1e+10" in found[0].detail


def test_a_counter_set_over_its_counters() -> None:
    h = clean()
    h.create(dra_pod("w0", "whole")).write(resource_claim("whole", result("whole", pool="b-0"), node="b-0",
                                                          reserved=("w0",))).bind("w0", "b-0")
    found = check(h.run())
    assert kinds(found) == ["counters-over"], found
    assert found[0].subject == f"{DRIVER}/b-0/mem" and "80Gi" not in found[0].detail
    assert "memory: 8.58993e+10 consumed > 4.29497e+10" in found[0].detail


def test_a_counter_set_of_an_older_generation_is_not_read() -> None:
    """A republished pool (a new generation) is judged by its newest slices only."""
    h = clean()
    old = slice_("b-0", {"name": "half-0"}, counters={"memory": "1Gi"}, generation=0)
    assert check(h.run(resource_slices=[*SLICES, old])) == []


@pytest.mark.parametrize("plant, why", [
    ("unallocated", "is not allocated"),
    ("elsewhere", "is allocated elsewhere"),
    ("unreserved", "is not reserved for it"),
    ("missing", "does not exist"),
])
def test_a_bound_pod_whose_claim_is_not_allocated_on_its_node_or_not_reserved(plant: str, why: str) -> None:
    h = clean()
    h.create(dra_pod("p5", "c5"))
    if plant == "unallocated":
        h.write(resource_claim("c5"))
    elif plant == "elsewhere":
        h.write(resource_claim("c5", result("half-0", pool="b-0"), node="b-0", reserved=("p5",)))
    elif plant == "unreserved":
        h.write(resource_claim("c5", result("gpu-1"), reserved=("p2",)))
    h.bind("p5", "a-0")
    found = [v for v in check(h.run()) if v.kind == "dra-pod-claims"]
    assert [v.subject for v in found] == [f"{NS}/p5", f"{NS}/p5"], found  # at its bind, and at the end
    assert all(why in v.detail for v in found), found


def test_a_claim_allocated_just_after_the_bind_is_within_the_slack() -> None:
    """The pod and claim watches are separate streams: a claim write seen a moment after the
    bind it preceded is not a violation; one seen long after is."""
    h = clean()
    h.create(dra_pod("p6", "c6")).bind("p6", "a-0")
    h.write(resource_claim("c6", result("gpu-1"), reserved=("p6",), owner="p6"))
    h.write(resource_claim("p2-gpu-x", result("gpu-1"), reserved=("p2",), owner="p2"))  # (unchanged)
    assert [v.kind for v in check(h.run()) if v.kind == "dra-pod-claims"] == []
    assert [v.kind for v in check(h.run(spread_slack=0.5)) if v.kind == "dra-pod-claims"] == ["dra-pod-claims"]


def test_a_claim_reserved_for_a_pod_that_is_gone() -> None:
    h = clean()
    h.delete("p3")
    found = check(h.run())
    assert kinds(found) == ["claim-reserved-for-gone"] and found[0].subject == f"{NS}/c3"


def test_a_leaked_allocation() -> None:
    """Allocated, no pod left that uses it, no owner: its device is lost."""
    h = clean()
    h.write(resource_claim("c3", result("gpu-0"))).delete("p3")
    found = check(h.run())
    assert kinds(found) == ["claim-leaked"] and found[0].subject == f"{NS}/c3"
    # Its owner still there (a template claim of a pod not scheduled yet): not a leak.
    h = clean()
    h.create(dra_pod("p7", "p7-gpu", template=True)).write(resource_claim("p7-gpu", result("gpu-1", pool="b-0"), owner="p7"))
    h.write(resource_claim("p2-gpu-x", owner="p2"))
    assert "claim-leaked" not in kinds(check(h.run()))


def test_a_finalizer_left_on_a_deleted_claim() -> None:
    h = clean()
    leftover = resource_claim("old")
    leftover["metadata"].update(finalizers=[FINALIZER], deletionTimestamp="2026-12-07T10:00:00Z")
    h.write(leftover)
    found = check(h.run())
    assert kinds(found) == ["claim-finalizer-left"] and found[0].subject == f"{NS}/old"


def test_a_device_allocated_while_tainted() -> None:
    h = clean()
    taint = ((DRIVER, "a-0", "gpu-2"), h.clock - 20.0, h.clock + 30.0)
    h.create(dra_pod("p8", "c8")).write(resource_claim("c8", result("gpu-2"), reserved=("p8",))).bind("p8", "a-0")
    found = check(h.run(device_taints=[taint]))
    assert kinds(found) == ["tainted-device-allocated"] and found[0].subject == f"{NS}/c8"
    # Tainted after it was allocated, or just before (the scheduler had not seen it): fine.
    late = ((DRIVER, "a-0", "gpu-2"), h.clock, h.clock + 30.0)
    just_before = ((DRIVER, "a-0", "gpu-2"), h.clock - 4.0, h.clock + 30.0)
    assert check(h.run(device_taints=[late, just_before])) == []
    # Tolerated: fine.
    h = clean()
    tolerated = result("gpu-2", tolerations=[{"operator": "Exists"}])
    h.create(dra_pod("p8", "c8")).write(resource_claim("c8", tolerated, reserved=("p8",))).bind("p8", "a-0")
    assert check(h.run(device_taints=[taint])) == []


def test_a_dra_backed_extended_resource_is_not_node_allocatable() -> None:
    h = clean()
    h.place(pod("ext", extra={"chaos.example/acc": "1"}), "b-0")
    assert kinds(check(h.run())) == ["over-allocatable"]
    assert check(h.run(dra_extended=frozenset({"chaos.example/acc"}))) == []


def test_every_dra_check_is_exercised_here() -> None:
    assert {"device-twice", "device-over-capacity", "counters-over", "dra-pod-claims", "settled-claims",
            "tainted-device-allocated"} <= set(CHECKS)


def test_the_pod_history_is_still_judged() -> None:
    """The DRA fields leave the other checks as they were."""
    h = clean()
    h.place(pod("heavy", cpu="4"), "a-0")
    assert kinds(check(h.run())) == ["over-allocatable"]
    assert NODES
