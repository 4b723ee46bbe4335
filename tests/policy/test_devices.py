"""DeviceFit and DeviceAllocation through the engine, over a cluster state holding GPU nodes and pods."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from extender.cluster.state import ClusterState
from extender.errors import PolicyError
from extender.model.devices import ASSIGNMENT_ANNOTATION, LedgerClaim, Use, parse_assignment
from extender.model.pods import PodView
from extender.model.records import record_from_dict
from extender.policy.builtin import DeviceAllocation, DeviceFit
from extender.policy.cluster_view import EMPTY_CLUSTER, PodChange
from extender.policy.engine import Engine, Policy, WeightedScorer
from extender.policy.registry import Registry
from extender.policy.reservations import Reservation, release_all
from extender.policy.status import Code, Status
from tests.devicebuilders import gpu, gpu_node_dict, gpu_pod_dict
from tests.policy.builders import node_dict


def _state(*objects: dict[str, Any]) -> ClusterState:
    state = ClusterState()
    state.replace_nodes([o for o in objects if o.get("kind") != "Pod"])
    state.replace_pods([o for o in objects if o.get("kind") == "Pod"])
    return state


def _pod(name: str = "p", **kwargs: Any) -> PodView:
    return PodView.from_dict(gpu_pod_dict(name, **kwargs))


def _engine(fit: DeviceFit | None = None, allocation: DeviceAllocation | None = None) -> Engine:
    scorers = (WeightedScorer(allocation, 1),) if allocation is not None else ()
    return Engine(Policy(filters=(fit or DeviceFit(),), scorers=scorers))


TWO_T4 = [gpu("GPU-0"), gpu("GPU-1")]


def test_args_are_validated(registry: Registry) -> None:
    assert registry.build_filter("DeviceFit", {"strategy": "spread"}) == DeviceFit("spread")
    assert registry.build_scorer("DeviceAllocation", {}) == DeviceAllocation("binpack")
    with pytest.raises(PolicyError, match="strategy: 'packed' is not one of binpack, spread"):
        registry.build_filter("DeviceFit", {"strategy": "packed"})
    with pytest.raises(PolicyError, match="unknown argument"):
        registry.build_scorer("DeviceAllocation", {"devices": "spread"})


def test_pods_without_device_requests_are_not_touched() -> None:
    state = _state(node_dict("plain"), gpu_node_dict("broken", raw="nope"))
    decision = _engine().filter(PodView.from_dict(gpu_pod_dict("web", containers=[{"name": "c"}])),
                                state.all_node_infos(), state)
    assert [i.name for i in decision.feasible] == ["plain", "broken"]


def test_fit_counts_bound_pods_assignments() -> None:
    state = _state(
        gpu_node_dict("full", TWO_T4), gpu_node_dict("roomy", TWO_T4),
        gpu_pod_dict("a", memory=16000, node="full", assignment={"main": [("GPU-0", 16000, 0)]}),
        gpu_pod_dict("b", memory=10000, node="full", assignment={"main": [("GPU-1", 10000, 0)]}),
    )
    decision = _engine().filter(_pod(memory=8000), state.all_node_infos(), state)
    assert [i.name for i in decision.feasible] == ["roomy"]
    status = decision.failed["full"]
    assert (status.code, status.reasons, status.plugin) == (Code.UNSCHEDULABLE, ("Insufficient GPU memory",),
                                                            "DeviceFit")
    assert "GPU-1 (Tesla-T4) 6384/16384 MiB" in status.detail


def test_nodes_that_can_never_fit_are_unresolvable_and_others_unaffected() -> None:
    state = _state(node_dict("cpu"), gpu_node_dict("broken", raw='{"devices": 3}'), gpu_node_dict("t4", TWO_T4))
    decision = _engine().filter(_pod(memory=32000), state.all_node_infos(), state)
    reasons = {name: (s.code, s.reason) for name, s in decision.failed.items()}
    assert reasons == {
        "cpu": (Code.UNRESOLVABLE, "node(s) had no shared GPUs"),
        "broken": (Code.UNRESOLVABLE, "node(s) had an unreadable GPU inventory"),
        "t4": (Code.UNRESOLVABLE, "node(s) had too few GPUs large enough for the request"),
    }
    assert "devices: expected a list" in decision.failed["broken"].detail
    assert decision.summary().startswith("0/3 nodes are available")


def test_an_invalid_request_refuses_every_node_once() -> None:
    state = _state(gpu_node_dict("t4", TWO_T4))
    decision = _engine().filter(_pod(cores=150), state.all_node_infos(), state)
    status = decision.failed["t4"]
    assert (status.code, status.reason) == (Code.UNRESOLVABLE, "pod has an invalid GPU request")
    assert "from 0 to 100, not 150" in status.detail


def test_reserve_picks_devices_claims_them_and_release_gives_them_back() -> None:
    state = _state(gpu_node_dict("t4", TWO_T4),
                   gpu_pod_dict("a", memory=4000, node="t4", assignment={"main": [("GPU-1", 4000, 0)]}))
    engine = _engine()
    pod = _pod("p", memory=8000, cores=30)
    reserved = engine.reserve(pod, state.node_info("t4"), state)
    assert isinstance(reserved, list) and len(reserved) == 1
    (reservation,) = reserved
    assignment = parse_assignment(reservation.annotations[ASSIGNMENT_ANNOTATION])
    assert assignment.node == "t4" and assignment.containers == (("main", (("GPU-1", 8000, 30),)),)  # binpack
    (claim,) = reservation.actions
    assert isinstance(claim, LedgerClaim)
    assert (claim.node, claim.pod, claim.ident, claim.shares) == ("t4", "default/p", "uid-default-p",
                                                                  (("GPU-1", 8000, 30),))
    assert claim.capacity == {"GPU-1": (16384, 100)}
    assert state.device_use("t4").used("GPU-1") == (12000, 30, 2)  # counted at once
    assert claim.use.holders["uid-default-p"] == (("GPU-1", 8000, 30),)
    release_all(reserved)
    assert state.device_use("t4").used("GPU-1") == (4000, 0, 1)
    assert "uid-default-p" in state.device_use("t4").released


def test_reserve_refuses_when_the_shares_are_gone() -> None:
    state = _state(gpu_node_dict("t4", [gpu("GPU-0")]))
    engine = _engine()
    first = engine.reserve(_pod("a", memory=10000), state.node_info("t4"), state)
    assert isinstance(first, list)
    second = engine.reserve(_pod("b", memory=10000), state.node_info("t4"), state)
    assert isinstance(second, Status) and second.reason == "Insufficient GPU memory"
    release_all(first)
    assert isinstance(engine.reserve(_pod("b", memory=10000), state.node_info("t4"), state), list)


def test_reserve_without_devices_or_for_other_pods_is_nothing() -> None:
    state = _state(node_dict("cpu"))
    engine = _engine()
    assert engine.reserve(PodView.from_dict(gpu_pod_dict("web", containers=[{"name": "c"}])),
                          state.node_info("cpu"), state) == []
    refused = engine.reserve(_pod(gpus=1), state.node_info("cpu"), state)
    assert isinstance(refused, Status) and refused.code == Code.UNRESOLVABLE


def test_spread_strategy_spreads_devices() -> None:
    state = _state(gpu_node_dict("t4", TWO_T4),
                   gpu_pod_dict("a", memory=4000, node="t4", assignment={"main": [("GPU-0", 4000, 0)]}))
    reserved = _engine(DeviceFit("spread")).reserve(_pod(memory=1000), state.node_info("t4"), state)
    assert isinstance(reserved, list)
    assert parse_assignment(reserved[0].annotations[ASSIGNMENT_ANNOTATION]).shares() == (("GPU-1", 1000, 0),)


def test_concurrent_reserves_never_over_allocate_a_device() -> None:
    """32 threads reserve 4000 MiB each on two 16384 MiB devices: exactly 8 get a share."""
    state = _state(gpu_node_dict("t4", TWO_T4))
    engine = _engine()
    info = state.node_info("t4")
    results: list[list[Reservation] | Status] = []
    lock = threading.Lock()
    start = threading.Barrier(32)

    def reserve(i: int) -> None:
        start.wait()
        outcome = engine.reserve(_pod(f"p{i}", memory=4000, cores=10), info, state)
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=reserve, args=(i,)) for i in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    granted = [r for r in results if isinstance(r, list)]
    assert len(results) == 32 and len(granted) == 8
    per_device: dict[str, int] = {}
    for reservation in granted:
        for device_id, memory, _ in reservation[0].actions[0].shares:
            per_device[device_id] = per_device.get(device_id, 0) + memory
    assert per_device == {"GPU-0": 16000, "GPU-1": 16000}
    assert state.device_use("t4").used("GPU-0") == (16000, 40, 4)


def test_allocation_scores_binpack_and_spread() -> None:
    state = _state(
        gpu_node_dict("busy", TWO_T4), gpu_node_dict("idle", TWO_T4),
        gpu_pod_dict("a", memory=8192, cores=50, node="busy", assignment={"main": [("GPU-0", 8192, 50)]}),
    )
    pod = _pod(memory=4096, cores=0)
    nodes = [state.node_info("busy"), state.node_info("idle")]
    binpack = _engine(allocation=DeviceAllocation("binpack")).score(pod, nodes, cluster=state)
    spread = _engine(allocation=DeviceAllocation("spread")).score(pod, nodes, cluster=state)
    busy, idle = binpack.raw_scores["DeviceAllocation"]
    # busy: node (12288/32768 + 50/200)/2 = 31.25%, chosen GPU-0 (12288/16384 + 0.5)/2 = 62.5% -> 47
    # idle: node (4096/32768 + 0)/2 = 6.25%, chosen device (0.25 + 0)/2 = 12.5% -> 9
    assert (busy, idle) == (47, 9)
    # spread puts the pod on the empty GPU-1 of busy: node 31.25%, chosen 12.5% -> 100 - 22 = 78
    assert spread.raw_scores["DeviceAllocation"] == [78, 91]
    assert binpack.totals[0] > binpack.totals[1] and spread.totals[0] < spread.totals[1]


def test_allocation_skips_pods_without_devices_and_scores_unusable_nodes_zero() -> None:
    state = _state(node_dict("cpu"), gpu_node_dict("t4", TWO_T4))
    engine = _engine(allocation=DeviceAllocation())
    web = PodView.from_dict(gpu_pod_dict("web", containers=[{"name": "c"}]))
    assert engine.score(web, state.all_node_infos(), cluster=state).raw_scores == {}
    scored = engine.score(_pod(gpus=1), state.all_node_infos(), cluster=state)
    assert scored.raw_scores["DeviceAllocation"] == [0, 75]  # a whole GPU: node 50% used after, device 100%


def test_one_node_api_sees_an_empty_cluster() -> None:
    info = _state(gpu_node_dict("t4", TWO_T4)).node_info("t4")
    assert DeviceFit().filter(_pod(memory=1000), info) is None
    refusal = DeviceFit().filter(_pod(memory=100000), info)
    assert isinstance(refusal, Status) and refusal.code == Code.UNRESOLVABLE
    assert DeviceAllocation().score(_pod(gpus=2), info) == 100
    assert isinstance(Engine(Policy(filters=(DeviceFit(),))).reserve(_pod(gpus=1), info, EMPTY_CLUSTER), list)


def test_preemption_changes_free_the_victims_shares() -> None:
    victim = gpu_pod_dict("victim", memory=16000, node="t4", assignment={"main": [("GPU-0", 16000, 0)]})
    state = _state(gpu_node_dict("t4", [gpu("GPU-0")]), victim)
    cycle = _engine().prepare(_pod(memory=8000), state)
    info = state.node_info("t4")
    assert cycle.refusal(info) is not None
    record = record_from_dict(victim)
    assert cycle.updated([PodChange(record, info.node, -1)]).refusal(info.without({record.key})) is None
    other = state.node_info("t4").node
    assert cycle.updated([PodChange(record, other, -1), PodChange(record, other, 1)]).refusal(info) is not None


def test_the_ledger_can_move_a_claim_to_other_devices_of_the_node() -> None:
    """What the device ledger does when another process took the chosen shares meanwhile."""
    state = _state(gpu_node_dict("t4", TWO_T4))
    reserved = _engine().reserve(_pod(memory=8000), state.node_info("t4"), state)
    assert isinstance(reserved, list)
    (reservation,) = reserved
    (claim,) = reservation.actions
    assert parse_assignment(reservation.annotations[ASSIGNMENT_ANNOTATION]).shares() == (("GPU-0", 8000, 0),)
    taken = {"uid-elsewhere": (("GPU-0", 16000, 0),)}  # the ledger: another process's bind
    moved = claim.rechoose(taken)
    assert moved == ((("GPU-1", 8000, 0),), {"GPU-1": (16384, 100)})
    assert parse_assignment(reservation.annotations[ASSIGNMENT_ANNOTATION]).shares() == (("GPU-1", 8000, 0),)
    use = state.device_use("t4")
    assert use.used("GPU-0") == Use() and use.used("GPU-1") == Use(8000, 0, 1)
    # Moved, not released: a release would let the ledger drop the entry of a bind in flight.
    assert "uid-default-p" not in use.released
    assert claim.rechoose({"x": (("GPU-0", 16000, 0),), "y": (("GPU-1", 16000, 0),)}) is None  # nowhere to go
    assert state.device_use("t4").used("GPU-1") == Use(8000, 0, 1)  # the claim it had is kept
    release_all(reserved)  # the claim it held, wherever it is now, is given back
    assert state.device_use("t4").used("GPU-1") == Use()
