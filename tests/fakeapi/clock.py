"""Timestamps as kube-apiserver writes them (RFC 3339, whole seconds, UTC)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


def now_rfc3339(offset: float = 0) -> str:
    """Now (plus ``offset`` seconds), formatted like metav1.Time."""
    return (datetime.now(UTC) + timedelta(seconds=offset)).strftime("%Y-%m-%dT%H:%M:%SZ")
