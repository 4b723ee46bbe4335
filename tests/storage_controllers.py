"""Test-side stand-ins for the controllers that finish what a scheduler starts with volumes.

Neither the fake API server nor envtest runs kube-controller-manager or a CSI provisioner,
so nobody makes a PersistentVolume Available, completes a binding after the scheduler set
a PV's claimRef, or creates a volume for a claim annotated with a selected node. These
helpers do it through the API, as those controllers would (so the same tests run on the
fake and on a real kube-apiserver):

* `create_storage` creates objects and reports their status the controller's way (a
  PV's phase through /status, never at creation, where the server resets it);
* `bind` completes a binding: the PV's claimRef (with the claim's uid) and phase Bound,
  the claim's volumeName, bind-completed annotation and phase Bound;
* `StorageControllers` runs a polling loop doing the PV controller's and a provisioner's
  part of the scheduler's work, until stopped.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from tests.fakeapi.client import STORAGE_COLLECTIONS, KubeApiError, KubeTestClient
from tests.fakeapi.patches import MERGE_PATCH
from tests.storage_objects import BIND_COMPLETED, CSI_DRIVER, HOSTNAME, SELECTED_NODE, node_affinity

BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"


def collection_path(obj: dict[str, Any]) -> str:
    kind, meta = obj["kind"], obj["metadata"]
    namespace = meta.get("namespace", "default")
    return {
        "PersistentVolumeClaim": f"/api/v1/namespaces/{namespace}/persistentvolumeclaims",
        "PersistentVolume": "/api/v1/persistentvolumes",
        "StorageClass": "/apis/storage.k8s.io/v1/storageclasses",
        "CSINode": "/apis/storage.k8s.io/v1/csinodes",
        "CSIDriver": "/apis/storage.k8s.io/v1/csidrivers",
        "CSIStorageCapacity": f"/apis/storage.k8s.io/v1/namespaces/{namespace}/csistoragecapacities",
        "VolumeAttachment": "/apis/storage.k8s.io/v1/volumeattachments",
    }[kind]


def create_storage(kube: KubeTestClient, *objects: dict[str, Any]) -> list[dict[str, Any]]:
    """Create each object; a PV's `status.phase` is then reported through /status."""
    created = []
    for obj in objects:
        body = {k: v for k, v in obj.items() if k != "status"}
        body["metadata"] = {k: v for k, v in obj["metadata"].items() if k not in ("uid", "deletionTimestamp")}
        result = kube.call("POST", collection_path(obj), body)
        phase = (obj.get("status") or {}).get("phase")
        if obj["kind"] == "PersistentVolume" and phase:
            result = set_phase(kube, result, phase)
        created.append(result)
    return created


def set_phase(kube: KubeTestClient, obj: dict[str, Any], phase: str) -> dict[str, Any]:
    meta = obj["metadata"]
    path = f"{collection_path(obj)}/{meta['name']}/status"
    return kube.call("PATCH", path, {"status": {"phase": phase}}, content_type=MERGE_PATCH)


def get_claim(kube: KubeTestClient, name: str, namespace: str = "default") -> dict[str, Any]:
    return kube.call("GET", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}")


def get_volume(kube: KubeTestClient, name: str) -> dict[str, Any]:
    return kube.call("GET", f"/api/v1/persistentvolumes/{name}")


def bind(kube: KubeTestClient, claim_name: str, volume_name: str, namespace: str = "default") -> None:
    """The PV controller's bind: both sides, spec then status."""
    claim = get_claim(kube, claim_name, namespace)
    volume = get_volume(kube, volume_name)
    ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": namespace, "name": claim_name,
           "uid": claim["metadata"]["uid"], "resourceVersion": claim["metadata"]["resourceVersion"]}
    if (volume["spec"].get("claimRef") or {}).get("uid") != ref["uid"]:
        kube.call("PATCH", f"/api/v1/persistentvolumes/{volume_name}",
                  {"metadata": {"annotations": {BOUND_BY_CONTROLLER: "yes"}}, "spec": {"claimRef": ref}},
                  content_type=MERGE_PATCH)
    set_phase(kube, volume, "Bound")
    kube.call("PATCH", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim_name}",
              {"metadata": {"annotations": {BIND_COMPLETED: "yes", BOUND_BY_CONTROLLER: "yes"}},
               "spec": {"volumeName": volume_name}}, content_type=MERGE_PATCH)
    capacity = volume["spec"]["capacity"]
    kube.call("PATCH", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim_name}/status",
              {"status": {"phase": "Bound", "capacity": capacity,
                          "accessModes": volume["spec"]["accessModes"]}}, content_type=MERGE_PATCH)


