"""The three PATCH flavours kube-apiserver accepts for built-in types.

* JSON merge patch (RFC 7386): ``application/merge-patch+json``.
* Strategic merge patch: ``application/strategic-merge-patch+json`` — what the
  python client sends for every dict body. It is a merge patch in which some lists
  merge by a key instead of being replaced: above all ``status.conditions`` by ``type``,
  which is how a ``PodScheduled`` condition is set without wiping the others. The merge
  keys below are the ``patchMergeKey`` tags of the core/v1 Go types this fake serves.
* JSON patch (RFC 6902): ``application/json-patch+json``.
"""

from __future__ import annotations

import copy
from typing import Any

from .status import ApiError

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

# Lists merged by key: path (list items written "[]") -> merge key. From the Go struct tags.
_MERGE_KEYS: dict[tuple[str, ...], str] = {
    ("metadata", "ownerReferences"): "uid",
    ("spec", "containers"): "name",
    ("spec", "initContainers"): "name",
    ("spec", "ephemeralContainers"): "name",
    ("spec", "volumes"): "name",
    ("spec", "imagePullSecrets"): "name",
    ("spec", "hostAliases"): "ip",
    ("spec", "schedulingGates"): "name",
    ("spec", "resourceClaims"): "name",
    ("status", "conditions"): "type",
    ("status", "reservedFor"): "uid",  # ResourceClaimStatus.ReservedFor: patchMergeKey uid
    ("status", "addresses"): "type",
    ("status", "podIPs"): "ip",
    ("status", "hostIPs"): "ip",
    ("status", "resourceClaimStatuses"): "name",
}
for _c in ("containers", "initContainers", "ephemeralContainers"):
    _MERGE_KEYS[("spec", _c, "[]", "env")] = "name"
    _MERGE_KEYS[("spec", _c, "[]", "ports")] = "containerPort"
    _MERGE_KEYS[("spec", _c, "[]", "volumeMounts")] = "mountPath"
    _MERGE_KEYS[("spec", _c, "[]", "volumeDevices")] = "devicePath"

# Lists of scalars merged as sets ("patchStrategy:merge" without a key).
_MERGE_SETS = {("metadata", "finalizers"), ("spec", "podCIDRs")}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """A strategic merge patch for the core/v1 types (merge keys above, ``$patch`` directives,
    ``$deleteFromPrimitiveList``, ``$setElementOrder`` and ``$retainKeys``)."""
    if not isinstance(patch, dict):
        raise ApiError.bad_request(
            "unable to find api field in struct for the json field: patch must be an object"
        )
    return _smp_map(target if isinstance(target, dict) else {}, patch, ())


def _smp_map(
    target: dict[str, Any], patch: dict[str, Any], path: tuple[str, ...]
) -> dict[str, Any]:
    directive = patch.get("$patch")
    if directive == "replace":
        return _strip({k: v for k, v in patch.items() if k != "$patch"})
    if directive == "delete":
        return {}
    result = copy.deepcopy(target)
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain or k in patch}
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list) and isinstance(value, list):
                result[field] = [v for v in result[field] if v not in value]
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        sub = path + (key,)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            current = result.get(key)
            result[key] = _smp_map(current if isinstance(current, dict) else {}, value, sub)
        elif isinstance(value, list):
            result[key] = _smp_list(result.get(key), value, sub)
        else:
            result[key] = value
    return result


def _smp_list(target: Any, patch: list[Any], path: tuple[str, ...]) -> list[Any]:
    current = target if isinstance(target, list) else []
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [_strip(item) for item in patch if not (isinstance(item, dict) and "$patch" in item)]
    key = _MERGE_KEYS.get(path)
    if key is not None:
        result = copy.deepcopy(current)
        for item in patch:
            if not isinstance(item, dict):
                raise ApiError.bad_request(
                    f"merging an object in json but data type is not map: {item!r}"
                )
            wanted = item.get(key)
            index = next(
                (
                    i
                    for i, old in enumerate(result)
                    if isinstance(old, dict) and old.get(key) == wanted
                ),
                None,
            )
            if item.get("$patch") == "delete":
                if index is not None:
                    del result[index]
            elif index is not None:
                result[index] = _smp_map(result[index], item, path + ("[]",))
            else:
                result.append(_smp_map({}, item, path + ("[]",)))
        return result
    if path in _MERGE_SETS:
        result = list(current)
        for item in patch:
            if item not in result:
                result.append(item)
        return result
    return [_strip(item) for item in patch]


