"""A real node beside the e2e control plane: containerd, kubelet and kube-proxy on this machine.

The recipe, its settings and its traps are measured in ../shared/notes/real-node.md; each
setting below that is not a default was a failure first there. In short:

- containerd (Debian's 1.6) with its own root, state, socket and CNI configuration folder,
  ``restrict_oom_score_adj`` (nothing here may lower an oom_score_adj), runc with cgroupfs;
- a CNI ``bridge`` network on a bridge of this run's own (``e2ebr<N>``, pod range
  ``10.244.<N>.0/24``, its IPAM state in the run's folder);
- kubelet v1.36.3 (``failCgroupV1: false``: these machines are cgroup v1) on ports of its own,
  talking to the control plane as its admin; kube-apiserver reaches it back for logs and
  exec with a client certificate of the control plane's CA;
- kube-proxy in iptables mode, so that ClusterIP Services work from pods and from the host;
- cluster DNS for ``<service>.<namespace>.svc``: a small server (tests.e2e.clusterdns) on a
  free port of the host, behind a ``kube-dns`` Service (10.0.0.10:53) with a hand-made
  EndpointSlice, as CoreDNS would be reached.

The control plane must be started for a node (:func:`node_control_plane`): kube-apiserver
bound to every address and advertising the node's, its certificate valid for the
``kubernetes`` Service's address, the ServiceAccount admission plugin on; and
kube-controller-manager with the controllers a node needs (:data:`NODE_CONTROLLERS`).

Only one node runs on a machine at a time (a lock file): iptables' KUBE-* chains and
``/run/netns`` are shared by the whole machine. Everything started is stopped, and
everything the node left on the host (pod sandboxes and their shims, mounts, network
namespaces, the bridge, kube-proxy's and the CNI plugins' iptables rules, cgroups) is removed
by :meth:`Node.stop`, also after a failed start. A run killed before it could clean up is
cleaned by the next one: each run records what to undo in ``/run/extender-e2e-node``.
Nothing here imports pytest.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO

import requests
import yaml

from tests.e2e.clusterdns import ClusterDNS
from tests.e2e.controlplane import ControlPlane
from tests.e2e.images import PAUSE_IMAGE, Archive
from tests.e2e.processes import terminate
from tests.fakeapi.client import KubeTestClient
from tests.helpers import free_port

#: The Debian packages a node needs (.ci/run installs them), by the command each provides.
PACKAGES = {
    "containerd": "containerd", "ctr": "containerd", "runc": "runc", "iptables": "iptables",
    "conntrack": "conntrack",
}
CNI_BIN_DIR = Path("/usr/lib/cni")  # containernetworking-plugins
CNI_PLUGINS = ("bridge", "host-local", "portmap", "loopback")
#: kube-controller-manager's controllers for a node (real-node.md, "settings" 6), by their
#: canonical names (its /healthz lists them so): Service endpoints, the kube-root-ca.crt
#: ConfigMap of projected tokens, default ServiceAccounts, Deployments and ReplicaSets for the
#: chart, the node lifecycle (NotReady taints), and the garbage collector and namespace
#: controller so that `helm uninstall` and deleted namespaces leave nothing behind.
NODE_CONTROLLERS = (
    "endpointslice-controller", "root-ca-certificate-publisher-controller", "serviceaccount-controller",
    "deployment-controller", "replicaset-controller", "node-lifecycle-controller",
    "garbage-collector-controller", "namespace-controller",
)
SERVICE_RANGE = "10.0.0.0/24"  # envtest's --service-cluster-ip-range
DNS_SERVICE_IP = "10.0.0.10"
CLUSTER_DOMAIN = "cluster.local"
#: kubelet renews its Lease every quarter of this; the node lifecycle controller's grace
#: period (NODE_MONITOR_GRACE) must be longer than a renewal interval.
NODE_LEASE_SECONDS = 8
NODE_MONITOR_GRACE = "10s"
STATE_DIR = Path("/run/extender-e2e-node")
#: containerd's root (content store and snapshots), kept between runs so that an image
#: imported once is not imported again (the product image takes ~20 s); one node runs at a
#: time (the lock), and each run removes the containers it made.
IMAGE_STORE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "extender-e2e" / "containerd"
LOCK_FILE = STATE_DIR / "lock"


class NodeBusy(RuntimeError):
    """Another node runs on this machine (its run holds :data:`LOCK_FILE`)."""


def take_lock(timeout: float) -> IO[str]:
    """The machine's node lock (flock on :data:`LOCK_FILE`), waiting up to ``timeout`` seconds;
    NodeBusy naming the holder's pid after that."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    lock = open(LOCK_FILE, "a+")  # noqa: SIM115 - held until the node stops
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                lock.seek(0)
                holder = lock.read().strip() or "?"
                lock.close()
                raise NodeBusy(f"another node runs on this machine (pid {holder} holds {LOCK_FILE})") from None
            time.sleep(0.5)
    lock.seek(0)
    lock.truncate()
    lock.write(str(os.getpid()))
    lock.flush()
    return lock


