"""Cluster DNS for the e2e node: ``<service>.<namespace>.svc.<domain>`` to the Service's ClusterIP.

The chart's second kube-scheduler calls the webhook by its Service's name
(``extender-webhook.<namespace>.svc``), as it would with CoreDNS. No CoreDNS image can be
pulled here, so this answers those names itself: a UDP server on a free port of the host,
reached by pods through the ``kube-dns`` Service (tests.e2e.node makes it, with an
EndpointSlice pointing here). A records only, from a GET of the Service per query; AAAA and
other types of a Service's name get an empty answer, every other name NXDOMAIN (what
CoreDNS' kubernetes plugin says for a name of the cluster domain that does not exist).
Nothing here imports pytest.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import struct
import threading
from typing import Any

TYPE_A = 1
NOERROR, FORMERR, NXDOMAIN = 0, 1, 3


def parse_query(packet: bytes) -> tuple[int, int, str, int, bytes]:
    """(id, flags, name, qtype, the question's bytes) of a DNS query with one question."""
    if len(packet) < 12:
        raise ValueError("short header")
    ident, flags, qdcount = struct.unpack("!HHH", packet[:6])
    if qdcount != 1:
        raise ValueError(f"{qdcount} questions")
    labels, offset = [], 12
    while True:
        length = packet[offset]
        offset += 1
        if length == 0:
            break
        if length > 63:
            raise ValueError("compressed or bad label in a question")
        labels.append(packet[offset:offset + length].decode("ascii", "replace").lower())
        offset += length
    qtype, _qclass = struct.unpack("!HH", packet[offset:offset + 4])
    return ident, flags, ".".join(labels), qtype, packet[12:offset + 4]


def answer(ident: int, flags: int, question: bytes, rcode: int, addresses: list[str]) -> bytes:
    """A response to the question: the A records ``addresses`` (TTL 5 s), or ``rcode``."""
    reply_flags = 0x8000 | (flags & 0x0100) | 0x0080 | 0x0400 | rcode  # QR, RD copied, RA, AA
    out = struct.pack("!HHHHHH", ident, reply_flags, 1 if question else 0, len(addresses), 0, 0) + question
    for address in addresses:
        out += struct.pack("!HHHIH", 0xC00C, TYPE_A, 1, 5, 4) + ipaddress.IPv4Address(address).packed
    return out


class ClusterDNS:
    """The server; ``kube`` is a KubeTestClient (used from the server's thread only)."""

    def __init__(self, kube: Any, domain: str = "cluster.local", host: str = "0.0.0.0") -> None:
        self.kube = kube
        self.domain = domain.strip(".").lower()
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind((host, 0))
        self._socket.settimeout(0.3)
        self.port: int = self._socket.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="cluster-dns", daemon=True)
        self.queries = 0

    def start(self) -> ClusterDNS:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._socket.close()

    def resolve(self, name: str) -> list[str] | None:
        """The addresses of a Service name; None when no such Service (NXDOMAIN)."""
        suffix = f".svc.{self.domain}"
        if not name.endswith(suffix):
            return None
        parts = name[: -len(suffix)].split(".")
        if len(parts) != 2:
            return None
        service, namespace = parts
        try:
            spec = self.kube.call("GET", f"/api/v1/namespaces/{namespace}/services/{service}").get("spec") or {}
        except Exception:
            return None
        cluster_ip = spec.get("clusterIP") or ""
        return [cluster_ip] if cluster_ip and cluster_ip != "None" else []

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                packet, peer = self._socket.recvfrom(4096)
            except (TimeoutError, OSError):
                continue
            self.queries += 1
            try:
                ident, flags, name, qtype, question = parse_query(packet)
            except (ValueError, IndexError, struct.error):
                with contextlib.suppress(OSError):
                    self._socket.sendto(answer(int.from_bytes(packet[:2] or b"\0\0", "big"), 0, b"", FORMERR, []), peer)
                continue
            addresses = self.resolve(name)
            if addresses is None:
                reply = answer(ident, flags, question, NXDOMAIN, [])
            else:
                reply = answer(ident, flags, question, NOERROR, addresses if qtype == TYPE_A else [])
            with contextlib.suppress(OSError):
                self._socket.sendto(reply, peer)