def _strip(value: Any) -> Any:
    """Drop directives and nulls from newly added content, as the patch would on an empty target."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$") and v is not None}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------------
# RFC 6902
# ---------------------------------------------------------------------------------------------


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _patch_error(f'JSON pointer must be empty or start with a "/": {path!r}')
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _patch_error(message: str) -> ApiError:
    return ApiError(422, "Invalid", message)


def _resolve(doc: Any, parts: list[str], path: str) -> Any:
    cur = doc
    for part in parts:
        if isinstance(cur, dict):
            if part not in cur:
                raise _patch_error(f"doc is missing path: {path!r}: missing value")
            cur = cur[part]
        elif isinstance(cur, list):
            try:
                cur = cur[int(part)]
            except (ValueError, IndexError):
                raise _patch_error(f"doc is missing path: {path!r}: missing value") from None
        else:
            raise _patch_error(f"doc is missing path: {path!r}: missing value")
    return cur


def _container(doc: Any, path: str) -> tuple[Any, str]:
    parts = _pointer(path)
    if not parts:
        raise _patch_error("cannot operate on the document root")
    return _resolve(doc, parts[:-1], path), parts[-1]


def _add(doc: Any, path: str, value: Any) -> Any:
    if path == "":
        return value
    parent, last = _container(doc, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            try:
                idx = int(last)
            except ValueError:
                raise _patch_error(
                    f"add operation does not apply: doc is missing path: {path!r}"
                ) from None
            if idx < 0 or idx > len(parent):
                raise _patch_error(f"add operation does not apply: doc is missing path: {path!r}")
            parent.insert(idx, value)
    else:
        raise _patch_error(f"add operation does not apply: doc is missing path: {path!r}")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    parent, last = _container(doc, path)
    try:
        if isinstance(parent, dict):
            return doc, parent.pop(last)
        if isinstance(parent, list):
            return doc, parent.pop(int(last))
    except (KeyError, ValueError, IndexError):
        pass
    raise _patch_error(f"remove operation does not apply: doc is missing path: {path!r}")


def json_patch(target: Any, ops: Any) -> Any:
    """Apply RFC 6902 operations to a copy of ``target``."""
    if not isinstance(ops, list):
        raise ApiError.bad_request(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
        )
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op:
            raise _patch_error("Unexpected kind: unknown")
        kind, path = op["op"], op.get("path", "")
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            _resolve(doc, _pointer(path), path)
            if path == "":
                doc = copy.deepcopy(op.get("value"))
            else:
                doc, _ = _remove(doc, path)
                doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "move":
            doc, value = _remove(doc, op.get("from", ""))
            doc = _add(doc, path, value)
        elif kind == "copy":
            value = _resolve(doc, _pointer(op.get("from", "")), op.get("from", ""))
            doc = _add(doc, path, copy.deepcopy(value))
        elif kind == "test":
            try:
                actual = _resolve(doc, _pointer(path), path)
            except ApiError:
                actual = None
            if actual != op.get("value"):
                raise _patch_error(f"testing value {path} failed: test failed")
        else:
            raise _patch_error(f"Unexpected kind: {kind}")
    return doc


def apply_patch(content_type: str, target: dict[str, Any], patch: Any) -> dict[str, Any]:
    """Dispatch on the request's media type (parameters such as charset ignored)."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media == MERGE_PATCH:
        result = merge_patch(target, patch)
    elif media == STRATEGIC_MERGE_PATCH:
        result = strategic_merge_patch(target, patch)
    elif media == JSON_PATCH:
        result = json_patch(target, patch)
    else:
        raise ApiError.unsupported_media_type(media)
    if not isinstance(result, dict):
        raise _patch_error("the patched object is not a JSON object")
    return result
