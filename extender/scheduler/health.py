"""A tiny HTTP server for probes and Prometheus: /healthz, /readyz, /metrics.

The scheduler has no web framework to hang these on, and needs none: the standard
library's threading server answers three GETs. /readyz is about the cache (the
initial lists are in), not about leadership: a follower is ready to take over, and a
rollout must not wait for every replica to become leader.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from extender import metrics

log = logging.getLogger(__name__)

Check = Callable[[], tuple[bool, str]]


def parse_bind(text: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 as `[::1]:PORT`); raises ValueError naming the problem."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{text!r}: expected HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            body, content_type = metrics.render()
            self._send(200, body, content_type)
            return
        check = self.server.checks.get(path)
        if check is None:
            self._send(404, b"not found\n", "text/plain; charset=utf-8")
            return
        try:
            ok, detail = check()
        except Exception as exc:  # a probe must answer, whatever broke
            ok, detail = False, f"check failed: {exc}"
        text = ("ok" if ok else "not ok") + (f": {detail}" if detail else "") + "\n"
        self._send(200 if ok else 503, text.encode(), "text/plain; charset=utf-8")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        """Probes every few seconds would drown the log."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], checks: dict[str, Check]) -> None:
        super().__init__(address, _Handler)
        self.checks = checks


class HealthServer:
    """Serves `checks` (path -> callable returning (ok, detail)) and /metrics from a thread."""

    def __init__(self, bind: str, *, healthz: Check, readyz: Check) -> None:
        host, port = parse_bind(bind)
        self._server = _Server((host, port), {"/healthz": healthz, "/livez": healthz, "/readyz": readyz})
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="health-server", daemon=True)
        self._thread.start()
        log.info("serving /healthz, /readyz and /metrics on port %d", self.port)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
