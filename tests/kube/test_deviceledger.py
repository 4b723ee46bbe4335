"""The device ledger against the API server (the fake, or a real one under envtest).

Each `Ledger` stands for one process (a gunicorn worker, a replica): its own instance id
and cache, the same Leases. What one records, the others must respect.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from extender import metrics
from extender.cluster.memory_binder import MemoryBinder
from extender.cluster.state import ClusterState
from extender.errors import ClusterError, ConflictError, NotFoundError
from extender.kube import deviceledger
from extender.kube.binder import KubeBinder
from extender.kube.client import build_api_client
from extender.kube.deviceledger import LEDGER_ANNOTATION, Ledger, lease_name, read_entries
from extender.model.devices import LedgerClaim, NodeDeviceUse, Use
from tests.fakeapi.rbac import rule
from tests.helpers import Clock

pytestmark = pytest.mark.apiserver

NAMESPACE = "device-ledger-test"
CAPACITY = {"GPU-0": (16000, 100), "GPU-1": (16000, 100)}


def claim(pod: str, shares: tuple[tuple[str, int, int], ...], use: NodeDeviceUse | None = None,
          node: str = "gpu-1") -> LedgerClaim:
    """A claim as DeviceFit.reserve makes it: the process's use includes the pod itself."""
    base = use or NodeDeviceUse()
    holders = {**base.holders, f"uid-{pod}": shares}
    totals = dict(base.totals)
    for device_id, memory, cores in shares:
        before = totals.get(device_id, Use())
        totals[device_id] = Use(before.memory + memory, before.cores + cores, before.pods + 1)
    return LedgerClaim(node, f"default/{pod}", f"uid-{pod}", shares,
                       {d: CAPACITY[d] for d, _, _ in shares},
                       NodeDeviceUse(totals, holders, base.gone, base.released))


@pytest.fixture
def namespace(kube: Any) -> str:
    kube.ensure_namespace(NAMESPACE)
    return NAMESPACE


def entries(kube: Any, node: str = "gpu-1") -> dict[str, Any]:
    lease = kube.get_lease(lease_name(node), NAMESPACE)
    assert lease is not None, "no ledger Lease"
    return json.loads(lease["metadata"]["annotations"][LEDGER_ANNOTATION])["entries"]


