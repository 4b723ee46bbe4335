"""Realistic Node and Pod objects for benchmarks: the sizes and shapes a real cluster lists.

Nodes are about 8 KB of JSON (labels, annotations, managedFields, conditions,
addresses, nodeInfo and a long status.images list), pods about 3-4 KB (1-3
containers with requests, owner references, managedFields, running status).
Deterministic for a given index, so runs compare.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import orjson

_STAMP = "2026-11-29T19:20:24Z"
_ZONES = ("zone-a", "zone-b", "zone-c")
_IMAGES = [f"registry.example.com/team-{t}/service-{s}" for t in range(6) for s in range(6)]
_SHAPES = [("100m", "64Mi"), ("250m", "256Mi"), ("500m", "512Mi"), ("1", "1Gi"), ("2", "4Gi")]


def _uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _fields(*paths: str) -> dict[str, Any]:
    return {f"f:{p}": {".": {}, **{f"f:{c}": {} for c in ("a", "b", "c")}} for p in paths}


def make_node(index: int) -> dict[str, Any]:
    rng = random.Random(index)
    name = f"node-{index:05d}"
    zone = _ZONES[index % 3]
    images = [
        {
            "names": [f"{image}@sha256:{rng.getrandbits(256):064x}", f"{image}:v{rng.randint(1, 40)}.{rng.randint(0, 9)}"],
            "sizeBytes": rng.randint(5_000_000, 900_000_000),
        }
        for image in rng.sample(_IMAGES, 24)
    ]
    conditions = [
        {"type": t, "status": "False", "lastHeartbeatTime": _STAMP, "lastTransitionTime": _STAMP,
         "reason": f"Kubelet{r}", "message": f"kubelet has {m}"}
        for t, r, m in (("MemoryPressure", "HasSufficientMemory", "sufficient memory available"),
                        ("DiskPressure", "HasNoDiskPressure", "no disk pressure"),
                        ("PIDPressure", "HasSufficientPID", "sufficient PID available"))
    ] + [{"type": "Ready", "status": "True", "lastHeartbeatTime": _STAMP, "lastTransitionTime": _STAMP,
          "reason": "KubeletReady", "message": "kubelet is posting ready status"}]
    return {
        "metadata": {
            "name": name,
            "uid": _uid(rng),
            "resourceVersion": str(1000 + index),
            "creationTimestamp": _STAMP,
            "labels": {
                "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m5.2xlarge", "topology.kubernetes.io/region": "eu-west-1",
                "topology.kubernetes.io/zone": zone, "failure-domain.beta.kubernetes.io/zone": zone,
                "node-role.kubernetes.io/worker": "", "pool": f"pool-{index % 7}",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "csi.volume.kubernetes.io/nodeid": f'{{"ebs.csi.aws.com":"i-{rng.getrandbits(64):016x}"}}',
            },
            "managedFields": [
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": _STAMP,
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": _fields("labels", "annotations")}},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": _STAMP,
                 "fieldsType": "FieldsV1", "subresource": "status",
                 "fieldsV1": {"f:status": _fields("allocatable", "capacity", "conditions", "images", "nodeInfo")}},
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                 "time": _STAMP, "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": _fields("podCIDR", "podCIDRs")}},
            ],
        },
        "spec": {"podCIDR": f"10.{index // 250}.{index % 250}.0/24", "podCIDRs": [f"10.{index // 250}.{index % 250}.0/24"],
                 "providerID": f"aws:///{zone}/i-{rng.getrandbits(64):016x}"},
        "status": {
            "capacity": {"cpu": "8", "ephemeral-storage": "104845292Ki", "hugepages-1Gi": "0",
                         "hugepages-2Mi": "0", "memory": "32408560Ki", "pods": "110"},
            "allocatable": {"cpu": "7910m", "ephemeral-storage": "95551679124", "hugepages-1Gi": "0",
                            "hugepages-2Mi": "0", "memory": "31391728Ki", "pods": "110"},
            "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": f"10.1.{index // 250}.{index % 250}"},
                          {"type": "Hostname", "address": name},
                          {"type": "InternalDNS", "address": f"{name}.eu-west-1.compute.internal"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": f"{rng.getrandbits(128):032x}", "systemUUID": _uid(rng),
                         "bootID": _uid(rng), "kernelVersion": "6.1.112-124.190.amzn2023.x86_64",
                         "osImage": "Amazon Linux 2023.6.20241031", "containerRuntimeVersion": "containerd://1.7.22",
                         "kubeletVersion": "v1.36.2", "kubeProxyVersion": "", "operatingSystem": "linux",
                         "architecture": "amd64"},
            "images": images,
        },
    }


def _scheduling_rules(index: int, app: str) -> dict[str, Any]:
    """What Helm charts commonly add: preferred hostname anti-affinity (one variant in five),
    required hostname anti-affinity (one in fifteen), a ScheduleAnyway zone spread (one in fifteen)."""
    selector = {"matchLabels": {"app": app}}
    hostname = {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
    variant = index % 15
    if variant in (2, 7, 12):
        return {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": hostname}]}}}
    if variant == 4:
        return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [hostname]}}}
    if variant == 9:
        return {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                               "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": selector}]}
    return {}


def make_pod(index: int, nodes: int) -> dict[str, Any]:
    rng = random.Random(-index - 1)
    namespace = f"team-{index % 40}"
    app = f"service-{index % 300}"
    name = f"{app}-{rng.getrandbits(40):010x}"
    containers = []
    statuses = []
    for c in range(1 + index % 3):
        cpu, memory = _SHAPES[(index + c) % len(_SHAPES)]
        image = _IMAGES[(index + c) % len(_IMAGES)]
        containers.append({
            "name": f"c{c}", "image": f"{image}:v1.2.{c}",
            "ports": [{"containerPort": 8080 + c, "protocol": "TCP"}],
            "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "APP", "value": app}],
            "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}},
            "volumeMounts": [{"name": "kube-api-access", "readOnly": True,
                              "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent",
        })
        statuses.append({
            "name": f"c{c}", "state": {"running": {"startedAt": _STAMP}}, "lastState": {}, "ready": True,
            "restartCount": 0, "image": f"{image}:v1.2.{c}", "imageID": f"{image}@sha256:{rng.getrandbits(256):064x}",
            "containerID": f"containerd://{rng.getrandbits(256):064x}", "started": True,
        })
    node = f"node-{rng.randrange(nodes):05d}"
    return {
        "metadata": {
            "name": name, "generateName": f"{app}-", "namespace": namespace, "uid": _uid(rng),
            "resourceVersion": str(100_000 + index), "creationTimestamp": _STAMP,
            "labels": {"app": app, "pod-template-hash": f"{index % 300:08x}"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{app}-{index % 300:08x}",
                                 "uid": _uid(rng), "controller": True, "blockOwnerDeletion": True}],
            "managedFields": [
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": _STAMP,
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": _fields("labels", "ownerReferences"),
                                                        "f:spec": _fields("containers")}},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": _STAMP,
                 "fieldsType": "FieldsV1", "subresource": "status",
                 "fieldsV1": {"f:status": _fields("conditions", "containerStatuses", "podIPs")}},
            ],
        },
        "spec": {
            "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]}}],
            "containers": containers,
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "serviceAccount": "default", "nodeName": node,
            "securityContext": {}, "schedulerName": "default-scheduler",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300},
            ],
            "priority": 0, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
            **_scheduling_rules(index, app),
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": _STAMP}
                           for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                                     "PodScheduled")],
            "hostIP": f"10.1.{index % 250}.{index % 199}", "hostIPs": [{"ip": f"10.1.{index % 250}.{index % 199}"}],
            "podIP": f"10.200.{index // 250 % 250}.{index % 250}",
            "podIPs": [{"ip": f"10.200.{index // 250 % 250}.{index % 250}"}],
            "startTime": _STAMP, "containerStatuses": statuses, "qosClass": "Burstable",
        },
    }


# ---- fast pages: the same objects, stamped from a few encoded templates ---------------------------
# Building 150,000 pods as dicts takes minutes; the state only keeps names, uids, node names and
# requests, so pods differing in those (and in container count and request shape) are enough.

_POD_VARIANTS = 15  # container count cycles with period 3, request shapes with period 5
_pod_templates: dict[int, list[bytes]] = {}
_node_template: list[bytes] = []


def _fake_uid(index: int, salt: int) -> str:
    return f"{index:08x}-{salt:04x}-4000-8000-{index * 7919 % 2**48:012x}"


def _pod_template_for(variant: int, nodes: int) -> bytes:
    templates = _pod_templates.setdefault(nodes, [])
    if not templates:
        for k in range(_POD_VARIANTS):
            pod = make_pod(k, nodes)
            meta = pod["metadata"]
            meta.update(name="@NAME@", namespace="@NS@", uid="@UID@", resourceVersion="@RV@")
            meta["ownerReferences"][0]["uid"] = "@OUID@"
            pod["spec"]["nodeName"] = "@NODE@"
            pod["status"]["podIP"] = "@IP@"
            pod["status"]["podIPs"] = [{"ip": "@IP@"}]
            templates.append(orjson.dumps(pod))
    return templates[variant]


def pod_bytes(index: int, nodes: int) -> bytes:
    """make_pod's shape with unique name, namespace, uid, node and IP, as JSON bytes."""
    data = _pod_template_for(index % _POD_VARIANTS, nodes)
    node = f"node-{index * 2654435761 % nodes:05d}"
    for placeholder, value in (
        (b"@NAME@", f"service-{index % 300}-{index:08x}"), (b"@NS@", f"team-{index % 40}"),
        (b"@UID@", _fake_uid(index, 1)), (b"@OUID@", _fake_uid(index % 300, 2)),
        (b"@RV@", str(100_000 + index)), (b"@NODE@", node),
        (b"@IP@", f"10.{200 + index // 62500}.{index // 250 % 250}.{index % 250}"),
    ):
        data = data.replace(placeholder, value.encode())
    return data


