"""Test certificates made with `cryptography`: CAs, a server certificate for 127.0.0.1, client certificates."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import shutil
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_ONE_DAY = dt.timedelta(days=1)


@dataclass
class Issued:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def serial(self) -> int:
        return self.cert.serial_number

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        return self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption())

    def write(self, directory: Path, stem: str) -> tuple[Path, Path]:
        cert, key = directory / f"{stem}.crt", directory / f"{stem}.key"
        cert.write_bytes(self.cert_pem())
        key.write_bytes(self.key_pem())
        os.chmod(key, 0o600)
        return cert, key


#: Names a loopback server answers to; kube-apiserver's own self-signed certificate has them too.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost")


def _name(common_name: str, organizations: Iterable[str] = ()) -> x509.Name:
    """CN is the user name, each O a group (how kube-apiserver reads a client certificate)."""
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    return x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _san(hosts: Iterable[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def make_ca(common_name: str) -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name)).issuer_name(_name(common_name))
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - _ONE_DAY).not_valid_after(now + 30 * _ONE_DAY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Issued(cert, key)


def issue(ca: Issued, common_name: str, *, server: bool = False, client: bool = False,
          key: ec.EllipticCurvePrivateKey | None = None, days: int = 10,
          hosts: Iterable[str] = LOOPBACK_HOSTS, organizations: Iterable[str] = ()) -> Issued:
    """A leaf certificate: `server` for TLS serving on `hosts` (IPs or DNS names), `client` for
    client authentication as `common_name` in the groups `organizations`."""
    key = key or ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name, organizations)).issuer_name(ca.cert.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - _ONE_DAY).not_valid_after(now + days * _ONE_DAY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, key_cert_sign=False,
                                     crl_sign=False, content_commitment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
    )
    if server:
        builder = builder.add_extension(_san(hosts), critical=False)
    return Issued(builder.sign(ca.key, hashes.SHA256()), key)


@dataclass
class PKI:
    """Everything a TLS test needs, written under `directory`."""

    directory: Path
    ca: Issued
    server: Issued
    client: Issued
    other_ca: Issued
    stranger: Issued  # a client certificate from other_ca

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.crt"

    def client_context(self, who: Issued | None = None, *, trust: Path | None = None) -> ssl.SSLContext:
        """A client that verifies the server against our CA and presents `who` (or nothing)."""
        context = ssl.create_default_context(cafile=str(trust or self.ca_file))
        if who is not None:
            stem = f"client-{who.serial}"
            if not (self.directory / f"{stem}.crt").exists():
                who.write(self.directory, stem)
            context.load_cert_chain(self.directory / f"{stem}.crt", self.directory / f"{stem}.key")
        return context


def make_pki(directory: Path) -> PKI:
    ca, other_ca = make_ca("extender test CA"), make_ca("some other CA")
    pki = PKI(directory, ca, issue(ca, "extender-webhook", server=True),
              issue(ca, "system:kube-scheduler", client=True), other_ca,
              issue(other_ca, "system:kube-scheduler", client=True))
    pki.ca_file.write_bytes(ca.cert_pem())
    (directory / "other-ca.crt").write_bytes(other_ca.cert_pem())
    return pki


class SecretVolume:
    """Files laid out as the kubelet mounts a Secret (what cert-manager's rotations look like).

    `tls.crt` -> `..data/tls.crt`, `..data` -> `..<version>/`; an update writes a new
    version directory and swaps the `..data` symlink atomically.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.version = 0

    def path(self, name: str) -> Path:
        return self.directory / name

    def update(self, files: dict[str, bytes]) -> None:
        self.version += 1
        target = self.directory / f"..{self.version}"
        target.mkdir()
        for name, data in files.items():
            (target / name).write_bytes(data)
        staging = self.directory / "..data_tmp"
        staging.symlink_to(target.name)
        os.replace(staging, self.directory / "..data")
        previous = self.directory / f"..{self.version - 1}"
        if previous.is_dir():  # the kubelet deletes the old version right after the swap
            shutil.rmtree(previous)
        for name in files:
            link = self.directory / name
            if not link.is_symlink():
                link.symlink_to(Path("..data") / name)

    def put(self, server: Issued, ca: Issued, *, key: Issued | None = None) -> None:
        self.update({"tls.crt": server.cert_pem(), "tls.key": (key or server).key_pem(), "ca.crt": ca.cert_pem()})


def served_serial(port: int, context: ssl.SSLContext) -> int:
    """Open a new connection, complete the handshake, and return the server certificate's serial."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            der = tls.getpeercert(binary_form=True)
            # TLS 1.3: the server checks our certificate after its Finished; a request proves we got in.
            tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert tls.recv(12).startswith(b"HTTP/1.1 200"), "the server did not serve us"
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number
