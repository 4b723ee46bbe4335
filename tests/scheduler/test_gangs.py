"""Gang scheduling by the standalone scheduler: the scenarios of kube-scheduler v1.36.3's
test/integration/scheduler/podgroup/podgroup_test.go (docs/gangs.md, section 5) as our own.

Every test runs on the fake API server and on a real etcd + kube-apiserver v1.36.3 started with
the gang gates and `--runtime-config=scheduling.k8s.io/v1alpha2=true` (skipped, saying so,
without the envtest binaries; CI builds none). The cluster of podgroup_test.go: one node with
4 CPUs in zone1, members of 1 CPU with priority 100, blockers of 2 CPUs. Each test has its own
namespace (a v1alpha2 group keeps its protection finalizer, and no controller removes it).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from extender import metrics
from extender.cluster.state import ClusterState
from extender.kube.client import build_api_client
from extender.model import podgroups as pg
from extender.scheduler import queueing
from extender.scheduler.standalone import Scheduler
from tests.fakeapi.client import KubeTestClient
from tests.fakeapi.fixtures import ApiServerHandle
from tests.gangs.servers import SERVERS, gang_apiserver
from tests.scheduler.conftest import FAST_WATCH, SCHEDULER_NAME, RecordingBinder, standalone_profile

pytestmark = pytest.mark.apiserver

GRACE_0 = {"terminationGracePeriodSeconds": 0}
_namespaces = itertools.count()


@pytest.fixture(scope="module", params=SERVERS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServerHandle]:
    with gang_apiserver(request.param, tmp_path_factory.mktemp("fakeapi")) as handle:
        yield handle


class Gangs:
    """One test's namespace, node and scheduler on the module's server."""

    def __init__(self, server: ApiServerHandle) -> None:
        self.server = server
        self.kube: KubeTestClient = server.client
        self.ns = f"gang-{next(_namespaces)}"
        self.kube.ensure_namespace(self.ns)
        self.kube.ensure_priority_class("gang-test-100", 100)
        self.kube.ensure_priority_class("gang-test-10", 10)
        self.api_client = build_api_client(kubeconfig=str(server.kubeconfig))
        self.scheduler: Scheduler | None = None

    def start(self) -> Scheduler:
        state = ClusterState()
        self.scheduler = Scheduler(self.api_client, [standalone_profile()], state=state, watch_options=FAST_WATCH,
                                   binder=RecordingBinder(self.api_client, state))
        self.scheduler.start()
        assert self.scheduler.wait_ready(20), "scheduler caches did not sync"
        return self.scheduler

    def close(self) -> None:
        if self.scheduler is not None:
            self.scheduler.stop(timeout=5)
        self.api_client.close()
        if self.server.fake is not None:
            self.server.fake.reset()
            return
        self.kube.delete_all([self.ns])

    # ---- objects ---------------------------------------------------------------------------

    def node(self, name: str = "node", cpu: str = "4", zone: str = "zone1") -> None:
        self.kube.create_node(name, cpu=cpu, labels={"topology.kubernetes.io/zone": zone})

    def gang(self, name: str, min_count: int = 3) -> None:
        self.kube.call("POST", f"/apis/{pg.API_V1ALPHA2}/namespaces/{self.ns}/podgroups",
                       {"apiVersion": pg.API_V1ALPHA2, "kind": "PodGroup", "metadata": {"name": name},
                        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}})

    def gang_in_one(self, name: str, min_count: int, key: str) -> None:
        self.kube.call("POST", f"/apis/{pg.API_V1ALPHA2}/namespaces/{self.ns}/podgroups",
                       {"apiVersion": pg.API_V1ALPHA2, "kind": "PodGroup", "metadata": {"name": name},
                        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}},
                                 "schedulingConstraints": {"topology": [{"key": key}]}}})

    def basic(self, name: str) -> None:
        self.kube.call("POST", f"/apis/{pg.API_V1ALPHA2}/namespaces/{self.ns}/podgroups",
                       {"apiVersion": pg.API_V1ALPHA2, "kind": "PodGroup", "metadata": {"name": name},
                        "spec": {"schedulingPolicy": {"basic": {}}}})

    def cosched(self, name: str, min_member: int) -> None:
        self.kube.call("POST", f"/apis/{pg.API_COSCHEDULING}/namespaces/{self.ns}/podgroups",
                       {"apiVersion": pg.API_COSCHEDULING, "kind": "PodGroup", "metadata": {"name": name},
                        "spec": {"minMember": min_member}})

    def member(self, name: str, group: str, *, label: bool = False) -> None:
        self.kube.create_pod(name, self.ns, cpu="1", scheduler_name=SCHEDULER_NAME,
                             priority_class_name="gang-test-100",
                             labels={pg.POD_GROUP_LABEL: group} if label else None,
                             spec={} if label else {"schedulingGroup": {"podGroupName": group}})

    def blocker(self, name: str = "blocker", cpu: str = "2", priority: str = "gang-test-100") -> None:
        self.kube.create_pod(name, self.ns, cpu=cpu, node_name="node", priority_class_name=priority, spec=GRACE_0)

    def delete(self, name: str) -> None:
        self.kube.delete_pod(name, self.ns)

    # ---- reads -----------------------------------------------------------------------------

    def node_of(self, name: str) -> str:
        return ((self.kube.get_pod(name, self.ns) or {}).get("spec") or {}).get("nodeName") or ""

    def bound(self, *names: str) -> list[str]:
        return [n for n in names if self.node_of(n)]

    def wait_bound(self, *names: str, timeout: float = 20) -> None:
        self.kube.wait_for(lambda: len(self.bound(*names)) == len(names), timeout=timeout,
                           message=f"{', '.join(names)} bound (bound: {self.bound(*names)})")

    def pod_scheduled(self, name: str) -> dict[str, Any]:
        conditions = ((self.kube.get_pod(name, self.ns) or {}).get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "PodScheduled"), {})

    def wait_unschedulable(self, *names: str, timeout: float = 20) -> None:
        self.kube.wait_for(lambda: all(self.pod_scheduled(n).get("reason") == "Unschedulable" for n in names),
                           timeout=timeout, message=f"{', '.join(names)} PodScheduled=False/Unschedulable")

    def condition(self, group: str) -> dict[str, Any]:
        raw = self.kube.call("GET", f"/apis/{pg.API_V1ALPHA2}/namespaces/{self.ns}/podgroups/{group}")
        found = [c for c in (raw.get("status") or {}).get("conditions") or [] if c["type"] == pg.SCHEDULED_CONDITION]
        return found[0] if found else {}

    def wait_condition(self, group: str, reason: str, timeout: float = 20) -> dict[str, Any]:
        return self.kube.wait_for(lambda: (lambda c: c if c.get("reason") == reason else None)(self.condition(group)),
                                  timeout=timeout, message=f"{group} PodGroupScheduled reason {reason}")

    def gated(self, *names: str, timeout: float = 10) -> None:
        assert self.scheduler is not None
        queue = self.scheduler.queue
        self.kube.wait_for(lambda: all(queue.where(f"{self.ns}/{n}") == queueing.GATED for n in names),
                           timeout=timeout, message=f"{', '.join(names)} gated")


@pytest.fixture
def gangs(server: ApiServerHandle) -> Iterator[Gangs]:
    made = Gangs(server)
    try:
        yield made
    finally:
        made.close()


def settle(gangs: Gangs, *, seconds: float = 1.5) -> None:
    """Give the scheduler time for any further attempt (checked as the absence of a change)."""
    import time

    assert gangs.scheduler is not None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.1)


# ---- podgroup_test.go TestPodGroupScheduling ----------------------------------------------------


def test_1_gang_schedules_when_group_and_resources_are_available(gangs: Gangs) -> None:
    gangs.node()
    gangs.start()
    gangs.gang("pg1")
    for name in ("p1", "p2", "p3"):
        gangs.member(name, "pg1")
    gangs.wait_bound("p1", "p2", "p3")
    condition = gangs.wait_condition("pg1", pg.REASON_SCHEDULED)
    assert (condition["status"], condition["message"]) == ("True", "")


def test_2_gang_waits_for_its_quorum_then_schedules(gangs: Gangs) -> None:
    gangs.node()
    gangs.start()
    gangs.gang("pg1")
    gangs.member("p1", "pg1")
    gangs.member("p2", "pg1")
    gangs.gated("p1", "p2")
    assert gangs.bound("p1", "p2") == []
    gangs.member("p3", "pg1")
    gangs.wait_bound("p1", "p2", "p3")


def group_after_its_members(gangs: Gangs, make_group: Callable[[str], None]) -> None:
    """Scenarios 3 and 9: a 2-CPU blocker fills half the node; members p1..p3 of pg1 wait at
    the gate until ``make_group`` creates pg1, after them."""
    gangs.node()
    gangs.blocker()
    gangs.start()
    for name in ("p1", "p2", "p3"):
        gangs.member(name, "pg1")
    gangs.gated("p1", "p2", "p3")
    make_group("pg1")


def test_3_gang_waits_for_its_group_then_for_room(gangs: Gangs) -> None:
    group_after_its_members(gangs, gangs.gang)
    gangs.wait_unschedulable("p1", "p2", "p3")
    condition = gangs.wait_condition("pg1", pg.REASON_UNSCHEDULABLE)
    assert (condition["status"], condition["message"]) == ("False", pg.KUBE_GROUP_UNSCHEDULABLE_MESSAGE)
    assert gangs.bound("p1", "p2", "p3") == []
    placed = [gangs.pod_scheduled(n)["message"] for n in ("p1", "p2", "p3")]
    assert placed.count(pg.KUBE_MEMBER_UNSCHEDULABLE_MESSAGE) == 2  # the third fit nowhere: its own message
    gangs.delete("blocker")
    gangs.wait_bound("p1", "p2", "p3")
    assert gangs.wait_condition("pg1", pg.REASON_SCHEDULED)["status"] == "True"


def test_4_more_members_than_min_count_the_extra_one_waits_for_room(gangs: Gangs) -> None:
    gangs.node()
    gangs.blocker("small-blocker", cpu="1")
    gangs.start()
    for name in ("p1", "p2", "p3", "p4"):
        gangs.member(name, "pg1")
    gangs.gang("pg1")
    gangs.kube.wait_for(lambda: len(gangs.bound("p1", "p2", "p3", "p4")) == 3, timeout=20, message="3 bound")
    gangs.wait_condition("pg1", pg.REASON_SCHEDULED)
    settle(gangs)
    assert len(gangs.bound("p1", "p2", "p3", "p4")) == 3
    gangs.delete("small-blocker")
    gangs.wait_bound("p1", "p2", "p3", "p4")
    assert gangs.condition("pg1")["status"] == "True"


@pytest.mark.parametrize("reversed_order", [False, True], ids=["in-order", "reversed"])
def test_5_6_two_gangs_competing_for_the_same_room_do_not_deadlock(gangs: Gangs, reversed_order: bool) -> None:
    gangs.node()
    gangs.start()
    gangs.gang("pg1")
    gangs.gang("pg2")
    pairs = [("p1", "other-p1"), ("p2", "other-p2"), ("p3", "other-p3")]
    if reversed_order:
        pairs = [(b, a) for a, b in reversed(pairs)]
    for first, second in pairs:
        gangs.member(first, "pg2" if first.startswith("other") else "pg1")
        gangs.member(second, "pg2" if second.startswith("other") else "pg1")
    ones, others = ("p1", "p2", "p3"), ("other-p1", "other-p2", "other-p3")
    winners, losers = (others, ones) if reversed_order else (ones, others)
    gangs.wait_bound(*winners)
    gangs.wait_unschedulable(*losers)
    settle(gangs)
    assert gangs.bound(*losers) == []
    assert gangs.condition("pg2" if reversed_order else "pg1")["status"] == "True"
    assert gangs.condition("pg1" if reversed_order else "pg2")["reason"] == pg.REASON_UNSCHEDULABLE


def preempt_for_four_members(gangs: Gangs, make_group: Callable[[str], None]) -> None:
    """Scenarios 7 and 10: a 2-CPU blocker at priority 10 fills half the node; ``make_group``
    creates pg1, whose four 1-CPU members at priority 100 all bind, the blocker preempted."""
    gangs.node()
    gangs.blocker("low-priority-blocker", priority="gang-test-10")
    gangs.start()
    make_group("pg1")
    for name in ("p1", "p2", "p3", "p4"):
        gangs.member(name, "pg1")
    gangs.wait_bound("p1", "p2", "p3", "p4", timeout=30)
    assert gangs.kube.get_pod("low-priority-blocker", gangs.ns) is None


def test_7_gang_schedules_with_preemption(gangs: Gangs) -> None:
    preempt_for_four_members(gangs, gangs.gang)
    assert gangs.wait_condition("pg1", pg.REASON_SCHEDULED)["status"] == "True"


def test_8_basic_group_schedules_without_gang_enforcement(gangs: Gangs) -> None:
    gangs.node()
    gangs.start()
    gangs.basic("pg1")
    gangs.member("p1", "pg1")
    gangs.wait_bound("p1")
    gangs.member("p2", "pg1")
    gangs.member("p3", "pg1")
    gangs.wait_bound("p2", "p3")


def test_9_basic_group_waits_for_its_group_then_part_of_it_for_room(gangs: Gangs) -> None:
    group_after_its_members(gangs, gangs.basic)
    gangs.kube.wait_for(lambda: len(gangs.bound("p1", "p2", "p3")) == 2, timeout=20, message="2 bound")
    settle(gangs)
    assert len(gangs.bound("p1", "p2", "p3")) == 2
    gangs.delete("blocker")
    gangs.wait_bound("p1", "p2", "p3")


def test_10_basic_group_schedules_with_preemption(gangs: Gangs) -> None:
    preempt_for_four_members(gangs, gangs.basic)


# ---- Coscheduling's API, faults and metrics -------------------------------------------------------


def test_a_coscheduling_group_binds_all_or_nothing(gangs: Gangs) -> None:
    gangs.node(cpu="2")
    gangs.start()
    gangs.cosched("job", min_member=3)
    for name in ("w1", "w2", "w3"):
        gangs.member(name, "job", label=True)
    gangs.wait_unschedulable("w1", "w2", "w3")
    settle(gangs)
    assert gangs.bound("w1", "w2", "w3") == []
    path = f"/apis/{pg.API_COSCHEDULING}/namespaces/{gangs.ns}/podgroups/job"
    # As Coscheduling's controller: minMember pods exist, none running.
    gangs.kube.wait_for(lambda: gangs.kube.call("GET", path).get("status", {}).get("phase") == pg.PHASE_SCHEDULING,
                        message="phase Scheduling")
    gangs.node("node-2", cpu="2")
    gangs.wait_bound("w1", "w2", "w3")


@pytest.mark.parametrize("count", [2, 4], ids=["pair", "four-for-one"])
def test_competing_coscheduling_gangs_one_whole_at_once_the_rest_none(gangs: Gangs, count: int) -> None:
    """Issue 46's competing gangs, standalone: Coscheduling groups of 3 x 1 CPU for room for 4,
    members created interleaved. Each group is placed whole in one cycle or not at all (nothing is
    held in part, so no gang waits out a hold and none has to give way): one gang binds, the
    others bind none and wait for room, and no hold times out."""
    from prometheus_client import REGISTRY

    timeouts = REGISTRY.get_sample_value("extender_gang_timeouts_total") or 0.0
    gangs.node()
    gangs.start()
    names = [f"job{g}" for g in range(count)]
    for name in names:
        gangs.cosched(name, min_member=3)
    for index in range(3):
        for name in names:
            gangs.member(f"{name}-{index}", name, label=True)
    members = {name: [f"{name}-{i}" for i in range(3)] for name in names}
    gangs.kube.wait_for(lambda: [n for n in names if len(gangs.bound(*members[n])) == 3], timeout=20,
                        message="one gang whole")
    losers = [n for n in names if len(gangs.bound(*members[n])) < 3]
    gangs.wait_unschedulable(*(m for n in losers for m in members[n]))
    settle(gangs)
    assert sorted(len(gangs.bound(*members[n])) for n in names) == [0] * (count - 1) + [3]
    assert (REGISTRY.get_sample_value("extender_gang_timeouts_total") or 0.0) == timeouts


def test_a_member_naming_a_missing_group_waits_and_a_pod_of_no_group_does_not(gangs: Gangs) -> None:
    gangs.node()
    scheduler = gangs.start()
    gangs.member("p1", "nowhere")
    gangs.kube.create_pod("plain", gangs.ns, cpu="1", scheduler_name=SCHEDULER_NAME)
    gangs.wait_bound("plain")
    gangs.gated("p1")
    status = scheduler.gangs.coordinator.admission(gangs.kube.get_pod("p1", gangs.ns)["metadata"]["uid"])
    assert status.message == f"pod group {gangs.ns}/nowhere does not exist (yet)"
    assert gangs.bound("p1") == []


def test_completion_is_measured(gangs: Gangs) -> None:
    before = metrics.GANG_COMPLETION._sum.get()  # type: ignore[attr-defined]
    count = sum(s.value for s in metrics.GANG_COMPLETION.collect()[0].samples if s.name.endswith("_count"))
    gangs.node()
    gangs.start()
    gangs.gang("pg1", min_count=2)
    gangs.member("p1", "pg1")
    gangs.member("p2", "pg1")
    gangs.wait_bound("p1", "p2")
    after = sum(s.value for s in metrics.GANG_COMPLETION.collect()[0].samples if s.name.endswith("_count"))
    assert after == count + 1 and metrics.GANG_COMPLETION._sum.get() >= before  # type: ignore[attr-defined]



# ---- schedulingConstraints.topology (tas_test.go's scenarios) -------------------------------------

ZONE = "topology.kubernetes.io/zone"


def constrained_gang(gangs: Gangs, *nodes: tuple[str, str, str]) -> None:
    """``nodes`` as (name, cpu, zone), then pg1: a gang of three 1-CPU members that must share
    one zone."""
    for name, cpu, zone in nodes:
        gangs.node(name, cpu=cpu, zone=zone)
    gangs.start()
    gangs.gang_in_one("pg1", 3, ZONE)
    for name in ("p1", "p2", "p3"):
        gangs.member(name, "pg1")


def test_a_constrained_gang_goes_whole_to_the_one_domain_that_fits_it(gangs: Gangs) -> None:
    constrained_gang(gangs, ("a1", "1", "a"), ("a2", "1", "a"), ("b1", "2", "b"), ("b2", "2", "b"))
    gangs.wait_bound("p1", "p2", "p3")
    assert {gangs.node_of(n) for n in ("p1", "p2", "p3")} <= {"b1", "b2"}


def test_a_constrained_gang_no_domain_fits_waits_though_the_cluster_has_room(gangs: Gangs) -> None:
    constrained_gang(gangs, ("a1", "2", "a"), ("b1", "2", "b"))
    gangs.wait_unschedulable("p1", "p2", "p3")
    settle(gangs)
    assert gangs.bound("p1", "p2", "p3") == []
    assert gangs.condition("pg1")["reason"] == pg.REASON_UNSCHEDULABLE
    gangs.node("b2", cpu="1", zone="b")
    gangs.wait_bound("p1", "p2", "p3")
    assert {gangs.node_of(n) for n in ("p1", "p2", "p3")} <= {"b1", "b2"}