def node_bytes(index: int) -> bytes:
    """make_node's shape (about 8 KB) with a unique name, uid and addresses, as JSON bytes."""
    if not _node_template:
        node = make_node(0)
        node["metadata"].update(name="@NAME@", uid="@UID@", resourceVersion="@RV@")
        node["metadata"]["labels"]["kubernetes.io/hostname"] = "@NAME@"
        node["status"]["addresses"] = [{"type": "InternalIP", "address": "@IP@"},
                                       {"type": "Hostname", "address": "@NAME@"}]
        _node_template.append(orjson.dumps(node))
    data = _node_template[0]
    for placeholder, value in ((b"@NAME@", f"node-{index:05d}"), (b"@UID@", _fake_uid(index, 3)),
                               (b"@RV@", str(1000 + index)), (b"@IP@", f"10.1.{index // 250}.{index % 250}")):
        data = data.replace(placeholder, value.encode())
    return data


CLAIM_EVERY = 10  # every 10th pod mounts a PersistentVolumeClaim (a StatefulSet-like share)
_CLAIM_VOLUME = b'"volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"data-%d"}},'


def claimed_pod_bytes(index: int, nodes: int) -> bytes:
    """pod_bytes, and every CLAIM_EVERY-th pod mounts claim `data-<index>` (bound to PV `pv-<index>`)."""
    data = pod_bytes(index, nodes)
    if index % CLAIM_EVERY == 0:
        data = data.replace(b'"volumes":[', _CLAIM_VOLUME % index, 1)
    return data


