"""The node itself (tests.e2e.node): what the chart's tests rely on, checked on its own.

A pod started by kubelet reaches kube-apiserver in-cluster (the ``kubernetes`` Service, DNS,
its projected ServiceAccount token); a ClusterIP Service reaches a pod through kube-proxy;
``kubectl logs`` reaches kubelet. The node's start time is printed (the target is under
15 s; bench/node.py measures it over several runs).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests

from tests.e2e.images import PRODUCT_IMAGE
from tests.e2e.nodecluster import running

pytestmark = [pytest.mark.e2e, pytest.mark.node]

NS = "node-check"

IN_CLUSTER = """
import json, socket, ssl, urllib.request
base = "/var/run/secrets/kubernetes.io/serviceaccount"
address = socket.gethostbyname("kubernetes.default.svc")
context = ssl.create_default_context(cafile=base + "/ca.crt")
request = urllib.request.Request("https://kubernetes.default.svc/api/v1/namespaces/node-check/pods",
                                 headers={"Authorization": "Bearer " + open(base + "/token").read()})
try:
    with urllib.request.urlopen(request, context=context, timeout=10) as reply:
        status = reply.status
except urllib.error.HTTPError as err:
    status = err.code
print(json.dumps({"address": address, "status": status}))
"""


def pod(name: str, command: list[str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": {"app": name}},
        "spec": {"containers": [{"name": "main", "image": PRODUCT_IMAGE, "imagePullPolicy": "Never",
                                 "command": command}], "terminationGracePeriodSeconds": 1, **spec},
    }  # fmt: skip


def test_node_is_ready(node: Any) -> None:
    n = node.client.get_node(node.node.name)
    addresses = {a["type"]: a["address"] for a in n["status"]["addresses"]}
    assert addresses["InternalIP"] == node.node.ip
    print(f"\nnode Ready in {node.timings['node Ready']:.1f}s ({', '.join(f'{k} {v:.1f}s' for k, v in node.timings.items())})")


def test_pod_reaches_the_api_server_in_cluster(node: Any, product_image: Any) -> None:
    kube = node.client
    kube.ensure_namespace(NS)
    kube.call("POST", f"/api/v1/namespaces/{NS}/pods", pod("in-cluster", ["python", "-c", IN_CLUSTER],
                                                             restartPolicy="Never"))
    done = node.wait_for(lambda: (node.pod(NS, "in-cluster") or {}).get("status", {}).get("phase")
                         in ("Succeeded", "Failed"), timeout=60, message="the in-cluster pod to finish")
    assert done
    logs = node.kubectl("logs", "-n", NS, "in-cluster").stdout  # kube-apiserver -> kubelet
    result = json.loads(logs.strip().splitlines()[-1])
    # DNS gave the kubernetes Service's address, TLS verified with kube-root-ca.crt, and the
    # default ServiceAccount's token authenticated (403: RBAC grants it nothing, not 401).
    assert result == {"address": "10.0.0.1", "status": 403}


def test_cluster_ip_service_reaches_a_pod(node: Any, product_image: Any) -> None:
    kube = node.client
    kube.ensure_namespace(NS)
    kube.call("POST", f"/api/v1/namespaces/{NS}/pods",
              pod("web", ["python", "-m", "http.server", "8080", "--directory", "/app/config"]))
    kube.call("POST", f"/api/v1/namespaces/{NS}/services", {
        "metadata": {"name": "web", "namespace": NS},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}})
    node.wait_for(lambda: running(node.pod(NS, "web")), timeout=60, message="the web pod to run")
    ip = kube.call("GET", f"/api/v1/namespaces/{NS}/services/web")["spec"]["clusterIP"]
    reply = node.wait_for(lambda: requests.get(f"http://{ip}/policy.yaml", timeout=2), timeout=30,
                          message=f"http://{ip}/ through kube-proxy")
    assert reply.status_code == 200 and "filters:" in reply.text