def test_the_first_claim_creates_the_lease_and_later_ones_add_to_it(api_client: Any, kube: Any,
                                                                    namespace: str) -> None:
    ledger = Ledger(api_client, namespace=namespace)
    ledger.record(claim("a", (("GPU-0", 4000, 10),)))
    ledger.record(claim("b", (("GPU-1", 8000, 0),)))
    lease = kube.get_lease("gpu-ledger.gpu-1", NAMESPACE)
    assert lease["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "extender"}
    assert lease["metadata"]["annotations"]["extender.example/gpu-ledger-node"] == "gpu-1"
    assert lease["spec"]["holderIdentity"] == ledger.instance
    recorded = entries(kube)
    assert recorded["uid-a"]["pod"] == "default/a" and recorded["uid-a"]["devices"] == {"GPU-0": [4000, 10]}
    assert recorded["uid-b"]["devices"] == {"GPU-1": [8000, 0]}
    assert recorded["uid-a"]["expires"] - recorded["uid-a"]["at"] == pytest.approx(60, abs=0.01)


def test_what_another_process_recorded_is_respected(api_client: Any, namespace: str) -> None:
    """Process 2 has not seen process 1's bind yet (empty use), but the ledger has."""
    first, second = Ledger(api_client, namespace=namespace), Ledger(api_client, namespace=namespace)
    first.record(claim("a", (("GPU-0", 12000, 0),)))
    with pytest.raises(ConflictError, match="GPU shares on node gpu-1 were handed out by another scheduler"):
        second.record(claim("b", (("GPU-0", 8000, 0),)))
    second.record(claim("b", (("GPU-0", 4000, 0),)))  # what is left still fits
    with pytest.raises(ConflictError):
        first.record(claim("c", (("GPU-0", 1, 0),), use=NodeDeviceUse(
            {"GPU-0": Use(12000, 0, 1)}, {"uid-a": (("GPU-0", 12000, 0),)})))


def test_pods_the_process_already_counts_are_not_counted_twice(api_client: Any, namespace: str) -> None:
    """Once process 2's watch shows pod a bound, the ledger entry for a adds nothing more."""
    first, second = Ledger(api_client, namespace=namespace), Ledger(api_client, namespace=namespace)
    first.record(claim("a", (("GPU-0", 8000, 0),)))
    seen = NodeDeviceUse({"GPU-0": Use(8000, 0, 1)}, {"uid-a": (("GPU-0", 8000, 0),)})
    second.record(claim("b", (("GPU-0", 8000, 0),), use=seen))  # 8000 + 8000 <= 16000


def test_expired_departed_and_released_entries_are_dropped(api_client: Any, kube: Any, namespace: str) -> None:
    wall = Clock(1_000_000.0)
    first = Ledger(api_client, namespace=namespace, wall=wall)
    other = Ledger(api_client, namespace=namespace, wall=wall)
    first.record(claim("old", (("GPU-0", 16000, 0),)))
    wall.now += 61
    first.record(claim("gone", (("GPU-0", 16000, 0),)))  # "old" expired: its share is free again
    assert set(entries(kube)) == {"uid-gone"}
    first.record(claim("failed", (("GPU-1", 16000, 0),), use=NodeDeviceUse(gone=frozenset({"uid-gone"}))))
    assert set(entries(kube)) == {"uid-failed"}
    released = NodeDeviceUse(released={"uid-failed": wall.now + 1})  # its bind failed a second later
    other.record(claim("x", (("GPU-0", 1, 0),), use=released))  # released by first, not by other: kept
    assert set(entries(kube)) == {"uid-failed", "uid-x"}
    wall.now += 5
    with pytest.raises(ConflictError):  # within the grace: a timed-out bind may still land
        first.record(claim("y", (("GPU-1", 16000, 0),), use=released))
    wall.now += 7
    first.record(claim("y", (("GPU-1", 16000, 0),), use=released))  # first released it: dropped now
    assert set(entries(kube)) == {"uid-x", "uid-y"}


def test_a_retried_pod_replaces_its_own_entry(api_client: Any, kube: Any, namespace: str) -> None:
    ledger = Ledger(api_client, namespace=namespace)
    ledger.record(claim("a", (("GPU-0", 16000, 0),)))
    ledger.record(claim("a", (("GPU-0", 16000, 0),)))
    assert list(entries(kube)) == ["uid-a"]


def test_concurrent_processes_never_over_allocate(api_client: Any, kube: Any, namespace: str) -> None:
    """Three processes, eight threads each, all claiming 3000 MiB of one 16000 MiB device with
    no knowledge of each other: exactly five succeed (409 conflicts are retried on fresh reads)."""
    ledgers = [Ledger(api_client, namespace=namespace) for _ in range(3)]
    outcomes: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(24)

    def run(ledger: Ledger, index: int) -> None:
        start.wait()
        try:
            ledger.record(claim(f"p{index}", (("GPU-0", 3000, 0),)))
            result = "ok"
        except ConflictError:
            result = "refused"
        except ClusterError as exc:  # too many conflicts in a row: retried later, nothing written
            result = f"error: {exc}"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=run, args=(ledgers[i % 3], i)) for i in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(outcomes) == 24
    recorded = entries(kube)
    assert sum(e["devices"]["GPU-0"][0] for e in recorded.values()) <= 16000
    assert outcomes.count("ok") == len(recorded)
    assert outcomes.count("ok") == 5, outcomes


