"""The service's OpenAPI document, generated from the wire schemas (served at /openapi.json).

Generated, not written by hand, so it cannot drift from what the verbs accept;
schemathesis runs against it in the test suite.
"""

from __future__ import annotations

from typing import Any

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin

from extender import __version__, wire
from extender.settings import Settings

_ERROR = {"type": "object", "properties": {"Error": {"type": "string"}}, "required": ["Error"]}


def _json(ref: str | dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": ref}}}


def build_openapi(settings: Settings) -> dict[str, Any]:
    plugin = MarshmallowPlugin()
    spec = APISpec(title="Kubernetes scheduler extender", version=__version__, openapi_version="3.0.3",
                   plugins=[plugin])
    for field, openapi_type in ((wire.JsonObject, "object"), (wire.NodeListField, "object"), (wire.NameList, "array")):
        plugin.map_to_openapi_type(field, openapi_type, None)  # type: ignore[no-untyped-call]  # apispec leaves it unannotated
    spec.components.schema("Error", _ERROR)
    for name, schema in (
        ("ExtenderArgs", wire.ExtenderArgsSchema),
        ("ExtenderFilterResult", wire.ExtenderFilterResultSchema),
        ("HostPriority", wire.HostPrioritySchema),
        ("ExtenderBindingArgs", wire.ExtenderBindingArgsSchema),
        ("ExtenderBindingResult", wire.ExtenderBindingResultSchema),
        ("ExtenderPreemptionArgs", wire.ExtenderPreemptionArgsSchema),
        ("ExtenderPreemptionResult", wire.ExtenderPreemptionResultSchema),
    ):
        spec.components.schema(name, schema=schema)
    errors = {
        "400": {"description": "The body breaks the extender/v1 contract", **_json("Error")},
        "413": {"description": "The body exceeds the size limit", **_json("Error")},
        "415": {"description": "Content-Type is not application/json", **_json("Error")},
    }
    verbs: dict[str, tuple[str, str | dict[str, Any]]] = {  # request and reply: a schema's name, or a schema
        "filter": ("ExtenderArgs", "ExtenderFilterResult"),
        "prioritize": ("ExtenderArgs", {"type": "array", "items": {"$ref": "#/components/schemas/HostPriority"}}),
        "bind": ("ExtenderBindingArgs", "ExtenderBindingResult"),
        "preempt": ("ExtenderPreemptionArgs", "ExtenderPreemptionResult"),
    }
    for verb, (request, reply) in verbs.items():
        spec.path(
            path=settings.verb_path(verb),
            operations={"post": {
                "operationId": verb,
                "requestBody": {"required": True, **_json(request)},
                "responses": {"200": {"description": f"{verb} reply", **_json(reply)}, **errors},
            }},
        )
    for path, text in (("/healthz", "alive"), ("/readyz", "cluster state synced"), ("/version", "version")):
        responses = {"200": {"description": text}}
        if path == "/readyz":
            responses["503"] = {"description": "cluster state not synced yet"}
        spec.path(path=path, operations={"get": {"responses": responses}})
    return spec.to_dict()
