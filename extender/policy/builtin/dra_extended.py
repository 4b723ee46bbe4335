"""Extended resources backed by DRA (DRAExtendedResource, beta and on in v1.36): `example.com/gpu: 1` served by a DeviceClass.

The facts, from pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go:

* A container's extended resource request is served through DRA when a DeviceClass maps the
  name (its `extendedResourceName`, or the implicit `deviceclass.resource.kubernetes.io/<class>`)
  and the node does not advertise the resource in its allocatable; a node that does serves it
  the classic way (device plugin), and ResourceFit checks it there.
* For such a pod the scheduler allocates one claim of its own, built per node: one request per
  container and resource, named `container-<index>-request-<index of the resource among the
  container's sorted requests>` (init containers first), ExactCount of the quantity; a
  non-sidecar init container reuses the requests of the long-lived containers after it, and
  the largest of those init containers' remaining requests is the one kept
  (`createRequestsAndMappings`).
* At PreBind the claim is created (generateName `<pod>-extended-resources-`, owned by the pod,
  annotation `resource.kubernetes.io/extended-resource-claim: "true"`), allocated and reserved
  like any claim, and `pod.status.extendedResourceClaimStatus` names it with the mapping of
  container and resource to request.
* A claim of that kind left by an earlier attempt (its bind failed) makes every node
  unschedulable ("cannot schedule extended resource claim"); PostFilter deletes it and the next
  attempt starts anew.
* Scoring (noderesources/resource_allocation.go calculateDRAResourceTotals): for a resource the
  node does not advertise, NodeResourcesFit's strategies take as allocatable the devices of the
  class that the node's slices publish, and as allocated those held by any allocation (whole,
  or a share of it), stored or in flight: `device_totals`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.dra.allocator import AllocationError, class_selects
from extender.dra.objects import DeviceClass, DeviceID, ResourceClaim
from extender.errors import QuantityError
from extender.model.pods import PodView
from extender.model.quantities import to_units
from extender.policy.builtin.fit import is_dra_extended_resource
from extender.policy.dra_view import EXTENDED_ANNOTATION, DraView

STALE = "cannot schedule extended resource claim"
IN_MEMORY_NAME = "<extended-resources>"  # specialClaimInMemName: the claim is named when it is created


@dataclass(frozen=True)
class RequestMapping:
    """v1.ContainerExtendedResourceRequest: which request serves a container's resource."""

    container: str
    resource: str
    request: str

    def to_api(self) -> dict[str, str]:
        return {"containerName": self.container, "resourceName": self.resource, "requestName": self.request}


@dataclass(frozen=True)
class NodeClaim:
    """The claim for the extended resources one kind of node must serve through DRA."""

    claim: ResourceClaim  # in memory: no name or uid yet (created at PreBind)
    requests: tuple[dict[str, Any], ...]  # its spec.devices.requests, for the create
    mappings: tuple[RequestMapping, ...]


def served(pod: PodView, dra: DraView) -> dict[str, int]:
    """The pod's extended resource requests that some DeviceClass serves (name -> count)."""
    return {resource: amount for resource, amount in pod.requests.items()
            if amount > 0 and is_dra_extended_resource(resource) and dra.extended_class(resource) is not None}


def device_totals(dra: DraView, device_class: DeviceClass, node_name: str, labels: Mapping[str, str]
                  ) -> tuple[int, int]:
    """(devices of the class the node's slices publish, how many of them are allocated). Every
    slice that reaches the node counts, whatever its pool's generation, as kube-scheduler counts
    them; a selector's CEL error makes the resource unknown here, (0, 0), as its error does there."""
    in_use, shared = dra.in_use(), dra.consumed()
    total = taken = 0
    for slice_ in dra.slices_for(node_name):
        if slice_.shared_counters or not slice_.available_on(node_name, labels):
            continue
        per_device = slice_.per_device_node_selection
        for device in slice_.devices:
            if per_device and not device.available_on(node_name, labels):
                continue
            try:
                if not class_selects(device_class, device):
                    continue
            except AllocationError:
                return 0, 0
            total += 1
            device_id = DeviceID(slice_.driver, slice_.pool, device.name)
            taken += device_id in in_use or device_id in shared
    return total, taken


