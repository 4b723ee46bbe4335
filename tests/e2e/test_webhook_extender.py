"""The webhook registered with the real kube-scheduler, from the config/ examples.

Every combination a user can pick: node-cache mode or full NodeList, with or without
``bindVerb``, over HTTP or mutual TLS. In each, kube-scheduler calls our ``extender serve``
(its cluster state watched from the API server) with a tenancy policy: pods are bound
where the policy allows (by the webhook when bindVerb is set, by kube-scheduler
otherwise), and a pod the policy refuses everywhere stays Pending with our reason in
kube-scheduler's FailedScheduling event and PodScheduled condition.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.checks.configs import check_scheduler_config_text
from tests.e2e import configs, processes
from tests.helpers import settled

pytestmark = [pytest.mark.e2e, pytest.mark.apiserver]

TEAM_A, TEAM_B = "e2e-team-a", "e2e-team-b"
TENANCY = [
    {"namespaces": [TEAM_A], "require": [{"label": "tenant", "values": ["team-a"]}]},
    {"namespaces": [TEAM_B], "require": [{"label": "tenant", "values": ["team-b"]}]},
]
# What kube-scheduler writes when the webhook refuses all three nodes with NodeLabels' reason.
REFUSED = "0/3 nodes are available: 3 node(s) didn't have required label tenant=team-b."

COMBINATIONS = [
    pytest.param(transport, node_cache, bind, id=f"{transport}-{'nodecache' if node_cache else 'nodelist'}-"
                 f"{'bindverb' if bind else 'nobind'}")
    for transport in ("http", "mtls")
    for node_cache in (True, False)
    for bind in (True, False)
]


def bound_node(kube: Any, name: str, namespace: str) -> str:
    return ((kube.get_pod(name, namespace) or {}).get("spec") or {}).get("nodeName") or ""


@pytest.mark.parametrize(("transport", "node_cache", "bind"), COMBINATIONS)
def test_kube_scheduler_places_pods_through_the_webhook(
    cluster: Any, kube_scheduler: Any, extender: Any, tmp_path: Path,
    transport: str, node_cache: bool, bind: bool,
) -> None:
    kube = cluster.client
    scheduler_name = f"e2e-{transport}-{int(node_cache)}{int(bind)}"
    example = configs.HTTP_EXAMPLE if transport == "http" else configs.MTLS_EXAMPLE
    tls = None
    if transport == "mtls":
        tls = configs.MutualTLS.create(tmp_path / "tls", configs.server_name(example))
    policy = configs.write_yaml(tmp_path / "policy.yaml", configs.webhook_policy(TENANCY))
    webhook = processes.serve(
        cluster.kubeconfig, tmp_path, policy=policy, scheduler_names=[scheduler_name],
        tls=(tls.server_cert, tls.server_key, tls.ca) if tls else None,
        client_context=_client_context(tls) if tls else None,
    )
    config = configs.kube_scheduler_config(
        example, kubeconfig=cluster.plane.user_kubeconfig("system:kube-scheduler"),
        scheduler_name=scheduler_name, port=webhook.port, node_cache=node_cache, bind=bind, tls=tls,
    )
    # What we hand kube-scheduler is still a configuration `extender check` accepts.
    assert check_scheduler_config_text(yaml.safe_dump(config)) == []

    for namespace in (TEAM_A, TEAM_B):
        kube.ensure_namespace(namespace)
    kube.create_node("wh-a", labels={"tenant": "team-a"})
    kube.create_node("wh-b")
    kube.create_node("wh-c")
    extender(webhook)  # starts once its node and pod lists are in
    kube_scheduler(config, name=f"kube-scheduler-{scheduler_name}")

    kube.create_pod("free", scheduler_name=scheduler_name, cpu="100m")
    kube.create_pod("tenant", TEAM_A, scheduler_name=scheduler_name, cpu="100m")
    kube.create_pod("orphan", TEAM_B, scheduler_name=scheduler_name, cpu="100m")

    kube.wait_for(lambda: bound_node(kube, "free", "default"), timeout=20, message="free bound")
    assert kube.wait_for(lambda: bound_node(kube, "tenant", TEAM_A), timeout=20,
                         message="tenant bound") == "wh-a"
    event = kube.wait_for(lambda: kube.list_events(TEAM_B, reason="FailedScheduling", involved_name="orphan"),
                          timeout=20, message="FailedScheduling of the orphan")[0]
    assert event["message"].startswith(REFUSED), event["message"]
    assert event.get("reportingComponent") == scheduler_name  # kube-scheduler's event, not ours
    condition = next(c for c in kube.get_pod("orphan", TEAM_B)["status"]["conditions"]
                     if c["type"] == "PodScheduled")
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert condition["message"].startswith(REFUSED)
    assert bound_node(kube, "orphan", TEAM_B) == ""

    assert webhook.metric("extender_requests_total", verb="filter", result="ok") >= 3
    binds = webhook.metric("extender_bind_total", result="bound")
    assert binds == (2 if bind else 0), "with bindVerb the webhook binds; without, kube-scheduler does"
    # Request metrics are written once the reply is out: the last bind's may land a moment later.
    assert settled(lambda: webhook.metric("extender_requests_total", verb="bind"), binds) == binds


def _client_context(tls: configs.MutualTLS) -> Any:
    import ssl

    context = ssl.create_default_context(cafile=str(tls.ca))
    context.load_cert_chain(str(tls.client_cert), str(tls.client_key))
    return context
