"""A stock kube-scheduler (no gang gates) placing a pod group all or nothing through the webhook.

config/kube-scheduler-gangs.yaml (bindVerb, httpTimeout 30s) against `extender serve`, on the
session's real control plane (no alpha gates: the group is a Coscheduling PodGroup from the
deploy/ CRD, its members labelled). A gang of 4 one-CPU members where only 3 fit binds none
(kube-scheduler alone would bind 3): /filter refuses every member as unresolvable, naming the
shortfall. Room freed: all 4 are filtered, reach /bind, are held until the fourth arrives, and
bind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.checks.configs import check_scheduler_config_text
from extender.gangs import fitting
from extender.model import podgroups as pg
from tests.e2e import configs, podgroups, processes
from tests.fakeapi.client import KubeApiError
from tests.gangs.test_podgroup_api import CRD_FILE, wait_served

pytestmark = [pytest.mark.e2e, pytest.mark.apiserver]

NAMESPACE = "e2e-gangs"
SCHEDULER = "e2e-gangs"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
MEMBERS = ("w1", "w2", "w3", "w4")


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
