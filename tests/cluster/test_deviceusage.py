"""Device use in the cluster state: derived from the pods' assignments, claims in flight, departures."""

from __future__ import annotations

from typing import Any

from extender.cluster.state import ClusterState
from extender.model.devices import ASSIGNMENT_ANNOTATION, Use
from tests.devicebuilders import assignment_text, gpu, gpu_node_dict, gpu_pod_dict
from tests.helpers import Clock

CAPACITY = {"GPU-0": (16000, 100), "GPU-1": (16000, 100)}


def _state(*pods: dict[str, Any], clock: Clock | None = None) -> ClusterState:
    state = ClusterState(clock=clock or Clock(1000.0), assume_ttl=30.0)
    state.replace_nodes([gpu_node_dict("t4", [gpu("GPU-0", 16000), gpu("GPU-1", 16000)])])
    state.replace_pods(pods)
    return state


def _bound(name: str, device: str = "GPU-0", memory: int = 4000, cores: int = 10, **kwargs: Any) -> dict[str, Any]:
    return gpu_pod_dict(name, memory=memory, cores=cores, node="t4",
                        assignment={"main": [(device, memory, cores)]}, **kwargs)


def test_a_restart_rebuilds_use_from_the_annotations() -> None:
    state = _state(_bound("a"), _bound("b", "GPU-1", 6000, 0), _bound("c", memory=2000, cores=0),
                   gpu_pod_dict("pending", memory=1000), _bound("done", phase="Succeeded"))
    use = state.device_use("t4")
    assert use.used("GPU-0") == Use(6000, 10, 2) and use.used("GPU-1") == Use(6000, 0, 1)
    assert set(use.holders) == {"uid-default-a", "uid-default-b", "uid-default-c"}


def test_watch_events_keep_use_in_step() -> None:
    state = _state()
    state.upsert_pod(_bound("a"))
    assert state.device_use("t4").used("GPU-0") == Use(4000, 10, 1)
    state.upsert_pod(_bound("a", phase="Succeeded"))  # finished: frees its share
    assert state.device_use("t4").used("GPU-0") == Use()
    assert "uid-default-a" in state.device_use("t4").gone
    state.upsert_pod(_bound("b"))
    state.delete_pod("default/b")
    assert state.device_use("t4").used("GPU-0") == Use()
    assert "uid-default-b" in state.device_use("t4").gone


def test_a_claim_counts_until_the_bound_pod_brings_its_assignment() -> None:
    pending = gpu_pod_dict("p", memory=4000, cores=10)
    state = _state(pending)
    claimed = state.claim_devices("t4", "default/p", "uid-default-p", (("GPU-0", 4000, 10),), CAPACITY)
    assert claimed is not None
    token, use = claimed
    assert use.used("GPU-0") == Use(4000, 10, 1) and use.holders["uid-default-p"] == (("GPU-0", 4000, 10),)
    state.assume("default/p", "t4", uid="uid-default-p")  # the binder's assumption: no assignment yet
    assert state.device_use("t4").used("GPU-0") == Use(4000, 10, 1)
    state.upsert_pod(_bound("p"))  # the watch: the pod bound, with its annotation
    assert state.device_use("t4").used("GPU-0") == Use(4000, 10, 1)  # counted once, from the pod now
    state.release_devices(token)  # too late to matter: the claim is gone already
    assert state.device_use("t4").used("GPU-0") == Use(4000, 10, 1)
    assert "uid-default-p" not in state.device_use("t4").released


def test_claims_are_checked_against_capacity_and_released_on_failure() -> None:
    state = _state(_bound("a", memory=12000))
    assert state.claim_devices("t4", "default/p", "u1", (("GPU-0", 5000, 0),), CAPACITY) is None
    claimed = state.claim_devices("t4", "default/p", "u1", (("GPU-0", 4000, 90),), CAPACITY)
    assert claimed is not None
    assert state.claim_devices("t4", "default/q", "u2", (("GPU-0", 1, 1),), CAPACITY) is None  # cores full
    state.release_devices(claimed[0])
    assert state.device_use("t4").used("GPU-0") == Use(12000, 10, 1)
    assert "u1" in state.device_use("t4").released


