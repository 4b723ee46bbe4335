"""TLS for the webhook: one SSLContext per worker, rebuilt when the certificate files change.

How gunicorn 27 uses TLS: every accepted connection goes through
`gunicorn.sock.ssl_wrap_socket`, which calls the `ssl_context(config,
default_ssl_context_factory)` hook *per connection*; the default hook builds a brand-new
SSLContext from disk each time (parse the key, the chain and the CA bundle). That does
pick up new files, but costs a context build on every connection and, because every
connection gets a different context, TLS session resumption never works.

`ContextCache` keeps one context per process and rebuilds it only when one of the files
changes. The change check is an `os.stat` of each file (following symlinks, so the
`..data` swap of a Kubernetes Secret volume, which is how cert-manager rotations reach
the pod, is seen as new inodes), done at most once every `interval` seconds; between
checks a connection costs one clock read. A new version that does not load (key and
certificate not matching, a half-written file) never replaces the serving context: the
error is logged once per bad version and the old certificate keeps serving until the
files change again. Connections already open keep the context they were accepted with;
keep-alive connections are not re-handshaken.

Security properties live in `harden()`, applied to every context whichever way it was
built: TLS 1.2 minimum, no renegotiation, no compression, and with a client CA, a
client certificate signed by it is required in the handshake (CERT_REQUIRED).

Importing this module imports neither gunicorn nor prometheus_client: the gunicorn
config file imports it in the master, before the metrics directory is set up.
"""

from __future__ import annotations

import functools
import logging
import os
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from extender.errors import ExtenderError

log = logging.getLogger(__name__)

MIN_VERSION = ssl.TLSVersion.TLSv1_2
DEFAULT_INTERVAL = 1.0  # seconds between two stat checks of the files, per worker

_FileSig = tuple[int, int, int, int, int] | None
Fingerprint = tuple[_FileSig, ...]


class TLSConfigError(ExtenderError):
    """The certificate, key or client CA cannot be loaded; the message names the files."""


@dataclass(frozen=True, slots=True)
class TLSFiles:
    cert: str
    key: str
    client_ca: str | None = None

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.cert, self.key) + ((self.client_ca,) if self.client_ca else ())


def _file_signature(path: str) -> _FileSig:
    try:
        st = os.stat(path)  # follows symlinks: the Secret volume's current ..data target
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def fingerprint(files: TLSFiles) -> Fingerprint:
    """What says "these files may have changed": device, inode, size, mtime and ctime of each."""
    return tuple(_file_signature(path) for path in files.paths)


def harden(context: ssl.SSLContext, *, require_client_cert: bool) -> ssl.SSLContext:
    """Apply the settings the webhook must never run without, to any server context."""
    if context.minimum_version < MIN_VERSION:  # includes MINIMUM_SUPPORTED (-2)
        context.minimum_version = MIN_VERSION
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
    if require_client_cert:
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def build_context(files: TLSFiles, *, ciphers: str | None = None) -> ssl.SSLContext:
    """A server context for `files`, hardened; raises TLSConfigError naming what is wrong."""
    try:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certfile=files.cert, keyfile=files.key)
        if files.client_ca:
            context.load_verify_locations(cafile=files.client_ca)
        if ciphers:
            context.set_ciphers(ciphers)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise TLSConfigError(_describe(files, exc)) from None
    return harden(context, require_client_cert=bool(files.client_ca))


def _describe(files: TLSFiles, exc: BaseException) -> str:
    what = f"certificate {files.cert}, key {files.key}"
    if files.client_ca:
        what += f", client CA {files.client_ca}"
    reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
    return f"cannot load TLS files ({what}): {reason}"


def certificate_info(path: str) -> dict[str, Any]:
    """Serial and expiry of the first certificate in `path`, for logs and the expiry gauge.

    Uses the ssl module's own decoder (no third-party dependency); returns {} if unavailable.
    """
    decode = getattr(getattr(ssl, "_ssl", None), "_test_decode_cert", None)
    if decode is None:
        return {}
    try:
        decoded = decode(path)
        return {"serial": decoded.get("serialNumber", ""),
                "not_after": ssl.cert_time_to_seconds(decoded["notAfter"])}
    except Exception:  # informational only: never let it stop a reload
        return {}


def check_files(cert: str, key: str, client_ca: str | None = None) -> dict[str, Any]:
    """Load the files once, as start-up does, so a bad pair fails `extender serve` at once."""
    build_context(TLSFiles(cert, key, client_ca))
    info = certificate_info(cert)
    not_after = info.get("not_after")
    expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(not_after)) if not_after else "unknown"
    if not_after is not None and not_after < time.time():
        log.warning("the serving certificate %s expired at %s; clients will refuse it", cert, expires)
    else:
        log.info("TLS on: certificate %s (serial %s, expires %s)%s", cert, info.get("serial", "?"), expires,
                 f", client certificates required (CA {client_ca})" if client_ca else "")
    return info


