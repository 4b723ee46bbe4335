"""Events: one storage, two APIs.

kube-apiserver stores ``core/v1`` and ``events.k8s.io/v1`` Events as the same objects and
converts on the way in and out, so an event written through one API is listed by the
other. The scheduler writes through ``events.k8s.io``; a test (or ``kubectl get events``)
reads through core. The validation rules are those of pkg/apis/core/validation/events.go:
``events.k8s.io/v1`` writes are validated strictly (eventTime, reportingController,
action, reason, type and a 1 KiB note are required or bounded).
"""

from __future__ import annotations

from typing import Any

from .status import ApiError, FieldError
from .validation import check_times, qualified_name_errors, validate_metadata

# events.k8s.io/v1 field -> core/v1 field, where the names differ.
_RENAMES = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_BACK = {v: k for k, v in _RENAMES.items()}

# What core/v1 always serialises (Go has no omitempty on these fields).
_SERVED_DEFAULTS: dict[str, Any] = {
    "involvedObject": {},
    "reportingComponent": "",
    "reportingInstance": "",
    "source": {},
}

NOTE_LENGTH_LIMIT = 1024
SHORT_LIMIT = 128


def to_storage(obj: dict[str, Any], group: str) -> dict[str, Any]:
    """The core/v1 form of an event written through ``group``."""
    if group == "events.k8s.io":
        obj = {_RENAMES.get(k, k): v for k, v in obj.items()}
    # Nulls and empty defaults are how the zero values are served; they are not stored.
    out = {
        k: v
        for k, v in obj.items()
        if v is not None and not (k in _SERVED_DEFAULTS and v == _SERVED_DEFAULTS[k])
    }
    out["apiVersion"], out["kind"] = "v1", "Event"
    return out


def from_storage(obj: dict[str, Any], group: str) -> dict[str, Any]:
    """The event as served by ``group``."""
    if group != "events.k8s.io":
        out = dict(obj)
        for key, value in _SERVED_DEFAULTS.items():
            out.setdefault(key, value)
        for key in ("firstTimestamp", "lastTimestamp", "eventTime"):
            out.setdefault(key, None)
        return out
    out = {_BACK.get(k, k): v for k, v in obj.items()}
    out["apiVersion"], out["kind"] = "events.k8s.io/v1", "Event"
    out.setdefault("eventTime", None)
    for empty in ("deprecatedSource",):
        if out.get(empty) == {}:
            out.pop(empty)
    return out


def check_event_times(obj: dict[str, Any], group: str) -> None:
    # events.k8s.io/v1 renames the core API's first/last timestamps to deprecated*.
    times = (("deprecatedFirstTimestamp", "deprecatedLastTimestamp") if group == "events.k8s.io"
             else ("firstTimestamp", "lastTimestamp"))
    check_times("Event", "v1", obj, times=times, micro_times=("eventTime", "series.lastObservedTime"))


def validate(event: dict[str, Any], group: str, creating: bool = True) -> None:
    """ValidateEventCreate (or, with ``creating=False``, the non-immutability part of
    ValidateEventUpdate) on the storage (core) form; ``group`` is the API the request used."""
    errs = _legacy_errors(event, group)
    if group != "events.k8s.io":
        if not (event.get("metadata") or {}).get("name"):  # core events skip ObjectMeta validation
            errs.append(
                FieldError("Required", "metadata.name", detail="name or generateName is required")
            )
    else:
        errs += validate_metadata(event, namespaced=True)
        series = event.get("series")
        if series:
            if (series.get("count") or 0) < 2:
                errs.append(FieldError("Invalid", "series.count", "", "should be at least 2"))
            if not series.get("lastObservedTime"):
                errs.append(FieldError("Required", "series.lastObservedTime"))
        if event.get("type") not in ("Normal", "Warning"):
            errs.append(
                FieldError("Invalid", "type", "", f"has invalid value: {event.get('type') or ''}")
            )
        if creating:
            errs += _strict_create_errors(event)
    if errs:
        # Both APIs validate the internal (core) Event: the message says `Event "x"` with no
        # group, even for events.k8s.io (kube-apiserver v1.36).
        raise ApiError.invalid("Event", (event.get("metadata") or {}).get("name", ""), errs)


def _strict_create_errors(event: dict[str, Any]) -> list[FieldError]:
    """Creation through events.k8s.io/v1 must use the new fields, not the deprecated ones.
    The paths are those of the internal (core) fields: ``count``, not ``deprecatedCount``."""
    errs: list[FieldError] = []
    if not event.get("eventTime"):
        errs.append(FieldError("Required", "eventTime"))
    for core in ("firstTimestamp", "lastTimestamp", "count"):
        if event.get(core):
            errs.append(FieldError("Invalid", core, "", "needs to be unset"))
    source = event.get("source") or {}
    if source.get("component") or source.get("host"):
        errs.append(FieldError("Invalid", "source", "", "needs to be unset"))
    return errs


def _legacy_errors(event: dict[str, Any], group: str) -> list[FieldError]:
    errs: list[FieldError] = []
    namespace = (event.get("metadata") or {}).get("namespace") or ""
    involved = event.get("involvedObject") or {}
    involved_ns = involved.get("namespace") or ""
    controller_field = "reportingController" if group == "events.k8s.io" else "reportingComponent"
    regarding = "involvedObject.namespace"  # the internal field path, whichever API was used
    if not event.get("eventTime"):
        if not involved_ns:
            if namespace not in ("", "default"):
                errs.append(
                    FieldError("Invalid", regarding, involved_ns, "does not match event.namespace")
                )
        elif namespace != involved_ns:
            errs.append(
                FieldError("Invalid", regarding, involved_ns, "does not match event.namespace")
            )
        return errs
    if not involved_ns and namespace not in ("default", "kube-system"):
        errs.append(FieldError("Invalid", regarding, involved_ns, "does not match event.namespace"))
    controller = event.get("reportingComponent") or ""
    if not controller:
        errs.append(FieldError("Required", controller_field))
    errs += qualified_name_errors(controller, controller_field)
    for name in ("reportingInstance", "action", "reason"):
        value = event.get(name) or ""
        if not value:
            errs.append(FieldError("Required", name))
        elif len(value) > SHORT_LIMIT:
            errs.append(FieldError("Invalid", name, "", f"can have at most {SHORT_LIMIT} characters"))
    if len(event.get("message") or "") > NOTE_LENGTH_LIMIT:
        errs.append(
            FieldError("Invalid", "message", "", f"can have at most {NOTE_LENGTH_LIMIT} characters")
        )
    return errs
