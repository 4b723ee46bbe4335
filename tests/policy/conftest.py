"""Fixtures for the policy tests: a fresh registry each time (no shared state between tests)."""

from __future__ import annotations

import pytest

from extender.policy.registry import Registry, default_registry


@pytest.fixture
def registry() -> Registry:
    return default_registry()
