"""deploy/ for real: every object created on the API server, each process logged in as its
ServiceAccount (a TokenRequest token) and started with its Deployment's own arguments.

So the manifests and the start-up permission check are tested together: `extender
schedule` passes its preflight with exactly the RBAC of deploy/overlays/standalone and
then binds, reports and leads; the same preflight names a rule taken out of that
ClusterRole. The webhook overlay runs too: `extender serve` as extender-webhook, and the
second kube-scheduler with the configuration of its ConfigMap, as extender-kube-scheduler
with the built-in roles deploy/ binds and its own leader-election lease.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e import manifests
from tests.e2e.processes import ExtenderProcess
from tests.fakeapi.client import KubeTestClient
from tests.helpers import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.apiserver]

NAMESPACE = "scheduler-extender"
APPS = "e2e-apps"
POD_NAME = "extender-scheduler-7d9f-x2x4q"


@pytest.fixture
def deploy(cluster: Any) -> Iterator[Any]:
    """Apply a deploy/ overlay to the real server; everything but the namespace is deleted after."""
    written: list[str] = []

    def apply(overlay: str) -> list[dict[str, Any]]:
        try:
            docs = manifests.render(overlay)
        except FileNotFoundError:
            pytest.skip("kubectl is not installed: deploy/ is rendered with kubectl kustomize")
        written.extend(manifests.apply(cluster.client, docs))
        return docs

    yield apply
    manifests.delete(cluster.client, written)


def standalone_process(docs: list[dict[str, Any]], kubeconfig: Path, workdir: Path) -> ExtenderProcess:
    """`extender schedule` with its Deployment's arguments; only the policy path (the
    ConfigMap's content in a file), the health address and the kubeconfig differ."""
    return manifests.standalone_process(docs, kubeconfig, workdir, POD_NAME)


def node_of(kube: KubeTestClient, name: str) -> str:
    return ((kube.get_pod(name, APPS) or {}).get("spec") or {}).get("nodeName") or ""


def test_standalone_runs_with_the_rbac_of_deploy(cluster: Any, deploy: Any, extender: Any,
                                                 tmp_path: Path) -> None:
    kube = cluster.client
    docs = deploy("overlays/standalone")
    kube.ensure_namespace(APPS)
    kube.create_node("deploy-n1", cpu="2")
    scheduler = extender(standalone_process(docs, manifests.login(cluster, "extender-scheduler"), tmp_path))
    assert "preflight: all" in scheduler.log() and "permissions granted" in scheduler.log()

    kube.create_pod("placed", APPS, cpu="500m", scheduler_name="extender-scheduler")
    kube.create_pod("too-big", APPS, cpu="64", scheduler_name="extender-scheduler")
    assert kube.wait_for(lambda: node_of(kube, "placed"), timeout=20, message="placed bound") == "deploy-n1"
    kube.wait_for(lambda: kube.list_events(APPS, reason="Scheduled", involved_name="placed"),
                  timeout=10, message="Scheduled event")  # events: create
    failed = kube.wait_for(lambda: kube.list_events(APPS, reason="FailedScheduling", involved_name="too-big"),
                           timeout=20, message="FailedScheduling event")
    assert failed[0]["message"] == ("0/1 nodes are available: 1 Insufficient cpu. "
                                    "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")
    condition = kube.wait_for(  # pods/status: patch
        lambda: next((c for c in (kube.get_pod("too-big", APPS)["status"].get("conditions") or [])
                      if c["type"] == "PodScheduled"), None), timeout=10, message="PodScheduled")
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    lease = kube.get_lease("extender-scheduler", NAMESPACE)  # leases in its namespace (the Role)
    holder = lease["spec"]["holderIdentity"] if lease else ""
    assert holder and f"campaigning for lease {NAMESPACE}/extender-scheduler as {holder}" in scheduler.log()
    assert scheduler.stop() == 0
    assert kube.get_lease("extender-scheduler", NAMESPACE)["spec"]["holderIdentity"] == ""


def test_preflight_names_a_rule_missing_from_deploy(cluster: Any, deploy: Any, tmp_path: Path) -> None:
    kube = cluster.client
    docs = deploy("overlays/standalone")
    role = manifests.find(docs, "ClusterRole", "scheduler-extender-standalone")
    role["rules"] = [r for r in role["rules"] if "pods/status" not in r["resources"]]
    assert len(role["rules"]) == len(manifests.find(docs, "ClusterRole", "scheduler-extender-standalone")["rules"]) - 1
    manifests.apply(kube, [role])
    kubeconfig = manifests.login(cluster, "extender-scheduler")
    account = KubeTestClient(cluster.url, token=kubeconfig_token(kubeconfig), verify=cluster.verify)
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
              "spec": {"resourceAttributes": {"verb": "patch", "resource": "pods", "subresource": "status"}}}
    kube.wait_for(lambda: not account.call("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                                           review)["status"]["allowed"], timeout=10, message="RBAC updated")
    account.close()

    process = standalone_process(docs, kubeconfig, tmp_path)
    with pytest.raises(RuntimeError, match="exited with 1") as exited:
        process.start(timeout=30)
    output = str(exited.value)
    assert "missing 1 permission" in output
    assert ("kubectl auth can-i patch pods --subresource=status --all-namespaces "
            "--as=system:serviceaccount:scheduler-extender:extender-scheduler") in output


def kubeconfig_token(path: Path) -> str:
    (user,) = yaml.safe_load(path.read_text())["users"]
    return str(user["user"]["token"])


def test_webhook_and_second_kube_scheduler_run_with_the_rbac_of_deploy(
    cluster: Any, deploy: Any, extender: Any, kube_scheduler: Any, tmp_path: Path,
) -> None:
    kube = cluster.client
    docs = deploy("overlays/webhook")
    kube.ensure_namespace(APPS)
    kube.create_node("deploy-w1")

    policy = tmp_path / "policy-webhook.yaml"
    policy.write_text(manifests.find(docs, "ConfigMap", "extender-policy")["data"]["policy-webhook.yaml"])
    args = manifests.container_args(manifests.find(docs, "Deployment", "extender-webhook"))
    port = free_port()
    args = manifests.replace_option(args, "--bind", f"127.0.0.1:{port}")
    args = manifests.replace_option(args, "--policy", str(policy))
    args += ["--kubeconfig", str(manifests.login(cluster, "extender-webhook")), "--workers", "1"]
    webhook = extender(ExtenderProcess(args, port, tmp_path / "serve.log",
                                       env={"POD_NAME": "extender-webhook-0", "POD_NAMESPACE": NAMESPACE}))

    config_map = manifests.find(docs, "ConfigMap", "extender-kube-scheduler-config")
    config = yaml.safe_load(config_map["data"]["kube-scheduler-config.yaml"])
    (extender_config,) = config["extenders"]
    extender_config["urlPrefix"] = f"http://127.0.0.1:{port}"
    config["clientConnection"] = {"kubeconfig": str(manifests.login(cluster, "extender-kube-scheduler"))}
    kube_scheduler(config, name="extender-kube-scheduler")  # leader election on, as deployed

    kube.create_pod("via-webhook", APPS, cpu="100m", scheduler_name="extender-kube-scheduler")
    assert kube.wait_for(lambda: node_of(kube, "via-webhook"), timeout=20, message="bound") == "deploy-w1"
    assert webhook.metric("extender_bind_total", result="bound") == 1  # pods/binding as extender-webhook
    lease = kube.get_lease("extender-kube-scheduler", NAMESPACE)  # its own lease, through the Role
    assert lease is not None and lease["spec"]["holderIdentity"]
