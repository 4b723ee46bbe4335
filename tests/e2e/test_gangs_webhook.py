"""A stock kube-scheduler (no gang gates) placing a pod group all or nothing through the webhook.

config/kube-scheduler-gangs.yaml (bindVerb, httpTimeout 30s) against `extender serve`, on the
session's real control plane (no alpha gates: the group is a Coscheduling PodGroup from the
deploy/ CRD, its members labelled). A gang of 4 one-CPU members where only 3 fit binds none
(kube-scheduler alone would bind 3): /filter refuses every member as unresolvable, naming the
shortfall. Room freed: all 4 are filtered, reach /bind, are held until the fourth arrives, and
bind. And a webhook restarted (SIGTERM, SIGKILL of the master, SIGKILL of everything) while
three members are held loses none and binds none twice, nor a part of the gang.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.bench_gang_pairs import GangShape, run_round
from extender.checks.configs import check_scheduler_config_text
from extender.gangs import fitting
from extender.gangs import ledger as gl
from extender.model import podgroups as pg
from extender.webhook.worker import STOP_LINGER, TICK
from tests.e2e import configs, podgroups, podwatch, processes
from tests.fakeapi.client import KubeApiError
from tests.gangs.servers import CRD_FILE, wait_served
from tests.reliability.servers import children

pytestmark = [pytest.mark.e2e, pytest.mark.apiserver]

NAMESPACE = "e2e-gangs"
SCHEDULER = "e2e-gangs"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
MEMBERS = ("w1", "w2", "w3", "w4")
MERGE_PATCH = "application/merge-patch+json"


def node_of(kube: Any, name: str) -> str:
    return ((kube.get_pod(name, NAMESPACE) or {}).get("spec") or {}).get("nodeName") or ""


def scheduled_message(kube: Any, name: str) -> str:
    conditions = ((kube.get_pod(name, NAMESPACE) or {}).get("status") or {}).get("conditions") or []
    return next((c.get("message", "") for c in conditions if c["type"] == "PodScheduled"), "")


@pytest.fixture
def crd(cluster: Any) -> Any:
    kube = cluster.client
    try:
        kube.call("POST", CRD_PATH, yaml.safe_load(CRD_FILE.read_text()))
    except KubeApiError as err:
        if err.code != 409:
            raise
    wait_served(kube, f"/apis/{pg.API_COSCHEDULING}/namespaces/default/podgroups")
    yield
    kube.call("DELETE", f"{CRD_PATH}/podgroups.scheduling.x-k8s.io")


def test_a_gang_of_four_where_three_fit_binds_none_then_all_when_room_is_freed(
        cluster: Any, crd: Any, kube_scheduler: Any, extender: Any, tmp_path: Path) -> None:
    kube = cluster.client
    kube.ensure_namespace(NAMESPACE)
    kube.ensure_namespace("scheduler-extender")  # the gang ledger's Leases
    webhook = processes.serve(cluster.kubeconfig, tmp_path, scheduler_names=[SCHEDULER])
    config = configs.kube_scheduler_config(
        "kube-scheduler-gangs.yaml", kubeconfig=cluster.plane.user_kubeconfig("system:kube-scheduler"),
        scheduler_name=SCHEDULER, port=webhook.port)
    assert check_scheduler_config_text(yaml.safe_dump(config)) == []
    kube.create_node("gang-a", cpu="2")
    kube.create_node("gang-b", cpu="1")
    extender(webhook)
    kube_scheduler(config, name="kube-scheduler-gangs")

    kube.call("POST", f"/apis/{pg.API_COSCHEDULING}/namespaces/{NAMESPACE}/podgroups",
              {"apiVersion": pg.API_COSCHEDULING, "kind": "PodGroup", "metadata": {"name": "job"},
               "spec": {"minMember": 4}})
    for name in MEMBERS:
        kube.create_pod(name, NAMESPACE, cpu="1", scheduler_name=SCHEDULER, labels={pg.POD_GROUP_LABEL: "job"})
    kube.wait_for(lambda: all(fitting.REASON_MEMBERS in scheduled_message(kube, n) for n in MEMBERS),
                  timeout=30, message="every member refused for the gang's room")
    assert [n for n in MEMBERS if node_of(kube, n)] == []

    kube.create_node("gang-c", cpu="1")
    kube.wait_for(lambda: all(node_of(kube, n) for n in MEMBERS), timeout=60, message="all four bound")


@pytest.mark.parametrize("scenario", podgroups.WEBHOOK_SCENARIOS, ids=lambda s: s.name[:40])
def test_the_issues_webhook_scenarios_with_the_extender(
        cluster: Any, crd: Any, kube_scheduler: Any, extender: Any, tmp_path: Path,
        scenario: podgroups.WebhookScenario) -> None:
    """tests/e2e/podgroups.py's webhook scenarios, `with_extender` steps: all or none bound
    (their `alone` steps, a stock kube-scheduler binding part of a gang, run in test_podgroups.py)."""
    kube = cluster.client
    kube.ensure_namespace("scheduler-extender")
    webhook = processes.serve(cluster.kubeconfig, tmp_path, scheduler_names=[SCHEDULER], extra=["--gang-hold", "5"])
    config = configs.kube_scheduler_config(
        "kube-scheduler-gangs.yaml", kubeconfig=cluster.plane.user_kubeconfig("system:kube-scheduler"),
        scheduler_name=SCHEDULER, port=webhook.port)
    kube.create_node("node", cpu=scenario.node_cpu)
    extender(webhook)
    kube_scheduler(config, name="kube-scheduler-gangs")
    try:
        podgroups.run(kube, podgroups.PodGroupScenario(scenario.name, scenario.with_extender), namespace=NAMESPACE,
                      scheduler_name=SCHEDULER)
    finally:
        podgroups.clean(kube, NAMESPACE)


LEASES = "scheduler-extender"  # the gang ledger's Leases (serve's default Lease namespace here)
RESTARTS = ("sigterm", "sigkill-master", "sigkill-all")
HOLD_TAINT = {"key": "e2e.example/held-elsewhere", "effect": "NoSchedule"}


def _ledger(kube: Any, group_uid: str) -> gl.GangLedger:
    lease = kube.get_lease(gl.lease_name(group_uid), LEASES) or {}
    return gl.read((lease.get("metadata") or {}).get("annotations"))


def _scheduled_events(kube: Any, name: str) -> int:
    """kube-scheduler's "Scheduled" events for pod `name`, a repeated one counted as often as it happened."""
    return sum(max(e.get("count") or 1, (e.get("series") or {}).get("count") or 1)
               for e in kube.list_events(NAMESPACE, reason="Scheduled", involved_name=name))


