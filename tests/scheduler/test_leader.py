"""Leader election: one active scheduler, fast hand-over, no pod bound twice."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from extender.kube.client import build_api_client
from extender.scheduler.leader import LeaderElector
from tests.scheduler.conftest import SCHEDULER_NAME, RecordingBinder

pytestmark = pytest.mark.apiserver

NAMESPACE = "default"
LEASE = "extender-scheduler"
# Short timings for tests: lease 2 s, renew deadline 1.5 s, retry 0.3 s.
TIMING = {"lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.3}


@pytest.fixture
def clients(apiserver: Any) -> Iterator[list[Any]]:
    made = [build_api_client(kubeconfig=str(apiserver.kubeconfig)) for _ in range(2)]
    yield made
    for client in made:
        client.close()


def elector(client: Any, identity: str, **timing: float) -> LeaderElector:
    return LeaderElector(client, namespace=NAMESPACE, name=LEASE, identity=identity, **{**TIMING, **timing})


def start_pair(make_scheduler: Any, clients: list[Any]) -> tuple[Any, Any]:
    """Scheduler `a` starts first and leads; `b` is the follower."""
    schedulers = []
    for client, identity in zip(clients, ("a", "b"), strict=True):
        from extender.cluster.state import ClusterState

        state = ClusterState()
        scheduler = make_scheduler(client=client, state=state, binder=RecordingBinder(client, state),
                                   leader=elector(client, identity))
        if identity == "a":
            assert scheduler.leader.wait_for_leadership(5), "first scheduler did not become leader"
        schedulers.append(scheduler)
    return schedulers[0], schedulers[1]


def all_bound(kube: Any, names: list[str]) -> bool:
    return all(((kube.get_pod(n) or {}).get("spec") or {}).get("nodeName") for n in names)


def assert_bound_once(apiserver: Any, names: list[str], *schedulers: Any) -> None:
    """Each pod bound exactly once: by the schedulers' own count of successful binds, and on
    the fake also by the server's count of accepted Bindings."""
    ours = Counter(key for scheduler in schedulers for key in scheduler.binder.bound)
    assert all(ours[f"default/{n}"] == 1 for n in names), ours
    if apiserver.fake is not None:
        counts = Counter(f"{b['namespace']}/{b['name']}" for b in apiserver.fake.bindings)
        assert all(counts[f"default/{n}"] == 1 for n in names), counts


def test_only_the_leader_binds(apiserver: Any, kube: Any, make_scheduler: Any, clients: list[Any]) -> None:
    kube.create_node("n1", cpu="16")
    a, b = start_pair(make_scheduler, clients)
    assert b.ready and not b.leading and a.leading
    names = [f"p{i}" for i in range(10)]
    for name in names:
        kube.create_pod(name, cpu="100m", scheduler_name=SCHEDULER_NAME)
    kube.wait_for(lambda: all_bound(kube, names), timeout=10, message="pods bound")
    assert sorted(a.binder.bound) == sorted(f"default/{n}" for n in names)
    assert b.binder.bound == []
    lease = kube.get_lease(LEASE, NAMESPACE)
    assert lease["spec"]["holderIdentity"] == "a"
    assert lease["spec"]["leaseDurationSeconds"] == 2


def test_follower_takes_over_when_the_leader_dies(
        apiserver: Any, kube: Any, make_scheduler: Any, clients: list[Any]) -> None:
    kube.create_node("n1", cpu="16")
    a, b = start_pair(make_scheduler, clients)
    first = [f"early{i}" for i in range(5)]
    for name in first:
        kube.create_pod(name, cpu="100m", scheduler_name=SCHEDULER_NAME)
    kube.wait_for(lambda: all_bound(kube, first), timeout=10, message="early pods bound")

    killed = time.monotonic()
    a.stop(release_lease=False, finish_binds=False)  # a crash: the lease is left to expire
    late = [f"late{i}" for i in range(5)]
    for name in late:
        kube.create_pod(name, cpu="100m", scheduler_name=SCHEDULER_NAME)
    assert b.leader.wait_for_leadership(5)
    took = time.monotonic() - killed
    assert 1.0 < took < TIMING["lease_duration"] + 2 * TIMING["retry_period"] + 1.0, took
    kube.wait_for(lambda: all_bound(kube, late), timeout=10, message="late pods bound by the new leader")
    assert sorted(b.binder.bound) == sorted(f"default/{n}" for n in late)
    assert_bound_once(apiserver, first + late, a, b)
    lease = kube.get_lease(LEASE, NAMESPACE)
    assert lease["spec"]["holderIdentity"] == "b"
    assert lease["spec"]["leaseTransitions"] == 1


def test_graceful_stop_releases_the_lease(apiserver: Any, kube: Any, make_scheduler: Any,
                                          clients: list[Any]) -> None:
    kube.create_node("n1", cpu="16")
    a, b = start_pair(make_scheduler, clients)
    a.stop()
    released = time.monotonic()
    lease = kube.get_lease(LEASE, NAMESPACE)
    assert lease["spec"]["holderIdentity"] in ("", "b")
    assert b.leader.wait_for_leadership(3)
    # Without the release b would wait a whole lease duration (2 s) after a's last renewal.
    assert time.monotonic() - released < 1.0, "a released lease is taken within a retry period or two"
    kube.create_pod("after", scheduler_name=SCHEDULER_NAME)
    kube.wait_for(lambda: all_bound(kube, ["after"]), timeout=10, message="bound by the new leader")
    # The API server shows the bind before the binder's call returns and records it.
    kube.wait_for(lambda: b.binder.bound == ["default/after"], timeout=5, message="b's binder recorded it")


