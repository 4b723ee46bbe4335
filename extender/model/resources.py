"""Resource lists and the effective request of a pod, as kube-scheduler's NodeResourcesFit counts it.

A resource list here is a plain `dict[str, int]` in this project's units (see
`quantities.to_units`). Pods in a cluster repeat the same few request shapes, so
parsed lists are interned: 150,000 pods share a few hundred dict objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from extender.errors import InvalidObject, QuantityError
from extender.model.quantities import to_units

Resources = dict[str, int]

# kube-scheduler's defaults for containers without requests, used only for scoring
# (pkg/scheduler/util: DefaultMilliCPURequest, DefaultMemoryRequest).
DEFAULT_MILLI_CPU = 100
DEFAULT_MEMORY = 200 * 1024 * 1024

_interned: dict[tuple[tuple[str, int], ...], Resources] = {}


def intern(resources: Resources) -> Resources:
    """Return a shared dict equal to `resources`; callers must never mutate the result."""
    key = tuple(sorted(resources.items()))
    found = _interned.get(key)
    if found is None:
        if len(_interned) < 100_000:
            _interned[key] = resources
        found = resources
    return found


def parse_resource_list(raw: Any, where: str) -> Resources:
    """Parse a `{name: quantity}` map; errors name the field, e.g. `status.allocatable.cpu`."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise QuantityError(f"{where}: expected a map of resource quantities")
    parsed: Resources = {}
    for name, text in raw.items():
        try:
            parsed[str(name)] = to_units(str(name), text)
        except QuantityError as exc:
            raise QuantityError(f"{where}.{name}: {exc}") from None
    return parsed


def add_into(total: Resources, extra: Mapping[str, int]) -> None:
    for name, value in extra.items():
        total[name] = total.get(name, 0) + value


def max_into(total: Resources, other: Mapping[str, int]) -> None:
    for name, value in other.items():
        if value > total.get(name, 0):
            total[name] = value


def subtract(total: Mapping[str, int], extra: Mapping[str, int]) -> Resources:
    result = dict(total)
    for name, value in extra.items():
        left = result.get(name, 0) - value
        if left:
            result[name] = left
        else:
            result.pop(name, None)
    return result


def _container_requests(container: Any, where: str) -> Resources:
    if not isinstance(container, Mapping):
        raise InvalidObject(f"{where}: expected a container object")
    resources = container.get("resources")
    if resources is None:
        resources = {}
    if not isinstance(resources, Mapping):
        raise InvalidObject(f"{where}.resources: expected an object")
    requests = parse_resource_list(resources.get("requests"), f"{where}.resources.requests")
    if resources.get("limits"):
        # The API server defaults each missing request to its limit; snapshots may not have been.
        limits = parse_resource_list(resources.get("limits"), f"{where}.resources.limits")
        for name, value in limits.items():
            requests.setdefault(name, value)
    return requests


def _containers(spec: Mapping[str, Any], field: str) -> Iterable[tuple[int, Any]]:
    items = spec.get(field)
    if items is None:
        return enumerate(())
    if not isinstance(items, list):
        raise InvalidObject(f"spec.{field}: expected a list")
    return enumerate(items)


class _SpecRequests:
    """A pod spec's requests parsed once: each container's, each init container's (and
    whether it is a sidecar), the pod-level ones and the overhead. Both effective requests
    (plain, and with the scoring defaults) are sums of these."""

    __slots__ = ("containers", "inits", "pod_level", "overhead")

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.containers = [_container_requests(c, f"spec.containers[{i}]") for i, c in _containers(spec, "containers")]
        self.inits = [
            (_container_requests(c, f"spec.initContainers[{i}]"),
             isinstance(c, Mapping) and c.get("restartPolicy") == "Always")
            for i, c in _containers(spec, "initContainers")
        ]
        pod_level = spec.get("resources")
        self.pod_level = parse_resource_list(pod_level.get("requests"), "spec.resources.requests") \
            if isinstance(pod_level, Mapping) and pod_level.get("requests") else {}
        self.overhead = parse_resource_list(spec.get("overhead"), "spec.overhead")

    def effective(self, nonzero_defaults: bool) -> Resources:
        def requests(parsed: Resources) -> Resources:
            return {"cpu": DEFAULT_MILLI_CPU, "memory": DEFAULT_MEMORY, **parsed} if nonzero_defaults else parsed

        total: Resources = {}
        for parsed in self.containers:
            add_into(total, requests(parsed))
        sidecars: Resources = {}
        init_peak: Resources = {}
        for parsed, sidecar in self.inits:
            if sidecar:
                add_into(total, requests(parsed))
                add_into(sidecars, requests(parsed))
                candidate = dict(sidecars)
            else:
                candidate = dict(requests(parsed))
                add_into(candidate, sidecars)
            max_into(init_peak, candidate)
        max_into(total, init_peak)
        total.update(self.pod_level)
        add_into(total, self.overhead)
        return intern({name: value for name, value in total.items() if value})


def pod_requests(spec: Mapping[str, Any], *, nonzero_defaults: bool = False) -> Resources:
    """The effective request of a pod spec (kube-scheduler's `resourcehelper.PodRequests`).

    The larger of (app containers + sidecars) and, for each init container in order,
    that container plus the sidecars started before it; then pod overhead on top.
    Pod-level `spec.resources.requests`, when set, replace the container sum for the
    resources they name. With `nonzero_defaults`, containers without cpu/memory
    requests count kube-scheduler's scoring defaults (100m, 200Mi).
    """
    return _SpecRequests(spec).effective(nonzero_defaults)


def pod_request_pair(spec: Mapping[str, Any]) -> tuple[Resources, Resources]:
    """`pod_requests` without and with the scoring defaults, the spec parsed once."""
    parsed = _SpecRequests(spec)
    return parsed.effective(False), parsed.effective(True)
