"""deploy/ on a real API server: render with kubectl kustomize, create every object, and log
in as its ServiceAccounts (TokenRequest), so a process runs with exactly the RBAC that
deploy/ grants it. Nothing here imports pytest.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.processes import ExtenderProcess
from tests.fakeapi.client import KubeApiError, KubeTestClient
from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
NAMESPACE = "scheduler-extender"  # deploy/'s and the chart's

#: Where each kind of deploy/ lives in the API ({ns}: the object's namespace).
PATHS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
    "Service": "/api/v1/namespaces/{ns}/services",
    "ClusterRole": f"{RBAC}/clusterroles",
    "ClusterRoleBinding": f"{RBAC}/clusterrolebindings",
    "Role": f"{RBAC}/namespaces/{{ns}}/roles",
    "RoleBinding": f"{RBAC}/namespaces/{{ns}}/rolebindings",
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
    "PodDisruptionBudget": "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
    "NetworkPolicy": "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies",
    "CustomResourceDefinition": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
}


def render(overlay: str) -> list[dict[str, Any]]:
    """The documents of ``kubectl kustomize deploy/<overlay>`` (FileNotFoundError without kubectl)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise FileNotFoundError("kubectl is not installed")
    result = subprocess.run([kubectl, "kustomize", str(DEPLOY / overlay)], capture_output=True,
                            text=True, timeout=120, check=True)  # fmt: skip
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def find(docs: Iterable[Mapping[str, Any]], kind: str, prefix: str = "") -> dict[str, Any]:
    """The one document of ``kind`` whose name starts with ``prefix`` (ConfigMaps get a hash)."""
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].startswith(prefix)]
    assert len(found) == 1, f"expected one {kind} {prefix!r}, found {[d['metadata']['name'] for d in found]}"
    return dict(found[0])


def object_path(doc: Mapping[str, Any]) -> str:
    collection = PATHS[doc["kind"]].format(ns=doc["metadata"].get("namespace", ""))
    return f"{collection}/{doc['metadata']['name']}"


def apply(kube: KubeTestClient, docs: Iterable[Mapping[str, Any]]) -> list[str]:
    """Create each object, or replace it when it exists (a namespace is kept: a deleted one
    stays Terminating without a controller). Returns the paths of what it wrote, the
    namespaces excepted, for :func:`delete`."""
    written = []
    for doc in docs:
        path = object_path(doc)
        collection = path.rsplit("/", 1)[0]
        try:
            kube.call("POST", collection, dict(doc))
        except KubeApiError as err:
            if err.reason != "AlreadyExists":
                raise
            if doc["kind"] == "Namespace":
                continue
            current = kube.call("GET", path)
            body = dict(doc, metadata={**doc["metadata"],
                                       "resourceVersion": current["metadata"]["resourceVersion"]})
            kube.call("PUT", path, body)
        if doc["kind"] != "Namespace":
            written.append(path)
    return written


def delete(kube: KubeTestClient, paths: Iterable[str]) -> None:
    for path in reversed(list(paths)):
        try:
            kube.call("DELETE", path)
        except KubeApiError as err:
            if err.code != 404:
                raise


def service_account_token(kube: KubeTestClient, namespace: str, name: str, seconds: int = 3600) -> str:
    """A bound token for the ServiceAccount (the TokenRequest API, as the kubelet gets one)."""
    reply = kube.call("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": seconds},
    })  # fmt: skip
    return str(reply["status"]["token"])


def login(cluster: Any, account: str, namespace: str = NAMESPACE) -> Path:
    """A kubeconfig holding a fresh token of ServiceAccount <namespace>/<account>, on the
    cluster's control plane (a tests.e2e ControlPlane)."""
    token = service_account_token(cluster.client, namespace, account)
    return Path(cluster.plane.token_kubeconfig(token, account))


def standalone_process(docs: list[dict[str, Any]], kubeconfig: Path, workdir: Path, pod_name: str) -> ExtenderProcess:
    """`extender schedule` with the rendered Deployment's arguments, as pod ``pod_name``; only the
    policy path (the ConfigMap's content in a file), the metrics address and the kubeconfig differ."""
    policy = workdir / "policy.yaml"
    policy.write_text(find(docs, "ConfigMap", "extender-policy")["data"]["policy.yaml"])
    args = container_args(find(docs, "Deployment", "extender-scheduler"))
    port = free_port()
    args = replace_option(args, "--policy", str(policy))
    args = replace_option(args, "--metrics-bind", f"127.0.0.1:{port}")
    args += ["--kubeconfig", str(kubeconfig)]
    return ExtenderProcess(args, port, workdir / "schedule.log", env={"POD_NAME": pod_name, "POD_NAMESPACE": NAMESPACE})


def container_args(deployment: Mapping[str, Any]) -> list[str]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return list(container.get("args") or container.get("command") or [])


def replace_option(args: list[str], option: str, value: str) -> list[str]:
    """``--option value`` (or ``--option=value``) set to ``value``; appended when absent."""
    out, i, done = [], 0, False
    while i < len(args):
        arg = args[i]
        if arg == option:
            out += [option, value]
            i += 2
            done = True
            continue
        if arg.startswith(option + "="):
            out.append(f"{option}={value}")
            done = True
        else:
            out.append(arg)
        i += 1
    return out if done else [*out, option, value]
