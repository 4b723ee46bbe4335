"""A tiny certificate authority for a test control plane, as envtest's ``tinyca`` does.

envtest (controller-runtime) does not let kube-apiserver invent its own self-signed
serving certificate: it makes a CA, issues the serving certificate from it, writes both
into the ``--cert-dir`` (``apiserver.crt``/``apiserver.key``) and puts the CA into the
kubeconfig, so every client verifies the server instead of skipping verification. The
same CA signs client certificates (``--client-ca-file``), so a test can add a user with
groups (``CN`` is the user name, each ``O`` a group) without a token file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tests.security.certs import LOOPBACK_HOSTS, Issued, issue, make_ca

__all__ = ["LOOPBACK_HOSTS", "CertificateAuthority", "KeyPair"]


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, PEM-encoded."""

    cert_pem: bytes
    key_pem: bytes

    @classmethod
    def of(cls, issued: Issued) -> KeyPair:
        return cls(issued.cert_pem(), issued.key_pem())

    def write(self, cert: Path, key: Path) -> tuple[Path, Path]:
        cert.write_bytes(self.cert_pem)
        key.write_bytes(self.key_pem)
        os.chmod(key, 0o600)
        return cert, key


class CertificateAuthority:
    """An ECDSA CA (tests/security/certs.py makes the certificates); issues serving and client certificates."""

    def __init__(self, common_name: str = "envtest-ca") -> None:
        self._ca = make_ca(common_name)

    @property
    def cert_pem(self) -> bytes:
        return self._ca.cert_pem()

    def write_cert(self, path: Path) -> Path:
        path.write_bytes(self.cert_pem)
        return path

    def serving(self, hosts: Iterable[str] = LOOPBACK_HOSTS, common_name: str = "") -> KeyPair:
        hosts = list(hosts)
        return KeyPair.of(issue(self._ca, common_name or hosts[0], server=True, hosts=hosts))

    def client(self, user: str, groups: Iterable[str] = ()) -> KeyPair:
        return KeyPair.of(issue(self._ca, user, client=True, organizations=groups))