def on_node(wanted: Mapping[str, int], allocatable: Mapping[str, int]) -> dict[str, int]:
    """Of the served requests, those this node must serve through DRA (it does not advertise them)."""
    return {resource: amount for resource, amount in wanted.items() if not allocatable.get(resource, 0)}


def node_claim(pod: PodView, needed: Mapping[str, int], dra: DraView) -> NodeClaim:
    """createRequestsAndMappings: the claim's requests for `needed`, and which serves what."""
    spec = pod.raw.get("spec") or {}
    init = [c for c in spec.get("initContainers") or [] if isinstance(c, Mapping)]
    containers = [*init, *(c for c in spec.get("containers") or [] if isinstance(c, Mapping))]
    long_lived = [i for i, c in enumerate(containers) if i >= len(init) or c.get("restartPolicy") == "Always"]
    short_lived = [i for i in range(len(init)) if containers[i].get("restartPolicy") != "Always"]
    requests: list[dict[str, Any]] = []
    mappings: list[RequestMapping] = []
    for resource in sorted(needed):
        cls = dra.extended_class(resource)
        if cls is None:
            continue
        kept: list[dict[str, Any] | None] = [None] * len(containers)
        long_maps: list[RequestMapping] = []
        for i in long_lived:
            request, found = _container_request(i, containers[i], resource, cls.name, ())
            kept[i] = request
            long_maps += found
        biggest: dict[str, Any] | None = None
        short_names: set[str] = set()
        short_maps: list[RequestMapping] = []
        for i in short_lived:
            request, found = _container_request(i, containers[i], resource, cls.name, kept[i:])
            if request is not None:
                short_names.add(request["name"])
                if biggest is None or biggest["exactly"]["count"] < request["exactly"]["count"]:
                    biggest = request
            short_maps += found
        if biggest is not None and len(short_names) > 1:
            short_names.discard(biggest["name"])
            short_maps = [RequestMapping(m.container, m.resource, biggest["name"]) if m.request in short_names else m
                          for m in short_maps]
        if biggest is not None:
            requests.append(biggest)
        requests += [request for request in kept if request is not None]
        mappings += long_maps + short_maps
    requests.sort(key=lambda request: request["name"])
    raw = {"metadata": {"name": IN_MEMORY_NAME, "namespace": pod.namespace, "uid": "",
                        "annotations": {EXTENDED_ANNOTATION: "true"},
                        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid,
                                             "controller": True}]},
           "spec": {"devices": {"requests": requests}}}
    return NodeClaim(ResourceClaim.parse(raw), tuple(requests), tuple(mappings))


def _container_request(index: int, container: Mapping[str, Any], resource: str, class_name: str,
                       reusable: Sequence[dict[str, Any] | None]) -> tuple[dict[str, Any] | None, list[RequestMapping]]:
    """createResourceRequestAndMappings: this container's request for the resource (None when it
    asks for none, or when the requests of later long-lived containers cover it)."""
    wanted = ((container.get("resources") or {}).get("requests") or {})
    if resource not in wanted:
        return None, []
    try:
        count = to_units(resource, wanted[resource])
    except QuantityError:
        return None, []
    if count <= 0:
        return None, []
    name = str(container.get("name") or "")
    mappings: list[RequestMapping] = []
    covered = 0
    for request in reusable:
        if request is not None:
            covered += request["exactly"]["count"]
            mappings.append(RequestMapping(name, resource, request["name"]))
            if covered >= count:
                return None, mappings
    position = sorted(wanted).index(resource)
    request_name = f"container-{index}-request-{position}"
    mappings.append(RequestMapping(name, resource, request_name))
    return ({"name": request_name, "exactly": {"deviceClassName": class_name, "allocationMode": "ExactCount",
                                               "count": count - covered}}, mappings)
