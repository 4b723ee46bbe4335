"""Host ports: what a pod asks of a node's network namespace (kube-scheduler's NodePorts).

Only ports with `hostPort > 0` count, from the app containers and from init containers
that run for the pod's whole life (sidecars, `restartPolicy: Always`), as
`util.GetHostPorts` reads them. IP and protocol are sanitised as `HostPortInfo` does:
an empty hostIP is the wildcard 0.0.0.0, an empty protocol is TCP.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from extender.errors import InvalidObject
from extender.model.fields import as_list, as_object, as_str

WILDCARD = "0.0.0.0"


@dataclass(frozen=True, slots=True)
class HostPort:
    ip: str
    protocol: str
    port: int


def _ports(container: Any, where: str) -> Iterable[HostPort]:
    for i, raw in enumerate(as_list(as_object(container, where).get("ports"), f"{where}.ports")):
        item = as_object(raw, f"{where}.ports[{i}]")
        port = item.get("hostPort")
        if port is None:
            continue
        if isinstance(port, bool) or not isinstance(port, int):
            raise InvalidObject(f"{where}.ports[{i}].hostPort: expected an integer")
        if port <= 0:
            continue
        yield HostPort(as_str(item.get("hostIP"), f"{where}.ports[{i}].hostIP") or WILDCARD,
                       as_str(item.get("protocol"), f"{where}.ports[{i}].protocol") or "TCP", port)


_NONE: tuple[HostPort, ...] = ()


def host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """Every host port the pod binds; () for the vast majority of pods."""
    found: list[HostPort] = []
    for i, container in enumerate(as_list(spec.get("initContainers"), "spec.initContainers")):
        if isinstance(container, Mapping) and container.get("restartPolicy") == "Always":
            found.extend(_ports(container, f"spec.initContainers[{i}]"))
    for i, container in enumerate(as_list(spec.get("containers"), "spec.containers")):
        found.extend(_ports(container, f"spec.containers[{i}]"))
    return tuple(found) if found else _NONE


def conflict(wanted: HostPort, used: Iterable[HostPort]) -> bool:
    """HostPortInfo.CheckConflict: the wildcard clashes with any IP, an IP with itself and the wildcard."""
    for port in used:
        if port.port == wanted.port and port.protocol == wanted.protocol and (
                wanted.ip == WILDCARD or port.ip == WILDCARD or port.ip == wanted.ip):
            return True
    return False
