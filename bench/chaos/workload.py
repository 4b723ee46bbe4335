"""The chaos run's cluster and its pod stream: nodes, storage, priorities, and pods of every kind.

Two pools of five nodes, one per scheduler (``POOL`` label, and every pod selects its
pool): two schedulers sharing nodes race for the same free space by design (the kubelet
refuses the loser), which would hide the races this run looks for, those within one
scheduler (two leaders, two gunicorn workers, a retried bind). Each pool spreads its
nodes over three zones; two nodes advertise ``example.com/fpga``, two publish two shared
GPUs (docs/devices.md).

The stream creates pods at a steady rate, alternating pools, each of a kind drawn by
weight, and deletes each one (with its claim) when its lifetime ends, bound or not:

* plain, and "mid" (a higher priority class): cpu and memory;
* anti: required hostname anti-affinity within its kind;
* spread: zone spread, maxSkew 1, DoNotSchedule;
* hostport: hostPort 7000;
* fpga: one ``example.com/fpga``;
* pvc-local, pvc-dynamic: a claim of a WaitForFirstConsumer class, local volumes made in
  advance on every node or volumes provisioned for the selected node (``storage.py`` plays
  the PV controller and the provisioner, as no kube-controller-manager runs);
* gpu: a shared-GPU request (memory and cores of one device);
* preemptor: highest priority, 3 cpus: usually fits only by evicting lower pods;
* gang: a pod group of minCount 2 or 3 and sometimes one member more (0.5 or 1 cpu each),
  all members created together and deleted together. The standalone pool's gangs are
  kube-scheduler v1.36's ``PodGroup`` (``scheduling.k8s.io/v1alpha2``, members name it in
  ``spec.schedulingGroup``; the API server runs with its gates); the webhook pool's are
  Coscheduling's (the CRD from deploy/, members labelled), as a stock kube-scheduler without
  the gates sees them (docs/gangs.md). Their priority class is as high as the preemptor's and
  never preempts: a gang is neither a victim (which would leave it partly bound on purpose)
  nor a preemptor.

**DRA kinds** (dynamic resource allocation, resource.k8s.io/v1), in both pools: the standalone
scheduler allocates its pools' claims itself; in the webhook pool kube-scheduler does and the
webhook filters, scores and binds. kube-controller-manager's resourceclaim-controller makes
the claims of templates. Every node publishes a pool of driver ``DRA_DRIVER`` named after it:
accelerators (``acc-0`` "big" on nodes 0 and 1, "small"
elsewhere; ``acc-1``, "small", on nodes 0..2 only), a NIC that takes several allocations
(``allowMultipleAllocations``, 8G of bandwidth), and on nodes 3 and 4 a partitionable device (a counter set of 40Gi memory, in a second slice of
the pool: ``part-whole`` consumes all of it, ``part-half-0`` and ``-1`` 20Gi each):

Devices are scarcer than cpu on purpose: DRA pods wait for devices now and then, so the
allocator's refusals, PostFilter and the devices coming back are all exercised.

* dra-template: one accelerator, from a ResourceClaimTemplate;
* dra-shared: one ResourceClaim (an accelerator) shared by 2 or 3 pods created together,
  deleted with them;
* dra-first: ``firstAvailable``: a "big" accelerator, else any;
* dra-nic: a share of a NIC, 2G, 3G or 4G of its bandwidth (consumable capacity);
* dra-part: a partition (half, twice as often) or the whole of a partitionable device;
* dra-ext: ``chaos.example/acc: 1``, an extended resource no node advertises: the
  DeviceClass ``chaos-acc`` serves it (DRAExtendedResource), through a claim the scheduler
  makes at PreBind.

At the end of its lifetime a DRA pod is deleted with its claims (the shared claim once its
last pod is, a template's or extended resource's claim as read from the pod's status), and
kube-controller-manager deallocates them: the devices come back.

Every pod has ``terminationGracePeriodSeconds: 0``: with no kubelet, a pod deleted with a
grace period would stay Terminating forever and keep its node's resources.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from extender.model import podgroups as pg
from extender.model.devices import GPU, GPU_CORES, GPU_MEMORY, INVENTORY_ANNOTATION
from tests.fakeapi.client import KubeApiError, KubeTestClient
from tests.storage_objects import claim, persistent_volume, storage_class

NAMESPACE = "chaos"
SYSTEM_NAMESPACE = "chaos-system"  # leases: leader election and the GPU ledgers
STANDALONE = "chaos-standalone"  # extender schedule's schedulerName
WEBHOOK = "chaos-webhook"  # kube-scheduler's profile, with the webhook
POOLS = {STANDALONE: "sa", WEBHOOK: "wh"}
POOL = "chaos.example/pool"
ZONE = "topology.kubernetes.io/zone"
FPGA = "example.com/fpga"
LOCAL_CLASS = "chaos-local"
DYNAMIC_CLASS = "chaos-dynamic"
PRIORITIES = {"chaos-low": 100, "chaos-mid": 1000, "chaos-high": 100000}
GANG_PRIORITY = "chaos-gang"  # as high as chaos-high, preemptionPolicy Never
NODES_PER_POOL = 5
LOCAL_VOLUMES_PER_NODE = 2
HOST_PORT = 7000
PAUSE = "registry.k8s.io/pause:3.10"
KINDS = {"plain": 24, "mid": 8, "anti": 8, "spread": 10, "hostport": 6, "fpga": 5, "pvc-local": 6,
         "pvc-dynamic": 6, "gpu": 14, "preemptor": 5, "gang": 6,
         "dra-template": 12, "dra-shared": 6, "dra-first": 10, "dra-nic": 10, "dra-part": 10, "dra-ext": 10}  # weights
DRA_KINDS = tuple(kind for kind in KINDS if kind.startswith("dra-"))
DRA_API = "resource.k8s.io/v1"
DRA_DRIVER = "dra.chaos.example"
DRA_EXTENDED = "chaos.example/acc"  # served by DeviceClass chaos-acc (DRAExtendedResource)
DRA_CLASSES = {  # name -> CEL selector on the driver's devices
    "chaos-acc": f'device.driver == "{DRA_DRIVER}" && device.attributes["{DRA_DRIVER}"].kind == "acc"',
    "chaos-nic": f'device.driver == "{DRA_DRIVER}" && device.attributes["{DRA_DRIVER}"].kind == "nic"',
    "chaos-part": f'device.driver == "{DRA_DRIVER}" && device.attributes["{DRA_DRIVER}"].kind == "part"',
}
DRA_PATHS = {"DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses",
             "ResourceSlice": "/apis/resource.k8s.io/v1/resourceslices",
             "ResourceClaim": f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims",
             "ResourceClaimTemplate": f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaimtemplates"}
PART_NODES = range(3, 5)  # nodes with the partitionable device
NIC_BANDWIDTH = "8G"  # two 4G shares, or four 2G ones
SHARED_LIFETIME = (20.0, 45.0)
GANG_LIFETIME = (30.0, 60.0)  # longer than a pod's: a gang stuck partly bound for 30 s is seen
# The API server flags that serve kube-scheduler v1.36's PodGroup (docs/gangs.md).
GANG_APISERVER_ARGS = ("--feature-gates=GenericWorkload=true,GangScheduling=true",
                       "--runtime-config=scheduling.k8s.io/v1alpha2=true")
ROOT = Path(__file__).resolve().parents[2]
COSCHEDULING_CRD = ROOT / "deploy" / "components" / "podgroup-crd" / "scheduling.x-k8s.io_podgroups.yaml"
GROUP_PATHS = {STANDALONE: f"/apis/{pg.API_V1ALPHA2}/namespaces/{NAMESPACE}/podgroups",
               WEBHOOK: f"/apis/{pg.API_COSCHEDULING}/namespaces/{NAMESPACE}/podgroups"}


def node_name(pool: str, index: int) -> str:
    return f"{pool}-{index}"


def gpu_inventory(node: str) -> str:
    return json.dumps({"version": 1, "devices": [
        {"id": f"{node}-gpu-{i}", "type": "Tesla-T4", "memory": 16000, "cores": 100} for i in range(2)]})


def create_cluster(kube: KubeTestClient) -> None:
    """Namespaces, priority classes, storage classes, both pools' nodes and local volumes, and
    Coscheduling's PodGroup CRD (served before the schedulers start: they look for it once)."""
    for namespace in (NAMESPACE, SYSTEM_NAMESPACE):
        kube.ensure_namespace(namespace)
    for name, value in PRIORITIES.items():
        kube.ensure_priority_class(name, value)
    kube.ensure_priority_class(GANG_PRIORITY, PRIORITIES["chaos-high"], preemption_policy="Never")
    kube.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
              yaml.safe_load(COSCHEDULING_CRD.read_text()))
    for path in GROUP_PATHS.values():
        _wait_served(kube, path)
    kube.call("POST", "/apis/storage.k8s.io/v1/storageclasses",
              storage_class(LOCAL_CLASS, provisioner="kubernetes.io/no-provisioner"))
    kube.call("POST", "/apis/storage.k8s.io/v1/storageclasses", storage_class(DYNAMIC_CLASS))
    for pool in POOLS.values():
        for i in range(NODES_PER_POOL):
            name = node_name(pool, i)
            kube.create_node(name, cpu="4", memory="16Gi", pods="16",
                             labels={POOL: pool, ZONE: f"zone-{'abc'[i % 3]}"},
                             extra_resources={FPGA: "2"} if i < 2 else None,
                             annotations={INVENTORY_ANNOTATION: gpu_inventory(name)} if i >= 3 else None)
            for v in range(LOCAL_VOLUMES_PER_NODE):
                volume = persistent_volume(f"local-{name}-{v}", size="5Gi", cls=LOCAL_CLASS, node=name,
                                           phase=None)
                kube.call("POST", "/api/v1/persistentvolumes", volume)


