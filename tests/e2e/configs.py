"""The shipped examples in config/, rendered for a test: same file, local addresses.

A test must run what a user would deploy, so nothing is written from scratch here: each
function loads a file from config/ and changes only what cannot be the same on loopback
(the kubeconfig, the extender's URL, certificate paths, the schedulerName) or what the
test varies on purpose (nodeCacheCapable, bindVerb). The result still has to pass
``extender check`` (tests/e2e/test_webhook_extender.py checks that too).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from tests.fakeapi.pki import CertificateAuthority

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config"

HTTP_EXAMPLE = "kube-scheduler-http.yaml"
MTLS_EXAMPLE = "kube-scheduler-mtls.yaml"
MANAGED_RESOURCES_EXAMPLE = "kube-scheduler-managed-resources.yaml"


def load(name: str) -> dict[str, Any]:
    return yaml.safe_load((CONFIG / name).read_text())


@dataclass(frozen=True)
class MutualTLS:
    """Files for the webhook's mutual TLS, from a CA of the extender's own (as
    docs/security.md asks: never the cluster CA). ``server_name`` is the name the example's
    ``tlsConfig.serverName`` expects; the serving certificate also covers 127.0.0.1."""

    ca: Path  # kube-scheduler's tlsConfig.caFile, and the webhook's --client-ca
    server_cert: Path
    server_key: Path
    client_cert: Path  # kube-scheduler's tlsConfig.certFile
    client_key: Path

    @classmethod
    def create(cls, directory: Path, server_name: str) -> MutualTLS:
        directory.mkdir(parents=True, exist_ok=True)
        ca = CertificateAuthority("extender-webhook-ca")
        ca.write_cert(directory / "ca.crt")
        ca.serving([server_name, "127.0.0.1"]).write(directory / "tls.crt", directory / "tls.key")
        ca.client("system:kube-scheduler").write(directory / "client.crt", directory / "client.key")
        return cls(
            directory / "ca.crt", directory / "tls.crt", directory / "tls.key",
            directory / "client.crt", directory / "client.key",
        )  # fmt: skip


def kube_scheduler_config(
    example: str,
    *,
    kubeconfig: Path,
    scheduler_name: str,
    port: int,
    node_cache: bool | None = None,
    bind: bool | None = None,
    tls: MutualTLS | None = None,
) -> dict[str, Any]:
    """config/<example> for a kube-scheduler on loopback: its own kubeconfig, leader
    election off, the profile renamed, the extender at 127.0.0.1:``port`` (same scheme
    and path), ``nodeCacheCapable`` set and ``bindVerb`` dropped when asked, and the
    example's certificate paths replaced with ``tls``'s files (its serverName is kept)."""
    config = load(example)
    config["clientConnection"] = {**config.get("clientConnection", {}), "kubeconfig": str(kubeconfig)}
    config["leaderElection"] = {"leaderElect": False}
    (profile,) = config["profiles"]
    profile["schedulerName"] = scheduler_name
    (extender,) = config["extenders"]
    url = urlsplit(extender["urlPrefix"])
    extender["urlPrefix"] = f"{url.scheme}://127.0.0.1:{port}{url.path}"
    if node_cache is not None:
        extender["nodeCacheCapable"] = node_cache
    if bind is False:
        extender.pop("bindVerb", None)
    if "tlsConfig" in extender:
        if tls is None:
            raise ValueError(f"{example} uses TLS: pass the certificate files")
        extender["tlsConfig"].update(
            certFile=str(tls.client_cert), keyFile=str(tls.client_key), caFile=str(tls.ca)
        )
    return config


def server_name(example: str) -> str:
    """The tlsConfig.serverName of an example (what its serving certificate must name)."""
    (extender,) = load(example)["extenders"]
    return str(extender["tlsConfig"]["serverName"])


def webhook_policy(rules: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """config/policy-webhook.yaml with these NodeLabels rules (its example tenancy rules)."""
    policy = load("policy-webhook.yaml")
    for entry in policy["filters"]:
        if entry["name"] == "NodeLabels":
            entry["args"] = {"rules": [dict(r) for r in rules]}
            break
    else:  # pragma: no cover - the shipped file has it
        raise AssertionError("config/policy-webhook.yaml has no NodeLabels filter")
    return policy


def write_yaml(path: Path, document: Mapping[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(copy.deepcopy(dict(document)), sort_keys=False))
    return path
