"""The chart on the e2e node, as a user installs it: helpers shared by the in-cluster tests.

``install`` runs the README's "Trying it on a local node" command (``helm install`` with the
locally built images) and waits for every Deployment's pods to be Ready through their own
probes. The rest reads what a user would look at: pods, Events, Leases, and ``/metrics``
scraped over the pod network. Nothing here imports pytest.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from typing import Any

import requests

from tests.deploy.charts import CHART, RELEASE
from tests.e2e.images import KUBE_SCHEDULER_IMAGE, PAUSE_IMAGE, PRODUCT_IMAGE
from tests.e2e.nodecluster import NodeCluster, pod_ready, running

NAMESPACE = "scheduler-extender"
APPS = "apps"
WEBHOOK = "extender-webhook"
KUBE_SCHEDULER = "extender-kube-scheduler"
STANDALONE = "extender-scheduler"
DEPLOYMENTS = (WEBHOOK, KUBE_SCHEDULER, STANDALONE)
#: The README's local-node values: the images built here (nothing is pulled).
LOCAL_IMAGES = [
    "--set", f"image.repository={PRODUCT_IMAGE.rsplit(':', 1)[0]}",
    "--set", f"image.tag={PRODUCT_IMAGE.rsplit(':', 1)[1]}",
    "--set", f"kubeScheduler.image={KUBE_SCHEDULER_IMAGE}",
]


def install(cluster: NodeCluster, *extra: str, timeout: float = 180) -> float:
    """``helm install`` (README's local-node command plus ``extra``), then wait until each
    installed Deployment has its replicas Ready; returns the seconds it took."""
    started = time.monotonic()
    cluster.helm("install", RELEASE, str(CHART), "-n", NAMESPACE, "--create-namespace", *LOCAL_IMAGES, *extra)
    wait_rolled_out(cluster, timeout=timeout)
    return time.monotonic() - started


@contextlib.contextmanager
def installed(cluster: NodeCluster, *extra: str) -> Iterator[float]:
    """The chart installed (``install``) for the block; uninstalled, and the pods it left in the
    apps namespace deleted, at the end, a failed block included. Gives the install's seconds."""
    try:
        yield install(cluster, *extra)
    finally:
        uninstall(cluster)
        delete_namespace_pods(cluster)


def upgrade(cluster: NodeCluster, *extra: str, timeout: float = 180) -> None:
    cluster.helm("upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--reuse-values", *extra)
    wait_rolled_out(cluster, timeout=timeout)


def uninstall(cluster: NodeCluster) -> None:
    cluster.helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "120s", check=False)


def deployments(cluster: NodeCluster) -> list[dict[str, Any]]:
    return list(cluster.client.call("GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments").get("items", []))


def rolled_out(deployment: dict[str, Any]) -> bool:
    """As ``kubectl rollout status``: the newest ReplicaSet's pods all updated and available,
    no old ones left."""
    spec, status = deployment["spec"], deployment.get("status") or {}
    want = spec.get("replicas", 1)
    return (status.get("observedGeneration", 0) >= deployment["metadata"]["generation"]
            and status.get("updatedReplicas", 0) == want and status.get("replicas", 0) == want
            and status.get("availableReplicas", 0) == want)  # fmt: skip


def wait_rolled_out(cluster: NodeCluster, timeout: float = 180) -> None:
    def done() -> bool:
        items = deployments(cluster)
        return bool(items) and all(rolled_out(d) for d in items)

    try:
        cluster.wait_for(done, timeout=timeout, message="every Deployment rolled out", interval=0.5)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{describe(cluster)}") from None


def describe(cluster: NodeCluster, namespace: str = NAMESPACE) -> str:
    """The pods, their states and the namespace's Events, for a failure message."""
    lines = []
    for pod in cluster.pods(namespace):
        status = pod.get("status") or {}
        states = [(s["name"], list((s.get("state") or {}).items()), s.get("restartCount"))
                  for s in status.get("containerStatuses") or []]  # fmt: skip
        lines.append(f"pod {pod['metadata']['name']} on {pod['spec'].get('nodeName')}: {status.get('phase')} {states}")
    events = cluster.client.call("GET", f"/api/v1/namespaces/{namespace}/events").get("items", [])
    for event in events[-30:]:
        lines.append(f"event {event['involvedObject'].get('name')}: {event.get('reason')}: {event.get('message')}")
    return "\n".join(lines)


def component_pods(cluster: NodeCluster, name: str) -> list[dict[str, Any]]:
    return [p for p in cluster.pods(NAMESPACE, f"app.kubernetes.io/name={name}")
            if not p["metadata"].get("deletionTimestamp")]  # fmt: skip


def service_ip(cluster: NodeCluster, name: str = WEBHOOK) -> str:
    return str(cluster.client.call("GET", f"/api/v1/namespaces/{NAMESPACE}/services/{name}")["spec"]["clusterIP"])


def metric(text: str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        match = re.match(r"^([a-zA-Z_:][\w:]*)(\{(.*)\})?\s+(\S+)", line)
        if not match or match.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(3) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(match.group(4))
    return total


def scrape(ip: str, port: int = 8888) -> str:
    reply = requests.get(f"http://{ip}:{port}/metrics", timeout=5)
    reply.raise_for_status()
    return reply.text


def webhook_metric(cluster: NodeCluster, name: str, **labels: str) -> float:
    """``name`` summed over every webhook pod (each is scraped at its pod IP, as Prometheus
    would through the ServiceMonitor's endpoints)."""
    return sum(metric(scrape(p["status"]["podIP"]), name, **labels)
               for p in component_pods(cluster, WEBHOOK) if p.get("status", {}).get("podIP"))  # fmt: skip


def app_pod(cluster: NodeCluster, name: str, scheduler: str, namespace: str = APPS, **spec: Any) -> None:
    """A pause pod for ``scheduler`` (the image is on the node; nothing is pulled)."""
    cluster.client.ensure_namespace(namespace)
    cluster.client.call("POST", f"/api/v1/namespaces/{namespace}/pods", {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"schedulerName": scheduler, "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "pause", "image": PAUSE_IMAGE, "imagePullPolicy": "Never",
                                 "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}], **spec},
    })  # fmt: skip


def wait_started(cluster: NodeCluster, name: str, namespace: str = APPS, timeout: float = 60) -> dict[str, Any]:
    """Wait until the pod is bound and its container runs; returns the pod."""
    try:
        return cluster.wait_for(lambda: (p := cluster.pod(namespace, name)) and running(p) and p,
                                timeout=timeout, message=f"pod {namespace}/{name} bound and running")  # fmt: skip
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{describe(cluster, namespace)}") from None


def lease_holder(cluster: NodeCluster, name: str = STANDALONE) -> str:
    """The pod holding the Lease: its holderIdentity is ``<hostname>_<uuid>`` (as
    kube-scheduler's), and a pod's hostname is its name."""
    lease = cluster.client.get_lease(name, NAMESPACE) or {}
    return str((lease.get("spec") or {}).get("holderIdentity") or "").split("_", 1)[0]


def event_messages(cluster: NodeCluster, name: str, namespace: str = APPS) -> list[str]:
    return [f"{e.get('reason')}: {e.get('message')}" for e in cluster.events(namespace, name)]


def delete_namespace_pods(cluster: NodeCluster, namespace: str = APPS) -> None:
    with contextlib.suppress(Exception):
        cluster.client.call("DELETE", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0")


__all__ = ["pod_ready", "running"]