def _attributes(**values: str) -> dict[str, Any]:
    return {name: {"string": value} for name, value in values.items()}


def dra_slices(node: str, generation: int = 1) -> list[dict[str, Any]]:
    """The ResourceSlices of `node`'s pool, as the driver publishes them at `generation`: its
    devices, and on the nodes with a partitionable device a second slice with the counter set
    they consume (a slice has devices or counter sets, not both: resource.k8s.io/v1)."""
    index = int(node.rsplit("-", 1)[1])
    devices: list[dict[str, Any]] = [
        {"name": "acc-0", "attributes": _attributes(kind="acc", model="big" if index < 2 else "small")}]
    if index < 3:
        devices.append({"name": "acc-1", "attributes": _attributes(kind="acc", model="small")})
    devices.append({"name": "nic", "attributes": _attributes(kind="nic"), "allowMultipleAllocations": True,
                    "capacity": {"bandwidth": {"value": NIC_BANDWIDTH}}})
    partitioned = index in PART_NODES
    if partitioned:
        devices += [{"name": name, "attributes": _attributes(kind="part", size=size),
                     "consumesCounters": [{"counterSet": "mem", "counters": {"memory": {"value": memory}}}]}
                    for name, size, memory in (("part-whole", "whole", "40Gi"), ("part-half-0", "half", "20Gi"),
                                               ("part-half-1", "half", "20Gi"))]
    pool = {"name": node, "generation": generation, "resourceSliceCount": 2 if partitioned else 1}
    prefix = f"{node}-{DRA_DRIVER.replace('.', '-')}"
    slices = [{"apiVersion": DRA_API, "kind": "ResourceSlice", "metadata": {"name": f"{prefix}-{generation}"},
               "spec": {"driver": DRA_DRIVER, "nodeName": node, "pool": pool, "devices": devices}}]
    if partitioned:
        slices.append({"apiVersion": DRA_API, "kind": "ResourceSlice",
                       "metadata": {"name": f"{prefix}-counters-{generation}"},
                       "spec": {"driver": DRA_DRIVER, "nodeName": node, "pool": dict(pool),
                                "sharedCounters": [{"name": "mem", "counters": {"memory": {"value": "40Gi"}}}]}})
    return slices


