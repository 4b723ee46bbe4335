"""Tests of what ships besides the Python code: deploy/, the Dockerfile, config/ examples.

`render()` runs `kubectl kustomize` once per directory and caches the parsed
documents; the tests skip (not fail) where kubectl is not installed.
"""

from __future__ import annotations

import copy
import functools
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CONFIG = ROOT / "config"

#: Every directory `kubectl kustomize` must render, relative to deploy/.
KUSTOMIZATIONS = ("", "overlays/webhook", "overlays/standalone")

IMAGE = "ghcr.io/example/scheduler-extender:0.1.0"


def kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        pytest.skip("kubectl is not on PATH: deploy/ is rendered with `kubectl kustomize`")
    return path


def strict_models() -> Any:
    """The kubernetes client's models module, or skip the calling test when its models do
    not forbid unknown fields (the offline schema checks rely on that)."""
    import kubernetes
    from kubernetes import client

    if "extra" not in getattr(client.V1Deployment, "model_config", {}):
        pytest.skip(f"kubernetes {kubernetes.__version__}'s models do not forbid unknown fields "
                    "(newer clients' pydantic models do: pip install -U kubernetes)")
    return client


#: The API version of every kind deploy/ and the chart ship; the model is the client's V1<Kind>.
API_VERSIONS = {
    "Namespace": "v1", "ServiceAccount": "v1", "ConfigMap": "v1", "Secret": "v1", "Service": "v1", "Pod": "v1",
    "Deployment": "apps/v1", "PodDisruptionBudget": "policy/v1", "NetworkPolicy": "networking.k8s.io/v1",
    "ClusterRole": "rbac.authorization.k8s.io/v1", "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
    "Role": "rbac.authorization.k8s.io/v1", "RoleBinding": "rbac.authorization.k8s.io/v1",
    "CustomResourceDefinition": "apiextensions.k8s.io/v1",
}  # fmt: skip


def validate_strictly(docs: Iterable[dict[str, Any]]) -> None:
    """The kubernetes client's models (pydantic, extra fields forbidden) as an offline schema:
    each document must be of a kind in API_VERSIONS, at its version, and validate as its model
    (which raises on unknown fields and wrong types; from_dict would drop unknown ones)."""
    client = strict_models()
    for doc in docs:
        name = f"{doc['kind']} {doc['metadata']['name']}"
        assert doc["apiVersion"] == API_VERSIONS[doc["kind"]], f"{name}: apiVersion {doc['apiVersion']}"
        getattr(client, f"V1{doc['kind']}").model_validate(doc)


@functools.cache
def _render(relative: str) -> tuple[dict[str, Any], ...]:
    result = subprocess.run(
        [kubectl(), "kustomize", str(DEPLOY / relative)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"kubectl kustomize deploy/{relative} failed:\n{result.stderr}")
    return tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)


def render(relative: str = "") -> list[dict[str, Any]]:
    """The documents `kubectl kustomize deploy/<relative>` renders (fresh copies)."""
    return copy.deepcopy(list(_render(relative)))


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    """Documents of `kind`; with `name`, those whose name is it or starts with `name-`
    (generated ConfigMaps carry a hash suffix)."""
    out = []
    for doc in docs:
        if doc.get("kind") != kind:
            continue
        doc_name = doc["metadata"]["name"]
        if name is None or doc_name == name or doc_name.startswith(name + "-"):
            out.append(doc)
    return out


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = find(docs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]
