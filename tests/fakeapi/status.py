"""Kubernetes ``Status`` objects and the errors that carry them.

Clients branch on ``reason`` and ``code`` (a 409 Conflict is retried, a 410 Expired
means re-list, a 404 on a binding means the pod is gone), so every failure the fake
returns is a real ``Status`` built here, with the message wording of kube-apiserver
(k8s.io/apimachinery/pkg/api/errors) wherever it is known.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tests.helpers import present

REASON_BY_CODE = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}

# The generic messages of apierrors.NewGenericServerResponse, used when no better one exists.
GENERIC_MESSAGE_BY_CODE = {
    400: "the server rejected our request for an unknown reason",
    401: "Unauthorized",
    403: "forbidden",
    404: "the server could not find the requested resource",
    405: "the server does not allow this method on the requested resource",
    409: "the server reported a conflict",
    410: "the server has asked for the client to try again later",
    415: "the server does not support the media type transmitted in the request",
    422: "the server rejected our request due to an error in our request",
    429: "Too many requests, please try again later.",
    500: 'an error on the server ("Internal error occurred: injected fault") has prevented the request from succeeding',
    503: "the server is currently unable to handle the request",
    504: "the server was unable to return a response in the time allotted, but may still be processing the request",
}


def status_object(
    code: int, reason: str, message: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A failure ``Status`` dict exactly as kube-apiserver serialises it (an empty reason and
    empty details omitted, as Go's omitempty does)."""
    obj: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
    }
    if reason:
        obj["reason"] = reason
    if details:
        obj["details"] = details
    obj["code"] = code
    return obj


def success_status(code: int = 200, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``Status`` with ``status: Success``, as returned by bindings and most deletions."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        **present(details=details, code=code),
    }


def _details(name: str | None, group: str, kind: str, **extra: Any) -> dict[str, Any]:
    return {**present(name=name, group=group, kind=kind), **{k: v for k, v in extra.items() if v is not None}}


def qualified(resource: str, group: str) -> str:
    """``pods`` for the core group, ``leases.coordination.k8s.io`` otherwise (GroupResource.String)."""
    return f"{resource}.{group}" if group else resource


@dataclass
class FieldError:
    """One validation failure, formatted like k8s.io/apimachinery/pkg/util/validation/field."""

    kind: str  # Required | Invalid | Forbidden | NotSupported | Duplicate | TooMany
    path: str
    value: Any = None
    detail: str = ""
    supported: list[str] = field(default_factory=list)

    _CAUSE = {
        "Required": "FieldValueRequired",
        "Invalid": "FieldValueInvalid",
        "Forbidden": "FieldValueForbidden",
        "NotSupported": "FieldValueNotSupported",
        "Duplicate": "FieldValueDuplicate",
        "TooMany": "FieldValueTooMany",
    }

    def body(self) -> str:
        """The part after ``path: `` (ErrorBody in Go)."""
        if self.kind == "Required":
            text = "Required value"
        elif self.kind == "Forbidden":
            text = "Forbidden"
        elif self.kind == "TooMany":
            text = f"Too many: {_go_value(self.value)}"
        elif self.kind == "Duplicate":
            text = f"Duplicate value: {_go_value(self.value)}"
        elif self.kind == "NotSupported":
            text = f"Unsupported value: {_go_value(self.value)}"
            if self.supported:
                text += ": supported values: " + ", ".join(f'"{s}"' for s in self.supported)
        else:
            text = f"Invalid value: {_go_value(self.value)}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.path}: {self.body()}"

    def cause(self) -> dict[str, str]:
        return {"reason": self._CAUSE[self.kind], "message": self.body(), "field": self.path}


class GoLiteral(str):
    """A value already formatted the way Go prints it (e.g. ``0x0`` for a uint64 zero)."""


def _go_value(value: Any) -> str:
    if isinstance(value, GoLiteral):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def aggregate(errors: list[Any]) -> str:
    """utilerrors.Aggregate formatting: one error bare, several in brackets."""
    texts = [str(e) for e in errors]
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"