def _exactly(device_class: str, selector: str = "", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": 1, **extra}
    if selector:
        body["selectors"] = [{"cel": {"expression": selector}}]
    return body


def _model(model: str) -> str:
    return f'device.attributes["{DRA_DRIVER}"].model == "{model}"'


def _size(size: str) -> str:
    return f'device.attributes["{DRA_DRIVER}"].size == "{size}"'


DRA_TEMPLATES = {  # template name -> its claim's spec.devices.requests
    "acc": [{"name": "acc", "exactly": _exactly("chaos-acc")}],
    "first": [{"name": "acc", "firstAvailable": [{"name": "big", **_exactly("chaos-acc", _model("big"))},
                                                 {"name": "any", **_exactly("chaos-acc")}]}],
    **{f"nic-{g}": [{"name": "nic", "exactly": _exactly("chaos-nic", capacity={"requests": {"bandwidth": f"{g}G"}})}]
       for g in (2, 3, 4)},
    **{f"part-{size}": [{"name": "part", "exactly": _exactly("chaos-part", _size(size))}] for size in ("half", "whole")},
}


def create_dra(kube: KubeTestClient) -> None:
    """The DeviceClasses (chaos-acc also serving ``DRA_EXTENDED``), every node's slice, and the
    ResourceClaimTemplates."""
    for name, selector in DRA_CLASSES.items():
        spec: dict[str, Any] = {"selectors": [{"cel": {"expression": selector}}]}
        if name == "chaos-acc":
            spec["extendedResourceName"] = DRA_EXTENDED
        kube.call("POST", DRA_PATHS["DeviceClass"], {"apiVersion": DRA_API, "kind": "DeviceClass",
                                                     "metadata": {"name": name}, "spec": spec})
    for pool in POOLS.values():
        for i in range(NODES_PER_POOL):
            for body in dra_slices(node_name(pool, i)):
                kube.call("POST", DRA_PATHS["ResourceSlice"], body)
    for name, requests in DRA_TEMPLATES.items():
        kube.call("POST", DRA_PATHS["ResourceClaimTemplate"], {
            "apiVersion": DRA_API, "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": requests}}}})


