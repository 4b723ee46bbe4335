from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from flask.testing import FlaskClient

from extender.settings import Settings
from extender.webhook import create_app
from extender.webhook.runtime import Runtime, build_runtime
from tests.helpers import SNAPSHOT, snapshot_settings
from tests.security.certs import PKI, make_pki


class RecordingBinder:
    """Wraps the runtime's binder and remembers every call that reached it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.kind = getattr(inner, "kind", "recording")
        self.calls: list[tuple[str, str, str, str]] = []

    def bind(self, namespace: str, name: str, uid: str, node: str, *,
             annotations: Mapping[str, str] | None = None) -> None:
        self.calls.append((namespace, name, uid, node))
        self.inner.bind(namespace, name, uid, node, annotations=annotations)

    def prebind(self, actions: Any) -> None:
        self.inner.prebind(actions)


class Webhook:
    """A Flask test client over the embedded snapshot, with the binder recorded."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.runtime: Runtime = build_runtime(settings)
        self.binder = RecordingBinder(self.runtime.binder)
        self.runtime.binder = self.binder
        self.app = create_app(settings, runtime=self.runtime)
        self.client: FlaskClient = self.app.test_client()


@pytest.fixture
def webhook_factory() -> Iterator[Callable[..., Webhook]]:
    made: list[Webhook] = []

    def make(**overrides: Any) -> Webhook:
        hook = Webhook(snapshot_settings(**overrides))
        made.append(hook)
        return hook

    yield make
    for hook in made:
        hook.runtime.stop()


@pytest.fixture
def webhook(webhook_factory: Callable[..., Webhook]) -> Webhook:
    return webhook_factory()


@pytest.fixture(scope="session")
def snapshot_objects() -> dict[str, dict[str, Any]]:
    """Raw snapshot objects by "Kind/namespace/name" (nodes: "Node/name")."""
    objects = {}
    for item in yaml.safe_load(SNAPSHOT.read_text())["items"]:
        meta = item["metadata"]
        key = f"Pod/{meta.get('namespace', 'default')}/{meta['name']}" if item["kind"] == "Pod" \
            else f"Node/{meta['name']}"
        objects[key] = item
    return objects


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    return make_pki(Path(tmp_path_factory.mktemp("pki")))
