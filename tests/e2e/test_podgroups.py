"""kube-scheduler v1.36.3 with the gang gates through podgroup_test.go's scenarios (podgroups.py).

The reference behaviour our standalone scheduler must match (it runs the same scenarios on the
same plane), and the baseline of the webhook checks (a stock kube-scheduler alone binds part of a
gang): a control plane with `--feature-gates=GenericWorkload=true,GangScheduling=true,
TopologyAwareWorkloadScheduling=true --runtime-config=scheduling.k8s.io/v1alpha2=true`, and for
each scenario a fresh kube-scheduler with `GenericWorkload` and `GangScheduling` (plus
`TopologyAwareWorkloadScheduling` for the scenario that needs it), its own schedulerName and
namespace. Skipped, saying why, without the binaries.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from extender.cluster.state import ClusterState
from extender.kube.client import build_api_client
from extender.scheduler.standalone import Scheduler
from tests.e2e import podgroups
from tests.e2e.conftest import NO_BINARIES
from tests.e2e.controlplane import ControlPlane, scheduler_configuration
from tests.fakeapi.envtest import find_assets
from tests.scheduler.conftest import FAST_WATCH, standalone_profile

pytestmark = [pytest.mark.e2e]

GANG_GATES = "GenericWorkload=true,GangScheduling=true"
TOPOLOGY_GATE = "TopologyAwareWorkloadScheduling=true"


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    assets = find_assets()
    if assets is None or assets.kube_scheduler is None:
        pytest.skip(NO_BINARIES)
    control = ControlPlane(apiserver_args=(f"--feature-gates={GANG_GATES},{TOPOLOGY_GATE}",
                                           "--runtime-config=scheduling.k8s.io/v1alpha2=true")).start()
    try:
        node = dict(podgroups.NODE)
        control.client.create_node(node.pop("name"), **node)
        yield control
    finally:
        control.stop()


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


@pytest.mark.parametrize("index", range(len(podgroups.SCENARIOS)),
                         ids=[_slug(s.name) for s in podgroups.SCENARIOS])
def test_kube_scheduler_passes_the_podgroup_scenarios(plane: ControlPlane, index: int) -> None:
    scenario = podgroups.SCENARIOS[index]
    gates = f"{GANG_GATES},{TOPOLOGY_GATE}" if scenario.needs_topology_gate else GANG_GATES
    name = f"podgroups-{index}"
    scheduler = plane.start_kube_scheduler(scheduler_configuration(name), name=name,
                                           extra_args=(f"--feature-gates={gates}",))
    try:
        podgroups.run(plane.client, scenario, namespace=name, scheduler_name=name)
    except AssertionError as failure:
        raise AssertionError(f"{failure}\n--- kube-scheduler log (tail) ---\n{scheduler.log()[-4000:]}") from None
    finally:
        podgroups.clean(plane.client, name)
        scheduler.stop()
        plane.schedulers.remove(scheduler)


@pytest.mark.parametrize("index", range(len(podgroups.SCENARIOS)),
                         ids=[_slug(s.name) for s in podgroups.SCENARIOS])
def test_our_standalone_scheduler_passes_the_podgroup_scenarios(plane: ControlPlane, index: int) -> None:
    """The same scenarios under our standalone scheduler (in this process), on the same plane."""
    scenario = podgroups.SCENARIOS[index]
    name = f"ours-{index}"
    api_client = build_api_client(kubeconfig=str(plane.kubeconfig))
    state = ClusterState()
    scheduler = Scheduler(api_client, [standalone_profile(name)], state=state, watch_options=FAST_WATCH)
    scheduler.start()
    try:
        assert scheduler.wait_ready(20), "scheduler caches did not sync"
        podgroups.run(plane.client, scenario, namespace=name, scheduler_name=name)
    finally:
        podgroups.clean(plane.client, name)
        scheduler.stop(timeout=5)
        api_client.close()


CRD = Path(__file__).resolve().parents[2] / "deploy" / "components" / "podgroup-crd" / "scheduling.x-k8s.io_podgroups.yaml"


@pytest.mark.parametrize("scenario", podgroups.WEBHOOK_SCENARIOS, ids=[_slug(s.name) for s in podgroups.WEBHOOK_SCENARIOS])
def test_a_stock_kube_scheduler_alone_binds_part_of_a_gang(scenario: podgroups.WebhookScenario) -> None:
    """The baseline of the webhook checks: without the extender, members are bound one by one."""
    assets = find_assets()
    if assets is None or assets.kube_scheduler is None:
        pytest.skip(NO_BINARIES)
    control = ControlPlane().start()
    try:
        kube = control.client
        kube.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", yaml.safe_load(CRD.read_text()))
        served = podgroups.COSCHEDULING_PODGROUPS.format(ns="default")
        deadline = time.monotonic() + 30
        while kube.request("GET", served).status_code != 200:
            assert time.monotonic() < deadline, "the CRD is not served"
            time.sleep(0.2)
        kube.create_node("node", cpu=scenario.node_cpu)
        control.start_kube_scheduler(scheduler_configuration("stock"), name="stock")
        podgroups.run(kube, podgroups.PodGroupScenario(scenario.name, scenario.alone), namespace="webhook",
                      scheduler_name="stock")
    finally:
        control.stop()