def shared_claim(name: str) -> dict[str, Any]:
    return {"apiVersion": DRA_API, "kind": "ResourceClaim", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"devices": {"requests": DRA_TEMPLATES["acc"]}}}


def _wait_served(kube: KubeTestClient, path: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while kube.request("GET", path).status_code != 200:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path} is not served after {timeout:.0f} s (gates, runtime-config, the CRD)")
        time.sleep(0.2)


def _container(requests: dict[str, str], limits: dict[str, str] | None = None,
               ports: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": PAUSE,
                                 "resources": {"requests": requests, "limits": limits or {}}}
    if ports:
        container["ports"] = ports
    return container


def pod_body(kind: str, name: str, scheduler: str, rng: random.Random,
             shared: str = "") -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A pod of `kind` for `scheduler`'s pool, and the claim to create before it (or None);
    a dra-shared pod uses the ResourceClaim `shared`."""
    pool = POOLS[scheduler]
    app = f"{pool}-{kind}"
    cpu = rng.choice(("100m", "200m", "300m", "500m"))
    memory = rng.choice(("128Mi", "256Mi", "512Mi", "1Gi"))
    limits: dict[str, str] = {}
    spec: dict[str, Any] = {"schedulerName": scheduler, "nodeSelector": {POOL: pool},
                            "terminationGracePeriodSeconds": 0, "priorityClassName": "chaos-low"}
    ports = None
    claim_body = None
    if kind == "mid":
        spec["priorityClassName"] = "chaos-mid"
    elif kind == "preemptor":
        spec["priorityClassName"] = "chaos-high"
        cpu, memory = "3", "1Gi"
    elif kind == "anti":
        cpu = "100m"
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}]}}
    elif kind == "spread":
        cpu = "100m"
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": ZONE,
                                              "whenUnsatisfiable": "DoNotSchedule",
                                              "labelSelector": {"matchLabels": {"app": app}}}]
    elif kind == "hostport":
        ports = [{"containerPort": HOST_PORT, "hostPort": HOST_PORT, "protocol": "TCP"}]
    elif kind == "fpga":
        limits = {FPGA: "1"}
    elif kind == "gpu":
        limits = {GPU: "1", GPU_MEMORY: str(rng.choice((3000, 5000, 7000))), GPU_CORES: str(rng.choice((10, 25, 40)))}
    elif kind in ("pvc-local", "pvc-dynamic"):
        cls = LOCAL_CLASS if kind == "pvc-local" else DYNAMIC_CLASS
        claim_body = claim(name, namespace=NAMESPACE, size="1Gi", cls=cls)
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": name}}]
    elif kind == "dra-ext":
        cpu, limits = "100m", {DRA_EXTENDED: "1"}
    elif kind.startswith("dra-"):
        cpu = "100m"
        template = {"dra-template": "acc", "dra-first": "first",
                    "dra-nic": f"nic-{rng.choice((2, 3, 4))}",
                    "dra-part": f"part-{rng.choice(('half', 'half', 'whole'))}"}.get(kind)
        entry = {"name": "dev", "resourceClaimTemplateName": template} if template else \
            {"name": "dev", "resourceClaimName": shared or name}
        spec["resourceClaims"] = [entry]
    spec["containers"] = [_container({"cpu": cpu, "memory": memory, **limits}, limits or None, ports)]
    if spec.get("resourceClaims"):
        spec["containers"][0]["resources"]["claims"] = [{"name": "dev"}]
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": app, "chaos.example/kind": kind}},
            "spec": spec}
    return body, claim_body


def gang_bodies(name: str, scheduler: str, rng: random.Random) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A pod group named `name` for `scheduler` (kube-scheduler v1.36's for the standalone pool,
    Coscheduling's for the webhook pool) and its members: minCount 2 or 3, one member more
    one time in three (an extra member binds alone once the group is bound)."""
    pool = POOLS[scheduler]
    min_count = rng.choice((2, 3))
    size = min_count + (1 if rng.random() < 1 / 3 else 0)
    cpu = rng.choice(("500m", "1"))
    labels = {"app": f"{pool}-gang", "chaos.example/kind": "gang"}
    spec: dict[str, Any] = {"schedulerName": scheduler, "nodeSelector": {POOL: pool},
                            "terminationGracePeriodSeconds": 0, "priorityClassName": GANG_PRIORITY,
                            "containers": [_container({"cpu": cpu, "memory": "256Mi"})]}
    if scheduler == STANDALONE:
        group = {"apiVersion": pg.API_V1ALPHA2, "kind": "PodGroup", "metadata": {"name": name, "namespace": NAMESPACE},
                 "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}
        spec["schedulingGroup"] = {"podGroupName": name}
    else:
        group = {"apiVersion": pg.API_COSCHEDULING, "kind": "PodGroup",
                 "metadata": {"name": name, "namespace": NAMESPACE}, "spec": {"minMember": min_count}}
        labels[pg.POD_GROUP_LABEL] = name
    members = [{"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{name}-{i}", "namespace": NAMESPACE, "labels": dict(labels)},
                "spec": json.loads(json.dumps(spec))} for i in range(size)]
    return group, members


