"""Shared GPUs offline: simulate takes devices from the snapshot, explain shows what each GPU has free.

The shipped example config/snapshot-devices.yaml (see its header): gpu-a100 with two 40960 MiB
A100s, ml/notebook holding 20480 MiB and 50% of GPU-a100-0; gpu-t4 with four 15360 MiB T4s,
GPU-t4-3 unhealthy; gpu-broken with an unreadable inventory; cpu-only without GPUs.
Queue order (by age): train (1 whole GPU), infer-1..4 (6144 MiB, 25% each), big-model
(30720 MiB, 50%, A100 only), no-t4 (4096 MiB, not on T4s), too-big (65536 MiB), web.
"""

from __future__ import annotations

import random

from extender.cluster.memory_binder import MemoryBinder
from extender.cluster.snapshot import load_into, read_snapshot
from extender.cluster.state import ClusterState
from extender.cycle.pod import schedule_one
from extender.model.devices import ASSIGNMENT_ANNOTATION, parse_assignment
from extender.policy.engine import Engine
from extender.policy.loading import load_policy_file
from tests.explain.gpu_examples import SHARED_PLACEMENTS, assert_gpu_notes, explained, simulated
from tests.helpers import ROOT

SNAPSHOT = ROOT / "config" / "snapshot-devices.yaml"
POLICY = ROOT / "config" / "policy-devices.yaml"


def test_simulate_places_gpu_pods_by_free_device_shares() -> None:
    placed, reasons = simulated(SNAPSHOT, POLICY)
    # web (CPU only) scores the same on gpu-broken and cpu-only: the seeded tie-break picks one.
    assert placed.pop("ml/web") in {"gpu-broken", "cpu-only"}
    # train takes the untouched A100 whole (binpack prefers the busier node; a whole device there
    # is free). infer-1 and -2 then fill GPU-a100-0's cores (50 + 25 + 25); infer-3 and -4 go to
    # the T4s. no-t4 asks for memory only (no cores) and fits beside them on GPU-a100-0.
    assert placed == SHARED_PLACEMENTS
    # big-model: GPU-a100-1 is taken whole, GPU-a100-0 has 8192 MiB and no cores left.
    assert reasons["ml/big-model"].startswith(
        "0/4 nodes are available: 1 Insufficient GPU cores, 1 Insufficient GPU memory, "
        "1 node(s) had an unreadable GPU inventory, 1 node(s) had no shared GPUs, "
        "1 node(s) had too few GPUs of the requested type. preemption: ")
    assert "2 node(s) had too few GPUs large enough for the request. preemption: 0/4 nodes are available: " \
        "4 Preemption is not helpful for scheduling." in reasons["ml/too-big"]


def test_simulated_binds_record_assignments_so_later_pods_see_them() -> None:
    """The in-memory bind applies the Binding's annotation: infer-3 would fit on GPU-a100-0 by memory
    (8192 MiB left after infer-1 and -2) if those binds had not taken its last cores."""
    snapshot = read_snapshot(SNAPSHOT)
    state = ClusterState(assume_ttl=float("inf"))
    load_into(state, snapshot)
    engine = Engine(load_policy_file(POLICY))
    binder = MemoryBinder(state)
    pod = state.pod("ml/infer-1").view  # type: ignore[union-attr]
    result = schedule_one(engine, state, pod, rng=random.Random(0))
    reserved = engine.reserve(pod, state.node_info(result.node), state)  # type: ignore[arg-type]
    assert isinstance(reserved, list)
    binder.bind(pod.namespace, pod.name, pod.uid, result.node or "", annotations=reserved[0].annotations)
    record = state.pod("ml/infer-1")
    assert record is not None and record.devices == (("GPU-a100-0", 6144, 25),)
    assert state.device_use("gpu-a100").used("GPU-a100-0").memory == 20480 + 6144
    assert parse_assignment(reserved[0].annotations[ASSIGNMENT_ANNOTATION]).node == "gpu-a100"


def test_explain_shows_each_devices_free_share() -> None:
    body = explained("ml/big-model", SNAPSHOT, POLICY)
    notes = assert_gpu_notes(body)
    assert any(n.startswith("GPUs on gpu-broken: unusable inventory: ") for n in notes)
    rows = {row["node"]: row for row in body["nodes"]}
    assert rows["gpu-t4"]["reason"] == "node(s) had too few GPUs of the requested type"
    assert "0 of 4 GPUs match the type rules" in rows["gpu-t4"]["detail"]


def test_explain_adds_no_device_notes_for_other_pods() -> None:
    assert "notes" not in explained("ml/web", SNAPSHOT, POLICY)