def test_a_claim_can_move_in_one_step_and_stays_put_when_the_move_does_not_fit() -> None:
    state = _state(_bound("a", "GPU-1", memory=12000))
    first = state.claim_devices("t4", "default/p", "u1", (("GPU-0", 10000, 0),), CAPACITY)
    assert first is not None
    moved = state.claim_devices("t4", "default/p", "u1", (("GPU-0", 16000, 0),), CAPACITY, replacing=first[0])
    assert moved is not None  # fits once its own old claim is out of the way
    assert state.device_use("t4").used("GPU-0") == Use(16000, 0, 1) and not state.device_use("t4").released
    assert state.claim_devices("t4", "default/p", "u1", (("GPU-1", 8000, 0),), CAPACITY, replacing=moved[0]) is None
    assert state.device_use("t4").used("GPU-0") == Use(16000, 0, 1)  # the failed move kept the old claim
    state.release_devices(moved[0])
    assert state.device_use("t4").used("GPU-0") == Use()


def test_a_deleted_or_recreated_pod_drops_its_claim() -> None:
    state = _state(gpu_pod_dict("p", memory=1000, uid="old"))
    assert state.claim_devices("t4", "default/p", "old", (("GPU-0", 1000, 0),), CAPACITY) is not None
    state.upsert_pod(gpu_pod_dict("p", memory=1000, uid="new"))
    assert state.device_use("t4").used("GPU-0") == Use()
    assert "old" in state.device_use("t4").gone
    assert state.claim_devices("t4", "default/p", "new", (("GPU-0", 1000, 0),), CAPACITY) is not None
    state.delete_pod("default/p")
    assert state.device_use("t4").used("GPU-0") == Use()


def test_claims_expire_with_the_assume_ttl() -> None:
    clock = Clock(1000.0)
    state = _state(gpu_pod_dict("p", memory=1000), clock=clock)
    state.claim_devices("t4", "default/p", "uid-default-p", (("GPU-0", 1000, 0),), CAPACITY)
    clock.now += 29
    state.expire_assumed()
    assert state.device_use("t4").used("GPU-0").memory == 1000
    clock.now += 2
    state.expire_assumed()
    assert state.device_use("t4").used("GPU-0") == Use()


def test_confirm_records_the_bindings_assignment_in_memory_mode() -> None:
    state = _state(gpu_pod_dict("p", memory=3000))
    token_use = state.claim_devices("t4", "default/p", "uid-default-p", (("GPU-1", 3000, 0),), CAPACITY)
    assert token_use is not None
    state.confirm("default/p", "t4",
                  annotations={ASSIGNMENT_ANNOTATION: assignment_text("t4", {"main": [("GPU-1", 3000, 0)]})})
    assert state.pod("default/p").devices == (("GPU-1", 3000, 0),)  # type: ignore[union-attr]
    assert state.device_use("t4").used("GPU-1") == Use(3000, 0, 1)


def test_a_relist_counts_pods_gone_during_a_broken_watch_as_departed() -> None:
    state = _state(_bound("a"), _bound("b", "GPU-1"))
    state.replace_pods([_bound("b", "GPU-1")])
    use = state.device_use("t4")
    assert use.used("GPU-0") == Use() and "uid-default-a" in use.gone


def test_departures_are_forgotten_after_the_ledger_ttl() -> None:
    wall = Clock(1000.0)
    state = _state(_bound("a"))
    state.devices._wall = wall  # departures are on the wall clock (the ledger's, shared by processes)
    state.delete_pod("default/a")
    assert "uid-default-a" in state.device_use("t4").gone
    wall.now += 61
    state.upsert_pod(_bound("b", "GPU-1"))
    assert state.device_use("t4").gone == frozenset()
