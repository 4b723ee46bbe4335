"""The Helm chart for real: `helm install` into a real API server, in each mode.

Every object the chart renders is accepted (the API server validates the Deployments' pod
templates, the PDBs, the NetworkPolicy...), and each ServiceAccount can do exactly what
`extender/checks/permissions.py` says its mode needs: the `kubectl auth can-i` lines the
preflight prints are run as they are, and answer yes; a few it must not do answer no. Then
processes run as those accounts with the chart's own arguments and files, as in
test_deploy_manifests.py for deploy/: the standalone scheduler passes its preflight, and with
the chart's generated mutual TLS the second kube-scheduler binds a pod through the webhook.
"""

from __future__ import annotations

import base64
import shlex
import shutil
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.checks.permissions import (
    SERVICE_ACCOUNTS,
    Permission,
    can_i_command,
    required_permissions,
    service_account_user,
)
from tests.deploy.charts import CHART, RELEASE, helm, run_helm
from tests.e2e import manifests
from tests.e2e.processes import ExtenderProcess
from tests.helpers import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.apiserver]

NAMESPACE = "scheduler-extender"
APPS = "helm-apps"
SECOND_SCHEDULER = "extender-kube-scheduler"
#: What no account of the chart may do (least privilege), as kubectl auth can-i lines.
NEVER = [
    "get secrets --all-namespaces",
    "create pods --all-namespaces",
    "update nodes --all-namespaces",
    "update leases.coordination.k8s.io -n kube-system",
]
#: Beyond permissions.py: the second kube-scheduler's grants (built-in roles, its own lease).
KUBE_SCHEDULER_YES = [
    "create pods --subresource=binding --all-namespaces",
    "create leases.coordination.k8s.io -n scheduler-extender",
    "get leases.coordination.k8s.io/extender-kube-scheduler -n scheduler-extender",
    "update leases.coordination.k8s.io/extender-kube-scheduler -n scheduler-extender",
    "get configmaps/extension-apiserver-authentication -n kube-system",
]
KUBE_SCHEDULER_NO = ["update leases.coordination.k8s.io/extender-scheduler -n scheduler-extender"]


