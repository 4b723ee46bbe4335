"""The chaos run's DRA workload (bench/chaos/workload.py) checked offline: each kind's claims
parse and can be allocated on the pools' slices by the allocator the oracle uses, the
partitionable device and the NIC shares are bounded as intended, and the pod bodies name
their claims."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from bench.chaos.oracle import Oracle
from bench.chaos.workload import (
    DRA_API,
    DRA_CLASSES,
    DRA_EXTENDED,
    DRA_KINDS,
    DRA_TEMPLATES,
    NAMESPACE,
    STANDALONE,
    WEBHOOK,
    dra_slices,
    pod_body,
    shared_claim,
)
from extender.dra.objects import ResourceSlice


def node(name: str, pool: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "chaos.example/pool": pool}},
            "spec": {}, "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "16"},
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


NODES = [node(f"sa-{i}", "sa") for i in range(5)]


def classes() -> list[dict[str, Any]]:
    found = []
    for name, selector in DRA_CLASSES.items():
        spec: dict[str, Any] = {"selectors": [{"cel": {"expression": selector}}]}
        if name == "chaos-acc":
            spec["extendedResourceName"] = DRA_EXTENDED
        found.append({"apiVersion": DRA_API, "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec})
    return found


def claim_from(template: str, name: str, owner: str = "") -> dict[str, Any]:
    """A claim with a template's requests (made for pod `owner`, as the controller makes it)."""
    meta: dict[str, Any] = {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner, "uid": f"uid-{owner}",
                                    "controller": True, "blockOwnerDeletion": True}]
    return {"apiVersion": DRA_API, "kind": "ResourceClaim", "metadata": meta,
            "spec": {"devices": {"requests": DRA_TEMPLATES[template]}}}


def as_made(pod: dict[str, Any], claim: str) -> dict[str, Any]:
    """The pod as the resourceclaim-controller leaves it: its template's claim named in its status."""
    pod["metadata"]["uid"] = f"uid-{pod['metadata']['name']}"
    entries = pod["spec"].get("resourceClaims") or []
    pod["status"] = {"phase": "Pending", "resourceClaimStatuses": [
        {"name": e["name"], "resourceClaimName": claim} for e in entries if e.get("resourceClaimTemplateName")]}
    return pod


def oracle(claims: list[dict[str, Any]], bound: list[dict[str, Any]] = ()) -> Oracle:  # type: ignore[assignment]
    dra = {"deviceclasses": classes(), "resourceslices": [s for n in NODES for s in dra_slices(n["metadata"]["name"])],
           "resourceclaims": claims}
    return Oracle(NODES, list(bound), {}, dra=dra)


def test_every_slice_parses() -> None:
    for name, count in (("sa-0", 1), ("sa-2", 1), ("wh-4", 2)):
        parsed = [ResourceSlice.parse(s) for s in dra_slices(name, generation=3)]
        assert len(parsed) == count and {(p.pool, p.generation, p.slice_count) for p in parsed} == {(name, 3, count)}
    assert {d.name for d in ResourceSlice.parse(dra_slices("sa-2")[0]).devices} == {"acc-0", "acc-1", "nic"}
    devices, counters = (ResourceSlice.parse(s) for s in dra_slices("sa-3"))
    assert {d.name for d in devices.devices} == {"acc-0", "nic", "part-whole", "part-half-0", "part-half-1"}
    assert not devices.shared_counters and [c.name for c in counters.shared_counters] == ["mem"]


@pytest.mark.parametrize("kind", [k for k in DRA_KINDS if k not in ("dra-shared", "dra-ext")])
def test_each_template_kind_can_be_allocated(kind: str) -> None:
    body, pvc = pod_body(kind, f"sa-{kind}-1", STANDALONE, random.Random(1))
    assert pvc is None
    (entry,) = body["spec"]["resourceClaims"]
    assert body["spec"]["containers"][0]["resources"]["claims"] == [{"name": entry["name"]}]
    claim = claim_from(entry["resourceClaimTemplateName"], "c", owner=f"sa-{kind}-1")
    assert oracle([claim]).fits(as_made(body, "c")).startswith("sa-")


def test_first_available_prefers_the_big_accelerators() -> None:
    body, _ = pod_body("dra-first", "sa-first-1", STANDALONE, random.Random(1))
    assert oracle([claim_from("first", "c", owner="sa-first-1")]).fits(as_made(body, "c")) in ("sa-0", "sa-1")


def test_a_shared_claim_and_an_extended_resource() -> None:
    rng = random.Random(2)
    pods = [as_made(pod_body("dra-shared", f"wh-shared-5-{i}", WEBHOOK, rng, shared="wh-shared-5")[0], "")
            for i in range(2)]
    assert all(p["spec"]["resourceClaims"] == [{"name": "dev", "resourceClaimName": "wh-shared-5"}] for p in pods)
    assert shared_claim("wh-shared-5")["spec"]["devices"]["requests"] == DRA_TEMPLATES["acc"]
    ext, _ = pod_body("dra-ext", "sa-ext-1", STANDALONE, rng)
    assert ext["spec"]["containers"][0]["resources"]["limits"] == {DRA_EXTENDED: "1"}
    assert oracle([]).fits(as_made(ext, "")).startswith("sa-")


def test_partitions_and_shares_are_bounded() -> None:
    """Two halves fill a partitionable device's counter set: a whole one no longer fits there;
    NIC shares stop at its 10G."""
    halves = [claim_from("part-half", f"h{i}") for i in range(5)]  # 2 halves on each of sa-3 and sa-4
    whole = claim_from("part-whole", "w")
    pods = [as_made(pod_body("dra-part", f"sa-part-{i}", STANDALONE, random.Random(0))[0], f"h{i}")
            for i in range(5)]
    for p, c in zip(pods, halves, strict=True):
        p["spec"]["resourceClaims"] = [{"name": "dev", "resourceClaimName": c["metadata"]["name"]}]
        p["status"] = {"phase": "Pending"}
    placed = oracle([*halves, whole]).placed(pods)
    assert len(placed) == 4 and sorted(set(placed.values())) == ["sa-3", "sa-4"]
    whole_pod = copy.deepcopy(pods[0])
    whole_pod["metadata"]["name"] = "sa-part-whole"
    whole_pod["spec"]["resourceClaims"] = [{"name": "dev", "resourceClaimName": "w"}]
    assert oracle([*halves, whole]).fits(whole_pod) in ("sa-3", "sa-4")
    assert len(oracle([*halves, whole]).placed([pods[0], whole_pod])) == 2  # a half and the whole: two nodes
    nics = [claim_from("nic-4", f"n{i}") for i in range(11)]
    nic_pods = []
    for i, c in enumerate(nics):
        p = as_made(pod_body("dra-nic", f"sa-nic-{i}", STANDALONE, random.Random(0))[0], "")
        p["spec"]["resourceClaims"] = [{"name": "dev", "resourceClaimName": c["metadata"]["name"]}]
        nic_pods.append(p)
    assert len(oracle(nics).placed(nic_pods)) == 10  # 2 shares of 4G per 8G NIC, 5 nodes