@pytest.fixture
def lease_cut(apiserver: Any, clients: list[Any]) -> Iterator[tuple[Any, Callable[[bool], None]]]:
    """A client whose lease renewals can be refused, and the switch that refuses them.

    On the fake, every lease request fails with 500; on a real server the client belongs to
    a user whose lease permissions are in a Role, and the RoleBinding is deleted (403) and
    created again: both are a leader that cannot renew."""
    if apiserver.fake is not None:
        rules: list[Any] = []

        def fake_cut(cut: bool) -> None:
            if cut:
                rules.append(apiserver.fake.fail_next(1000, status=500, path_regex=r"/leases/"))
            else:
                apiserver.fake.faults.remove(rules.pop())

        yield clients[0], fake_cut
        return
    from extender.checks.permissions import required_permissions
    from tests.fakeapi.rbac import create_user, rules_for

    needs = required_permissions("standalone", leader_elect=True)
    user = create_user(apiserver.plane, apiserver.client,
                       rules_for(p for p in needs if not p.namespaced),
                       namespaced_rules=rules_for(p for p in needs if p.namespaced),
                       namespace=NAMESPACE, prefix="leader")
    client = build_api_client(kubeconfig=str(user.kubeconfig))

    def real_cut(cut: bool) -> None:
        if cut:
            user.revoke_namespaced()
        else:
            user.restore_namespaced()
        user.wait_can(not cut, "update", "leases", "coordination.k8s.io", NAMESPACE)

    try:
        user.wait_can(True, "update", "leases", "coordination.k8s.io", NAMESPACE)
        yield client, real_cut
    finally:
        client.close()
        user.delete()


def test_leader_stops_when_it_cannot_renew(apiserver: Any, kube: Any, make_scheduler: Any,
                                           lease_cut: tuple[Any, Callable[[bool], None]]) -> None:
    client, cut = lease_cut
    kube.create_node("n1")
    scheduler = make_scheduler(client=client, leader=elector(client, "solo"))
    assert scheduler.leader.wait_for_leadership(5)
    cut(True)
    started = time.monotonic()
    kube.wait_for(lambda: not scheduler.leading, timeout=5, message="leadership dropped")
    assert time.monotonic() - started <= TIMING["renew_deadline"] + TIMING["retry_period"] + 0.3
    kube.create_pod("while-lost", scheduler_name=SCHEDULER_NAME)
    time.sleep(0.7)
    assert scheduler.binder.attempts_for("while-lost") == 0
    if apiserver.fake is not None:
        assert apiserver.fake.requests_matching("POST", r"/pods/while-lost/binding$") == []
    cut(False)
    assert scheduler.leader.wait_for_leadership(5)
    kube.wait_for(lambda: all_bound(kube, ["while-lost"]), timeout=10, message="bound after re-election")


def test_two_candidates_racing_for_an_expired_lease_cannot_both_win(
        apiserver: Any, kube: Any, clients: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    kube.call("POST", f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases", {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": LEASE, "namespace": NAMESPACE},
        "spec": {"holderIdentity": "ghost", "leaseDurationSeconds": 1,
                 "renewTime": "2020-01-01T00:00:00.000000Z", "acquireTime": "2020-01-01T00:00:00.000000Z"},
    })
    one, two = elector(clients[0], "one"), elector(clients[1], "two")
    assert not one.try_acquire_or_renew() and not two.try_acquire_or_renew()  # ghost is alive to us
    time.sleep(1.1)  # now unchanged for a whole lease duration
    # Both candidates read the lease, then both write it: each PUT waits at a barrier until the
    # other candidate has read too, so both carry the same resourceVersion (on either server).
    from extender.errors import ConflictError
    from extender.kube import client as kube_client

    barrier = threading.Barrier(2, timeout=5)
    puts: list[str] = []
    real_request = kube_client.request_json

    def request_json(api_client: Any, method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        if method == "PUT" and "/leases/" in path:
            barrier.wait()
            try:
                reply = real_request(api_client, method, path, *args, **kwargs)
            except ConflictError:
                puts.append("409")
                raise
            puts.append("200")
            return reply
        return real_request(api_client, method, path, *args, **kwargs)

    monkeypatch.setattr("extender.scheduler.leader.kube_client.request_json", request_json)
    start = threading.Barrier(2)
    results: dict[str, bool] = {}

    def campaign(candidate: LeaderElector) -> None:
        start.wait()
        results[candidate.identity] = candidate.try_acquire_or_renew()

    threads = [threading.Thread(target=campaign, args=(c,)) for c in (one, two)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(results.values()) == [False, True], results
    winner = next(name for name, won in results.items() if won)
    assert kube.get_lease(LEASE, NAMESPACE)["spec"]["holderIdentity"] == winner
    assert sorted(puts) == ["200", "409"]
    if apiserver.fake is not None:
        server_puts = apiserver.fake.requests_matching("PUT", r"/leases/")
        assert sorted(r.status for r in server_puts) == [200, 409]


def test_timings_are_validated(clients: list[Any]) -> None:
    with pytest.raises(ValueError, match="lease duration"):
        elector(clients[0], "x", lease_duration=1.0, renew_deadline=1.5)
    with pytest.raises(ValueError, match="retry period"):
        elector(clients[0], "x", renew_deadline=0.3, retry_period=0.3)