def _bound_by(webhook: processes.ExtenderProcess, name: str) -> bool:
    """Whether `webhook`'s access log shows it binding pod `name`."""
    return any(f"verb=bind pod={NAMESPACE}/{name} " in line and "note=bound to" in line
               for line in webhook.log().splitlines())


def _restart(how: str, webhook: processes.ExtenderProcess, workers: list[int]) -> None:
    """Stop the webhook as `how` says (SIGTERM, or a worker whose master was killed: the worker
    answers its held binds at once and stops; SIGKILL of all: the connections are cut)."""
    assert webhook.process is not None
    if how == "sigterm":
        webhook.process.send_signal(signal.SIGTERM)
        return
    webhook.process.kill()  # the master first, so that it forks no new worker
    webhook.process.wait(10)
    if how == "sigkill-all":
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("how", RESTARTS)
def test_a_webhook_restarted_while_binds_are_held_loses_no_pod_and_binds_none_twice(
        cluster: Any, crd: Any, kube_scheduler: Any, extender: Any, logs: list[Any], tmp_path: Path,
        how: str) -> None:
    """A gang of 4: three members held at /bind (the fourth fits nowhere yet), the webhook
    restarted on the same port, then the fourth made placeable.

    SIGTERM, or SIGKILL of the gunicorn master alone: the old worker, stopping, answers its held
    binds at once with a retryable error and withdraws their holds (runtime.drain), so it neither
    keeps the port for the hold nor binds anyone; kube-scheduler retries the three, and all four
    bind through the new process once they can be placed. SIGKILL of master and workers: kube-scheduler's connections are cut,
    its extender Bind fails and handleBindingCycleError forgets the three places and sends the pods
    back to the queue (backoff); their holds stay in the Lease. Here the three can no longer be
    placed (their node is tainted meanwhile), so the fourth must not be released on the dead
    process's count: it is held alone, refused after the hold, and nothing binds until the taint
    goes. Throughout, each pod's nodeName is set once and never changes (the test's own watch)
    and kube-scheduler records one Scheduled event per pod."""
    kube = cluster.client
    kube.ensure_namespace(NAMESPACE)
    kube.ensure_namespace(LEASES)
    first = processes.serve(cluster.kubeconfig, tmp_path, scheduler_names=[SCHEDULER], name="serve-1",
                           extra=["--access-log"])
    config = configs.kube_scheduler_config(
        "kube-scheduler-gangs.yaml", kubeconfig=cluster.plane.user_kubeconfig("system:kube-scheduler"),
        scheduler_name=SCHEDULER, port=first.port)
    kube.create_node("gang-a", cpu="3", labels={"pool": "a"})
    kube.create_node("gang-b", cpu="1")
    watch = podwatch.NodeNames(kube, NAMESPACE).start()
    logs.append(lambda: ("serve before the restart", first.log()))
    first.start()
    workers = children(first.process.pid) if first.process else []
    try:
        kube_scheduler(config, name="kube-scheduler-gangs")
        group = kube.call("POST", f"/apis/{pg.API_COSCHEDULING}/namespaces/{NAMESPACE}/podgroups",
                          {"apiVersion": pg.API_COSCHEDULING, "kind": "PodGroup", "metadata": {"name": "job"},
                           "spec": {"minMember": 4}})
        group_uid = group["metadata"]["uid"]
        for name in MEMBERS:
            kube.create_pod(name, NAMESPACE, cpu="1", scheduler_name=SCHEDULER, labels={pg.POD_GROUP_LABEL: "job"},
                            node_selector={"pool": "b" if name == "w4" else "a"})
        held = kube.wait_for(lambda: len((doc := _ledger(kube, group_uid)).holds) == 3 and doc, timeout=60,
                             message="w1, w2, w3 held at /bind")
        dead = {e.by for e in held.holds.values()}

        _restart(how, first, workers)
        if how != "sigkill-all":
            # The old worker notices (its master gone: within a TICK) and shuts its idle kept-alive
            # connections after STOP_LINGER: from then on kube-scheduler reaches only the new process.
            time.sleep(TICK + STOP_LINGER + 1)
        kube.patch_node("gang-a", {"spec": {"taints": [HOLD_TAINT]}}, content_type=MERGE_PATCH)
        # Before the new process lists the nodes: a webhook whose node watch lags behind kube-scheduler's
        # refuses w4 on the label it has not seen, and nothing would retry w4 for minutes.
        kube.patch_node("gang-b", {"metadata": {"labels": {"pool": "b"}}}, content_type=MERGE_PATCH)
        second = extender(processes.ExtenderProcess(first.args, first.port, tmp_path / "serve-2.log"), 60)
        untainted = 0.0
        if how == "sigkill-all":
            kube.wait_for(lambda: "did not reach minCount" in scheduled_message(kube, "w4") or node_of(kube, "w4"),
                          timeout=90, message="w4 held alone at /bind, then refused")
            assert [n for n in MEMBERS if node_of(kube, n)] == [], "a part of the gang bound"
            left = gl.expire(_ledger(kube, group_uid), now=time.time())
            assert not {e.by for e in left.holds.values()} & dead, "the killed process's holds still count"
            untainted = time.monotonic()
        kube.patch_node("gang-a", {"spec": {"taints": None}}, content_type=MERGE_PATCH)
        kube.wait_for(lambda: all(node_of(kube, n) for n in MEMBERS), timeout=120, message="all four bound")
        kube.wait_for(lambda: all(_scheduled_events(kube, n) for n in MEMBERS), timeout=30,
                      message="a Scheduled event for every member")
        time.sleep(2)  # a second bind, had there been one, would have shown by now
        assert {n: watch.nodes(n) for n in MEMBERS} == {n: [node_of(kube, n)] for n in MEMBERS}
        assert {n: _scheduled_events(kube, n) for n in MEMBERS} == dict.fromkeys(MEMBERS, 1)
        assert all(watch.first_bound[n] > untainted for n in MEMBERS)
        assert second.get("/readyz")[0] == 200
        # Who bound whom (the access log): every member through the new process; the old one,
        # drained or killed, bound none.
        binders = {n: [p for p, w in (("old", first), ("new", second)) if _bound_by(w, n)] for n in MEMBERS}
        assert binders == dict.fromkeys(MEMBERS, ["new"])
        if how == "sigterm":
            assert first.process is not None and first.process.wait(30) == 0
    finally:
        watch.stop()
        first.stop()
        for pid in workers:  # a worker whose master was killed exits by itself; make sure
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# ---- competing gangs: one whole at once, the others give way (extender.gangs.giveway) ------------

