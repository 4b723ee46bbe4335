"""Dynamic Resource Allocation objects for the end-to-end tests, and what to read back.

Builders for resource.k8s.io/v1 DeviceClasses, ResourceSlices, ResourceClaims and
ResourceClaimTemplates and for the pod fields that use them (field names from
k8s.io/api@v0.36.3/resource/v1/types.go and core/v1's PodResourceClaim); ``create`` and
``purge`` against a real API server; and the checks a test makes on the settled state:
each bound pod's claims allocated from devices published for its node and reserved for it,
no device handed to two claims, no claim of a pending pod allocated.

No DRA driver runs: the slices are created here as a driver's kubelet plugin would publish
them (one pool per node, named after it, complete in one slice), and nothing prepares the
devices (no kubelet runs the pods). ``attaching`` plays the one part of a driver that
scheduling waits for: it sets the binding conditions of allocated devices true. The test client's wipe between tests does not know
these kinds, so a test calls ``purge`` itself, before and after.

No pytest here: a benchmark can build the same objects.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tests.fakeapi.client import KubeTestClient

API = "resource.k8s.io/v1"
DRIVER = "gpu.example.com"
PAUSE = "registry.k8s.io/pause:3.10"
_COLLECTIONS = {
    "DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses",
    "ResourceSlice": "/apis/resource.k8s.io/v1/resourceslices",
    "ResourceClaim": "/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims",
    "ResourceClaimTemplate": "/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaimtemplates",
}
#: The PodScheduled messages kube-scheduler writes while it waits for something that
#: happens without any other change to the cluster, after which it retries by itself
#: (pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go PreFilter;
#: dynamic-resource-allocation/resourceclaim.ErrClaimNotFound): the resourceclaim-controller
#: has not created a template's claim yet, or another pod's bind is writing a shared claim.
TRANSIENT = ("ResourceClaim not created yet", "is in the process of being allocated")


# ---- builders ------------------------------------------------------------------------------


def cel(expression: str) -> dict[str, Any]:
    """A DeviceSelector with a CEL expression."""
    return {"cel": {"expression": expression}}


def driver_is(driver: str = DRIVER) -> dict[str, Any]:
    return cel(f'device.driver == "{driver}"')


def attribute_is(name: str, value: str, driver: str = DRIVER) -> dict[str, Any]:
    """A selector on a string attribute in the driver's domain."""
    return cel(f'device.attributes["{driver}"].{name} == "{value}"')


def device_class(name: str, *selectors: Mapping[str, Any]) -> dict[str, Any]:
    """A DeviceClass; by default it selects every device of ``DRIVER``."""
    chosen = [dict(s) for s in selectors] or [driver_is()]
    return {"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": name}, "spec": {"selectors": chosen}}


def device(name: str, **attributes: str | int | bool) -> dict[str, Any]:
    """A device with attributes in the driver's domain (short names are qualified with the
    driver's name: types.go, Device.Attributes)."""
    def typed(value: str | int | bool) -> dict[str, Any]:
        if isinstance(value, bool):
            return {"bool": value}
        return {"int": value} if isinstance(value, int) else {"string": value}

    return {"name": name, **({"attributes": {k: typed(v) for k, v in attributes.items()}} if attributes else {})}


def resource_slice(node: str, devices: Sequence[Mapping[str, Any]], driver: str = DRIVER) -> dict[str, Any]:
    """The one slice of a node-local pool named after ``node``, as a driver publishes it."""
    return {
        "apiVersion": API, "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver.replace('.', '-')}"},
        "spec": {"driver": driver, "nodeName": node,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": [dict(d) for d in devices]},
    }  # fmt: skip


def exactly(name: str, device_class_name: str, *selectors: Mapping[str, Any], mode: str = "ExactCount",
            count: int = 1) -> dict[str, Any]:
    """A request for ``count`` devices of a class (or, with ``mode="All"``, all that match)."""
    wanted: dict[str, Any] = {"deviceClassName": device_class_name, "allocationMode": mode}
    if mode == "ExactCount":
        wanted["count"] = count
    if selectors:
        wanted["selectors"] = [dict(s) for s in selectors]
    return {"name": name, "exactly": wanted}


