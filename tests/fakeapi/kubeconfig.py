"""Kubeconfig files for the fake and for envtest, so code under test loads its config the
normal way (``kubernetes.config.load_kube_config(config_file=...)``) in both cases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.helpers import present


def kubeconfig_dict(
    server: str,
    *,
    token: str | None = None,
    insecure: bool = False,
    ca_file: str | None = None,
    client_cert: str | None = None,
    client_key: str | None = None,
    context: str = "test",
) -> dict[str, Any]:
    cluster = {"server": server, **present(**{"insecure-skip-tls-verify": insecure, "certificate-authority": ca_file})}
    user = present(token=token, **{"client-certificate": client_cert, "client-key": client_key})
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": cluster}],
        "users": [{"name": context, "user": user}],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": context, "user": context, "namespace": "default"},
            }
        ],
        "current-context": context,
        "preferences": {},
    }


def write_kubeconfig(path: str | Path, server: str, **options: Any) -> Path:
    """Write a single-context kubeconfig; ``options`` as for :func:`kubeconfig_dict`."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(kubeconfig_dict(server, **options), sort_keys=False))
    target.chmod(0o600)
    return target
