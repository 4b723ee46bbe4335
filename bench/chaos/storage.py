"""The storage controllers of the chaos run: tests.storage_controllers' PV controller and
provisioner, plus the part they leave out because a test ends before it matters:

* a claim being deleted loses its ``kubernetes.io/pvc-protection`` finalizer once no pod
  uses it (the pvc-protection controller's job), so it goes;
* a volume whose claim is gone is recycled: a provisioned one is deleted (reclaim policy
  Delete, its pv-protection finalizer removed first), a local one made available again
  (its claimRef cleared), as a local static provisioner would recreate it.

It talks to kube-apiserver directly (controllers run beside it) and polls every
``interval`` seconds; an API server that is down just skips rounds.
"""

from __future__ import annotations

from typing import Any

from tests.fakeapi.client import KubeApiError
from tests.fakeapi.patches import MERGE_PATCH
from tests.storage_controllers import StorageControllers, set_phase


class ChaosStorage(StorageControllers):
    recycled = 0

    def sync(self) -> None:
        super().sync()
        self._release_claims()
        self._recycle_volumes()

    def _release_claims(self) -> None:
        used = {(p["metadata"]["namespace"], v["persistentVolumeClaim"]["claimName"])
                for p in self.kube.call("GET", "/api/v1/pods")["items"]
                for v in p["spec"].get("volumes") or [] if v.get("persistentVolumeClaim")}
        for claim in self.kube.call("GET", "/api/v1/persistentvolumeclaims")["items"]:
            meta = claim["metadata"]
            if meta.get("deletionTimestamp") and meta.get("finalizers") and \
                    (meta["namespace"], meta["name"]) not in used:
                self._drop_finalizers(f"/api/v1/namespaces/{meta['namespace']}/persistentvolumeclaims/{meta['name']}")

    def _recycle_volumes(self) -> None:
        # Volumes first: a claimRef seen then names a claim created before, so listed after.
        volumes = self.kube.call("GET", "/api/v1/persistentvolumes")["items"]
        claims = {c["metadata"]["uid"] for c in self.kube.call("GET", "/api/v1/persistentvolumeclaims")["items"]}
        for volume in volumes:
            ref = volume["spec"].get("claimRef")
            if ref is None or not ref.get("uid") or ref["uid"] in claims:
                continue
            path = f"/api/v1/persistentvolumes/{volume['metadata']['name']}"
            if volume["spec"].get("csi"):
                self._drop_finalizers(path)
                self._ignore_missing("DELETE", path)
            else:
                self.kube.call("PATCH", path, {"spec": {"claimRef": None}}, content_type=MERGE_PATCH)
                set_phase(self.kube, {**volume, "kind": "PersistentVolume"}, "Available")
            self.recycled += 1

    def _drop_finalizers(self, path: str) -> None:
        self._ignore_missing("PATCH", path, {"metadata": {"finalizers": None}})

    def _ignore_missing(self, method: str, path: str, body: Any = None) -> None:
        try:
            self.kube.call(method, path, body, content_type=MERGE_PATCH if body is not None else "application/json")
        except KubeApiError as exc:
            if exc.code != 404:
                raise
