"""A local fake kube-apiserver for tests: HTTP on 127.0.0.1, a background thread, fault controls.

Why our own and not kmock: kmock 0.8 (PyPI) was evaluated first. It is an aiohttp/asyncio
mock whose Kubernetes emulator lists with a placeholder ``resourceVersion: "..."``, keeps
no history (so no watch resume and no 410 Expired), ignores field and label selectors,
has no Binding subresource, no optimistic-concurrency conflicts and no bookmarks, and
would need an event loop thread plus the extra ``jsonpatch`` dependency. This fake is
built on the standard library's ``ThreadingHTTPServer`` instead, which gives full control
of the socket: HTTP/1.1 keep-alive, chunked watch streams, cutting a stream in the middle
of an event, and stopping and restarting on the same port.

Layout: :mod:`.api` holds the REST rules, :mod:`.store` the objects and history,
:mod:`.watch` the streaming; this module only does HTTP and exposes the test controls.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from .api import ApiHandler, Settings
from .authz import Authorizer
from .clock import now_rfc3339
from .faults import FaultInjector, RecordedRequest, RequestLog
from .kubeconfig import write_kubeconfig
from .routing import ApiRequest, ApiResponse
from .status import ApiError
from .store import Store, Watcher
from .watch import WatchPlan, WatchSettings, run_watch

FAKE_TOKEN = "fakeapi-token"


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], fake: FakeApiServer) -> None:
        self.fake = fake
        super().__init__(address, _Handler)


class _ChunkedWriter:
    """Writes a watch stream as HTTP/1.1 chunks, one event line per chunk."""

    def __init__(self, handler: _Handler) -> None:
        self._handler = handler

    def send(self, data: bytes) -> None:
        self._handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def finish(self) -> None:
        self._handler.wfile.write(b"0\r\n\r\n")

    def abort(self) -> None:
        """Close the connection without the final chunk: the client sees a broken stream."""
        self._handler.close_connection = True
        with contextlib.suppress(OSError):
            self._handler.connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fakeapi"
    server: _HttpServer

    def version_string(self) -> str:
        return self.server_version

    def setup(self) -> None:
        super().setup()
        # Small JSON replies must not wait for Nagle/delayed-ACK (a 40 ms stall per request).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.fake._track(self.connection)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.server.fake._untrack(self.connection)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return bytes(body)
                body += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _dispatch(self) -> None:
        fake = self.server.fake
        url = urlsplit(self.path)
        body = self._read_body()
        headers = {k.lower(): v for k, v in self.headers.items()}
        req = ApiRequest(
            self.command, url.path, parse_qs(url.query, keep_blank_values=True), headers, body
        )
        record = fake._record(req, url.query)
        target = url.path + ("?" + url.query if url.query else "")
        latency, failure = fake.faults.check(self.command, target)
        if latency:
            time.sleep(latency)
        try:
            if failure is not None:
                raise failure
            result = fake.api.handle(req)
        except ApiError as err:
            result = ApiResponse(err.code, err.status(), err.headers)
        except Exception as exc:  # a bug in the fake: answer like the real server would, and say so
            traceback.print_exc(file=sys.stderr)
            err = ApiError(500, "InternalError", f"Internal error occurred: {exc!r}")
            result = ApiResponse(500, err.status())
        if isinstance(result, WatchPlan):
            record.status = 200
            self._stream(result)
        else:
            record.status = result.code
            self._reply(result)

    def _reply(self, result: ApiResponse) -> None:
        if isinstance(result.body, bytes):
            payload = result.body
            content_type = result.headers.get("Content-Type", "text/plain; charset=utf-8")
        else:
            payload = orjson.dumps(result.body) + b"\n"
            content_type = "application/json"
        self.send_response(result.code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-cache, private")
        for name, value in result.headers.items():
            if name.lower() != "content-type":
                self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def _stream(self, plan: WatchPlan) -> None:
        fake = self.server.fake
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        settings = WatchSettings(
            fake.api.settings.bookmark_interval, fake.api.settings.too_large_rv_wait
        )
        try:
            run_watch(fake.store, plan, _ChunkedWriter(self), settings, on_register=fake._on_watch)
        except OSError:  # the client went away
            self.close_connection = True


class FakeApiServer:
    """A fake kube-apiserver on 127.0.0.1 (free port unless given), served from a thread.

    Use as a context manager or call :meth:`start` / :meth:`close`. Everything public is
    thread-safe and meant to be called from tests while clients talk to the server.
    """

    def __init__(
        self,
        *,
        port: int = 0,
        history_size: int = 1000,
        bookmark_interval: float = 1.0,
        graceful_delete: bool = True,
        copy_binding_labels: bool = True,
        too_large_rv_wait: float = 3.0,
        user: str = "fakeapi-user",
        dra_api: bool = True,
    ) -> None:
        self.store = Store(history_size=history_size)
        self._defaults = dict(
            history_size=history_size,
            bookmark_interval=bookmark_interval,
            graceful_delete=graceful_delete,
            copy_binding_labels=copy_binding_labels,
            too_large_rv_wait=too_large_rv_wait,
            user=user,
            dra_api=dra_api,
        )
        self.authz = Authorizer()
        self.faults = FaultInjector()
        # Their controls, where tests reach for them: fake.fail_next(...), fake.deny(...).
        self.fail_next = self.faults.fail_next
        self.delay = self.faults.delay
        self.clear_faults = self.faults.clear
        self.deny = self.authz.deny
        self.allow = self.authz.allow
        self.set_allowed = self.authz.set_allowed
        self.allow_all = self.authz.reset
        self.log = RequestLog()
        self.api = ApiHandler(self.store, self._settings(), self.authz)
        self.api.create_default_namespaces()
        self._port = port
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None
        self._lifecycle = threading.Lock()
        self._conn_lock = threading.Lock()
        self._connections: set[socket.socket] = set()

    def _settings(self) -> Settings:
        d = self._defaults
        return Settings(
            graceful_delete=d["graceful_delete"],
            copy_binding_labels=d["copy_binding_labels"],
            too_large_rv_wait=d["too_large_rv_wait"],
            bookmark_interval=d["bookmark_interval"],
            user=d["user"],
            dra_api=d["dra_api"],
        )

    # ---------------------------------------------------------------------------------------
    # Lifecycle
    # ---------------------------------------------------------------------------------------

    def start(self) -> FakeApiServer:
        """Listen (again) on the same port; a no-op when already running."""
        with self._lifecycle:
            if self._httpd is not None:
                return self
            deadline = time.monotonic() + 5
            while True:
                try:
                    httpd = _HttpServer(("127.0.0.1", self._port), self)
                    break
                except OSError:
                    if self._port == 0 or time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            self._port = httpd.server_address[1]
            self.api.address = f"127.0.0.1:{self._port}"
            self._httpd = httpd
            self._thread = threading.Thread(
                target=httpd.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=f"fakeapi-{self._port}",
                daemon=True,
            )
            self._thread.start()
            return self

    def stop(self) -> None:
        """Go down: refuse connections and cut every open one (watches end abruptly).
        Objects and history are kept; :meth:`start` brings the server back on the same port."""
        with self._lifecycle:
            httpd, self._httpd = self._httpd, None
            if httpd is None:
                return
            httpd.shutdown()
            httpd.server_close()
            for watcher in self.store.watchers():
                watcher.drop("abrupt")
            with self._conn_lock:
                conns = list(self._connections)
            for conn in conns:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
            if self._thread is not None:
                self._thread.join(timeout=5)

    def restart(self, reset_resource_version: bool = True, downtime: float = 0.0) -> None:
        """Stop, then start like a restarted kube-apiserver: the watch cache is rebuilt empty, so
        every older resourceVersion is too old (410). With ``reset_resource_version`` the
        objects are also renumbered from 1, like etcd restored into a new cluster."""
        self.stop()
        if reset_resource_version:
            self.store.reset_resource_versions()
        else:
            self.store.compact()
        if downtime:
            time.sleep(downtime)
        self.start()

    def close(self) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._httpd is not None

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def write_kubeconfig(self, path: str | Path, token: str = FAKE_TOKEN) -> Path:
        """A kubeconfig for this server (any bearer token is accepted)."""
        return write_kubeconfig(path, self.url, token=token, context="fakeapi")

    def reset(self) -> None:
        """A clean slate for the next test: no objects but the default namespaces, no faults,
        no rules, an empty request log, default settings, every watch closed, server running."""
        self.start()
        self.drop_watches()
        self.faults.clear()
        self.authz.reset()
        self.log.clear()
        self.store.clear()
        self.store.set_history_size(self._defaults["history_size"])
        self.api.settings = self._settings()
        with self.api._stats_lock:
            self.api.binding_counts.clear()
            self.api.bindings.clear()
        self.api.create_default_namespaces()

    # ---------------------------------------------------------------------------------------
    # Settings
    # ---------------------------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        """Live behaviour switches: graceful_delete, copy_binding_labels, bookmark_interval,
        too_large_rv_wait, default_watch_timeout, user, priority_classes, dra_api."""
        return self.api.settings

    def configure(self, **changes: Any) -> None:
        """Change settings for the current test (``reset`` restores the constructor values)."""
        for name, value in changes.items():
            if not hasattr(self.api.settings, name):
                raise AttributeError(f"unknown setting {name!r}")
            setattr(self.api.settings, name, value)

    # ---------------------------------------------------------------------------------------
    # Fault injection
    # ---------------------------------------------------------------------------------------

    def drop_watches(self, mid_event: bool = False) -> int:
        """Cut every open watch stream (no final chunk); with ``mid_event`` the stream first
        gets half an event line. Returns how many streams were cut."""
        watchers = self.store.watchers()
        for watcher in watchers:
            watcher.drop("mid_event" if mid_event else "abrupt")
        return len(watchers)

    def open_watches(self) -> int:
        return len(self.store.watchers())

    def wait_for_watches(self, count: int = 1, timeout: float = 5.0) -> bool:
        """Block until at least ``count`` watches are open (to sequence a test with a client)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.open_watches() >= count:
                return True
            time.sleep(0.01)
        return False

    # ---------------------------------------------------------------------------------------
    # metrics.k8s.io (metrics-server behind the aggregation layer)
    # ---------------------------------------------------------------------------------------

    def serve_node_metrics(self, state: str = "served") -> None:
        """Install metrics-server ("served"), break it ("unavailable": 503) or remove it ("absent": 404)."""
        if state not in ("served", "unavailable", "absent"):
            raise ValueError(f"unknown metrics API state {state!r}")
        self.api.settings.metrics_api = state

    def set_node_metrics(self, node: str, cpu: str | None = None, memory: str | None = None, *,
                         timestamp: str | None = None, window: str = "20.012s") -> dict[str, Any]:
        """What metrics-server reports for ``node``: usage quantities, the sample's time (default now)."""
        usage = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
        return self.api.put_node_metrics(node, usage, timestamp or now_rfc3339(), window)

    def compact(self) -> int:
        """Forget all watch history: any watch from an older resourceVersion gets 410 Expired."""
        return self.store.compact()

    def set_history_size(self, size: int) -> None:
        """Bound the per-resource history window (default 1000 events)."""
        self.store.set_history_size(size)

    # ---------------------------------------------------------------------------------------
    # Observation
    # ---------------------------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        return self.log.all()

    def requests_matching(
        self, method: str | None = None, path_regex: str | None = None
    ) -> list[RecordedRequest]:
        """Recorded requests by method and a regex searched in the path (not the query)."""
        pattern = re.compile(path_regex) if path_regex else None
        return [
            r
            for r in self.log.all()
            if (method is None or r.method == method.upper())
            and (pattern is None or pattern.search(r.path))
        ]

    def clear_requests(self) -> None:
        self.log.clear()

    def binding_count(self, namespace: str, name: str) -> int:
        """Successful bindings of one pod (a correct scheduler binds each pod once)."""
        with self.api._stats_lock:
            return self.api.binding_counts[f"{namespace}/{name}"]

    @property
    def bindings(self) -> list[dict[str, str]]:
        """Every successful binding in order: namespace, name, node, uid."""
        with self.api._stats_lock:
            return list(self.api.bindings)

    @property
    def resource_version(self) -> int:
        return self.store.resource_version

    def get_object(self, resource: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        """Peek at the stored object directly (no HTTP, no authorization, no faults)."""
        return self.store.get(resource, namespace, name)

    # ---------------------------------------------------------------------------------------
    # Internals used by the HTTP handler
    # ---------------------------------------------------------------------------------------

    def _track(self, conn: socket.socket) -> None:
        with self._conn_lock:
            self._connections.add(conn)

    def _untrack(self, conn: socket.socket) -> None:
        with self._conn_lock:
            self._connections.discard(conn)

    def _on_watch(self, watcher: Watcher) -> None:
        if self._httpd is None:  # stopped while this watch was being set up
            watcher.drop("abrupt")

    def _record(self, req: ApiRequest, query: str) -> RecordedRequest:
        body: Any = None
        if req.body:
            try:
                body = json.loads(req.body)
            except ValueError:
                body = req.body
        flat = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
        record = RecordedRequest(req.method, req.path, flat, dict(req.headers), body)
        self.log.add(record)
        return record
