"""Short API requests over kept-alive HTTP/1.1 connections written and read by hand.

Why not urllib3 for these: a bind or an Event sent through urllib3 costs about 280 µs of
this process's CPU (urllib3's layers over http.client, which parses every reply's headers
with the email package); the same request written and read here, on the same kind of
kept-alive TLS connection, costs about 50 µs (kube-apiserver v1.36 on loopback). The
standalone scheduler sends two such requests for every pod it places (the Binding and the
Scheduled Event) while sharing the machine's cores with the API server, so the difference
is close to half of its CPU per pod.

The client is deliberately narrow: one origin, requests whose reply is read whole, no
redirects, no compression (it never offers any). Watches stream through urllib3, and so does
every request of a client that reaches the API server through a proxy or with custom socket
options (`for_client` returns None then). The TLS settings are the kubernetes client
Configuration's, read as its RESTClientObject reads them for urllib3.
"""

from __future__ import annotations

import logging
import select
import socket
import ssl
import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

MAX_HEAD = 64 * 1024  # status line and headers; kube-apiserver sends well under 1 kB
_RECV = 256 * 1024
_CRLF = b"\r\n"
_END_OF_HEAD = b"\r\n\r\n"
# Safe to send again when a kept-alive connection turns out dead before any reply byte.
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


class TransportError(Exception):
    """The exchange did not complete: refused, reset, timed out, or a reply that is not HTTP."""


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    headers: dict[str, str]  # names in lower case; repeated fields joined with ", "
    body: bytes


class _Connection:
    """One socket and the bytes read from it but not yet consumed."""

    __slots__ = ("sock", "buffer", "received")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self.received = False  # any byte of the current reply

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def dropped(self) -> bool:
        """Whether an idle connection is unusable: the server closed it (readable at EOF) or
        sent something unasked. Either way the next reply could not be trusted."""
        if self.buffer:
            return True
        if isinstance(self.sock, ssl.SSLSocket) and self.sock.pending():
            return True
        try:
            poller = select.poll()  # not select(): it refuses descriptors above 1023
            poller.register(self.sock, select.POLLIN)
            return bool(poller.poll(0))
        except (OSError, ValueError):
            return True

    def _fill(self) -> None:
        chunk = self.sock.recv(_RECV)
        if not chunk:
            raise TransportError("the API server closed the connection")
        self.received = True
        self.buffer += chunk

    def read_until(self, separator: bytes, limit: int) -> bytes:
        """Bytes up to `separator` (consumed, not returned)."""
        start = 0
        while True:
            end = self.buffer.find(separator, start)
            if end >= 0:
                data = bytes(self.buffer[:end])
                del self.buffer[:end + len(separator)]
                return data
            if len(self.buffer) > limit:
                raise TransportError(f"reply line or head longer than {limit} bytes")
            start = max(0, len(self.buffer) - len(separator) + 1)
            self._fill()

    def read_exact(self, size: int) -> bytes:
        while len(self.buffer) < size:
            self._fill()
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data

    def read_to_close(self) -> bytes:
        while True:
            chunk = self.sock.recv(_RECV)
            if not chunk:
                data = bytes(self.buffer)
                self.buffer.clear()
                return data
            self.buffer += chunk


def _parse_head(head: bytes) -> tuple[int, str, dict[str, str]]:
    """(status, HTTP version, headers) of a reply head, or TransportError naming what is wrong."""
    status_line, _, fields = head.partition(_CRLF)
    version, _, rest = status_line.partition(b" ")
    code = rest[:3]
    if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise TransportError(f"not an HTTP/1.x reply: {status_line[:80]!r}")
    headers: dict[str, str] = {}
    if fields:
        for line in fields.split(_CRLF):
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip():
                raise TransportError(f"malformed reply header: {line[:80]!r}")
            key = name.decode("latin-1").lower()
            text = value.strip().decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return int(code), version.decode("ascii"), headers


def _read_chunked(connection: _Connection) -> bytes:
    parts: list[bytes] = []
    while True:
        line = connection.read_until(_CRLF, 4096)
        try:
            size = int(line.partition(b";")[0].strip(), 16)
        except ValueError:
            raise TransportError(f"malformed chunk size: {line[:40]!r}") from None
        if size < 0:
            raise TransportError(f"malformed chunk size: {line[:40]!r}")
        if size == 0:
            while connection.read_until(_CRLF, MAX_HEAD):  # trailer fields, then the blank line
                pass
            return b"".join(parts)
        parts.append(connection.read_exact(size))
        if connection.read_exact(2) != _CRLF:
            raise TransportError("chunk not followed by CRLF")


