"""A tiny certificate authority for a test control plane, as envtest's ``tinyca`` does.

envtest (controller-runtime) does not let kube-apiserver invent its own self-signed
serving certificate: it makes a CA, issues the serving certificate from it, writes both
into the ``--cert-dir`` (``apiserver.crt``/``apiserver.key``) and puts the CA into the
kubeconfig, so every client verifies the server instead of skipping verification. The
same CA signs client certificates (``--client-ca-file``), so a test can add a user with
groups (``CN`` is the user name, each ``O`` a group) without a token file.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_DAY = dt.timedelta(days=1)
#: Names a loopback server answers to; kube-apiserver's own self-signed certificate has them too.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, PEM-encoded."""

    cert_pem: bytes
    key_pem: bytes

    def write(self, cert: Path, key: Path) -> tuple[Path, Path]:
        cert.write_bytes(self.cert_pem)
        key.write_bytes(self.key_pem)
        os.chmod(key, 0o600)
        return cert, key


def _subject(common_name: str, organizations: Iterable[str] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _san(hosts: Iterable[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


class CertificateAuthority:
    """An ECDSA CA valid for a week; issues serving and client certificates."""

    def __init__(self, common_name: str = "envtest-ca") -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(_subject(common_name))
            .issuer_name(_subject(common_name))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _DAY)
            .not_valid_after(now + 7 * _DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, key_cert_sign=True, crl_sign=True,
                    content_commitment=False, key_encipherment=False, data_encipherment=False,
                    key_agreement=False, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False
            )
            .sign(self._key, hashes.SHA256())
        )  # fmt: skip

    @property
    def cert_pem(self) -> bytes:
        return self._cert.public_bytes(serialization.Encoding.PEM)

    def write_cert(self, path: Path) -> Path:
        path.write_bytes(self.cert_pem)
        return path

    def issue(
        self,
        common_name: str,
        *,
        hosts: Iterable[str] = (),
        organizations: Iterable[str] = (),
        server: bool = False,
        client: bool = False,
    ) -> KeyPair:
        """A leaf certificate: ``server`` for TLS serving on ``hosts`` (IPs or DNS names),
        ``client`` for client authentication as ``common_name`` in ``organizations``."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        usages = [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
        usages += [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
        builder = (
            x509.CertificateBuilder()
            .subject_name(_subject(common_name, organizations))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _DAY)
            .not_valid_after(now + 7 * _DAY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, key_encipherment=False, key_cert_sign=False,
                    crl_sign=False, content_commitment=False, data_encipherment=False,
                    key_agreement=False, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
        )  # fmt: skip
        hosts = list(hosts)
        if hosts:
            builder = builder.add_extension(_san(hosts), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))

    def serving(self, hosts: Iterable[str] = LOOPBACK_HOSTS, common_name: str = "") -> KeyPair:
        hosts = list(hosts)
        return self.issue(common_name or hosts[0], hosts=hosts, server=True)

    def client(self, user: str, groups: Iterable[str] = ()) -> KeyPair:
        return self.issue(user, organizations=groups, client=True)