def first_available(name: str, *subrequests: Mapping[str, Any]) -> dict[str, Any]:
    """A request satisfied by the first of its subrequests that can be (each an ``exactly``
    request's name and body)."""
    return {"name": name, "firstAvailable": [{"name": s["name"], **s["exactly"]} for s in subrequests]}


def claim_spec(*requests: Mapping[str, Any], match_attribute: tuple[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """A claim's spec; ``match_attribute`` is (fully qualified attribute, the requests that
    must agree on it)."""
    devices: dict[str, Any] = {"requests": [dict(r) for r in requests]}
    if match_attribute is not None:
        attribute, names = match_attribute
        devices["constraints"] = [{"requests": list(names), "matchAttribute": attribute}]
    return {"devices": devices}


def resource_claim(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "ResourceClaim", "metadata": {"name": name}, "spec": dict(spec)}


def claim_template(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": dict(spec)}}


def uses_claims(*, templates: Mapping[str, str] | None = None, claims: Mapping[str, str] | None = None,
                cpu: str = "10m") -> dict[str, Any]:
    """``KubeTestClient.create_pod`` keyword arguments for a pod whose one container uses
    these pod claims: ``templates`` maps a pod claim's name to a ResourceClaimTemplate,
    ``claims`` to an existing ResourceClaim."""
    entries = [{"name": n, "resourceClaimTemplateName": t} for n, t in (templates or {}).items()]
    entries += [{"name": n, "resourceClaimName": c} for n, c in (claims or {}).items()]
    main = {"name": "main", "image": PAUSE,
            "resources": {"requests": {"cpu": cpu}, "claims": [{"name": e["name"]} for e in entries]}}
    return {"containers": [main], "spec": {"resourceClaims": entries}}


# ---- the API server ------------------------------------------------------------------------


def collection(kind: str, namespace: str = "default") -> str:
    return _COLLECTIONS[kind].format(namespace=namespace)


def create(kube: KubeTestClient, obj: Mapping[str, Any], namespace: str = "default") -> dict[str, Any]:
    return kube.call("POST", collection(obj["kind"], namespace), dict(obj))


def list_claims(kube: KubeTestClient, namespace: str) -> dict[str, dict[str, Any]]:
    return {c["metadata"]["name"]: c for c in kube.call("GET", collection("ResourceClaim", namespace))["items"]}


def purge(kube: KubeTestClient, namespaces: Iterable[str]) -> None:
    """Delete every claim and template in ``namespaces``, then every slice and class; the
    claims' finalizers first (kube-scheduler's ``resource.kubernetes.io/delete-protection``,
    which only the resourceclaim-controller removes)."""
    for namespace in namespaces:
        kube.purge(collection("ResourceClaim", namespace))
        kube.purge(collection("ResourceClaimTemplate", namespace))
    kube.purge(collection("ResourceSlice"))
    kube.purge(collection("DeviceClass"))


def _attach(kube: KubeTestClient, namespace: str, claim: dict[str, Any]) -> None:
    """Every binding condition of the claim's allocated devices set true, as their driver would."""
    waiting = [r for r in results(claim) if r.get("bindingConditions")]
    status = claim.get("status") or {}
    done = {(d["driver"], d["pool"], d["device"]) for d in status.get("devices") or []}
    if not waiting or all((r["driver"], r["pool"], r["device"]) in done for r in waiting):
        return
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status["devices"] = [{"driver": r["driver"], "pool": r["pool"], "device": r["device"],
                          "conditions": [{"type": kind, "status": "True", "reason": "Attached", "message": "",
                                          "lastTransitionTime": now} for kind in r["bindingConditions"]]}
                         for r in waiting]
    with contextlib.suppress(AssertionError, Exception):  # changed meanwhile: the next round sees it
        kube.call("PUT", f"{collection('ResourceClaim', namespace)}/{claim['metadata']['name']}/status", claim)


@contextlib.contextmanager
def attaching(kube: KubeTestClient, namespace: str, interval: float = 0.3) -> Iterator[None]:
    """While inside: the devices of claims allocated in ``namespace`` are attached (binding
    conditions set true) a moment after their allocation is written."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(interval):
            for claim in list_claims(kube, namespace).values():
                _attach(kube, namespace, claim)

    thread = threading.Thread(target=loop, name=f"attach-{namespace}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)


# ---- reading the settled state -------------------------------------------------------------


def pod_claim_names(pod: Mapping[str, Any]) -> dict[str, str | None]:
    """Each pod claim's ResourceClaim: named in the spec, or (for a template) the one the
    resourceclaim-controller recorded in ``status.resourceClaimStatuses``; None while there
    is none yet."""
    generated = {s["name"]: s.get("resourceClaimName")
                 for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    return {entry["name"]: entry.get("resourceClaimName") or generated.get(entry["name"])
            for entry in (pod.get("spec") or {}).get("resourceClaims") or []}


def results(claim: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The claim's allocated devices (request, driver, pool, device); empty if unallocated."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or [])


def reserved_for(claim: Mapping[str, Any]) -> set[str]:
    """The names of the pods the claim is reserved for."""
    return {c["name"] for c in (claim.get("status") or {}).get("reservedFor") or [] if c.get("resource") == "pods"}


@dataclass(frozen=True)
class Settled:
    """A namespace's pods and claims once a scheduler has decided on every pod, and the
    devices published per node."""

    pods: dict[str, dict[str, Any]]
    claims: dict[str, dict[str, Any]]
    node_devices: dict[tuple[str, str, str], str]  # (driver, pool, device) -> its node

    @classmethod
    def read(cls, kube: KubeTestClient, namespace: str) -> Settled:
        slices = kube.call("GET", collection("ResourceSlice"))["items"]
        node_devices = {(s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"]): s["spec"].get("nodeName") or ""
                        for s in slices for d in s["spec"].get("devices") or []}
        pods = {p["metadata"]["name"]: p for p in kube.list_pods(namespace)}
        return cls(pods, list_claims(kube, namespace), node_devices)

    def claims_of(self, pod: str) -> dict[str, dict[str, Any] | None]:
        """Pod claim name -> its ResourceClaim (None if it does not exist)."""
        return {name: self.claims.get(claim) if claim else None
                for name, claim in pod_claim_names(self.pods[pod]).items()}

    def devices_of(self, pod: str) -> list[tuple[str, str]]:
        """(request, device) of every device allocated to the pod's claims, in order."""
        return [(r["request"], r["device"]) for claim in self.claims_of(pod).values() if claim
                for r in results(claim)]

    def problems(self, bound: Mapping[str, str], pending: Iterable[str]) -> list[str]:
        """What breaks DRA's invariants: a bound pod with a claim that is missing, not
        allocated, allocated a device not published for the pod's node, or not reserved for
        it; a device in two claims (shares aside); an allocated claim used only by pending pods."""
        found = []
        for pod, node in sorted(bound.items()):
            for name, claim in self.claims_of(pod).items():
                if claim is None:
                    found.append(f"{pod}: claim {name} does not exist")
                    continue
                where = {self.node_devices.get((r["driver"], r["pool"], r["device"]), "?") for r in results(claim)}
                if not where:
                    found.append(f"{pod} on {node}: claim {claim['metadata']['name']} is not allocated")
                elif where != {node}:
                    found.append(f"{pod} on {node}: claim {claim['metadata']['name']} has devices of {sorted(where)}")
                if pod not in reserved_for(claim):
                    found.append(f"{pod}: claim {claim['metadata']['name']} reserved for {sorted(reserved_for(claim))}")
        owners: dict[tuple[str, str, str], str] = {}
        for name, claim in sorted(self.claims.items()):
            for r in results(claim):
                if r.get("shareID"):
                    continue  # a share of a device that allows several: the scenario checks the capacity
                key = (r["driver"], r["pool"], r["device"])
                if key in owners:
                    found.append(f"device {'/'.join(key)} allocated to both {owners[key]} and {name}")
                owners[key] = name
        used_by_bound = {c["metadata"]["name"] for pod in bound for c in self.claims_of(pod).values() if c}
        for pod in sorted(pending):
            for claim in self.claims_of(pod).values():
                if claim and results(claim) and claim["metadata"]["name"] not in used_by_bound:
                    found.append(f"{pod} is pending but its claim {claim['metadata']['name']} is allocated")
        return found
