"""simulate's tests share explain's snapshots and fixtures (tests/explain/conftest.py)."""

from tests.explain.conftest import shipped, shipped_state, small, standalone  # noqa: F401 (fixtures)