def test_the_kube_prebind_handler_uses_the_configured_ledger(api_client: Any, kube: Any, namespace: str) -> None:
    deviceledger.configure(api_client, namespace=namespace)
    before = metrics.DEVICE_LEDGER_WRITES.labels(result="written")._value.get()
    KubeBinder(api_client, ClusterState()).prebind([claim("a", (("GPU-0", 1000, 0),), node="gpu-2")])
    assert set(entries(kube, "gpu-2")) == {"uid-a"}
    assert metrics.DEVICE_LEDGER_WRITES.labels(result="written")._value.get() == before + 1
    MemoryBinder(ClusterState()).prebind([claim("b", (("GPU-0", 1000, 0),))])  # nothing to do in memory


def test_a_missing_namespace_is_a_plain_error_naming_it(api_client: Any) -> None:
    ledger = Ledger(api_client, namespace="no-such-namespace")
    with pytest.raises(ClusterError, match="namespace no-such-namespace does not exist") as raised:
        ledger.record(claim("a", (("GPU-0", 1000, 0),)))
    # Not a ConflictError/NotFoundError: those would make the scheduler drop the pod as gone.
    assert not isinstance(raised.value, ConflictError | NotFoundError)


def test_forbidden_writes_name_the_permission(refused: Any, namespace: str) -> None:
    kubeconfig = refused([("create", "leases", "", "coordination.k8s.io")],
                         [rule(["get", "update"], ["leases"], "coordination.k8s.io"), rule(["get"], ["namespaces"])])
    api_client = build_api_client(kubeconfig=kubeconfig)
    with pytest.raises(ClusterError, match="grant get, create, update on leases.coordination.k8s.io") as raised:
        Ledger(api_client, namespace=namespace).record(claim("a", (("GPU-0", 1000, 0),)))
    api_client.close()
    assert raised.value.status == 403 and not isinstance(raised.value, ConflictError | NotFoundError)


