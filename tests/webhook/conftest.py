from __future__ import annotations

from collections.abc import Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient

from extender.runtime import Runtime, build_runtime
from extender.settings import Settings
from extender.webhook import create_app
from tests.helpers import SNAPSHOT


@pytest.fixture
def settings() -> Settings:
    return Settings(source="snapshot", snapshot=str(SNAPSHOT))


@pytest.fixture
def runtime(settings: Settings) -> Iterator[Runtime]:
    rt = build_runtime(settings)
    yield rt
    rt.stop()


@pytest.fixture
def app(settings: Settings, runtime: Runtime) -> Flask:
    return create_app(settings, runtime=runtime)


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()