def node_ip() -> str:
    """This machine's global IPv4 address: the source address of its default route."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("203.0.113.1", 9))  # TEST-NET-3; no packet is sent: connect() only picks a route
        address = probe.getsockname()[0]
    if address.startswith("127."):
        raise RuntimeError("no global IPv4 address (a node needs one that pods can route to)")
    return address


def missing(assets: Path | None) -> list[str]:
    """What this machine lacks to run a node, one item each (empty: all there)."""
    lacks = []
    if os.geteuid() != 0:
        lacks.append("root (containerd and kubelet need it)")
    for command, package in PACKAGES.items():
        if shutil.which(command) is None:
            lacks.append(f"{command} (apt-get install {package})")
    for plugin in CNI_PLUGINS:
        if not (CNI_BIN_DIR / plugin).exists():
            lacks.append(f"{CNI_BIN_DIR / plugin} (apt-get install containernetworking-plugins)")
            break
    for binary in ("kubelet", "kube-proxy", "kube-controller-manager", "kube-scheduler"):
        if assets is None or not os.access(assets / binary, os.X_OK):
            lacks.append(f"{binary} in KUBEBUILDER_ASSETS (bash ../shared/tools/k8s-test-binaries.sh builds it)")
    if shutil.which("go") is None and not Path("/usr/local/go/bin/go").exists():
        lacks.append("go (builds the pause image)")
    return lacks


def node_control_plane(ip: str) -> ControlPlane:
    """A ControlPlane whose kube-apiserver a node's pods can reach (real-node.md, settings 5)."""
    kubernetes_service = str(next(ipaddress.ip_network(SERVICE_RANGE).hosts()))
    return ControlPlane(
        apiserver_args=[
            "--bind-address=0.0.0.0",
            f"--advertise-address={ip}",
            "--endpoint-reconciler-type=lease",
            "--kubelet-preferred-address-types=InternalIP",
        ],
        serving_hosts=[ip, kubernetes_service, "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                       f"kubernetes.default.svc.{CLUSTER_DOMAIN}"],
        service_account_admission=True,
        kubelet_client=True,
    )


@dataclass
class HostState:
    """What a node run leaves on the host, recorded before it is made so that a later run can
    undo it when this one was killed: the owner's pid, its folder, containerd's socket, the
    bridge, the CNI network's name and the network namespaces present before it started."""

    owner: int
    workdir: str
    socket: str
    bridge: str
    network: str
    netns_before: list[str]
    kubepods: bool = False

    @property
    def path(self) -> Path:
        return STATE_DIR / f"{self.owner}-{self.bridge}.json"

    def save(self) -> None:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(asdict(self)))