def _uses_dra(body: dict[str, Any]) -> bool:
    return bool(body["spec"].get("resourceClaims")) or any(
        DRA_EXTENDED in ((c.get("resources") or {}).get("limits") or {}) for c in body["spec"]["containers"])


def probe_body(name: str, scheduler: str) -> dict[str, Any]:
    """A pod that fits any node of its pool (no requests): bound again means scheduling is back."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"chaos.example/kind": "probe"}},
            "spec": {"schedulerName": scheduler, "nodeSelector": {POOL: POOLS[scheduler]},
                     "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": PAUSE}]}}


@dataclass
class Stream:
    """Creates pods at `rate` per second (pools alternating) until stopped; deletes each one
    when its lifetime (uniform in `lifetime`) ends. Runs in its own thread."""

    kube: KubeTestClient
    rng: random.Random
    clock: Callable[[], float]
    rate: float = 2.0
    lifetime: tuple[float, float] = (15.0, 45.0)
    created: int = 0
    gangs: int = 0
    deleted_uids: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    created_by_kind: dict[str, int] = field(default_factory=dict)  # pods the API server took, by kind
    # (expires, name, uid, cleanup): cleanup is "pvc" (its claim), "dra" (its claims, read from its
    # status), "shared-claim" (the entry is a shared ResourceClaim, no pod) or ""
    _live: list[tuple[float, str, str, str]] = field(default_factory=list)
    _claims_left: list[str] = field(default_factory=list)
    _dra_claims_left: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Stream:
        self._thread = threading.Thread(target=self._run, name="chaos-stream", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop creating and deleting; the pods alive stay, for the final check."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def _run(self) -> None:
        kinds, weights = list(KINDS), list(KINDS.values())
        schedulers = list(POOLS)
        next_at = time.monotonic()
        while not self._stop.is_set():
            scheduler = schedulers[self.created % 2]
            kind = self.rng.choices(kinds, weights)[0]
            name = f"{POOLS[scheduler]}-{kind}-{self.created}"
            if kind == "gang":
                group, members = gang_bodies(name, scheduler, self.rng)
                expires = self.clock() + self.rng.uniform(*GANG_LIFETIME)
                self.created += len(members)
                self._create_gang(scheduler, group, members, expires)
            elif kind == "dra-shared":
                size = self.rng.choice((2, 3))
                expires = self.clock() + self.rng.uniform(*SHARED_LIFETIME)
                bodies = [pod_body(kind, f"{name}-{i}", scheduler, self.rng, shared=name)[0] for i in range(size)]
                self.created += size
                self._create_shared(name, bodies, expires)
            else:
                body, claim_body = pod_body(kind, name, scheduler, self.rng)
                expires = self.clock() + self.rng.uniform(*self.lifetime)
                self.created += 1
                self._create(body, claim_body, expires)
            self._expire()
            next_at += 1.0 / self.rate
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def _create(self, body: dict[str, Any], claim_body: dict[str, Any] | None, expires: float) -> None:
        name = body["metadata"]["name"]
        try:
            if claim_body is not None:
                self.kube.call("POST", f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims", claim_body)
            created = self.kube.call("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body)
        except (KubeApiError, OSError) as exc:  # the API server is down: that pod is skipped
            self.errors.append(f"create {name}: {str(exc)[:120]}")
            if claim_body is not None:
                self._delete_claim(name)
            return
        except Exception as exc:  # noqa: BLE001 - requests' connection errors
            self.errors.append(f"create {name}: {type(exc).__name__}")
            return
        cleanup = "pvc" if claim_body is not None else "dra" if _uses_dra(body) else ""
        self._live.append((expires, name, created["metadata"]["uid"], cleanup))
        kind = (body["metadata"].get("labels") or {}).get("chaos.example/kind", "")
        self.created_by_kind[kind] = self.created_by_kind.get(kind, 0) + 1

    def _create_shared(self, claim_name: str, bodies: list[dict[str, Any]], expires: float) -> None:
        """One ResourceClaim and the pods sharing it; the claim goes after them (a claim deleted
        while a pod still holds it keeps its finalizer until that pod is gone)."""
        try:
            self.kube.call("POST", DRA_PATHS["ResourceClaim"], shared_claim(claim_name))
        except Exception as exc:  # noqa: BLE001 - the API server is down: the group is skipped
            self.errors.append(f"create claim {claim_name}: {str(exc)[:120]}")
            return
        for body in bodies:
            self._create(body, None, expires)
        self._live.append((expires, claim_name, "", "shared-claim"))

    def _create_gang(self, scheduler: str, group: dict[str, Any], members: list[dict[str, Any]],
                     expires: float) -> None:
        """The group, then its members, all to be deleted at `expires` (the group stays: a
        v1alpha2 group keeps its protection finalizer without kube-controller-manager). A member
        the API server refused leaves the group short of its quorum: it should bind none."""
        try:
            self.kube.call("POST", GROUP_PATHS[scheduler], group)
        except Exception as exc:  # noqa: BLE001 - the API server is down: the whole gang is skipped
            self.errors.append(f"create group {group['metadata']['name']}: {str(exc)[:120]}")
            return
        self.gangs += 1
        for body in members:
            self._create(body, None, expires)

    def _expire(self) -> None:
        now = self.clock()
        due = [entry for entry in self._live if entry[0] <= now]
        for entry in due:
            _, name, pod_uid, cleanup = entry
            if cleanup == "shared-claim":
                self._live.remove(entry)
                self._delete_dra_claims([name])
                continue
            dra_claims = self._dra_claims_of(name) if cleanup == "dra" else []
            if dra_claims is None:
                continue  # the API server did not answer: next round
            if self.delete(name, pod_uid):
                self._live.remove(entry)
                if cleanup == "pvc":
                    self._delete_claim(name)
                self._delete_dra_claims(dra_claims)

    def _dra_claims_of(self, name: str) -> list[str] | None:
        """The ResourceClaims made for a pod (from its templates, or for its extended resources),
        as its status names them; None when the API server did not answer."""
        try:
            pod = self.kube.call("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")
        except KubeApiError as exc:
            return [] if exc.code == 404 else None
        except Exception:  # noqa: BLE001 - a connection error
            return None
        status = pod.get("status") or {}
        names = [s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or []]
        names.append((status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName"))
        return [n for n in names if n]

    def _delete_dra_claims(self, names: list[str]) -> None:
        """Delete ResourceClaims; one the API server did not take is retried at the next round."""
        _delete_all(self.kube, DRA_PATHS["ResourceClaim"], names, self._dra_claims_left)

    def delete(self, name: str, pod_uid: str) -> bool:
        """Delete a pod now (no grace, this uid only); False when the API server did not answer."""
        self.deleted_uids.add(pod_uid)  # before the call: its DELETED event may come first
        try:
            self.kube.delete_pod(name, NAMESPACE, grace_period_seconds=0, uid=pod_uid)
        except KubeApiError as exc:
            if exc.code in (404, 409):  # gone already (evicted: not ours), or a new pod of that name
                self.deleted_uids.discard(pod_uid)
                return True
            self.deleted_uids.discard(pod_uid)
            return False
        except Exception:  # noqa: BLE001 - a connection error: try again at the next round
            self.deleted_uids.discard(pod_uid)
            return False
        return True

    def _delete_claim(self, name: str) -> None:
        """Delete a pod's claim; one the API server did not take is retried at the next round."""
        _delete_all(self.kube, f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims", [name], self._claims_left)


def _delete_all(kube: KubeTestClient, collection: str, names: list[str], left: list[str]) -> None:
    """Delete `names` and those in `left` (objects of `collection`); those the API server did not
    take go back into `left`, for the next round (a 404 is done)."""
    for pending in [*left, *names]:
        if pending in left:
            left.remove(pending)
        try:
            kube.call("DELETE", f"{collection}/{pending}")
        except KubeApiError as exc:
            if exc.code != 404:
                left.append(pending)
        except Exception:  # noqa: BLE001 - a connection error
            left.append(pending)
