"""A small cluster that runs pods: the e2e control plane, kube-controller-manager and one node.

:class:`NodeCluster` starts, in order: etcd and kube-apiserver (tests.e2e.node's flags),
kube-controller-manager with the controllers a node needs, the cluster's kube-scheduler
(``default-scheduler``, for the pods that name no scheduler), then the node (containerd,
kubelet, kube-proxy, cluster DNS) with the pause and kube-scheduler images imported, and
stops all of it, cleaning the host, when the ``with`` block ends, a failed start included.
:meth:`NodeCluster.kubectl` and :meth:`NodeCluster.helm` run those tools against it as its
admin. Nothing here imports pytest; ``python -m bench.node`` times the same start and stop.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tests.e2e import images
from tests.e2e.controlplane import ControlPlane, KubeControllerManager, KubeScheduler
from tests.e2e.images import Archive
from tests.e2e.node import NODE_CONTROLLERS, NODE_MONITOR_GRACE, Node, node_control_plane, node_ip

T = TypeVar("T")
#: A folder to copy the daemons' logs into when the cluster stops (bench.bench_node sets it per
#: run and keeps it when the run failed): the node's own folder does not outlive the run.
KEEP_LOGS = "E2E_NODE_LOGS"


@dataclass
class NodeCluster:
    """The control plane, kube-controller-manager and a Ready node; a context manager.
    ``timings`` holds how long each part took to start, in seconds."""

    extra_images: Sequence[Archive] = ()
    plane: ControlPlane | None = None
    controller_manager: KubeControllerManager | None = None
    scheduler: KubeScheduler | None = None
    node: Node | None = None
    timings: dict[str, float] = field(default_factory=dict)

    def start(self) -> NodeCluster:
        try:
            started = time.monotonic()
            archives = [images.pause_image()]
            plane = node_control_plane(node_ip())
            self.plane = plane.start()
            assert plane.plane is not None and plane.assets is not None and plane.assets.kube_scheduler is not None
            archives.append(images.kube_scheduler_image(plane.assets.kube_scheduler))
            self.timings["control plane"] = time.monotonic() - started
            mark = time.monotonic()
            self.controller_manager = plane.start_kube_controller_manager(
                NODE_CONTROLLERS, name="kube-controller-manager",
                extra_args=[f"--root-ca-file={plane.plane.ca_file}", "--node-monitor-period=1s",
                            f"--node-monitor-grace-period={NODE_MONITOR_GRACE}",
                            "--node-startup-grace-period=30s", "--concurrent-deployment-syncs=2"],
            )  # fmt: skip
            self.timings["kube-controller-manager"] = time.monotonic() - mark
            # The cluster's own scheduler (default-scheduler), as system:kube-scheduler.
            self.scheduler = plane.start_kube_scheduler(name="kube-scheduler")
            self.node = Node(plane, images=[*archives, *self.extra_images]).start()
            self.timings["node Ready"] = self.node.ready_seconds
            self.timings["image import"] = self.node.import_seconds
            self.timings["total"] = time.monotonic() - started
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        keep = os.environ.get(KEEP_LOGS)
        if keep:
            with contextlib.suppress(OSError):
                self.save_logs(Path(keep))
        if self.node is not None:
            self.node.stop()
        if self.plane is not None:
            self.plane.stop()  # kube-controller-manager too

    def __enter__(self) -> NodeCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----------------------------------------------------------------------------- access
    @property
    def client(self) -> Any:
        assert self.plane is not None
        return self.plane.client

    @property
    def kubeconfig(self) -> Path:
        assert self.plane is not None
        return self.plane.kubeconfig

    def logs(self) -> dict[str, str]:
        """The logs of every daemon, by name (for a failed test's report)."""
        out = dict(self.node.logs()) if self.node is not None else {}
        if self.controller_manager is not None:
            out["kube-controller-manager"] = self.controller_manager.log()
        if self.scheduler is not None:
            out["kube-scheduler"] = self.scheduler.log()
        if self.plane is not None and self.plane.plane is not None and self.plane.plane.workdir is not None:
            path = self.plane.plane.workdir / "kube-apiserver.log"
            out["kube-apiserver"] = path.read_text(errors="replace") if path.exists() else ""
        return out

    def save_logs(self, folder: Path) -> None:
        """Copy every daemon's log, and the pod and task logs still on the node, into ``folder``
        (the node's own folder is removed when it stops)."""
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in self.logs().items():
            (folder / f"{name}.log").write_text(text)
        workdir = self.node.workdir if self.node is not None else None
        if workdir is not None and (workdir / "pod-logs").is_dir():
            shutil.copytree(workdir / "pod-logs", folder / "pod-logs", dirs_exist_ok=True)
        for task_log in workdir.glob("task-*.log") if workdir is not None else []:
            shutil.copy2(task_log, folder / task_log.name)

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 60,
                check: bool = True) -> subprocess.CompletedProcess[str]:
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            raise FileNotFoundError("kubectl is not installed")
        result = subprocess.run([kubectl, "--kubeconfig", str(self.kubeconfig), *args], input=input,
                                capture_output=True, text=True, timeout=timeout, check=False)  # fmt: skip
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {result.stderr or result.stdout}")
        return result

    def helm(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
        from tests.deploy.charts import helm_path

        helm = helm_path()
        if helm is None:
            raise FileNotFoundError("helm is not installed (bash deploy/helm/install-helm.sh)")
        result = subprocess.run([helm, *args, "--kubeconfig", str(self.kubeconfig)],
                                capture_output=True, text=True, timeout=timeout, check=False)  # fmt: skip
        if check and result.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)}: {result.stderr or result.stdout}")
        return result

    def import_images(self, archives: Sequence[Archive]) -> None:
        assert self.node is not None
        self.node.import_images(archives)

    # ----------------------------------------------------------------------------- waiting
    def wait_for(self, condition: Callable[[], T | None], *, timeout: float, message: str,
                 interval: float = 0.25) -> T:
        """Poll ``condition`` until it returns something truthy; AssertionError naming
        ``message`` (and the last exception) after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                value = condition()
            except Exception as exc:  # an API hiccup while polling: try again until the deadline
                last = exc
                value = None
            if value:
                return value
            time.sleep(interval)
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {message}" + (f" ({last})" if last else ""))

    def pods(self, namespace: str, selector: str = "") -> list[dict[str, Any]]:
        query = f"?labelSelector={selector}" if selector else ""
        return list(self.client.call("GET", f"/api/v1/namespaces/{namespace}/pods{query}").get("items", []))

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        with contextlib.suppress(Exception):
            return self.client.get_pod(name, namespace)
        return None

    def events(self, namespace: str, pod: str) -> list[dict[str, Any]]:
        items = self.client.call("GET", f"/api/v1/namespaces/{namespace}/events"
                                        f"?fieldSelector=involvedObject.name={pod}").get("items", [])
        return list(items)


def pod_ready(pod: dict[str, Any] | None) -> bool:
    """The pod's Ready condition is True (its probes passed, kubelet says so)."""
    conditions = ((pod or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def running(pod: dict[str, Any] | None) -> bool:
    """Every container of the pod is running (started by kubelet)."""
    statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or []
    return bool(statuses) and all("running" in (s.get("state") or {}) for s in statuses)


def main() -> int:
    """``make node-up``: a node cluster to try the chart by hand, until Ctrl-C (or SIGTERM)."""
    import argparse
    import signal
    import threading

    from tests.e2e.chartnode import LOCAL_IMAGES, NAMESPACE
    from tests.e2e.node import missing

    parser = argparse.ArgumentParser(description="Start the control plane and a node with the local images, "
                                     "print how to use them, stop everything on Ctrl-C.")
    parser.add_argument("--no-product-image", action="store_true", help="do not build/import the product image")
    options = parser.parse_args()
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    lacks = missing(Path(assets) if assets else None)
    if lacks:
        print("cannot start a node; missing:\n  " + "\n  ".join(lacks))
        return 2
    started = time.monotonic()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with NodeCluster() as cluster:
        print(f"node Ready: {', '.join(f'{k} {v:.1f}s' for k, v in cluster.timings.items())}", flush=True)
        if not options.no_product_image:
            print("product image: make image (cached by its sources) ...", flush=True)
            mark = time.monotonic()
            archive = images.product_image()
            cluster.import_images([archive])
            print(f"  {archive.name} {'built and ' if archive.built else ''}imported in {time.monotonic() - mark:.0f}s")
        chart_command = " ".join(["helm install scheduler-extender deploy/helm/scheduler-extender",
                                  f"-n {NAMESPACE} --create-namespace", *LOCAL_IMAGES])
        print(f"""
ready in {time.monotonic() - started:.0f}s. In another shell:
  export KUBECONFIG={cluster.kubeconfig}
  kubectl get nodes -o wide
  {chart_command}
  kubectl -n {NAMESPACE} rollout status deployment -l app.kubernetes.io/instance=scheduler-extender
logs: {cluster.node.workdir if cluster.node else ''} (kubelet.log, containerd.log, kube-proxy.log)
Ctrl-C stops everything and cleans the host.""", flush=True)
        while not stop.wait(1.0):
            pass
        print("stopping ...", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
