"""Validation shared by all kinds: object names, labels, annotations and timestamps.

These are the checks real clients trip over (a label value with a slash, a Lease
``renewTime`` without exactly six fractional digits), so the fake refuses exactly what
kube-apiserver refuses, with the same field paths and wording.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from .status import ApiError, FieldError

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*"
    "[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
QUALIFIED_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', "
    "'_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  "
    "or 'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)

RFC3339 = "2006-01-02T15:04:05Z07:00"
RFC3339_MICRO = "2006-01-02T15:04:05.000000Z07:00"
_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
_MICRO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$")


def is_dns_subdomain(name: str) -> bool:
    return len(name) <= 253 and bool(_DNS1123_SUBDOMAIN.match(name))


def is_dns_label(name: str) -> bool:
    return len(name) <= 63 and bool(_DNS1123_LABEL.match(name))


def qualified_name_errors(key: str, path: str) -> list[FieldError]:
    """IsQualifiedName: optional DNS-subdomain prefix, then a 63-character name part."""
    prefix, _, name = key.rpartition("/")
    errs = []
    if prefix and not is_dns_subdomain(prefix):
        errs.append(FieldError("Invalid", path, key, "prefix part " + SUBDOMAIN_MSG))
    if not name:
        errs.append(FieldError("Invalid", path, key, "name part must be non-empty"))
    elif len(name) > 63:
        errs.append(
            FieldError("Invalid", path, key, "name part must be no more than 63 characters")
        )
    if not _QUALIFIED_NAME.match(name):  # checked even when empty, as IsQualifiedName does
        errs.append(FieldError("Invalid", path, key, QUALIFIED_MSG))
    return errs


def validate_metadata(
    obj: dict[str, Any], namespaced: bool, name_check: str = "subdomain"
) -> list[FieldError]:
    """ValidateObjectMeta: name (or generateName) present and well-formed, labels, annotations."""
    meta = obj.get("metadata") or {}
    errs: list[FieldError] = []
    name = meta.get("name") or ""
    if not name:
        errs.append(
            FieldError("Required", "metadata.name", detail="name or generateName is required")
        )
    elif name_check == "label" and not is_dns_label(name):
        errs.append(FieldError("Invalid", "metadata.name", name, LABEL_MSG))
    elif name_check == "subdomain" and not is_dns_subdomain(name):
        errs.append(FieldError("Invalid", "metadata.name", name, SUBDOMAIN_MSG))
    if not namespaced and meta.get("namespace"):
        errs.append(
            FieldError("Forbidden", "metadata.namespace", detail="not allowed on this type")
        )
    for key, value in (meta.get("labels") or {}).items():
        errs += qualified_name_errors(key, "metadata.labels")
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            errs.append(FieldError("Invalid", "metadata.labels", value, LABEL_VALUE_MSG))
    total = 0
    for key, value in (meta.get("annotations") or {}).items():
        errs += [
            FieldError("Invalid", "metadata.annotations", key, e.detail)
            for e in qualified_name_errors(key.lower(), "metadata.annotations")
        ]
        total += len(key) + len(value if isinstance(value, str) else "")
    if total > 256 * 1024:
        errs.append(
            FieldError("Invalid", "metadata.annotations", "", "may not be more than 262144 bytes")
        )
    return errs


def check_decodable(kind: str, version: str, obj: Any) -> None:
    """What the JSON decoder refuses with 400 before validation runs: a body that is not an
    object, non-string label/annotation values."""
    if not isinstance(obj, dict):
        raise ApiError.bad_request(f"the object provided is unrecognized ({type(obj).__name__})")
    meta = obj.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise _undecodable(
            kind,
            version,
            "json: cannot unmarshal into Go struct field .metadata of type v1.ObjectMeta",
        )
    for section in ("labels", "annotations"):
        for value in ((meta or {}).get(section) or {}).values():
            if not isinstance(value, str):
                raise _undecodable(
                    kind,
                    version,
                    f"json: cannot unmarshal {_json_type(value)} into Go "
                    f"struct field ObjectMeta.metadata.{section} of type string",
                )


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return "string"


def _undecodable(kind: str, version: str, detail: str) -> ApiError:
    return ApiError.bad_request(
        f'{kind} in version "{version}" cannot be handled as a {kind}: {detail}'
    )


def _dig(obj: Any, path: str) -> Any:
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def check_times(
    kind: str,
    version: str,
    obj: dict[str, Any],
    times: Iterable[str] = (),
    micro_times: Iterable[str] = (),
    condition_lists: Iterable[str] = (),
) -> None:
    """metav1.Time must be RFC 3339; metav1.MicroTime must have exactly six fractional digits
    (Go parses it with the layout ``2006-01-02T15:04:05.000000Z07:00``). Anything else is a 400."""

    def check(value: Any, micro: bool) -> None:
        if value is None:
            return
        pattern, layout = (_MICRO_TIME, RFC3339_MICRO) if micro else (_TIME, RFC3339)
        ok = isinstance(value, str) and bool(pattern.match(value))
        if ok:
            try:
                datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                ok = False
        if not ok:
            raise _undecodable(
                kind,
                version,
                f'parsing time "{value}" as "{layout}": cannot parse "{value}" as "{layout}"',
            )

    for path in times:
        check(_dig(obj, path), micro=False)
    for path in micro_times:
        check(_dig(obj, path), micro=True)
    for path in condition_lists:
        for cond in _dig(obj, path) or []:
            if isinstance(cond, dict):
                for key in (
                    "lastTransitionTime",
                    "lastProbeTime",
                    "lastHeartbeatTime",
                    "lastUpdateTime",
                ):
                    check(cond.get(key), micro=False)
