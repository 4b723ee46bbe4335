"""Both servers collect the young generation less often (runtime.tune_gc says why)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from extender.startup import GC_YOUNG_THRESHOLD
from extender.webhook import create_app
from tests.helpers import snapshot_settings


@pytest.fixture
def default_thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


def test_a_webhook_worker_raises_the_young_threshold_only(default_thresholds: None) -> None:
    app = create_app(snapshot_settings())
    try:
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, 10, 10)
    finally:
        app.extensions["extender"].stop()