def claim_bytes(number: int) -> bytes:
    """The bound claim of the `number`-th claimed pod (index number * CLAIM_EVERY)."""
    index = number * CLAIM_EVERY
    return orjson.dumps({
        "metadata": {"name": f"data-{index}", "namespace": f"team-{index % 40}", "uid": _fake_uid(index, 4),
                     "resourceVersion": str(500_000 + index), "creationTimestamp": _STAMP,
                     "annotations": {"pv.kubernetes.io/bind-completed": "yes",
                                     "pv.kubernetes.io/bound-by-controller": "yes"},
                     "finalizers": ["kubernetes.io/pvc-protection"]},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}},
                 "storageClassName": "local-storage", "volumeMode": "Filesystem", "volumeName": f"pv-{index}"},
        "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "10Gi"}},
    })


def volume_bytes(number: int, nodes: int) -> bytes:
    """The local PV of claim number `number`, pinned to the node its pod runs on."""
    index = number * CLAIM_EVERY
    node = f"node-{index * 2654435761 % nodes:05d}"
    return orjson.dumps({
        "metadata": {"name": f"pv-{index}", "uid": _fake_uid(index, 5), "resourceVersion": str(700_000 + index),
                     "creationTimestamp": _STAMP, "finalizers": ["kubernetes.io/pv-protection"],
                     "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
        "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem",
                 "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "local-storage",
                 "local": {"path": f"/mnt/disks/ssd{index % 4}"},
                 "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": f"team-{index % 40}",
                              "name": f"data-{index}", "uid": _fake_uid(index, 4)},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}},
        "status": {"phase": "Bound"},
    })


def claim_count(pods: int) -> int:
    return (pods + CLAIM_EVERY - 1) // CLAIM_EVERY


def list_page(kind: str, start: int, count: int, total: int, nodes: int,
              metadata: dict[str, Any] | None = None) -> bytes:
    """A page of `count` objects of `kind` from `start`, encoded like the API server's: nodes, pods,
    claims or volumes (the claims and volumes of the pods that mount one); any other kind is empty."""
    end = min(total, start + count)
    if kind == "nodes":
        items = b",".join(node_bytes(i) for i in range(start, end))
    elif kind == "pods":
        items = b",".join(claimed_pod_bytes(i, nodes) for i in range(start, end))
    elif kind == "claims":
        items = b",".join(claim_bytes(i) for i in range(start, end))
    elif kind == "volumes":
        items = b",".join(volume_bytes(i, nodes) for i in range(start, end))
    else:
        items = b""
    meta = orjson.dumps(metadata or {})
    return b'{"kind":"List","apiVersion":"v1","metadata":' + meta + b',"items":[' + items + b"]}"
