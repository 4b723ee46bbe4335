"""Pod groups side by side: kube-scheduler v1.36.3 with its gang gates and our standalone scheduler.

One control plane (kube-apiserver with `GenericWorkload`, `GangScheduling` and
`scheduling.k8s.io/v1alpha2` served), the node of podgroup_test.go (4 CPUs). For each
scenario, kube-scheduler (started with the same gates) places its copy in a namespace of its
own, then our scheduler (in this process) places the same objects in another: the same
number of pods bound and pending per group, and the same `PodGroupScheduled` status and
reason on every group. Pods are deleted between the two runs; groups stay (their protection
finalizer keeps them, no controller runs), each in its run's namespace.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from extender.cluster.state import ClusterState
from extender.kube.client import build_api_client
from extender.model import podgroups as pg
from extender.scheduler.standalone import Scheduler
from tests.e2e.controlplane import ControlPlane, scheduler_configuration
from tests.fakeapi.envtest import find_assets
from tests.scheduler.conftest import FAST_WATCH, standalone_profile

pytestmark = [pytest.mark.e2e, pytest.mark.apiserver]

GATES = "GenericWorkload=true,GangScheduling=true"
SETTLE = 4.0  # seconds without a change once the expected pods are bound (longer than a backoff)
_runs = itertools.count()


@dataclass(frozen=True)
class GangScenario:
    name: str
    groups: dict[str, int]  # group -> minCount
    members: tuple[tuple[str, str], ...]  # (pod, group) in creation order
    blocker_cpu: str = ""  # a bound pod taking that much of the node first
    blocker_priority: str = "gang-e2e-100"
    bound: int = 0  # pods bound in the settled state

    def __str__(self) -> str:
        return self.name


SCENARIOS = [
    GangScenario("fits", {"pg1": 3}, (("p1", "pg1"), ("p2", "pg1"), ("p3", "pg1")), bound=3),
    GangScenario("no-quorum-of-members", {"pg1": 3}, (("p1", "pg1"), ("p2", "pg1")), bound=0),
    GangScenario("no-room", {"pg1": 3}, (("p1", "pg1"), ("p2", "pg1"), ("p3", "pg1")), blocker_cpu="2", bound=0),
    GangScenario("more-members-than-min-count", {"pg1": 3},
                 (("p1", "pg1"), ("p2", "pg1"), ("p3", "pg1"), ("p4", "pg1")), blocker_cpu="1", bound=3),
    GangScenario("two-gangs-compete", {"pg1": 3, "pg2": 3},
                 (("p1", "pg1"), ("other-p1", "pg2"), ("p2", "pg1"), ("other-p2", "pg2"), ("p3", "pg1"),
                  ("other-p3", "pg2")), bound=3),
    GangScenario("fits-by-preemption", {"pg1": 3}, (("p1", "pg1"), ("p2", "pg1"), ("p3", "pg1"), ("p4", "pg1")),
                 blocker_cpu="2", blocker_priority="gang-e2e-10", bound=4),
]


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    assets = find_assets()
    if assets is None or assets.kube_scheduler is None:
        pytest.skip("needs etcd, kube-apiserver and kube-scheduler v1.36 (KUBEBUILDER_ASSETS); CI builds none")
    with ControlPlane(assets, apiserver_args=(f"--feature-gates={GATES}",
                                              "--runtime-config=scheduling.k8s.io/v1alpha2=true")) as started:
        kube = started.client
        kube.create_node("node", cpu="4", labels={"topology.kubernetes.io/zone": "zone1"})
        kube.ensure_priority_class("gang-e2e-100", 100)
        kube.ensure_priority_class("gang-e2e-10", 10)
        yield started


@dataclass
class Settled:
    bound: dict[str, int]  # group -> members bound
    pending: dict[str, int]
    conditions: dict[str, tuple[str, str]]  # group -> (status, reason), ("", "") when none


def run(plane: ControlPlane, scenario: GangScenario, scheduler_name: str, namespace: str) -> Settled:
    kube = plane.client
    kube.ensure_namespace(namespace)
    if scenario.blocker_cpu:
        kube.create_pod("blocker", namespace, cpu=scenario.blocker_cpu, node_name="node",
                        priority_class_name=scenario.blocker_priority, spec={"terminationGracePeriodSeconds": 0})
    for group, min_count in scenario.groups.items():
        kube.call("POST", f"/apis/{pg.API_V1ALPHA2}/namespaces/{namespace}/podgroups",
                  {"apiVersion": pg.API_V1ALPHA2, "kind": "PodGroup", "metadata": {"name": group},
                   "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}})
    for name, group in scenario.members:
        kube.create_pod(name, namespace, cpu="1", scheduler_name=scheduler_name, priority_class_name="gang-e2e-100",
                        spec={"schedulingGroup": {"podGroupName": group}})

    def bound() -> int:
        return sum(1 for name, _ in scenario.members
                   if ((kube.get_pod(name, namespace) or {}).get("spec") or {}).get("nodeName"))

    kube.wait_for(lambda: bound() >= scenario.bound, timeout=30, message=f"{scenario.bound} bound")
    time.sleep(SETTLE)
    settled = Settled({}, {}, {})
    for name, group in scenario.members:
        placed = bool(((kube.get_pod(name, namespace) or {}).get("spec") or {}).get("nodeName"))
        counts = settled.bound if placed else settled.pending
        counts[group] = counts.get(group, 0) + 1
    for group in scenario.groups:
        raw = kube.call("GET", f"/apis/{pg.API_V1ALPHA2}/namespaces/{namespace}/podgroups/{group}")
        found = [c for c in (raw.get("status") or {}).get("conditions") or [] if c["type"] == pg.SCHEDULED_CONDITION]
        settled.conditions[group] = (found[0]["status"], found[0]["reason"]) if found else ("", "")
    kube.call("DELETE", f"/api/v1/namespaces/{namespace}/pods",
              {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
    kube.wait_for(lambda: not kube.list_pods(namespace), timeout=20, message="pods deleted")
    return settled


@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_the_same_pods_bound_and_the_same_group_conditions(plane: ControlPlane, scenario: GangScenario) -> None:
    index = next(_runs)
    kube_scheduler = plane.start_kube_scheduler(scheduler_configuration("e2e-kube"), name=f"kube-scheduler-{index}",
                                                extra_args=[f"--feature-gates={GATES}"])
    try:
        theirs = run(plane, scenario, "e2e-kube", f"kube-{index}")
    finally:
        kube_scheduler.stop()
    api_client = build_api_client(kubeconfig=str(plane.kubeconfig))
    state = ClusterState()
    ours_scheduler = Scheduler(api_client, [standalone_profile("e2e-ours")], state=state, watch_options=FAST_WATCH)
    ours_scheduler.start()
    try:
        assert ours_scheduler.wait_ready(20)
        ours = run(plane, scenario, "e2e-ours", f"ours-{index}")
    finally:
        ours_scheduler.stop(timeout=5)
        api_client.close()
    assert sum(theirs.bound.values()) == scenario.bound, f"kube-scheduler: {theirs}"
    assert ours == theirs, f"ours {ours} != kube-scheduler's {theirs}"
