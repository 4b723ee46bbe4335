"""Typed reads of JSON fields that raise `InvalidObject` naming the field, instead of a TypeError later."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extender.errors import InvalidObject


def as_object(raw: Any, where: str) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InvalidObject(f"{where}: expected an object")
    return raw


def as_list(raw: Any, where: str) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InvalidObject(f"{where}: expected a list")
    return raw


def as_str(raw: Any, where: str, default: str = "") -> str:
    """A string field; scalars are tolerated as their text, objects and lists are refused.

    (str() of a 900-deep nested list raises RecursionError: a bad body must be a 400, not a 500.)
    """
    if raw is None:
        return default
    if isinstance(raw, str):
        return raw
    if isinstance(raw, Mapping | list):
        raise InvalidObject(f"{where}: expected a string, got {'an object' if isinstance(raw, Mapping) else 'a list'}")
    return str(raw)


def as_choice(raw: Any, where: str, choices: tuple[str, ...], default: str) -> str:
    """An enum field of the API (one of a closed set of strings); absent or empty: `default`.
    Anything else is refused naming the choices, as the API server's validation does."""
    value = as_str(raw, where) or default
    if value not in choices:
        raise InvalidObject(f"{where}: {value!r} is not {' or '.join(choices)}")
    return value


def as_string_map(raw: Any, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InvalidObject(f"{where}: expected a map of strings")
    return {str(k): v if isinstance(v, str) else as_str(v, f"{where}.{k}") for k, v in raw.items()}


def metadata_of(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """An object's metadata for a log line or a key, whatever it holds ({} when it is not an object)."""
    return part_of(raw, "metadata")


def part_of(raw: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """An object's `name` part (spec, status, metadata) when it is an object, else {}: for code
    that reads a few fields leniently, where a view would refuse the whole object."""
    part = raw.get(name)
    return part if isinstance(part, Mapping) else {}


def object_name(meta: Mapping[str, Any]) -> str:
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidObject("metadata.name: required")
    return name


def object_key(raw: Mapping[str, Any], namespaced: bool = True) -> str | None:
    """The store key of an object not parsed (a watch event's, a deletion's): `namespace/name`
    (client-go's MetaNamespaceKeyFunc, an empty namespace read as "default"), or the name of a
    cluster-scoped kind; None when it has no name (the caller counts it as rejected)."""
    meta = raw.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return None
    return f"{meta.get('namespace') or 'default'}/{name}" if namespaced else name


def object_parts(raw: Any, kind: str) -> tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]]:
    """An API object's metadata, spec and status (empty when absent); InvalidObject naming
    `kind` when it is not an object, or naming the part that is not."""
    if not isinstance(raw, Mapping):
        raise InvalidObject(f"{kind}: expected an object")
    return (as_object(raw.get("metadata"), "metadata"), as_object(raw.get("spec"), "spec"),
            as_object(raw.get("status"), "status"))


def controller_ref(meta: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ownerReference marked `controller` (the API server allows one), or None."""
    for ref in as_list(meta.get("ownerReferences"), "metadata.ownerReferences"):
        if isinstance(ref, Mapping) and ref.get("controller"):
            return ref
    return None


def controller_owner(meta: Mapping[str, Any]) -> tuple[str, str] | None:
    """(kind, name) of the controller owning the object, or None."""
    ref = controller_ref(meta)
    if ref is None:
        return None
    return as_str(ref.get("kind"), "metadata.ownerReferences.kind"), as_str(ref.get("name"), "metadata.ownerReferences.name")


class Namespaced:
    """The `namespace/name` key of a namespaced object (client-go's MetaNamespaceKeyFunc), for
    the dataclasses that carry both fields: stores, queues and messages name objects by it."""

    __slots__ = ()
    namespace: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"