@pytest.fixture
def install(cluster: Any) -> Iterator[Any]:
    """`helm install` the chart with these values; uninstalled after the test."""
    helm()
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: the RBAC is checked with kubectl auth can-i")
    kubeconfig = str(cluster.kubeconfig)
    installed = []

    def run(values: dict[str, Any]) -> list[dict[str, Any]]:
        result = run_helm("install", RELEASE, str(CHART), "-n", NAMESPACE, "--create-namespace",
                          "--kubeconfig", kubeconfig, values=values, timeout=180)  # fmt: skip
        assert result.returncode == 0, result.stderr
        installed.append(RELEASE)
        assert f"NOTES:\nscheduler-extender 0.1.0 is installed in namespace {NAMESPACE}" in result.stdout
        manifest = subprocess.run([helm(), "get", "manifest", RELEASE, "-n", NAMESPACE, "--kubeconfig", kubeconfig],
                                  capture_output=True, text=True, timeout=60, check=True).stdout  # fmt: skip
        docs = [d for d in yaml.safe_load_all(manifest) if d]
        # Every object is there, as the API server stored it.
        live = subprocess.run([kubectl, "get", "-f", "-", "-o", "name", "--kubeconfig", kubeconfig],
                              input=manifest, capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        assert live.returncode == 0, live.stderr
        assert len(live.stdout.split()) == len(docs)
        return docs

    yield run
    for release in installed:
        subprocess.run([helm(), "uninstall", release, "-n", NAMESPACE, "--kubeconfig", kubeconfig],
                       capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def can_i(cluster: Any, line: str) -> bool | None:
    """Run one `kubectl auth can-i ...` line (as printed to operators) against the server; None
    when kubectl cannot ask (a group the server does not serve: see :func:`review`)."""
    kubectl = shutil.which("kubectl")
    assert kubectl is not None
    args = shlex.split(line)
    assert args[:3] == ["kubectl", "auth", "can-i"], line
    result = subprocess.run([kubectl, *args[1:], "--kubeconfig", str(cluster.kubeconfig)],
                            capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
    if "the server doesn't have a resource type" in result.stderr:
        return None
    answer = result.stdout.strip()
    assert answer in ("yes", "no"), f"{line}: {result.stdout}{result.stderr}"
    return answer == "yes"


def review(cluster: Any, permission: Permission, account: str) -> bool:
    """The SubjectAccessReview kubectl would send for ``permission``, had it discovered the group.

    kubectl maps `nodes.metrics.k8s.io` through discovery; where metrics-server is not installed
    (this control plane) it asks about resource "nodes.metrics.k8s.io" in the core group and
    always says no, whatever the RBAC (seen with kubectl 1.3x against kube-apiserver 1.36).
    """
    attributes = {"verb": permission.verb, "group": permission.group, "resource": permission.resource,
                  "subresource": permission.subresource}  # fmt: skip
    if permission.namespaced:
        attributes["namespace"] = NAMESPACE
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": service_account_user(NAMESPACE, account),
        "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:authenticated"],
        "resourceAttributes": attributes,
    }}  # fmt: skip
    reply = cluster.client.call("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body)
    return bool(reply["status"].get("allowed"))


def as_account(rest: str, account: str) -> str:
    return f"kubectl auth can-i {rest} --as={service_account_user(NAMESPACE, account)}"


def assert_rbac(cluster: Any, modes: dict[str, dict[str, bool]], second_scheduler: bool) -> None:
    """Each mode's account can do what the code needs (its can-i lines say yes); the modes left
    out, and every account for NEVER, say no."""
    wrong: list[str] = []
    for mode, account in SERVICE_ACCOUNTS.items():
        if mode in modes:
            for permission in required_permissions(mode, **modes[mode]):
                line = can_i_command(permission, account, NAMESPACE)
                allowed = can_i(cluster, line)
                if allowed is None:
                    # Not served on this control plane: metrics.k8s.io (no metrics-server),
                    # scheduling.k8s.io/v1alpha2 (pod groups, GenericWorkload gate) and
                    # DeviceTaintRules (resource.k8s.io/v1beta2, a beta API left off by default).
                    unserved = permission.group in ("metrics.k8s.io", "scheduling.k8s.io") or (
                        permission.group, permission.resource) == ("resource.k8s.io", "devicetaintrules")
                    assert unserved, f"kubectl cannot ask: {line}"
                    allowed = review(cluster, permission, account)
                if not allowed:
                    wrong.append(f"no, should be yes: {line}")
        else:  # one line stands for all: without a binding the account can do nothing
            line = as_account("list nodes --all-namespaces", account)
            if can_i(cluster, line):
                wrong.append(f"yes, should be no: {line}")
        for rest in NEVER:
            if can_i(cluster, as_account(rest, account)):
                wrong.append(f"yes, should be no: {as_account(rest, account)}")
    for rest in KUBE_SCHEDULER_YES:
        if can_i(cluster, as_account(rest, SECOND_SCHEDULER)) != second_scheduler:
            wrong.append(f"{'no' if second_scheduler else 'yes'}: {as_account(rest, SECOND_SCHEDULER)}")
    for rest in KUBE_SCHEDULER_NO + NEVER:
        if can_i(cluster, as_account(rest, SECOND_SCHEDULER)):
            wrong.append(f"yes, should be no: {as_account(rest, SECOND_SCHEDULER)}")
    assert not wrong, "\n".join(wrong)


def write_secret(docs: list[dict[str, Any]], name: str, directory: Path) -> Path:
    """The files of a rendered Secret, as the kubelet would mount them."""
    directory.mkdir(parents=True, exist_ok=True)
    for key, value in manifests.find(docs, "Secret", name)["data"].items():
        (directory / key).write_bytes(base64.b64decode(value))
    return directory


def test_standalone_mode(cluster: Any, install: Any, extender: Any, tmp_path: Path) -> None:
    docs = install({"webhook": {"enabled": False}, "kubeScheduler": {"enabled": False}})
    assert {d["metadata"]["name"] for d in docs if d["kind"] == "Deployment"} == {"extender-scheduler"}
    assert_rbac(cluster, {"standalone": {}}, second_scheduler=False)

    # `extender schedule` with the chart's arguments, as its ServiceAccount: the preflight passes.
    scheduler = extender(manifests.standalone_process(docs, manifests.login(cluster, "extender-scheduler"), tmp_path,
                                                      "extender-scheduler-0"))
    assert "preflight: all" in scheduler.log() and "permissions granted" in scheduler.log()


def test_webhook_mode_without_bind(cluster: Any, install: Any) -> None:
    docs = install({"standalone": {"enabled": False}, "webhook": {"bind": False}})
    assert {d["metadata"]["name"] for d in docs if d["kind"] == "Deployment"} == {
        "extender-webhook", SECOND_SCHEDULER,
    }
    assert_rbac(cluster, {"webhook": {"bind": False}}, second_scheduler=True)


def test_both_modes_with_generated_mutual_tls(cluster: Any, install: Any, extender: Any, kube_scheduler: Any,
                                              tmp_path: Path) -> None:
    kube = cluster.client
    # localhost too: the `helm test` pod's script runs here against the loopback port.
    values = {"webhook": {"tls": {"enabled": True, "clientAuth": True, "extraDNSNames": ["localhost"]}}}
    docs = install(values)
    assert_rbac(cluster, {"webhook": {}, "standalone": {}}, second_scheduler=True)
    # An upgrade keeps the generated CA and certificates (kube-scheduler reads caFile only once).
    upgrade = run_helm("upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--kubeconfig", str(cluster.kubeconfig),
                       values=values, timeout=180)  # fmt: skip
    assert upgrade.returncode == 0, upgrade.stderr
    for name in ("extender-webhook-tls", "extender-kube-scheduler-client"):
        live = kube.call("GET", f"/api/v1/namespaces/{NAMESPACE}/secrets/{name}")
        assert live["data"] == manifests.find(docs, "Secret", name)["data"], f"{name} regenerated by an upgrade"
    server_files = write_secret(docs, "extender-webhook-tls", tmp_path / "webhook-tls")
    client_files = write_secret(docs, "extender-kube-scheduler-client", tmp_path / "scheduler-tls")

    # The webhook with the chart's arguments; its TLS files are the chart's generated Secret.
    webhook_deployment = manifests.find(docs, "Deployment", "extender-webhook")
    policy = tmp_path / "policy-webhook.yaml"
    policy.write_text(manifests.find(docs, "ConfigMap", "extender-policy")["data"]["policy-webhook.yaml"])
    port = free_port()
    args = manifests.container_args(webhook_deployment)
    args = manifests.replace_option(args, "--bind", f"127.0.0.1:{port}")
    args = manifests.replace_option(args, "--policy", str(policy))
    for option in ("--tls-cert", "--tls-key", "--client-ca"):
        mounted = Path(args[args.index(option) + 1])
        assert mounted.parent == Path("/etc/extender-tls")
        args = manifests.replace_option(args, option, str(server_files / mounted.name))
    args += ["--kubeconfig", str(manifests.login(cluster, "extender-webhook")), "--workers", "1"]
    # What the readiness probe does: present the serving certificate, trust the CA.
    probe = ssl.create_default_context(cafile=str(server_files / "ca.crt"))
    probe.check_hostname = False
    probe.load_cert_chain(str(server_files / "tls.crt"), str(server_files / "tls.key"))
    webhook = extender(ExtenderProcess(args, port, tmp_path / "serve.log", scheme="https", tls=probe,
                                       env={"POD_NAME": "extender-webhook-0", "POD_NAMESPACE": NAMESPACE}))
    anonymous = ssl.create_default_context(cafile=str(client_files / "ca.crt"))
    anonymous.check_hostname = False
    assert ExtenderProcess([], port, tmp_path / "x.log", scheme="https", tls=anonymous).get("/readyz")[0] == 0, (
        "a caller without a client certificate is refused in the handshake"
    )

    # The `helm test` hook's script (no kubelet here to run its pod) asks /readyz as it would,
    # with the callers' Secret: only the Service address and the mount point differ.
    hooks = subprocess.run([helm(), "get", "hooks", RELEASE, "-n", NAMESPACE, "--kubeconfig", str(cluster.kubeconfig)],
                           capture_output=True, text=True, timeout=60, check=True).stdout  # fmt: skip
    test_pod = manifests.find([d for d in yaml.safe_load_all(hooks) if d], "Pod", "extender-webhook-test")
    script = test_pod["spec"]["containers"][0]["command"][-1]
    script = script.replace(f"extender-webhook.{NAMESPACE}.svc:8888", f"localhost:{port}")
    script = script.replace("/etc/extender-tls", str(client_files))
    hook = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert hook.returncode == 0 and f"https://localhost:{port}/readyz 200" in hook.stdout, hook.stdout + hook.stderr

    # The second kube-scheduler with the chart's configuration: only the address and the mount
    # point of its client Secret differ; serverName stays the Service's name in the certificate.
    config_text = manifests.find(docs, "ConfigMap", "extender-kube-scheduler-config")["data"]["kube-scheduler-config.yaml"]
    config = yaml.safe_load(config_text)
    (extender_config,) = config["extenders"]
    extender_config["urlPrefix"] = f"https://127.0.0.1:{port}"
    tls = extender_config["tlsConfig"]
    assert tls["serverName"] == f"extender-webhook.{NAMESPACE}.svc"
    for field in ("caFile", "certFile", "keyFile"):
        tls[field] = str(client_files / Path(tls[field]).name)
    config["clientConnection"] = {"kubeconfig": str(manifests.login(cluster, SECOND_SCHEDULER))}
    kube_scheduler(config, name=SECOND_SCHEDULER)

    kube.ensure_namespace(APPS)
    kube.create_node("helm-n1")
    kube.create_pod("via-helm-webhook", APPS, cpu="100m", scheduler_name=SECOND_SCHEDULER)
    node = kube.wait_for(lambda: ((kube.get_pod("via-helm-webhook", APPS) or {}).get("spec") or {}).get("nodeName"),
                         timeout=30, message="bound through the webhook")  # fmt: skip
    assert node == "helm-n1"
    assert webhook.metric("extender_bind_total", result="bound") == 1  # mTLS call, pods/binding as extender-webhook