@dataclass
class _Daemon:
    name: str
    args: list[str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 15.0) -> int | None:
        return terminate(self.process, timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@dataclass
class Node:
    """One node named ``name`` registered with ``control_plane`` (started by
    :func:`node_control_plane`). ``images`` are imported into containerd before kubelet starts.
    A context manager; :attr:`ready_seconds` is how long start() took to a Ready node."""

    control_plane: ControlPlane
    images: Sequence[Archive] = ()
    name: str = "e2e-node"
    workdir: Path | None = None
    start_timeout: float = 90.0
    lock_timeout: float = 120.0
    ip: str = ""
    bridge: str = ""
    pod_cidr: str = ""
    ready_seconds: float = 0.0
    import_seconds: float = 0.0
    dns: ClusterDNS | None = None
    _containerd: _Daemon | None = None
    _kubelet: _Daemon | None = None
    _kube_proxy: _Daemon | None = None
    _state: HostState | None = None
    _lock: IO[str] | None = None
    _owns_workdir: bool = False
    _undo: list[Callable[[], None]] = field(default_factory=list)

    # ----------------------------------------------------------------------------- paths
    @property
    def socket(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "containerd" / "containerd.sock"

    @property
    def assets(self) -> Path:
        assert self.control_plane.assets is not None
        return self.control_plane.assets.kube_apiserver.parent

    def logs(self) -> dict[str, str]:
        """Each daemon's log text, by name (for a failed test's report)."""
        return {d.name: d.log() for d in (self._containerd, self._kubelet, self._kube_proxy) if d is not None}

    # ----------------------------------------------------------------------------- start
    def start(self) -> Node:
        started = time.monotonic()
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        self._lock = take_lock(self.lock_timeout)  # one node per machine at a time
        try:
            sweep_leftovers()
            self._prepare()
            self._start_containerd()
            self.import_images(self.images)
            self._start_cluster_dns()
            self._start_kubelet()
            self._start_kube_proxy()
            self._wait_node_ready(started)
        except BaseException:
            self.stop()
            raise
        self.ready_seconds = time.monotonic() - started
        return self

    def _prepare(self) -> None:
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="node-", dir="/var/tmp"))
            self._owns_workdir = True
        self.ip = self.ip or node_ip()
        existing = set(os.listdir("/sys/class/net"))
        index = random.choice([n for n in range(1, 255) if f"e2ebr{n}" not in existing])
        self.bridge, self.pod_cidr = f"e2ebr{index}", f"10.244.{index}.0/24"
        netns = sorted(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else []
        self._state = HostState(os.getpid(), str(self.workdir), str(self.socket), self.bridge,
                                f"e2e-{index}", netns)  # fmt: skip
        self._state.save()

    def _write(self, relative: str, text: str) -> Path:
        assert self.workdir is not None
        path = self.workdir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def _start_containerd(self) -> None:
        assert self.workdir is not None and self._state is not None
        base = self.workdir / "containerd"
        cni_conf = self._write("cni/net.d/10-e2e.conflist", json.dumps({
            "cniVersion": "0.4.0", "name": self._state.network,
            "plugins": [
                {"type": "bridge", "bridge": self.bridge, "isGateway": True, "ipMasq": True, "hairpinMode": True,
                 "ipam": {"type": "host-local", "ranges": [[{"subnet": self.pod_cidr}]],
                          "routes": [{"dst": "0.0.0.0/0"}], "dataDir": str(self.workdir / "cni" / "ipam")}},
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        }, indent=1)).parent  # fmt: skip
        config = f"""\
version = 2
root = "{IMAGE_STORE}"
state = "{base / 'state'}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "{self.socket}"
[ttrpc]
  address = "{base / 'ttrpc.sock'}"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{base / 'opt'}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{cni_conf}"
"""
        path = self._write("containerd/config.toml", config)
        self._containerd = _Daemon("containerd", ["containerd", "--config", str(path)],
                                   self.workdir / "containerd.log")  # fmt: skip
        self._containerd.start()
        self._wait(lambda: self.socket.exists() and self._ctr("version").returncode == 0,
                   self._containerd, "containerd's socket")  # fmt: skip

    def _ctr(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ctr", "-a", str(self.socket), "-n", "k8s.io", *args],
                              capture_output=True, text=True, timeout=timeout, check=False)  # fmt: skip

    def import_images(self, archives: Sequence[Archive]) -> None:
        """``ctr images import`` each archive into the node's containerd (k8s.io namespace)."""
        started = time.monotonic()
        have = set(self._ctr("images", "ls", "-q").stdout.split())
        marks = IMAGE_STORE / "imported"
        marks.mkdir(parents=True, exist_ok=True)
        for archive in archives:
            mark = marks / archive.path.name  # the archive's name holds its content key
            if archive.name in have and mark.exists():
                continue
            result = self._ctr("images", "import", str(archive.path), timeout=300)
            if result.returncode != 0:
                raise RuntimeError(f"ctr images import {archive.path}: {result.stderr or result.stdout}")
            for old in marks.glob(archive.path.name.rsplit("-", 1)[0] + "-*"):
                old.unlink()
            mark.touch()
        names = set(self._ctr("images", "ls", "-q").stdout.split())
        absent = [a.name for a in archives if a.name not in names]
        if absent:
            raise RuntimeError(f"images not in containerd after import: {absent} (have {sorted(names)})")
        self.import_seconds += time.monotonic() - started

    def _start_cluster_dns(self) -> None:
        kube = self.control_plane.client
        plane = self.control_plane.plane
        assert plane is not None
        # Its own client: the server answers from its own thread.
        # Bound to the node's address, the kube-dns endpoint: a socket on 0.0.0.0 would answer
        # a pod from the bridge's address, which conntrack does not match to the DNAT'd query.
        self.dns = ClusterDNS(KubeTestClient(plane.url, token=plane.token, verify=str(plane.ca_file)),
                              domain=CLUSTER_DOMAIN, host=self.ip).start()
        kube.call("POST", "/api/v1/namespaces/kube-system/services", {
            "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}},
            "spec": {"clusterIP": DNS_SERVICE_IP, "ports": [
                {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": self.dns.port},
                {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": self.dns.port}]},
        })  # fmt: skip
        kube.call("POST", "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices", {
            "metadata": {"name": "kube-dns-host", "namespace": "kube-system",
                         "labels": {"kubernetes.io/service-name": "kube-dns",
                                    "endpointslice.kubernetes.io/managed-by": "e2e-node"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [self.ip], "conditions": {"ready": True}}],
            "ports": [{"name": "dns", "port": self.dns.port, "protocol": "UDP"},
                      {"name": "dns-tcp", "port": self.dns.port, "protocol": "TCP"}],
        })  # fmt: skip

    def _kubelet_args(self) -> list[str]:
        assert self.workdir is not None
        plane = self.control_plane.plane
        assert plane is not None
        root = self.workdir / "kubelet"
        (root / "pki").mkdir(parents=True, exist_ok=True)
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "address": "0.0.0.0", "port": free_port(), "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": free_port(),
            "failCgroupV1": False, "cgroupDriver": "cgroupfs",
            "containerRuntimeEndpoint": f"unix://{self.socket}", "imageServiceEndpoint": f"unix://{self.socket}",
            "failSwapOn": False, "makeIPTablesUtilChains": False, "staticPodPath": "",
            "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                             "nodefs.inodesFree": "1%"},
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                               "x509": {"clientCAFile": str(plane.ca_file)}},
            "authorization": {"mode": "Webhook"},
            "clusterDNS": [DNS_SERVICE_IP], "clusterDomain": CLUSTER_DOMAIN,
            "resolvConf": "/etc/resolv.conf",
            "nodeLeaseDurationSeconds": NODE_LEASE_SECONDS, "nodeStatusUpdateFrequency": "2s",
            "serializeImagePulls": False, "podLogsDir": str(self.workdir / "pod-logs"),
            "volumePluginDir": str(self.workdir / "volume-plugins"),
            "syncFrequency": "5s", "fileCheckFrequency": "5s",
        }  # fmt: skip
        config_path = self._write("kubelet/config.yaml", yaml.safe_dump(config))
        return [
            str(self.assets / "kubelet"), f"--config={config_path}", f"--kubeconfig={plane.kubeconfig}",
            f"--root-dir={root}", f"--cert-dir={root / 'pki'}", f"--hostname-override={self.name}",
            f"--node-ip={self.ip}", "--v=2",  # v=2: its kills and their grace periods
        ]

    def _start_kubelet(self) -> None:
        assert self.workdir is not None and self._state is not None
        self._state.kubepods = True
        self._state.save()
        if self._kubelet is None:
            self._kubelet = _Daemon("kubelet", self._kubelet_args(), self.workdir / "kubelet.log")
        self._kubelet.start()

    def _start_kube_proxy(self) -> None:
        assert self.workdir is not None
        plane = self.control_plane.plane
        assert plane is not None
        healthz = free_port()
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(plane.kubeconfig)},
            "mode": "iptables", "clusterCIDR": self.pod_cidr, "hostnameOverride": self.name,
            "healthzBindAddress": f"127.0.0.1:{healthz}", "metricsBindAddress": f"127.0.0.1:{free_port()}",
            "conntrack": {"maxPerCore": 0}, "iptables": {"minSyncPeriod": "0s", "syncPeriod": "30s"},
        }  # fmt: skip
        path = self._write("kube-proxy.yaml", yaml.safe_dump(config))
        self._kube_proxy = _Daemon("kube-proxy", [str(self.assets / "kube-proxy"), f"--config={path}"],
                                   self.workdir / "kube-proxy.log")  # fmt: skip
        self._kube_proxy.start()
        self._wait(lambda: _http_ok(f"http://127.0.0.1:{healthz}/healthz"), self._kube_proxy, "kube-proxy's /healthz")

    def _wait_node_ready(self, started: float) -> None:
        assert self._kubelet is not None
        self._wait(lambda: self.ready(), self._kubelet, f"node {self.name} Ready",
                   timeout=max(5.0, self.start_timeout - (time.monotonic() - started)))  # fmt: skip

    def _wait(self, done: Callable[[], bool], daemon: _Daemon, what: str, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout or self.start_timeout)
        while time.monotonic() < deadline:
            if not daemon.running():
                raise RuntimeError(f"{daemon.name} exited while waiting for {what}:\n{daemon.log()[-3000:]}")
            with contextlib.suppress(Exception):
                if done():
                    return
            time.sleep(0.2)
        raise TimeoutError(f"{what}: not after {timeout or self.start_timeout:.0f}s\n{daemon.log()[-3000:]}")

    # ----------------------------------------------------------------------------- state
    def ready(self) -> bool:
        """The node's Ready condition is True."""
        node = self.control_plane.client.get_node(self.name) or {}
        return any(c.get("type") == "Ready" and c.get("status") == "True"
                   for c in (node.get("status") or {}).get("conditions") or [])  # fmt: skip

    def stop_kubelet(self) -> None:
        """Stop kubelet only (its pods keep running, as after a kubelet crash)."""
        if self._kubelet is not None:
            self._kubelet.stop()

    def start_kubelet(self) -> None:
        """Start kubelet again after :meth:`stop_kubelet` (same configuration)."""
        self._start_kubelet()

    def containers(self) -> dict[str, int]:
        """Running containers' host pids by CRI container name (from containerd's tasks)."""
        pids: dict[str, int] = {}
        for line in self._ctr("tasks", "ls").stdout.splitlines()[1:]:
            parts = line.split()
            if len(parts) >= 3 and parts[2] == "RUNNING":
                pids[parts[0]] = int(parts[1])
        return pids

    # ----------------------------------------------------------------------------- bare tasks
    def run_image(self, image: str, name: str, argv: Sequence[str]) -> Path:
        """Start ``image`` (imported already) as a bare containerd task named ``name`` running
        ``argv`` (the whole command: ctr does not prepend the image's entry point) as the
        image's user, with no pod and no kubelet, so that a test times signals to it as a
        runtime sends them (kubelet's StopContainer is containerd's SIGTERM to the task's PID 1).
        Its output goes to the returned file. Remove it with :meth:`remove_task`; :meth:`stop`
        removes any left."""
        assert self.workdir is not None
        log = self.workdir / f"task-{name}.log"
        log.unlink(missing_ok=True)
        result = self._ctr("run", "-d", f"--log-uri=file://{log}", image, name, *argv, timeout=60)
        if result.returncode != 0:
            raise RuntimeError(f"ctr run {image} {name}: {result.stderr or result.stdout}")
        return log

    def task_pids(self, name: str) -> list[int]:
        """The host pids of the task's processes (its PID 1 first)."""
        lines = self._ctr("tasks", "ps", name, timeout=30).stdout.splitlines()[1:]
        return [int(line.split()[0]) for line in lines if line.split() and line.split()[0].isdigit()]

    def task_status(self, name: str) -> str:
        """containerd's status of the task (RUNNING, STOPPED, ...; "" when there is none)."""
        for line in self._ctr("tasks", "ls", timeout=30).stdout.splitlines()[1:]:
            parts = line.split()
            if parts and parts[0] == name:
                return parts[-1]
        return ""

    def signal_task(self, name: str, signal_name: str) -> None:
        """Send a signal to the task's PID 1, as the runtime does to stop a container."""
        result = self._ctr("tasks", "kill", "-s", signal_name, name, timeout=30)
        if result.returncode != 0:
            raise RuntimeError(f"ctr tasks kill -s {signal_name} {name}: {result.stderr or result.stdout}")

    def delete_task(self, name: str) -> int:
        """Delete the stopped task; returns its exit status (ctr 1.6 prints a non-zero one in a
        warning, "task NAME exit with non-zero exit code N", and exits 0)."""
        result = self._ctr("tasks", "delete", name, timeout=30)
        if result.returncode != 0:
            raise RuntimeError(f"ctr tasks delete {name}: {result.stderr or result.stdout}")
        found = re.search(r"exit with non-zero exit code (\d+)", result.stderr)
        return int(found.group(1)) if found else 0

    def remove_task(self, name: str) -> None:
        """Kill the task if it runs, then delete it and its container (and snapshot)."""
        self._ctr("tasks", "kill", "-s", "SIGKILL", name, timeout=30)
        self._ctr("tasks", "delete", "-f", name, timeout=30)
        self._ctr("containers", "delete", name, timeout=60)

    def container_pid(self, container_id: str) -> int:
        """The host pid of a CRI container (``containerID`` of a pod's status, without
        ``containerd://``)."""
        container_id = container_id.removeprefix("containerd://")
        pid = self.containers().get(container_id)
        if pid is None:
            raise LookupError(f"no running task {container_id} in containerd")
        return pid

    # ----------------------------------------------------------------------------- stop
    def drain(self, timeout: float = 30.0) -> None:
        """Cordon the node (controllers' replacement pods then stay Pending), delete every pod
        bound to it (grace 0) and wait until containerd runs no task, so that kubelet tears
        their sandboxes and networks down itself (CNI DEL)."""
        kube = self.control_plane.client
        with contextlib.suppress(Exception):
            kube.cordon_node(self.name)
            for pod in kube.call("GET", f"/api/v1/pods?fieldSelector=spec.nodeName={self.name}").get("items", []):
                meta = pod["metadata"]
                with contextlib.suppress(Exception):
                    kube.call("DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}?gracePeriodSeconds=0")
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self._kubelet is not None and self._kubelet.running():
                if not self.containers():
                    return
                time.sleep(0.5)

    def stop(self) -> None:
        """Stop everything and remove what the node left on the host; safe to call twice and
        after a failed start."""
        if self._kubelet is not None and self._kubelet.running() and self._containerd is not None \
                and self._containerd.running():
            self.drain()
        for daemon in (self._kube_proxy, self._kubelet):
            if daemon is not None:
                daemon.stop()
        if self.dns is not None:
            self.dns.stop()
            self.dns = None
        if self._state is not None:
            clean_host(self._state, containerd=self._containerd)
            self._state = None
        if self._owns_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
        if self._lock is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    def __enter__(self) -> Node:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _http_ok(url: str) -> bool:
    return requests.get(url, timeout=2).status_code == 200


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, check=False)


def _processes_using(text: str) -> Iterator[int]:
    """Pids whose command line contains ``text`` (a containerd socket path, unique to a run)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            if text.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                yield int(entry)


def _mounts_under(prefix: str) -> list[str]:
    mounts = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].replace("\\040", " ")
            if point == prefix or point.startswith(prefix.rstrip("/") + "/"):
                mounts.append(point)
    return sorted(set(mounts), key=len, reverse=True)  # deepest first


def clean_host(state: HostState, containerd: _Daemon | None = None) -> None:
    """Undo what a node run did to the host (see the module's docstring), from its record."""
    socket_path = state.socket
    # Containers: kill every task (the shims then exit), then containerd itself.
    if Path(socket_path).exists():
        ctr = ["ctr", "-a", socket_path, "-n", "k8s.io"]
        with contextlib.suppress(Exception):
            for line in _run(*ctr, "tasks", "ls", "-q", timeout=20).stdout.split():
                _run(*ctr, "tasks", "kill", "-s", "SIGKILL", line, timeout=20)
                _run(*ctr, "tasks", "delete", "-f", line, timeout=20)
            # The containers and their snapshots (the image store is kept between runs).
            leftover = _run(*ctr, "containers", "ls", "-q", timeout=20).stdout.split()
            if leftover:
                _run(*ctr, "containers", "delete", *leftover, timeout=60)
    if containerd is not None:
        containerd.stop()
    for pid in _processes_using(socket_path):  # a containerd of a killed run, its shims
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    # Mounts under the run's folder (overlay rootfs, token tmpfs, sandbox shm).
    for point in _mounts_under(state.workdir):
        _run("umount", "-l", point, timeout=20)
    # Network namespaces the CNI made for the run's pods, the bridge, the CNI plugins' cache.
    if os.path.isdir("/run/netns"):
        for name in sorted(set(os.listdir("/run/netns")) - set(state.netns_before)):
            if name.startswith("cni-"):
                _run("ip", "netns", "delete", name, timeout=20)
    if Path(f"/sys/class/net/{state.bridge}").exists():
        _run("ip", "link", "delete", state.bridge, timeout=20)
    for cached in Path("/var/lib/cni/results").glob(f"{state.network}-*"):
        cached.unlink(missing_ok=True)
    _clean_iptables(state.network)
    if state.kubepods:
        _clean_cgroups()
    with contextlib.suppress(OSError):
        state.path.unlink()


def _clean_iptables(network: str) -> None:
    """kube-proxy's and kubelet's KUBE-* chains, and the CNI bridge plugin's masquerade chains
    of this run's network (their rules carry its name in a comment), in IPv4 and IPv6: first
    the rules of other chains that jump to them, then the chains."""
    for tool in ("iptables", "ip6tables"):
        for table in ("nat", "filter", "mangle"):
            saved = _run(f"{tool}-save", "-t", table).stdout
            rules = [line[3:] for line in saved.splitlines() if line.startswith("-A ")]
            owned = {line[1:].split()[0] for line in saved.splitlines() if line.startswith(":KUBE-")}
            tagged = [r for r in rules if f'name: \\"{network}\\"' in r]
            owned |= {_target(r) for r in tagged if _target(r).startswith("CNI-")}
            for rule in rules:
                if rule.split()[0] not in owned and (_target(rule) in owned or rule in tagged):
                    _run(tool, "-t", table, "-D", *shlex.split(rule))
            for chain in owned:
                _run(tool, "-t", table, "-F", chain)
            for chain in owned:
                _run(tool, "-t", table, "-X", chain)
            # A CNI chain left empty and unreferenced (its rule removed by CNI DEL, the chain not):
            # garbage whoever made it, and nothing else here uses CNI.
            referenced = {_target(r) for r in rules}
            for line in saved.splitlines():
                chain = line[1:].split()[0] if line.startswith(":CNI-") else ""
                if chain and chain not in referenced and not any(r.split()[0] == chain for r in rules):
                    _run(tool, "-t", table, "-X", chain)


def _target(rule: str) -> str:
    parts = rule.split()
    return parts[parts.index("-j") + 1] if "-j" in parts[:-1] else ""


def _clean_cgroups() -> None:
    """kubelet's empty ``kubepods`` cgroups (cgroupfs driver), deepest first."""
    base = Path("/sys/fs/cgroup")
    for hierarchy in base.iterdir() if base.is_dir() else []:
        top = hierarchy / "kubepods"
        if not top.is_dir():
            continue
        for directory in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                directory.rmdir()
        with contextlib.suppress(OSError):
            top.rmdir()


def sweep_leftovers() -> None:
    """Clean up after runs that were killed before their own clean-up (their owner is gone)."""
    for record in STATE_DIR.glob("*.json"):
        try:
            state = HostState(**json.loads(record.read_text()))
        except (OSError, ValueError, TypeError):
            record.unlink(missing_ok=True)
            continue
        if state.owner != os.getpid() and not Path(f"/proc/{state.owner}").exists():
            clean_host(state)
            shutil.rmtree(state.workdir, ignore_errors=True)