@functools.cache
def _metrics() -> Any:
    """Created on first use, in the worker: never at import (see the module docstring)."""
    from types import SimpleNamespace

    from prometheus_client import Counter, Gauge

    return SimpleNamespace(
        connections=Counter("extender_tls_connections_total",
                            "TLS connections accepted; each one pays one handshake."),
        reloads=Counter("extender_tls_reloads_total", "TLS context (re)builds from the files, by outcome.",
                        ["outcome"]),
        expiry=Gauge("extender_tls_certificate_expiry_timestamp_seconds",
                     "notAfter of the serving certificate in use (earliest across workers).",
                     multiprocess_mode="livemin"),
    )


class ContextCache:
    """One SSLContext for a set of files, rebuilt when the files change (see the module docstring)."""

    def __init__(self, files: TLSFiles, build: Callable[[], ssl.SSLContext] | None = None, *,
                 interval: float = DEFAULT_INTERVAL, clock: Callable[[], float] = time.monotonic,
                 record_metrics: bool = True) -> None:
        self.files = files
        self._build = build or (lambda: build_context(files))
        self.interval = interval
        self._clock = clock
        self._record = record_metrics
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._context: ssl.SSLContext | None = None
        self._fingerprint: Fingerprint | None = None
        self._failed: Fingerprint | None = None
        self._next_check = 0.0
        self.builds = 0
        self.checks = 0
        self.info: dict[str, Any] = {}

    def get(self) -> ssl.SSLContext:
        """The context to wrap a new connection with."""
        context = self._context
        if context is not None and self._clock() < self._next_check and self._pid == os.getpid():
            self._count_connection()
            return context
        with self._lock:
            context = self._refresh()
        self._count_connection()
        return context

    def _count_connection(self) -> None:
        if self._record:
            _metrics().connections.inc()

    def _refresh(self) -> ssl.SSLContext:
        if self._pid != os.getpid():  # forked: start afresh rather than share OpenSSL state
            self._pid, self._context, self._fingerprint, self._failed = os.getpid(), None, None, None
        now = self._clock()
        if self._context is not None and now < self._next_check:
            return self._context  # another thread checked while this one waited for the lock
        self._next_check = now + self.interval
        self.checks += 1
        current = fingerprint(self.files)
        if self._context is not None and current in (self._fingerprint, self._failed):
            return self._context
        if self._context is None and current == self._failed:
            raise TLSConfigError(f"TLS files still unusable: {', '.join(self.files.paths)}")
        try:
            context = self._build()
        except TLSConfigError as exc:
            self._reject(current, str(exc))
        except (OSError, ValueError) as exc:
            self._reject(current, _describe(self.files, exc))
        else:
            self._accept(context, current)
        assert self._context is not None
        return self._context

    def _accept(self, context: ssl.SSLContext, current: Fingerprint) -> None:
        replacing = self._context is not None
        self._context, self._fingerprint, self._failed = context, current, None
        self.builds += 1
        self.info = certificate_info(self.files.cert)
        if self._record:
            metrics = _metrics()
            metrics.reloads.labels(outcome="success").inc()
            if "not_after" in self.info:
                metrics.expiry.set(self.info["not_after"])
        log.log(logging.INFO if replacing else logging.DEBUG,
                "%s TLS certificate %s", "reloaded" if replacing else "loaded", self.files.cert,
                extra={"fields": {k: v for k, v in self.info.items()}})

    def _reject(self, current: Fingerprint, message: str) -> None:
        first = current != self._failed
        self._failed = current
        if self._record:
            _metrics().reloads.labels(outcome="failure").inc()
        if self._context is None:
            raise TLSConfigError(message)
        if first:
            log.error("%s; still serving the previous certificate until the files change again", message)


_caches: dict[TLSFiles, ContextCache] = {}
_caches_lock = threading.Lock()


def gunicorn_ssl_context(config: Any, default_ssl_context_factory: Callable[[], ssl.SSLContext]
                         ) -> ssl.SSLContext:
    """gunicorn's `ssl_context` hook: the cached, hardened context for this worker.

    The context itself comes from gunicorn's factory (so `ciphers`, `ca_certs` and ALPN
    follow gunicorn's settings) and is then hardened; only when the files change is the
    factory called again.
    """
    files = TLSFiles(config.certfile, config.keyfile or config.certfile, config.ca_certs or None)
    cache = _caches.get(files)
    if cache is None:
        with _caches_lock:
            cache = _caches.get(files)
            if cache is None:
                def build() -> ssl.SSLContext:
                    return harden(default_ssl_context_factory(), require_client_cert=bool(files.client_ca))

                cache = _caches[files] = ContextCache(files, build)
    return cache.get()


__all__ = [
    "DEFAULT_INTERVAL",
    "MIN_VERSION",
    "ContextCache",
    "TLSConfigError",
    "TLSFiles",
    "build_context",
    "certificate_info",
    "check_files",
    "fingerprint",
    "gunicorn_ssl_context",
    "harden",
]
