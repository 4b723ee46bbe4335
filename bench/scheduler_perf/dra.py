"""The objects of scheduler_perf's DRA opcodes, built apart from the API calls that send them.

``createResourceDriver`` (test/integration/scheduler_perf/dra.go, createResourceDriverOp)
publishes one ResourceSlice per node whose name matches a glob: :func:`resource_slice`
is its ``resourceSlice``, :func:`driver_nodes` its ``filepath.Match`` over the node names.

``allocResourceClaims`` (dra.go, allocResourceClaimsOp) allocates claims that no pod uses
yet, one at a time, each on the first of the nodes (shuffled anew for each claim) where the
structured allocator finds devices, counting the devices of every claim allocated so far
as in use. It writes ``status.allocation`` only: no ``reservedFor``, no finalizer, no
allocation timestamp. :func:`plan_allocations` makes those decisions; it runs the same
structured allocator the scheduler under test runs (``extender.dra``), as the Go op runs
kube-scheduler's (``structured.NewAllocator``), since the point is a realistic starting
state, not a check. The invariants (invariants.py) never use it.
"""

from __future__ import annotations

import fnmatch
import random
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from extender.dra.allocator import NodeAllocation, allocate
from extender.dra.objects import (
    DeviceClass,
    DeviceID,
    Pool,
    PoolCache,
    ResourceClaim,
    ResourceSlice,
    gather_pools,
)

API = "resource.k8s.io/v1"
#: The attributes and capacity dra.go's resourceSlice gives every device.
DEVICE_ATTRIBUTES = {
    "model": {"string": "A100"},
    "family": {"string": "GPU"},
    "driverVersion": {"version": "1.2.3"},
}
DEVICE_CAPACITY = {"memory": {"value": "1Gi"}}


class AllocationFailed(Exception):
    """No node has room for a claim (dra.go: "Could not allocate claim %d out of %d")."""


def resource_slice(driver: str, node: str, capacity: int) -> dict[str, Any]:
    """dra.go resourceSlice: a slice named after the node, a pool of that name with one
    slice, and ``capacity`` devices ``instance-<i>`` (the NUMA attribute is the index)."""
    devices = [{"name": f"instance-{i}",
                "attributes": {**DEVICE_ATTRIBUTES, "dra.example.com/numa": {"int": i}},
                "capacity": dict(DEVICE_CAPACITY)} for i in range(capacity)]
    return {"apiVersion": API, "kind": "ResourceSlice", "metadata": {"name": node},
            "spec": {"driver": driver, "nodeName": node, "pool": {"name": node, "resourceSliceCount": 1},
                     "devices": devices}}


def driver_nodes(pattern: str, names: Iterable[str]) -> list[str]:
    """The node names matching the glob, in list order. Go's filepath.Match differs from
    fnmatch only about '/', which a node name cannot hold."""
    return [name for name in names if fnmatch.fnmatchcase(name, pattern)]


def allocated_devices(claims: Iterable[Mapping[str, Any]]) -> set[DeviceID]:
    """The devices of every claim's status.allocation."""
    used = set()
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            used.add(DeviceID(result["driver"], result["pool"], result["device"]))
    return used


def plan_allocations(claims: list[dict[str, Any]], nodes: list[dict[str, Any]], slices: list[dict[str, Any]],
                     classes: list[dict[str, Any]], others: Iterable[Mapping[str, Any]] = (),
                     rng: random.Random | None = None) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(claim, its status.allocation) for each of ``claims`` not allocated yet, in order.

    ``others`` are the cluster's claims outside ``claims`` (their devices are in use too).
    Raises AllocationFailed when a claim fits on no node, as the Go op fails the test.
    """
    rng = rng or random.Random()
    by_class = {c.name: c for c in map(DeviceClass.parse, classes)}
    parsed = [ResourceSlice.parse(s) for s in slices]
    local: dict[str, list[ResourceSlice]] = {}
    shared: list[ResourceSlice] = []
    for slice_ in parsed:  # a node only needs its own slices and those not bound to one node
        (local.setdefault(slice_.node_name, []) if slice_.node_name else shared).append(slice_)
    targets = [(n["metadata"]["name"], (n["metadata"].get("labels") or {})) for n in nodes]
    in_use = allocated_devices([*claims, *others])
    # The slices do not change during the op: each node's pools are gathered once (and a pool
    # every node reaches is one object), not once per claim and node tried.
    built: PoolCache = {}
    pools_of: dict[str, list[Pool]] = {}
    for index, raw in enumerate(claims):
        if (raw.get("status") or {}).get("allocation"):
            continue
        claim = ResourceClaim.parse(raw)
        rng.shuffle(targets)
        for name, labels in targets:
            pools = pools_of.get(name)
            if pools is None:
                pools = pools_of[name] = gather_pools([*local.get(name, ()), *shared], name, labels,
                                                      all_slices=parsed, built=built)
            result = allocate([claim], name, labels, pools, by_class.get, in_use)
            if isinstance(result, NodeAllocation):
                allocation = result.allocations[0]
                in_use.update(r.id for r in allocation.results)
                yield raw, allocation.to_api()
                break
        else:
            raise AllocationFailed(f"could not allocate claim {index} out of {len(claims)} "
                                   f"({raw['metadata'].get('namespace')}/{raw['metadata']['name']})")
