"""Fixtures every test package may use, defined once.

- ``apiserver``, ``kube``, ``fake_apiserver`` (tests.fakeapi.fixtures): the fake API server,
  or the real one under envtest when KUBEBUILDER_ASSETS is set.
- ``api_client``: an ApiClient on that server, built the production way.
- ``refused``: a kubeconfig whose user is refused some permissions, on either server.
- ``settings``, ``runtime``, ``app``, ``client``: the webhook over the shipped snapshot
  (a package overrides ``settings`` or ``runtime`` for another cluster).

Subdirectories need no plugin registration of their own: pytest loads this file for any
path below tests/, run alone or not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from extender.kube.client import build_api_client
from extender.settings import Settings
from extender.webhook import create_app
from extender.webhook.runtime import Runtime, build_runtime
from tests.helpers import snapshot_settings

pytest_plugins = ["tests.fakeapi.fixtures"]


@pytest.fixture
def api_client(apiserver: Any) -> Iterator[Any]:
    """An ApiClient built the production way: from the server's kubeconfig file."""
    client = build_api_client(kubeconfig=str(apiserver.kubeconfig))
    yield client
    client.close()


#: (verb, resource, subresource, group), as FakeApiServer.deny takes them.
Denial = tuple[str, str, str, str]


@pytest.fixture
def refused(apiserver: Any) -> Iterator[Callable[[Sequence[Denial], Sequence[dict[str, Any]]], str]]:
    """``refused(denied, granted)``: the kubeconfig the code under test must use to be refused
    ``denied``. The fake denies them to everybody through its authorizer; a real server has
    RBAC instead, so there the kubeconfig is a user of its own holding exactly ``granted``
    (RBAC rules, tests.fakeapi.rbac), which must leave ``denied`` out."""
    users: list[Any] = []

    def refuse(denied: Sequence[Denial], granted: Sequence[dict[str, Any]]) -> str:
        if apiserver.fake is not None:
            for verb, resource, subresource, group in denied:
                apiserver.fake.deny(verb, resource, subresource=subresource, group=group)
            return str(apiserver.kubeconfig)
        from tests.fakeapi.rbac import create_user

        user = create_user(apiserver.plane, apiserver.client, granted, prefix="refused")
        users.append(user)
        some = granted[0]  # RBAC reads roles through an informer: wait until it has this one
        resource, _, subresource = some["resources"][0].partition("/")
        user.wait_can(True, some["verbs"][0], resource, some["apiGroups"][0], subresource=subresource)
        return str(user.kubeconfig)

    yield refuse
    for user in users:
        user.delete()


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
