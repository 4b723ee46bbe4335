"""Requests, responses and URL routing: the path grammar of kube-apiserver for the served types.

``/api/v1/...`` and ``/apis/{group}/{version}/...`` followed by optional ``watch/``
(deprecated), ``namespaces/{ns}/``, the resource, a name and a subresource; plus the
discovery and health endpoints that clients read before anything else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from . import resources
from .resources import ResourceType
from .status import ApiError


@dataclass
class ApiRequest:
    """One HTTP request, decoded just enough for routing (query values keep repeats)."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-case names
    body: bytes = b""

    def param(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else default

    def flag(self, name: str) -> bool:
        return (self.param(name) or "").lower() in ("true", "1")

    def json(self) -> Any:
        """The decoded JSON body. Protobuf bodies (kubectl's typed clients send them) are refused
        with 415 and a clear message, since the fake speaks JSON only."""
        if "protobuf" in self.headers.get("content-type", ""):
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the fake API server decodes JSON only, not {self.headers['content-type']}",
            )
        if not self.body:
            raise ApiError.bad_request(
                "couldn't get version/kind; json parse error: unexpected end of JSON input"
            )
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise ApiError.bad_request(
                f"couldn't get version/kind; json parse error: {exc}"
            ) from None


@dataclass
class ApiResponse:
    """A complete (non-streaming) reply."""

    code: int
    body: Any  # JSON-able, or bytes for text endpoints
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Route:
    """Where a request points. ``resource`` is None only for the legacy ``bindings`` endpoint."""

    resource: ResourceType | None
    group: str
    version: str
    plural: str
    namespace: str | None
    name: str | None
    subresource: str
    legacy_watch: bool = False


def discovery(
    parts: list[str], address: str, aggregated: frozenset[str] = frozenset(), withheld: frozenset[str] = frozenset()
) -> ApiResponse | None:
    """The discovery and health documents, or None when ``parts`` is not one of those paths.
    ``aggregated`` are the aggregated API groups currently installed (metrics.k8s.io),
    ``withheld`` the built-in groups the server is told not to serve (resource.k8s.io)."""
    if parts in (["healthz"], ["readyz"], ["livez"]) or (
        parts and parts[0] in ("healthz", "readyz", "livez")
    ):
        return ApiResponse(200, b"ok", {"Content-Type": "text/plain; charset=utf-8"})
    if parts == ["version"]:
        return ApiResponse(200, resources.SERVER_VERSION)
    if parts == ["api"]:
        return ApiResponse(200, resources.api_versions(address))
    if parts == ["apis"]:
        return ApiResponse(200, resources.api_group_list(aggregated, withheld))
    if parts == ["api", "v1"]:
        return ApiResponse(200, resources.resource_list("", "v1"))
    if len(parts) == 2 and parts[0] == "apis":
        group = resources.api_group(parts[1], aggregated)
        if group is None:
            raise ApiError.unknown_path()
        return ApiResponse(200, group)
    if len(parts) == 3 and parts[0] == "apis":
        listing = resources.resource_list(parts[1], parts[2], aggregated)
        if listing is None:
            raise ApiError.unknown_path()
        return ApiResponse(200, listing)
    return None


def parse_route(group: str, version: str, rest: list[str]) -> Route:
    """Split the path after ``/api/v1`` or ``/apis/{group}/{version}`` into its parts;
    404 for anything the fake does not serve."""
    legacy_watch = bool(rest) and rest[0] == "watch"
    if legacy_watch:
        rest = rest[1:]
    namespace: str | None = None
    if (
        len(rest) >= 3
        and rest[0] == "namespaces"
        and not (group == "" and rest[2] in ("status", "finalize") and len(rest) == 3)
    ):
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        raise ApiError.unknown_path()
    plural = rest[0]
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else ""
    rt = resources.lookup(group, plural)
    if rt is None and not (
        group == "" and plural == resources.BINDINGS and namespace and name is None
    ):
        raise ApiError.unknown_path()
    if rt is not None:
        if (rt.version != version) or (
            rt.namespaced and namespace is None and name is not None
        ):
            raise ApiError.unknown_path()
        if not rt.namespaced and namespace is not None:
            raise ApiError.unknown_path()
        if sub and sub not in rt.subresources:
            raise ApiError.unknown_path()
    return Route(rt, group, version, plural, namespace, name, sub, legacy_watch)