def delete_storage(kube: KubeTestClient, namespaces: Iterable[str] = ("default",)) -> None:
    """Remove every storage object, finalizers first (nothing else would release them)."""
    collections = [f"/api/v1/namespaces/{ns}/persistentvolumeclaims" for ns in namespaces]
    collections += [f"/apis/storage.k8s.io/v1/namespaces/{ns}/csistoragecapacities" for ns in namespaces]
    for collection in [*collections, *STORAGE_COLLECTIONS]:
        kube.purge(collection)


class StorageControllers:
    """The PV controller's and a provisioner's part, in a polling thread (`interval` seconds).

    * a Pending PV without claimRef becomes Available;
    * a PV whose claimRef names an existing claim is bound to it (both sides);
    * a claim of a class provisioned by `provisioner`, annotated with a selected node,
      gets a new PV pinned to that node and is bound to it.
    """

    def __init__(self, kube: KubeTestClient, provisioner: str = CSI_DRIVER, interval: float = 0.05) -> None:
        self.kube = kube
        self.provisioner = provisioner
        self.interval = interval
        self.provisioned: list[str] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> StorageControllers:
        self._thread = threading.Thread(target=self._run, name="test-storage-controllers", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sync()
            except Exception as exc:  # a conflict with a concurrent write: try again next round
                self.errors.append(str(exc))

    def sync(self) -> None:
        kube = self.kube
        classes = {c["metadata"]["name"]: c for c in
                   kube.call("GET", "/apis/storage.k8s.io/v1/storageclasses")["items"]}
        claims = {f"{c['metadata']['namespace']}/{c['metadata']['name']}": c
                  for c in kube.call("GET", "/api/v1/persistentvolumeclaims")["items"]}
        for volume in kube.call("GET", "/api/v1/persistentvolumes")["items"]:
            ref = volume["spec"].get("claimRef")
            phase = (volume.get("status") or {}).get("phase")
            if ref is None and phase == "Pending":
                set_phase(kube, {**volume, "kind": "PersistentVolume"}, "Available")
            elif ref is not None and phase != "Bound":
                claim = claims.get(f"{ref['namespace']}/{ref['name']}")
                if claim is not None and not claim["spec"].get("volumeName"):
                    bind(kube, ref["name"], volume["metadata"]["name"], ref["namespace"])
        for claim in claims.values():
            meta, spec = claim["metadata"], claim["spec"]
            node = (meta.get("annotations") or {}).get(SELECTED_NODE)
            cls = classes.get(spec.get("storageClassName") or "")
            if node and not spec.get("volumeName") and cls is not None and cls["provisioner"] == self.provisioner:
                self._provision(claim, node)

    def _provision(self, claim: dict[str, Any], node: str) -> None:
        meta, spec = claim["metadata"], claim["spec"]
        name = f"pvc-{meta['uid']}"
        volume = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
                  "spec": {"capacity": {"storage": spec["resources"]["requests"]["storage"]},
                           "accessModes": spec["accessModes"], "persistentVolumeReclaimPolicy": "Delete",
                           "storageClassName": spec["storageClassName"],
                           "csi": {"driver": self.provisioner, "volumeHandle": name},
                           "nodeAffinity": node_affinity(HOSTNAME, node)}}
        try:
            self.kube.call("POST", "/api/v1/persistentvolumes", volume)
        except KubeApiError as err:
            if err.reason != "AlreadyExists":
                raise
        bind(self.kube, meta["name"], name, meta["namespace"])
        self.provisioned.append(name)