def _read_reply(connection: _Connection, method: str) -> tuple[Reply, bool]:
    """The reply and whether the connection may carry another request (RFC 9112 §6.3 framing)."""
    while True:
        status, version, headers = _parse_head(connection.read_until(_END_OF_HEAD, MAX_HEAD))
        if status >= 200 or status == 101:
            break  # 1xx interim replies precede the real one
    reusable = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
    if method == "HEAD" or status < 200 or status in (204, 304):
        return Reply(status, headers, b""), reusable and status != 101
    coding = headers.get("transfer-encoding")
    if coding is not None:
        if coding.lower().rsplit(",", 1)[-1].strip() != "chunked":
            return Reply(status, headers, connection.read_to_close()), False
        return Reply(status, headers, _read_chunked(connection)), reusable
    length = headers.get("content-length")
    if length is None:
        return Reply(status, headers, connection.read_to_close()), False
    if not length.isdigit():
        raise TransportError(f"malformed Content-Length: {length[:40]!r}")
    return Reply(status, headers, connection.read_exact(int(length))), reusable


class KeepAlivePool:
    """Kept-alive connections to one origin, at most `maxsize` of them idle at a time.

    Threads take a connection each for one exchange. When more threads talk at once than
    `maxsize`, extra connections are opened and closed after their exchange, with the same
    warning urllib3 gives ("Connection pool is full"): size the pool for the concurrency.
    """

    def __init__(self, scheme: str, host: str, port: int, *, ssl_context: ssl.SSLContext | None = None,
                 server_hostname: str | None = None, maxsize: int = 10, path_prefix: str = "",
                 default_headers: Iterable[tuple[str, str]] = ()) -> None:
        if scheme not in ("http", "https"):
            raise ValueError(f"unsupported scheme {scheme!r}")
        if scheme == "https" and ssl_context is None:
            raise ValueError("https needs an ssl_context")
        self.host = host
        self.port = port
        self.ssl_context = ssl_context if scheme == "https" else None
        self.server_hostname = server_hostname or host
        self.maxsize = max(1, maxsize)
        self.path_prefix = path_prefix.rstrip("/")  # a server behind a path (https://proxy/k8s/clusters/x)
        authority = f"[{host}]" if ":" in host else host
        default_port = 443 if scheme == "https" else 80
        self._head = _header_block([("Host", authority if port == default_port else f"{authority}:{port}"),
                                    *default_headers])
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        self.opened = 0  # connections opened so far
        self.discarded = 0  # connections closed only because the idle pool was full

    def request(self, method: str, target: str, headers: Iterable[tuple[str, str]] = (), body: bytes | None = None,
                *, timeout: tuple[float, float] = (5.0, 30.0)) -> Reply:
        """Send one request for `target` (path and query) and read the whole reply.

        Raises TransportError when the exchange fails. A request on a kept-alive connection
        that fails before any reply byte is sent again on a new connection when the method is
        idempotent (the server may have closed the connection just as it was taken)."""
        message = self._message(method, target, headers, body)
        connection, reused = self._take(timeout[0])
        try:
            return self._exchange(connection, method, message, timeout[1])
        except (OSError, TransportError) as exc:
            if not (reused and not connection.received and method in _IDEMPOTENT):
                raise _transport_error(exc) from None
        connection = self._connect(timeout[0])
        try:
            return self._exchange(connection, method, message, timeout[1])
        except (OSError, TransportError) as exc:
            raise _transport_error(exc) from None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def _message(self, method: str, target: str, headers: Iterable[tuple[str, str]], body: bytes | None) -> bytes:
        if not target.startswith("/") or any(c in target for c in " \r\n"):
            raise ValueError(f"invalid request target {target[:80]!r}")
        lines = [f"{method} {self.path_prefix}{target} HTTP/1.1\r\n".encode("ascii"), self._head, _header_block(headers)]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(b"Content-Length: %d\r\n" % len(body or b""))
        lines.append(_CRLF)
        if body:
            lines.append(body)
        return b"".join(lines)

    def _exchange(self, connection: _Connection, method: str, message: bytes, read_timeout: float) -> Reply:
        try:
            connection.received = False
            connection.sock.settimeout(read_timeout)
            connection.sock.sendall(message)
            reply, reusable = _read_reply(connection, method)
        except BaseException:
            connection.close()
            raise
        if reusable:
            self._give_back(connection)
        else:
            connection.close()
        return reply

    def _take(self, connect_timeout: float) -> tuple[_Connection, bool]:
        while True:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                return self._connect(connect_timeout), False
            if not connection.dropped():
                return connection, True
            connection.close()

    def _give_back(self, connection: _Connection) -> None:
        with self._lock:
            if self._closed:
                full = False
            elif len(self._idle) < self.maxsize:
                self._idle.append(connection)
                return
            else:
                full = True
                self.discarded += 1
        connection.close()
        if full:
            log.warning("Connection pool is full, discarding connection: %s. Connection pool size: %d",
                        self.host, self.maxsize)

    def _connect(self, timeout: float) -> _Connection:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.ssl_context is not None:
                try:
                    sock = self.ssl_context.wrap_socket(sock, server_hostname=self.server_hostname)
                except BaseException:
                    sock.close()
                    raise
        except OSError as exc:
            raise _transport_error(exc) from None
        with self._lock:
            self.opened += 1
        return _Connection(sock)


