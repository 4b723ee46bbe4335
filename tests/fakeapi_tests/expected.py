"""What kube-apiserver v1.36 sends, written out by hand for the fake's tests to compare against
(never built with the fake's own code, so a mistake there cannot hide in both)."""

from __future__ import annotations

from typing import Any


def status(code: int, message: str = "", reason: str = "", details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A metav1.Status as the server serializes it: ``status`` is Success below 300, Failure
    otherwise; ``message``, ``reason`` and ``details`` appear only when set (omitempty)."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Success" if code < 300 else "Failure", "code": code}
    if message:
        body["message"] = message
    if reason:
        body["reason"] = reason
    if details is not None:
        body["details"] = details
    return body


def binding(pod: str, /, **target: str) -> dict[str, Any]:
    """A v1 Binding of ``pod`` to ``target`` (an ObjectReference's fields: the node)."""
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod}, "target": target}
