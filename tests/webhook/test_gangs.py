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
from prometheus_client import REGISTRY

from extender.gangs import fitting
from extender.gangs import ledger as gl
from extender.gangs.coordinator import REASON_TOO_FEW
from extender.gangs.ledger import Outcome
from extender.kube.gangledger import GangLeases
from extender.model import podgroups as pg
from extender.settings import Settings
from extender.webhook import create_app
from extender.webhook.gang_holds import WAKE_ANNOTATION
from extender.webhook.runtime import Runtime, build_runtime
from tests.fakeapi.client import NOT_READY_TAINT_KEY
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
    webhook's state has every node created so far as kube-scheduler will see it at /bind (Ready,
    its status being a second write, and without the not-ready taint, which the node lifecycle
    controller removes in a third), the members and each member's group."""
    nodes = [n["metadata"]["name"] for n in gangs.kube.list_nodes()]
    assert runtime.gangs is not None

    def known() -> bool:
        records = [runtime.state.pod(f"{gangs.ns}/{n}") for n in names]
        infos = [runtime.state.node_info(node) for node in nodes]
        return (all(info is not None and info.node.ready
                    and not any(t.key == NOT_READY_TAINT_KEY for t in info.node.taints) for info in infos)
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


# ---- competing gangs: one gives way at once (extender.gangs.giveway) -----------------------------

LONG_HOLD = 30.0  # far past every wait below: a gang completing or giving way did not wait its hold out


class Binds:
    """/bind requests in flight, one thread each (kube-scheduler binds each pod in a goroutine)."""

    def __init__(self, app: Flask, gangs: Gangs) -> None:
        self.app, self.gangs = app, gangs
        self.answers: dict[str, str] = {}
        self.answered_at: dict[str, float] = {}
        self.threads: list[threading.Thread] = []

    def start(self, pod: dict[str, Any], node: str = "node") -> None:
        def bind() -> None:
            meta = pod["metadata"]
            reply = self.app.test_client().post("/bind", json={
                "PodName": meta["name"], "PodNamespace": self.gangs.ns, "PodUID": meta["uid"], "Node": node})
            self.answers[meta["name"]] = reply.get_json()["Error"] if reply.status_code == 200 else str(reply.data)
            self.answered_at[meta["name"]] = time.monotonic()

        thread = threading.Thread(target=bind)
        thread.start()
        self.threads.append(thread)

    def held(self, runtime: Runtime, *pods: dict[str, Any]) -> None:
        """Wait until every one of `pods` is held in its group's ledger (as every process sees it)."""
        assert runtime.gangs is not None
        uids = {p["metadata"]["uid"] for p in pods}
        self.gangs.kube.wait_for(
            lambda: uids <= {u for ledger in runtime.gangs.view.ledgers().values() for u in ledger.holds},
            timeout=10, message=f"{sorted(p['metadata']['name'] for p in pods)} held")

    def join(self) -> None:
        for thread in self.threads:
            thread.join(LONG_HOLD + 5)


def give_ways(reason: str) -> float:
    return REGISTRY.get_sample_value("extender_gang_give_way_total", {"reason": reason}) or 0.0


def holds_ended(outcome: str) -> float:
    return REGISTRY.get_sample_value("extender_gang_holds_total", {"outcome": outcome}) or 0.0


def gave_way_events(gangs: Gangs, name: str) -> list[str]:
    events = gangs.kube.list_events(gangs.ns, reason="GaveWay", involved_name=name)  # the core view of them
    return [e.get("message") or "" for e in events]


def test_a_pair_on_room_for_one_ends_whole_at_once_the_loser_gives_way(
        gangs: Gangs, webhook: tuple[Runtime, Flask]) -> None:
    """The issue's pair: two gangs of 3 x 1 CPU on room for 4. `a` holds 2, `b` then holds 1: not
    both can complete, and `b` (fewer placed) gives way at once, not after its 30 s hold: its bind
    is answered with the reason, an Event says so on the pod, /filter refuses `b` while it backs
    off and /bind answers at once; `a`'s third member binds and `a` is whole."""
    runtime, app = webhook
    assert runtime.gangs is not None
    runtime.gangs.hold_seconds = LONG_HOLD
    gangs.node(cpu="4")
    gangs.gang("a", min_count=3)
    gangs.gang("b", min_count=3)
    a = [member(gangs, f"a{i}", "a") for i in range(1, 4)]
    b = [member(gangs, f"b{i}", "b") for i in range(1, 4)]
    wait_known(gangs, runtime, "a1", "a2", "a3", "b1", "b2", "b3")
    before = (give_ways("outranked"), holds_ended("timeout"))
    binds = Binds(app, gangs)
    started = time.monotonic()
    binds.start(a[0])
    binds.start(a[1])
    binds.held(runtime, a[0], a[1])
    binds.start(b[0])
    gangs.kube.wait_for(lambda: "b1" in binds.answers, timeout=10, message="b1 answered before its hold ran out")
    assert binds.answers["b1"].startswith(f"gave way to pod group {gangs.ns}/a: 1 of 3 members placed against "
                                          "its 2 of 3"), binds.answers
    assert "backs off for" in binds.answers["b1"] and binds.answers["b1"].endswith("the pod will be retried")
    assert binds.answered_at["b1"] - started < 5
    refused = filter_reply(app, b[1], ["node"])["FailedAndUnresolvableNodes"]["node"]
    assert refused.startswith("pod group gave way to a competing gang: gave way to pod group ")
    binds.start(b[1])  # a member that passed /filter before: answered at once, no hold
    binds.start(a[2])
    binds.join()
    assert binds.answers["a1"] == binds.answers["a2"] == binds.answers["a3"] == ""
    assert "gave way to pod group" in binds.answers["b2"]
    assert gangs.bound("a1", "a2", "a3", "b1", "b2", "b3") == ["a1", "a2", "a3"]
    assert max(binds.answered_at.values()) - started < 10
    assert (give_ways("outranked"), holds_ended("timeout")) == (before[0] + 1, before[1])
    notes = gangs.kube.wait_for(lambda: gave_way_events(gangs, "b1"), message="a GaveWay event on b1")
    assert notes[0].startswith(f"gave way to pod group {gangs.ns}/a")


def test_four_gangs_for_one_room_three_give_way_to_one(gangs: Gangs, webhook: tuple[Runtime, Flask]) -> None:
    runtime, app = webhook
    assert runtime.gangs is not None
    runtime.gangs.hold_seconds = LONG_HOLD
    gangs.node(cpu="4")
    names = ["g1", "g2", "g3", "g4"]
    for name in names:
        gangs.gang(name, min_count=3)
    pods = {name: [member(gangs, f"{name}-{i}", name) for i in range(1, 4)] for name in names}
    wait_known(gangs, runtime, *(p["metadata"]["name"] for ps in pods.values() for p in ps))
    binds = Binds(app, gangs)
    started = time.monotonic()
    binds.start(pods["g1"][0])
    binds.held(runtime, pods["g1"][0])
    for name in names[1:]:
        binds.start(pods[name][0])
    gangs.kube.wait_for(lambda: all(f"{n}-1" in binds.answers for n in names[1:]), timeout=10,
                        message="the three others answered before their holds ran out")
    for name in names[1:]:
        assert binds.answers[f"{name}-1"].startswith(f"gave way to pod group {gangs.ns}/g1"), binds.answers
    for pod in pods["g1"][1:]:
        binds.start(pod)
    binds.join()
    assert [n for n in binds.answers if binds.answers[n] == ""] == ["g1-1", "g1-2", "g1-3"] or \
        sorted(n for n in binds.answers if binds.answers[n] == "") == ["g1-1", "g1-2", "g1-3"]
    assert sorted(gangs.bound(*(p["metadata"]["name"] for ps in pods.values() for p in ps))) == [
        "g1-1", "g1-2", "g1-3"]
    assert max(binds.answered_at.values()) - started < 10


def test_of_two_sizes_the_gang_that_fits_wins(gangs: Gangs, webhook: tuple[Runtime, Flask]) -> None:
    """Nodes of 3 and 1 CPU. `big` (2 x 2 CPU, older) holds one member on n3: its second fits
    nowhere any more, while `small` (3 x 1 CPU) waits for room (refused at /filter for the room
    `big` keeps). `big` gives way at once for want of room (to nobody: it cannot complete at all),
    and `small` then holds and binds whole, `big` refused meanwhile."""
    runtime, app = webhook
    assert runtime.gangs is not None
    runtime.gangs.hold_seconds = LONG_HOLD
    gangs.node("n3", cpu="3")
    gangs.node("n1", cpu="1")
    gangs.gang("big", min_count=2)
    gangs.gang("small", min_count=3)
    big = [gangs.kube.create_pod(f"big{i}", gangs.ns, cpu="2", spec={"schedulingGroup": {"podGroupName": "big"}})
           for i in (1, 2)]
    small = [member(gangs, f"small{i}", "small") for i in (1, 2, 3)]
    wait_known(gangs, runtime, "big1", "big2", "small1", "small2", "small3")
    assert filter_reply(app, big[0], ["n3", "n1"])["NodeNames"] == ["n3", "n1"]  # sums fit: 4 of 4 CPUs
    before = give_ways("no-room")
    binds = Binds(app, gangs)
    started = time.monotonic()
    binds.start(big[0], "n3")
    gangs.kube.wait_for(lambda: "big1" in binds.answers, timeout=10, message="big1 answered before its hold ran out")
    assert binds.answers["big1"].startswith(f"pod group {gangs.ns}/big cannot place the 1 more members its minCount "
                                            "2 needs, even with the other held gangs released"), binds.answers
    assert binds.answered_at["big1"] - started < 5
    assert "gave way" in filter_reply(app, big[1], ["n3", "n1"])["FailedAndUnresolvableNodes"]["n3"]
    assert filter_reply(app, small[0], ["n3", "n1"])["NodeNames"] == ["n3", "n1"]
    binds.start(small[0], "n1")
    binds.start(small[1], "n3")
    binds.start(small[2], "n3")
    binds.join()
    assert {n: binds.answers[n] for n in ("small1", "small2", "small3")} == dict.fromkeys(
        ("small1", "small2", "small3"), "")
    assert gangs.bound("big1", "big2", "small1", "small2", "small3") == ["small1", "small2", "small3"]
    assert give_ways("no-room") == before + 1


def test_a_lone_gang_still_waits_for_its_last_member_and_pods_of_no_group_bind_at_once(
        gangs: Gangs, webhook: tuple[Runtime, Flask]) -> None:
    """Nothing to compare with one gang holding: its quorum waits for the last member, which binds
    the gang whole when it comes; a pod of no group binds without waiting meanwhile."""
    runtime, app = webhook
    assert runtime.gangs is not None
    runtime.gangs.hold_seconds = LONG_HOLD
    gangs.node(cpu="4")
    gangs.gang("a", min_count=3)
    a = [member(gangs, f"a{i}", "a") for i in range(1, 4)]
    solo = gangs.kube.create_pod("solo", gangs.ns, cpu="1")
    wait_known(gangs, runtime, "a1", "a2", "a3")
    gangs.kube.wait_for(lambda: runtime.state.pod(f"{gangs.ns}/solo"), message="solo in the webhook's state")
    binds = Binds(app, gangs)
    binds.start(a[0])
    binds.start(a[1])
    binds.held(runtime, a[0], a[1])
    binds.start(solo)
    gangs.kube.wait_for(lambda: "solo" in binds.answers, timeout=10, message="the pod of no group bound at once")
    assert binds.answers["solo"] == "" and not {"a1", "a2"} & binds.answers.keys()
    checks = runtime.gangs.checks
    gangs.kube.wait_for(lambda: runtime.gangs.checks >= checks + 3, message="three give-way checks while held")
    assert not {"a1", "a2"} & binds.answers.keys()
    binds.start(a[2])
    binds.join()
    assert [binds.answers[n] for n in ("a1", "a2", "a3")] == ["", "", ""]
    assert gangs.bound("a1", "a2", "a3", "solo") == ["a1", "a2", "a3", "solo"]


def test_a_held_member_deleted_or_whose_group_is_deleted_lets_go_at_once(
        gangs: Gangs, webhook: tuple[Runtime, Flask]) -> None:
    """kube-scheduler keeps a pod assumed on its node while its bind is in flight: a bind held on
    for a deleted pod (or a deleted group) would keep that room from every other pod until the
    hold ran out. It is given up at once; the other held member keeps waiting for its quorum
    until its group is deleted. (A Coscheduling group: deleting a v1alpha2 one waits for its
    protection finalizer, and it counts as existing until then.)"""
    runtime, app = webhook
    assert runtime.gangs is not None
    runtime.gangs.hold_seconds = LONG_HOLD
    gangs.node(cpu="4")
    gangs.cosched("a", min_member=3)
    a = [gangs.kube.create_pod(f"a{i}", gangs.ns, cpu="1", labels={pg.POD_GROUP_LABEL: "a"}) for i in range(1, 4)]
    wait_known(gangs, runtime, "a1", "a2", "a3")
    binds = Binds(app, gangs)
    binds.start(a[0])
    binds.start(a[1])
    binds.held(runtime, a[0], a[1])
    gangs.kube.delete_pod("a1", gangs.ns, grace_period_seconds=0)
    gangs.kube.wait_for(lambda: "a1" in binds.answers, timeout=10, message="a1's bind given up")
    assert binds.answers["a1"] == (f"pod {gangs.ns}/a1 was deleted (or finished) while held for pod group "
                                   f"{gangs.ns}/a: its held bind is given up")
    assert "a2" not in binds.answers
    gangs.kube.call("DELETE", f"/apis/{pg.API_COSCHEDULING}/namespaces/{gangs.ns}/podgroups/a")
    gangs.kube.wait_for(lambda: "a2" in binds.answers, timeout=10, message="a2's bind given up")
    binds.join()
    assert binds.answers["a2"] == f"pod group {gangs.ns}/a was deleted while pod {gangs.ns}/a2 was held: its held " \
                                  "bind is given up"
    assert gangs.bound("a2") == []


def test_members_refused_while_their_group_was_incomplete_are_annotated_once_it_is(
        gangs: Gangs, webhook: tuple[Runtime, Flask]) -> None:
    """kube-scheduler retries a pod an extender refused only on some event, and a stock one takes
    the creation of another pending pod for none: p1, refused as "1 of 3 members", is annotated
    when p3 completes the group (an update of the pod itself, which it does act on)."""
    runtime, app = webhook
    gangs.node(cpu="4")
    gangs.gang("a", min_count=3)
    p1 = member(gangs, "p1", "a")
    wait_known(gangs, runtime, "p1")
    refused = filter_reply(app, p1, ["node"])["FailedAndUnresolvableNodes"]["node"]
    assert refused.startswith(f"{REASON_TOO_FEW}: pod group {gangs.ns}/a has 1 of 3 members")
    member(gangs, "p2", "a")
    wait_known(gangs, runtime, "p2")
    assert WAKE_ANNOTATION not in ((gangs.kube.get_pod("p1", gangs.ns) or {}).get("metadata") or {}).get(
        "annotations", {})
    member(gangs, "p3", "a")
    gangs.kube.wait_for(lambda: WAKE_ANNOTATION in (((gangs.kube.get_pod("p1", gangs.ns) or {}).get("metadata") or {})
                                                    .get("annotations") or {}),
                        timeout=10, message="p1 annotated once its group is complete")
    for name in ("p2", "p3"):  # never refused: nothing to wake
        assert WAKE_ANNOTATION not in (((gangs.kube.get_pod(name, gangs.ns) or {}).get("metadata") or {})
                                       .get("annotations") or {})