def _transport_error(exc: BaseException) -> TransportError:
    if isinstance(exc, TransportError):
        return exc
    if isinstance(exc, TimeoutError | socket.timeout):
        return TransportError("timed out")
    return TransportError(f"{type(exc).__name__}: {exc}")


def _header_block(headers: Iterable[tuple[str, str]]) -> bytes:
    lines = []
    for name, value in headers:
        text = str(value)
        if any(c in name for c in ":\r\n ") or "\r" in text or "\n" in text:
            raise ValueError(f"invalid header {name!r}")
        lines.append(f"{name}: {text}\r\n")
    return "".join(lines).encode("latin-1")


# ---- pools for kubernetes client configurations ---------------------------------

_pools: weakref.WeakKeyDictionary[Any, KeepAlivePool | None] = weakref.WeakKeyDictionary()
_pools_lock = threading.Lock()


def for_client(api_client: Any) -> KeepAlivePool | None:
    """The pool for a kubernetes ApiClient, made on first use and closed with the client;
    None when its configuration needs what only urllib3 does here (a proxy, socket options)."""
    try:
        return _pools[api_client]
    except KeyError:
        pass
    with _pools_lock:
        if api_client not in _pools:
            pool = pool_for(api_client.configuration,
                            default_headers=[(k, v) for k, v in api_client.default_headers.items()
                                             if k.lower() not in ("host", "content-length")])
            _pools[api_client] = pool
            if pool is not None:
                weakref.finalize(api_client, pool.close)
        return _pools[api_client]


def pool_for(configuration: Any, *, default_headers: Iterable[tuple[str, str]] = ()) -> KeepAlivePool | None:
    """A pool reaching `configuration.host` with its TLS settings, or None (see `for_client`)."""
    from kubernetes.client.rest import should_bypass_proxies

    if configuration.proxy and not should_bypass_proxies(configuration.host, configuration.no_proxy or ""):
        return None
    if configuration.socket_options is not None or getattr(configuration, "keep_alive", False):
        return None
    origin = urlsplit(configuration.host)
    if origin.scheme not in ("http", "https") or not origin.hostname:
        return None
    port = origin.port or (443 if origin.scheme == "https" else 80)
    context = ssl_context(configuration) if origin.scheme == "https" else None
    server_hostname = configuration.tls_server_name or None
    if isinstance(configuration.assert_hostname, str) and configuration.assert_hostname:
        server_hostname = server_hostname or configuration.assert_hostname
    return KeepAlivePool(origin.scheme, origin.hostname, port, ssl_context=context,
                         server_hostname=server_hostname,
                         maxsize=configuration.connection_pool_maxsize or 4, path_prefix=origin.path,
                         default_headers=default_headers)


def ssl_context(configuration: Any) -> ssl.SSLContext:
    """The client's TLS: its CA (file or data; else the system's), client certificate, and
    verification switches (verify_ssl, assert_hostname=False), as urllib3 applies them."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None,
                                         cadata=getattr(configuration, "ca_cert_data", None) or None)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif configuration.assert_hostname is False:
        context.check_hostname = False
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    return context
