"""The Helm chart (deploy/helm/scheduler-extender) rendered with `helm template`, per mode.

helm is found at $HELM, on PATH, or where deploy/helm/install-helm.sh builds it (beside the
control-plane binaries); without it the tests skip, saying how to get it. Nothing here
imports pytest but :func:`helm`, which skips.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from extender.checks.permissions import DEFAULT_NAMESPACE

from . import DEPLOY

CHART = DEPLOY / "helm" / "scheduler-extender"
HELM_VERSION = "v3.22.0"
RELEASE = "scheduler-extender"
NO_HELM = (
    f"helm is not installed: `bash deploy/helm/install-helm.sh` builds helm {HELM_VERSION} from its "
    "Go module (needs go), or set HELM to a helm v3 binary"
)

#: Each mode of the chart, as values, and the kustomization of deploy/ that installs the same.
MODES: dict[str, tuple[dict[str, Any], str]] = {
    "all": ({}, ""),
    "webhook": ({"standalone": {"enabled": False}}, "overlays/webhook"),
    "standalone": ({"webhook": {"enabled": False}, "kubeScheduler": {"enabled": False}}, "overlays/standalone"),
}


def helm_path() -> str | None:
    """The helm binary to use, or None."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    for candidate in (
        os.environ.get("HELM"),
        shutil.which("helm"),
        str(cache / "k8s-test-binaries" / f"helm-{HELM_VERSION}" / "helm"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def helm() -> str:
    """The helm binary, or skip the calling test saying how to get one."""
    import pytest

    path = helm_path()
    if path is None:
        pytest.skip(NO_HELM)
    return path


def run_helm(*args: str, values: dict[str, Any] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`helm ARGS -f <values>`; the values go through a file, so types stay as written."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as file:
        yaml.safe_dump(values or {}, file)
        file.flush()
        return subprocess.run([helm(), *args, "-f", file.name], capture_output=True, text=True,
                              timeout=timeout, check=False)  # fmt: skip


@functools.cache
def _template(values_json: str, namespace: str, tests: bool) -> tuple[dict[str, Any], ...]:
    args = ["template", RELEASE, str(CHART), "-n", namespace]
    if not tests:
        args.append("--skip-tests")
    result = run_helm(*args, values=json.loads(values_json))
    if result.returncode != 0:
        raise AssertionError(f"helm template failed:\n{result.stderr}")
    return tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)


def template(values: dict[str, Any] | None = None, *, namespace: str = DEFAULT_NAMESPACE,
             tests: bool = False) -> list[dict[str, Any]]:
    """The documents `helm template` renders with these values (fresh copies); the `helm test`
    hook pod only with ``tests``."""
    return copy.deepcopy(list(_template(json.dumps(values or {}, sort_keys=True), namespace, tests)))


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` merged in, key by key (as Helm merges -f files)."""
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