def test_an_unreadable_ledger_starts_afresh(api_client: Any, kube: Any, namespace: str,
                                            caplog: pytest.LogCaptureFixture) -> None:
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": lease_name("gpu-1"), "annotations": {LEDGER_ANNOTATION: "{oops"}}, "spec": {}}
    kube.call("POST", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", body)
    Ledger(api_client, namespace=namespace).record(claim("a", (("GPU-0", 1000, 0),)))
    assert set(entries(kube)) == {"uid-a"}
    assert "is not JSON" in caplog.text


def test_unreadable_entries_are_left_out() -> None:
    lease = {"metadata": {"annotations": {LEDGER_ANNOTATION: json.dumps({"entries": {
        "ok": {"pod": "default/ok", "devices": {"GPU-0": [1, 2]}, "by": "x", "at": 1, "expires": 2},
        "bad-devices": {"devices": {"GPU-0": [1]}, "expires": 2},
        "no-expiry": {"devices": {}},
        "not-an-object": 3,
    }})}}}
    assert list(read_entries(lease, "test")) == ["ok"]
    assert read_entries(None, "test") == {}


def test_long_node_names_get_a_hashed_lease_name() -> None:
    assert lease_name("gpu-1") == "gpu-ledger.gpu-1"
    long = "n" * 250
    assert len(lease_name(long)) <= 253 and lease_name(long) != lease_name("m" * 250)


def test_a_claim_whose_shares_were_taken_moves_to_devices_with_room(api_client: Any, kube: Any,
                                                                    namespace: str) -> None:
    first, second = Ledger(api_client, namespace=namespace), Ledger(api_client, namespace=namespace)
    first.record(claim("a", (("GPU-0", 12000, 0),)))
    seen: list[dict[str, Any]] = []

    def rechoose(others: Any) -> Any:
        seen.append(dict(others))
        return (("GPU-1", 8000, 0),), {"GPU-1": CAPACITY["GPU-1"]}

    before = metrics.DEVICE_LEDGER_WRITES.labels(result="moved")._value.get()
    wanted = claim("b", (("GPU-0", 8000, 0),))
    second.record(LedgerClaim(wanted.node, wanted.pod, wanted.ident, wanted.shares, wanted.capacity, wanted.use,
                              rechoose))
    assert seen == [{"uid-a": (("GPU-0", 12000, 0),)}]  # the ledger's other entries
    assert entries(kube)["uid-b"]["devices"] == {"GPU-1": [8000, 0]}
    assert metrics.DEVICE_LEDGER_WRITES.labels(result="moved")._value.get() == before + 1


def test_a_given_up_bind_that_happened_after_all_keeps_its_entry(api_client: Any, kube: Any, namespace: str) -> None:
    """A bind that timed out may have succeeded: the entry stays while the pod is bound."""
    wall = Clock(1_000_000.0)
    ledger = Ledger(api_client, namespace=namespace, wall=wall)
    kube.create_node("gpu-1")
    pod = kube.create_pod("slow")
    kube.bind_pod("slow", "gpu-1")
    uid = pod["metadata"]["uid"]
    timed_out = LedgerClaim("gpu-1", "default/slow", uid, (("GPU-0", 16000, 0),), {"GPU-0": CAPACITY["GPU-0"]},
                            NodeDeviceUse())
    ledger.record(timed_out)
    released = NodeDeviceUse(released={uid: wall.now + 1})
    wall.now += 20
    with pytest.raises(ConflictError):
        ledger.record(claim("next", (("GPU-0", 1, 0),), use=released))
    assert uid in entries(kube)


def test_a_moved_claim_is_counted_where_it_went(api_client: Any, kube: Any, namespace: str) -> None:
    """Found on a real control plane with kube-scheduler binding asynchronously into two workers.

    Process B holds 10000 MiB of GPU-0 and 3000 of GPU-1 (in the ledger only). Process A
    claims X (GPU-0) then Y (GPU-1), 7000 MiB each (spread). X's ledger write finds GPU-0
    taken and moves X; GPU-1 cannot take it either, since Y (newer than X's snapshot, not in
    the ledger yet) is there: X is refused. Y then fits. Before the fix X moved onto GPU-1, and
    Y, counting X where its own snapshot had it (GPU-0), was let through: GPU-1 held 17000.
    """
    from extender.cluster.state import ClusterState
    from extender.model.pods import PodView
    from extender.policy.builtin import DeviceFit
    from extender.policy.engine import Engine, Policy
    from tests.devicebuilders import gpu, gpu_node_dict, gpu_pod_dict

    other = Ledger(api_client, namespace=namespace)
    other.record(claim("b1", (("GPU-0", 10000, 0),)))
    other.record(claim("b2", (("GPU-1", 3000, 0),)))
    state = ClusterState()
    state.replace_nodes([gpu_node_dict("gpu-1", [gpu("GPU-0", 16000), gpu("GPU-1", 16000)])])
    x, y = (PodView.from_dict(gpu_pod_dict(name, memory=7000)) for name in ("x", "y"))
    state.replace_pods([x.raw, y.raw])
    engine = Engine(Policy(filters=(DeviceFit("spread"),)))
    reserved_x = engine.reserve(x, state.node_info("gpu-1"), state)
    reserved_y = engine.reserve(y, state.node_info("gpu-1"), state)
    assert isinstance(reserved_x, list) and isinstance(reserved_y, list)
    assert reserved_x[0].actions[0].shares == (("GPU-0", 7000, 0),)
    assert reserved_y[0].actions[0].shares == (("GPU-1", 7000, 0),)
    mine = Ledger(api_client, namespace=namespace)
    with pytest.raises(ConflictError):
        mine.record(reserved_x[0].actions[0])
    mine.record(reserved_y[0].actions[0])
    per_device: dict[str, int] = {}
    for entry in entries(kube).values():
        for device_id, (memory, _) in entry["devices"].items():
            per_device[device_id] = per_device.get(device_id, 0) + memory
    assert per_device == {"GPU-0": 10000, "GPU-1": 10000}
