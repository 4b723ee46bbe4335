"""Pod groups in webhook mode: /filter refuses a gang that cannot complete, /bind holds members
until their quorum has reached /bind (counted in the group's Lease), else answers an error.

On the fake API server and a real kube-apiserver v1.36.3 with the gang gates (skipped, saying
so, without the envtest binaries). The verbs are called as kube-scheduler calls them, one thread
per bind (kube-scheduler binds each pod in its own goroutine); the hold is 2 s here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask

from extender.gangs import fitting
from extender.gangs import ledger as gl
from extender.gangs.coordinator import REASON_TOO_FEW
from extender.gangs.ledger import Outcome
from extender.kube.gangledger import GangLeases
from extender.model import podgroups as pg
from extender.settings import Settings
from extender.webhook import create_app
from extender.webhook.runtime import Runtime, build_runtime
from tests.fakeapi.fixtures import ApiServerHandle
from tests.scheduler.test_gangs import Gangs, server  # noqa: F401 (the module's server fixture)

pytestmark = pytest.mark.apiserver

HOLD = 2.0


@pytest.fixture
def gangs(server: ApiServerHandle) -> Iterator[Gangs]:  # noqa: F811
    made = Gangs(server)
    try:
        yield made
    finally:
        made.close()


def start_webhook(gangs: Gangs) -> tuple[Runtime, Flask]:
    gangs.kube.ensure_namespace("gang-leases")
    settings = Settings(source="kube", kubeconfig=str(gangs.server.kubeconfig), gang_hold=HOLD,
                        lease_namespace="gang-leases")
    runtime = build_runtime(settings)
    assert runtime.gangs is not None, "pod groups served, so the webhook watches them"
    runtime.start()
    assert runtime.source.wait_synced(10)
    return runtime, create_app(settings, runtime=runtime, start=False)


@pytest.fixture
def webhook(gangs: Gangs) -> Iterator[tuple[Runtime, Flask]]:
    runtime, app = start_webhook(gangs)
    # A member's first /filter starts the pod watch (as a first /bind does) and is answered with a
    # retryable error until the pods are listed; here the watch is started up front.
    first = app.test_client().post("/filter", json={"Pod": {
        "metadata": {"name": "probe", "namespace": gangs.ns, "uid": "probe"},
        "spec": {"schedulingGroup": {"podGroupName": "probe"}, "containers": [{"name": "c"}]}}, "NodeNames": []})
    assert first.status_code == 200 and runtime.source.pods_watched
    assert runtime.source.pods_listed(10)
    yield runtime, app
    runtime.stop()


def member(gangs: Gangs, name: str, group: str) -> dict[str, Any]:
    return gangs.kube.create_pod(name, gangs.ns, cpu="1", spec={"schedulingGroup": {"podGroupName": group}})


def wait_known(gangs: Gangs, runtime: Runtime, *names: str) -> None:
    """Nodes, pods and pod groups come on three watches, each in its own time: wait until the
    webhook's state has every node created so far, the members and each member's group."""
    nodes = [n["metadata"]["name"] for n in gangs.kube.list_nodes()]
    assert runtime.gangs is not None

    def known() -> bool:
        records = [runtime.state.pod(f"{gangs.ns}/{n}") for n in names]
        return (all(runtime.state.node_info(node) is not None for node in nodes)
                and all(r is not None and runtime.gangs.coordinator.group_of(r.uid) is not None for r in records))

    gangs.kube.wait_for(known, timeout=10, message="nodes, members and their groups in the webhook's state")


def filter_reply(app: Flask, pod: dict[str, Any], nodes: list[str]) -> dict[str, Any]:
    reply = app.test_client().post("/filter", json={"Pod": pod, "NodeNames": nodes})
    assert reply.status_code == 200, reply.data
    return reply.get_json()  # type: ignore[no-any-return]


def scheduled_condition(gangs: Gangs, group: str) -> dict[str, Any]:
    raw = gangs.kube.call("GET", f"/apis/{pg.API_V1ALPHA2}/namespaces/{gangs.ns}/podgroups/{group}")
    conditions = (raw.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == pg.SCHEDULED_CONDITION), {})


def bind_all(app: Flask, gangs: Gangs, pods: list[dict[str, Any]], node: str = "node") -> dict[str, str]:
    errors: dict[str, str] = {}

    def bind(pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        reply = app.test_client().post("/bind", json={"PodName": meta["name"], "PodNamespace": gangs.ns,
                                                      "PodUID": meta["uid"], "Node": node})
        errors[meta["name"]] = reply.get_json()["Error"] if reply.status_code == 200 else str(reply.data)

    threads = [threading.Thread(target=bind, args=(pod,)) for pod in pods]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HOLD * 5)
    return errors


def test_filter_refuses_a_gang_short_of_members_or_of_room_as_unresolvable(gangs: Gangs,
                                                                         webhook: tuple[Runtime, Flask]) -> None:
    runtime, app = webhook
    gangs.node(cpu="3")
    gangs.gang("pg1", min_count=4)
    pods = [member(gangs, f"p{i}", "pg1") for i in range(1, 4)]
    wait_known(gangs, runtime, "p1", "p2", "p3")
    reply = filter_reply(app, pods[0], ["node"])
    assert reply["NodeNames"] == [] and reply["FailedNodes"] == {}
    assert reply["FailedAndUnresolvableNodes"]["node"].startswith(f"{REASON_TOO_FEW}: pod group {gangs.ns}/pg1 "
                                                                 "has 3 of 4 members")
    pods.append(member(gangs, "p4", "pg1"))
    wait_known(gangs, runtime, "p4")
    reply = filter_reply(app, pods[0], ["node"])
    assert reply["FailedAndUnresolvableNodes"]["node"] == (f"{fitting.REASON_MEMBERS}: 4 more members: "
                                                          "cpu short by 1")
    gangs.node("node-2", cpu="1")
    # The watch delivers node-2 in its own time (it yields to requests in flight): ask until it counts.
    reply = gangs.kube.wait_for(lambda: (r := filter_reply(app, pods[0], ["node", "node-2"]))["NodeNames"] and r,
                                message="the gang admitted once node-2 brings the missing cpu")
    assert reply["NodeNames"] == ["node", "node-2"] and reply["FailedAndUnresolvableNodes"] == {}


def test_bind_holds_a_gang_until_its_quorum_and_binds_none_of_an_incomplete_one(
        gangs: Gangs, webhook: tuple[Runtime, Flask]) -> None:
    runtime, app = webhook
    gangs.node()
    gangs.gang("pg1", min_count=4)
    pods = [member(gangs, f"p{i}", "pg1") for i in range(1, 5)]
    wait_known(gangs, runtime, "p1", "p2", "p3", "p4")
    errors = bind_all(app, gangs, pods[:3])  # kube-scheduler found room for 3 only
    assert sorted(errors) == ["p1", "p2", "p3"]
    assert all(f"did not reach minCount 4 within {HOLD:g}s" in e for e in errors.values()), errors
    assert gangs.bound("p1", "p2", "p3", "p4") == []
    assert scheduled_condition(gangs, "pg1") == {}
    errors = bind_all(app, gangs, pods)  # room freed: all four reach /bind
    assert errors == dict.fromkeys(["p1", "p2", "p3", "p4"], "")
    assert gangs.bound("p1", "p2", "p3", "p4") == ["p1", "p2", "p3", "p4"]
    condition = gangs.kube.wait_for(lambda: scheduled_condition(gangs, "pg1"), message="PodGroupScheduled written")
    assert (condition["status"], condition["reason"]) == ("True", pg.REASON_SCHEDULED)


def test_a_basic_group_binds_each_member_at_once(gangs: Gangs, webhook: tuple[Runtime, Flask]) -> None:
    runtime, app = webhook
    gangs.node()
    gangs.basic("pg1")
    pod = member(gangs, "p1", "pg1")
    wait_known(gangs, runtime, "p1")
    assert filter_reply(app, pod, ["node"])["NodeNames"] == ["node"]
    assert bind_all(app, gangs, [pod]) == {"p1": ""}
    assert gangs.bound("p1") == ["p1"]



def test_a_gang_holding_members_keeps_the_room_its_quorum_needs(gangs: Gangs, webhook: tuple[Runtime, Flask]) -> None:
    """Two gangs of 4 on 6 CPUs: while one holds a member at /bind, the other is refused at
    /filter (the first one's quorum keeps its room), so they cannot end 3 + 3."""
    runtime, app = webhook
    gangs.node(cpu="6")
    gangs.gang("pg1", min_count=4)
    gangs.gang("pg2", min_count=4)
    first = [member(gangs, f"p{i}", "pg1") for i in range(1, 5)]
    other = [member(gangs, f"o{i}", "pg2") for i in range(1, 5)]
    wait_known(gangs, runtime, "p1", "p2", "p3", "p4", "o1", "o2", "o3", "o4")
    assert filter_reply(app, other[0], ["node"])["NodeNames"] == ["node"]
    binding = threading.Thread(target=bind_all, args=(app, gangs, first[:1]))
    binding.start()
    gangs.kube.wait_for(lambda: runtime.gangs._holding, message="p1 held at /bind")
    refused = filter_reply(app, other[0], ["node"])["FailedAndUnresolvableNodes"]["node"]
    assert refused == f"{fitting.REASON_MEMBERS}: 4 more members: cpu short by 2"  # 6 - 1 held - 3 kept
    assert filter_reply(app, first[1], ["node"])["NodeNames"] == ["node"]  # its own gang goes on
    binding.join()
    assert filter_reply(app, other[0], ["node"])["NodeNames"] == ["node"]  # p1 was sent back: room again


def test_holds_left_by_a_killed_process_release_nothing_and_a_retried_member_takes_its_over(
        gangs: Gangs, webhook: tuple[Runtime, Flask], monkeypatch: pytest.MonkeyPatch) -> None:
    """A webhook process held 3 of a gang of 4 at /bind and was killed (its holds stay in the
    Lease; kube-scheduler, its connections cut, forgot those places and will retry the pods).
    The 4th member reaching /bind through the new process must not be released on the dead
    process's count: it is held, then refused; once the dead process has been silent for the
    holder TTL its holds are gone. The three, retried through the new process, take their
    entries over and the gang binds whole, each member once."""
    # Live holders write every 0.5 s, the dead one never; the 4th's 2 s hold ends before the dead
    # holds are dropped, so what keeps it from release is the answer the dead process never gives.
    monkeypatch.setattr(gl, "HOLDER_TTL", 3.0)
    monkeypatch.setattr(gl, "RENEW_SECONDS", 0.5)
    runtime, app = webhook
    gangs.node()
    gangs.gang("pg1", min_count=4)
    pods = [member(gangs, f"p{i}", "pg1") for i in range(1, 5)]
    wait_known(gangs, runtime, "p1", "p2", "p3", "p4")
    group = gangs.kube.call("GET", f"/apis/{pg.API_V1ALPHA2}/namespaces/{gangs.ns}/podgroups/pg1")
    group_uid = group["metadata"]["uid"]
    assert runtime.gangs is not None
    record = runtime.state.pod(f"{gangs.ns}/p4")
    assert record is not None and record.group is not None
    coordinator = runtime.gangs.coordinator
    gangs.kube.wait_for(lambda: coordinator.status(record.group).exists, message="pg1 in the webhook's group watch")
    killed = GangLeases(runtime.gangs.leases.api_client, namespace="gang-leases")
    for pod in pods[:3]:
        outcome = killed.hold(group_uid, pod["metadata"]["uid"], "node", min_count=4, bound=frozenset(),
                              hold_seconds=30)
        assert outcome is Outcome.WAITING

    errors = bind_all(app, gangs, pods[3:])
    assert f"did not reach minCount 4 within {HOLD:g}s" in errors["p4"], errors
    assert gangs.bound("p1", "p2", "p3", "p4") == []

    def ledger_now() -> gl.GangLedger:  # as readers and the next writer see it
        lease = gangs.kube.get_lease(gl.lease_name(group_uid), "gang-leases") or {}
        return gl.expire(gl.read((lease.get("metadata") or {}).get("annotations")), now=time.time())

    gangs.kube.wait_for(lambda: ledger_now().holds == {}, timeout=10, message="the killed process's holds dropped")

    errors = bind_all(app, gangs, pods)  # kube-scheduler retries all four
    assert errors == dict.fromkeys(["p1", "p2", "p3", "p4"], "")
    assert gangs.bound("p1", "p2", "p3", "p4") == ["p1", "p2", "p3", "p4"]


def test_members_there_before_the_pod_watch_count_though_they_never_change(gangs: Gangs) -> None:
    """A webhook (re)started while a gang's members wait (held elsewhere, or unschedulable with
    nothing about them changing): the pod list that starts its watch is all it ever hears of
    them, and they must count, or the last member is refused as "1 of 4 members" for good."""
    gangs.node()
    gangs.gang("pg1", min_count=4)
    pods = [member(gangs, f"p{i}", "pg1") for i in range(1, 5)]
    runtime, app = start_webhook(gangs)
    try:
        reply = filter_reply(app, pods[3], ["node"])  # starts the pod watch; retryable error if not listed in 2 s
        if reply["Error"]:
            assert runtime.source.pods_listed(10)
            reply = filter_reply(app, pods[3], ["node"])
        assert reply["FailedAndUnresolvableNodes"] == {} and reply["NodeNames"] == ["node"]
    finally:
        runtime.stop()


def test_one_release_is_reported_once_whichever_process_writes_it(gangs: Gangs) -> None:
    """Two processes hold one member each of a gang of 2: the release is one write, so exactly
    one of them is told it released the group (and writes PodGroupScheduled), not each."""
    gangs.kube.ensure_namespace("gang-leases")
    first, second = (GangLeases(gangs.api_client, namespace="gang-leases") for _ in range(2))
    told: list[str] = []
    held = first.hold("g-uid", "a", "node", min_count=2, bound=frozenset(), hold_seconds=30,
                      released=lambda: told.append("first"))
    assert held is Outcome.WAITING
    assert second.hold("g-uid", "b", "node", min_count=2, bound=frozenset(), hold_seconds=30,
                       released=lambda: told.append("second")) is Outcome.WAITING  # the call: first must answer
    assert first.check("g-uid", "a", mine=frozenset({"a"}), min_count=2, bound=frozenset(),
                       released=lambda: told.append("first")) is Outcome.RELEASED
    assert second.check("g-uid", "b", mine=frozenset({"b"}), min_count=2, bound=frozenset(),
                        released=lambda: told.append("second")) is Outcome.RELEASED
    assert told == ["first"]


def test_a_stopping_webhook_answers_its_held_binds_at_once(gangs: Gangs, webhook: tuple[Runtime, Flask]) -> None:
    """SIGTERM, or a gunicorn master gone: the worker drains the runtime, and binds held for a
    gang answer now (kube-scheduler retries them) instead of keeping the process for the hold."""
    runtime, app = webhook
    assert runtime.gangs is not None
    runtime.gangs.hold_seconds = 60.0  # far past bind_all's wait: only the drain can answer in time
    gangs.node()
    gangs.gang("pg1", min_count=4)
    pods = [member(gangs, f"p{i}", "pg1") for i in range(1, 4)]
    wait_known(gangs, runtime, "p1", "p2", "p3")
    threading.Timer(1.0, runtime.drain).start()
    errors = bind_all(app, gangs, pods)
    assert sorted(errors) == ["p1", "p2", "p3"], errors
    assert all("the webhook is stopping" in e and "will be retried" in e for e in errors.values()), errors
    assert gangs.bound("p1", "p2", "p3") == []