class ApiError(Exception):
    """An error reply: raising it anywhere in a handler sends its ``Status`` to the client."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        return status_object(self.code, self.reason, self.message, self.details)

    # -- constructors mirroring apierrors.NewXxx -------------------------------------------

    @classmethod
    def _about(cls, code: int, reason: str, resource: str, name: str, group: str, before: str = "",
               after: str = "") -> ApiError:
        """An error about one named object: ``<before>pods "p"<after>``, its details naming it."""
        return cls(code, reason, f'{before}{qualified(resource, group)} "{name}"{after}',
                   _details(name, group, resource))

    @classmethod
    def not_found(cls, resource: str, name: str, group: str = "") -> ApiError:
        return cls._about(404, "NotFound", resource, name, group, after=" not found")

    @classmethod
    def already_exists(cls, resource: str, name: str, group: str = "") -> ApiError:
        return cls._about(409, "AlreadyExists", resource, name, group, after=" already exists")

    @classmethod
    def conflict(cls, resource: str, name: str, cause: str, group: str = "") -> ApiError:
        return cls._about(409, "Conflict", resource, name, group, before="Operation cannot be fulfilled on ",
                          after=f": {cause}")

    @classmethod
    def stale_update(cls, resource: str, name: str, group: str = "") -> ApiError:
        return cls.conflict(
            resource,
            name,
            "the object has been modified; please apply your "
            "changes to the latest version and try again",
            group,
        )

    @classmethod
    def bad_request(cls, message: str) -> ApiError:
        return cls(400, "BadRequest", message)

    @classmethod
    def invalid(cls, kind: str, name: str, errors: list[FieldError], group: str = "") -> ApiError:
        qualified_kind = f"{kind}.{group}" if group else kind
        return cls(
            422,
            "Invalid",
            f'{qualified_kind} "{name}" is invalid: {aggregate(errors)}',
            _details(name, group, kind, causes=[e.cause() for e in errors]),
        )

    @classmethod
    def forbidden(cls, resource: str, name: str, reason: str, group: str = "") -> ApiError:
        target = f'{qualified(resource, group)} "{name}"' if name else qualified(resource, group)
        return cls(
            403, "Forbidden", f"{target} is forbidden: {reason}", _details(name, group, resource)
        )

    @classmethod
    def expired(cls, message: str) -> ApiError:
        return cls(410, "Expired", message)

    @classmethod
    def gone(cls, message: str) -> ApiError:
        return cls(410, "Gone", message)

    @classmethod
    def too_large_resource_version(cls, requested: int, current: int) -> ApiError:
        # storage.NewTooLargeResourceVersionError: a 504 Timeout with a machine-readable cause.
        return cls(
            504,
            "Timeout",
            f"Timeout: Too large resource version: {requested}, current: {current}",
            {
                "causes": [
                    {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
                ],
                "retryAfterSeconds": 1,
            },
        )

    @classmethod
    def method_not_allowed(cls) -> ApiError:
        return cls(405, "MethodNotAllowed", GENERIC_MESSAGE_BY_CODE[405])

    @classmethod
    def unknown_path(cls) -> ApiError:
        return cls(404, "NotFound", GENERIC_MESSAGE_BY_CODE[404])

    @classmethod
    def unsupported_media_type(cls, content_type: str) -> ApiError:
        return cls(
            415,
            "UnsupportedMediaType",
            f"the body of the request was in an unknown format - accepted media types include: "
            f"application/json-patch+json, application/merge-patch+json, "
            f"application/apply-patch+yaml, application/strategic-merge-patch+json "
            f"(got {content_type!r})",
        )

    @classmethod
    def unsupported_media_type_for_custom_resource(cls) -> ApiError:
        """Custom resources have no Go struct to merge by: no strategic merge patch."""
        return cls(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: "
            "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
        )

    @classmethod
    def injected(cls, code: int, retry_after: int = 1, message: str | None = None) -> ApiError:
        """A fault chosen by a test; 429 and 503 carry Retry-After like the real priority-and-fairness filter."""
        reason = REASON_BY_CODE.get(code, "InternalError" if code >= 500 else "BadRequest")
        headers: dict[str, str] = {}
        details: dict[str, Any] | None = None
        if code in (429, 503):
            headers["Retry-After"] = str(retry_after)
            details = {"retryAfterSeconds": retry_after}
        if message is None:
            message = GENERIC_MESSAGE_BY_CODE.get(code, f"injected fault ({code})")
            if code == 500:
                message = "Internal error occurred: injected fault"
                details = {"causes": [{"message": "injected fault"}]}
        return cls(code, reason, message, details, headers)