COMPETING_HOLD = 20.0  # the issue's --gang-hold: a round that waited a hold out would take longer
COMPETING = {
    "pair": ((GangShape("a", 3), GangShape("b", 3)), {"room": "4"}),
    "four-for-one": (tuple(GangShape(n, 3) for n in ("a", "b", "c", "d")), {"room": "4"}),
    "sizes": ((GangShape("big", 2, cpu="2"), GangShape("small", 3)), {"n3": "3", "n1": "1"}),
}


def _gave_way_notes(kube: Any) -> list[str]:
    events = kube.list_events(NAMESPACE, reason="GaveWay")  # the core view of events.k8s.io's
    return [e.get("message") or "" for e in events]


@pytest.mark.parametrize("scenario", COMPETING)
def test_competing_gangs_end_with_one_whole_gang_without_waiting_a_hold_out(
        cluster: Any, crd: Any, kube_scheduler: Any, extender: Any, tmp_path: Path, scenario: str) -> None:
    """The issue's runs, on a stock kube-scheduler with the webhook (--gang-hold 20): two gangs of
    3 x 1 CPU for room for 4; four such gangs; a gang of 2 x 2 CPU that can never complete on
    nodes of 3 and 1 CPU against one of 3 x 1 CPU that can. All members are created at once,
    interleaved. One gang is whole well inside one hold (none waited out: the hold metric shows
    no time-out), none is left partly bound, the one that fits is the one that wins, and each
    gang that gave way says so on its pods (a GaveWay event naming the rival or the room)."""
    gangs, nodes = COMPETING[scenario]
    kube = cluster.client
    kube.ensure_namespace(NAMESPACE)
    kube.ensure_namespace(LEASES)
    # Two workers, as a production install runs: each sees the other's holds only through the
    # gang ledgers, where the race between /filter and /bind is widest (the issue's livelock).
    webhook = processes.serve(cluster.kubeconfig, tmp_path, scheduler_names=[SCHEDULER],
                              extra=["--gang-hold", f"{COMPETING_HOLD:g}", "--workers", "2"])
    config = configs.kube_scheduler_config(
        "kube-scheduler-gangs.yaml", kubeconfig=cluster.plane.user_kubeconfig("system:kube-scheduler"),
        scheduler_name=SCHEDULER, port=webhook.port)
    for name, cpu in nodes.items():
        kube.create_node(name, cpu=cpu)
    extender(webhook)
    kube_scheduler(config, name="kube-scheduler-gangs")
    result = run_round(kube, NAMESPACE, SCHEDULER, gangs, timeout=60, settle=3)
    assert result.first_whole_s is not None, f"no gang whole in 60 s: {result.bound}"
    assert result.first_whole_s < COMPETING_HOLD, f"a hold was waited out: {result}"
    assert result.partial == [], f"partly bound: {result}"
    assert sum(1 for g in gangs if result.bound[g.name] == g.members) == 1, result
    if scenario == "sizes":
        assert result.winner == "small", result
    assert webhook.metric("extender_gang_holds_total", outcome="timeout") == 0
    # A gang that got members held beside the winner gave way; one that got none was refused at
    # /filter for the room the holders keep, and never held. Either way its pods say why.
    gave_way = webhook.metric("extender_gang_give_way_total")
    print(f"{scenario}: first whole gang {result.first_whole_s:.2f} s, {gave_way:g} give-way(s)")
    if gave_way:
        notes = kube.wait_for(lambda: _gave_way_notes(kube), timeout=10, message="GaveWay events on the losers' pods")
        assert all(("gave way to pod group " in n or "cannot place" in n) and "backs off" in n for n in notes), notes
        # kube-scheduler's own FailedScheduling event carries the bind's answer too.
        kube.wait_for(lambda: any("backs off for" in (e.get("message") or "")
                                  for e in kube.list_events(NAMESPACE, reason="FailedScheduling")),
                      timeout=10, message="kube-scheduler's FailedScheduling event with the reason")
