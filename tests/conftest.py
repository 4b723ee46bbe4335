"""Fixtures every test package may use, defined once.

- ``apiserver``, ``kube``, ``fake_apiserver`` (tests.fakeapi.fixtures): the fake API server,
  or the real one under envtest when KUBEBUILDER_ASSETS is set.
- ``api_client``: an ApiClient on that server, built the production way.
- ``settings``, ``runtime``, ``app``, ``client``: the webhook over the shipped snapshot
  (a package overrides ``settings`` or ``runtime`` for another cluster).

Subdirectories need no plugin registration of their own: pytest loads this file for any
path below tests/, run alone or not.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from extender.kube.client import build_api_client
from extender.runtime import Runtime, build_runtime
from extender.settings import Settings
from extender.webhook import create_app
from tests.helpers import snapshot_settings

pytest_plugins = ["tests.fakeapi.fixtures"]


@pytest.fixture
def api_client(apiserver: Any) -> Iterator[Any]:
    """An ApiClient built the production way: from the server's kubeconfig file."""
    client = build_api_client(kubeconfig=str(apiserver.kubeconfig))
    yield client
    client.close()


@pytest.fixture
def settings() -> Settings:
    """The webhook's settings: the shipped snapshot, defaults otherwise."""
    return snapshot_settings()


@pytest.fixture
def runtime(settings: Settings) -> Iterator[Runtime]:
    """The runtime of ``settings``, built and not started (``app`` starts it)."""
    rt = build_runtime(settings)
    yield rt
    rt.stop()


@pytest.fixture
def app(settings: Settings, runtime: Runtime) -> Flask:
    return create_app(settings, runtime=runtime)


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()
