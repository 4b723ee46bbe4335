"""The project's exception family.

Each layer raises its own kind so that adapters can map them without guessing:
`WireError` becomes an HTTP 400 with `{"Error": ...}`, `PolicyError` stops a policy
from loading (the old one stays), `ClusterError` keeps the API server's status so
the scheduling loop can tell a conflict (drop) from a transient failure (retry).
"""

from __future__ import annotations


class ExtenderError(Exception):
    """Base class for every error this project raises on purpose."""


class WireError(ExtenderError):
    """A request body that does not follow the extender/v1 wire contract."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class InvalidObject(ExtenderError, ValueError):
    """A Kubernetes object (pod, node) whose fields cannot be read; the message names the field."""


class QuantityError(InvalidObject):
    """A Kubernetes resource quantity that Kubernetes itself would refuse to parse."""


class PolicyError(ExtenderError):
    """A policy file or plugin configuration that cannot be used; `problems` lists each one."""

    def __init__(self, *problems: str) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class ClusterError(ExtenderError):
    """A failure talking to the API server; `status` is the HTTP code when there was one."""

    def __init__(self, message: str, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason

    @property
    def retryable(self) -> bool:
        """Conflicts and validation errors will fail again; server trouble may not."""
        return self.status is None or self.status in (429, 500, 502, 503, 504)


class ConflictError(ClusterError):
    """409: the object changed under us (pod already bound, UID mismatch, stale lease)."""


class GoneError(ClusterError):
    """410: a watch resourceVersion is too old; the caller must list again."""


class NotFoundError(ClusterError):
    """404: the object no longer exists."""
