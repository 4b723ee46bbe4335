"""A gunicorn worker shaped for kube-scheduler's traffic: one thread per connection, blocking reads.

kube-scheduler calls the extender for one pod at a time over one kept-alive connection,
so what it waits for is the latency of each call, not the server's parallelism.
gthread pays for its parallelism on every request: the main thread's poller sees the
socket readable, hands the connection to a pool thread, which hands it back through a
pipe to be polled again, and the worker's heartbeat file is touched on each loop; with
the GIL, each hand-off waits for whichever thread holds it. Measured on a real control
plane (`python -m bench e2e`), that costs kube-scheduler more than the verbs themselves.

Here a connection's own thread reads the request, runs the app and writes the reply
(headers and body in one send), then blocks reading the next request: no hand-off, no
poller. The main thread only accepts connections and touches the heartbeat about once
a second. Connections beyond `worker_connections` wait in the listen backlog.

Stopping (SIGTERM) is quick even while clients hold idle connections, which
kube-scheduler's Go client does (a spare connection, over TLS already past the
handshake): new connections are refused at once, a request already being read or run
is finished and answered with `Connection: close`, and idle connections get
STOP_LINGER seconds for a request already on its way, then are shut down. gthread
waits out the whole graceful timeout for a connection that never sent a request.

Requests in kube-scheduler's plain shape are read by `plain_requests` (a third of the
time per call went to gunicorn's general parser), and those to a verb path with a plain
JSON body are answered by the app's verb routes without a WSGI environ or gunicorn
Response (`VerbRoutes.answer_plain`; only while gunicorn's access log and request hooks
are off, as by default): the reply is one status line, five headers and the body, in
one send. Every other request, and the WSGI environ, responses, error pages and hooks,
are gunicorn's own.
"""

from __future__ import annotations

import errno
import os
import select
import selectors
import socket
import ssl
import struct
import sys
import threading
import time
from datetime import datetime
from typing import Any, TypeAlias

from gunicorn import SERVER, http, sock, util
from gunicorn.http import wsgi
from gunicorn.http.errors import NoMoreData
from gunicorn.http.parser import Parser
from gunicorn.workers import base

from extender.webhook import plain_requests
from extender.webhook.app import EXTENSION
from extender.webhook.verb_routes import VerbRoutes

# A request as the worker handles it: read by plain_requests, or by gunicorn's parser.
IncomingRequest: TypeAlias = "plain_requests.PlainRequest | http.Request"
# How long a stopping worker leaves idle connections open for a request already sent.
STOP_LINGER = 1.0
# The heartbeat (the arbiter kills a worker silent for `timeout`) and shutdown checks.
TICK = 1.0
# Replies smaller than this go out in one send with their headers.
_COALESCE_LIMIT = 256 * 1024
# Largest recv() while reading headers and bodies. gunicorn's 8 KiB means hundreds of
# recv() calls and buffer appends for a full-NodeList request (about 2 MB for 230 nodes),
# each a GIL hand-off; 64 KiB stays below malloc's mmap threshold for the buffer.
RECV_CHUNK = 64 * 1024
# The most of an unread plain request body skipped to keep the connection; more closes it.
DRAIN_LIMIT = 64 * 1024
# How long the rest of a body the app left unread may take to arrive before the connection
# is closed instead of reused (gthread's DEFAULT_WORKER_DATA_TIMEOUT).
DRAIN_TIMEOUT = 5.0


class _CoalescingSocket:
    """The socket a reply is written to (gunicorn's Response, or a verb answered directly):
    headers and body leave in one send.

    gunicorn writes the status line and headers, then the body, in separate sends;
    with TCP_NODELAY each is its own segment, and the client wakes up for each.
    """

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self._pending: list[bytes] = []
        self._size = 0

    def sendall(self, data: bytes) -> None:
        if self._size + len(data) >= _COALESCE_LIMIT:
            self.flush()  # a large body goes out as it is, not copied behind its headers
            self._raw.sendall(data)
            return
        self._pending.append(data)
        self._size += len(data)

    def send(self, data: bytes) -> int:
        self.flush()
        return int(self._raw.send(data))

    def flush(self) -> None:
        if self._pending:
            data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
            self._pending.clear()
            self._size = 0
            self._raw.sendall(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


class _Date:
    """The Date header's value, formatted once a second (email.utils.formatdate on every
    reply was a tenth of the HTTP work of a verb call)."""

    __slots__ = ("_current",)

    def __init__(self) -> None:
        self._current = (0, "")

    def __call__(self) -> str:
        second, text = self._current  # one tuple: threads see the pair whole
        now = int(time.time())
        if now != second:
            text = util.http_date(now)
            self._current = (now, text)
        return text


class _Response(wsgi.Response):
    """gunicorn's Response with the cached Date; its default_headers otherwise, line for line
    (a test compares the two)."""

    date = _Date()

    def default_headers(self) -> list[str]:
        if self.upgrade:
            connection = "upgrade"
        elif self.should_close():
            connection = "close"
        else:
            connection = "keep-alive"
        headers = [
            f"HTTP/{self.req.version[0]}.{self.req.version[1]} {self.status}\r\n",
            f"Server: {self.version}\r\n",
            f"Date: {self.date()}\r\n",
            f"Connection: {connection}\r\n",
        ]
        if self.chunked:
            headers.append("Transfer-Encoding: chunked\r\n")
        return headers


class _Connection:
    """A client connection and whether its thread is between requests."""

    __slots__ = ("sock", "idle", "closing")

    def __init__(self, client: socket.socket) -> None:
        self.sock = client
        self.idle = True
        self.closing = False

    def cut(self) -> None:
        """Wake the thread blocked reading this connection: shut the socket down.

        socket.socket.shutdown, not the SSLSocket's override: that one would tear the
        TLS object down under the reading thread's feet.
        """
        self.closing = True
        try:
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
        except OSError:
            pass


def _limit_stalls(client: socket.socket, seconds: int) -> None:
    """SO_RCVTIMEO and SO_SNDTIMEO: a client that stops sending its request (or reading the
    reply) for `seconds` makes the blocking call fail instead of holding the thread forever.
    Linux's struct timeval; elsewhere transfers are unbounded, as with gunicorn's sync worker."""
    if not seconds or not sys.platform.startswith("linux"):
        return
    timeval = struct.pack("ll", int(seconds), 0)
    for option in (socket.SO_RCVTIMEO, socket.SO_SNDTIMEO):
        client.setsockopt(socket.SOL_SOCKET, option, timeval)


class _Readable:
    """Waits for a connection's next request: one poll object per connection, registered
    once (a new one per request was a few percent of a verb call's CPU)."""

    __slots__ = ("_client", "_unreader", "_timeout", "_poller")

    def __init__(self, client: Any, unreader: Any, keepalive: float) -> None:
        self._client, self._unreader = client, unreader
        self._timeout = keepalive * 1000 if keepalive else None
        self._poller = select.poll()
        self._poller.register(client.fileno(), select.POLLIN | select.POLLPRI)

    def __call__(self) -> bool:
        """Wait up to the keep-alive timeout for the next request; False when none comes (or
        the connection was shut down, which poll() reports at once)."""
        unreader = self._unreader
        if unreader is not None and unreader.buf.getbuffer().nbytes:
            return True  # a pipelined request is already read
        client = self._client
        if isinstance(client, ssl.SSLSocket) and client.pending():
            return True  # decrypted bytes wait in the TLS layer: the socket itself may be quiet
        events = self._poller.poll(self._timeout)
        return any(mask & (select.POLLIN | select.POLLPRI) for _, mask in events)


def _plain_requests_allowed(cfg: Any) -> bool:
    """Plain requests skip gunicorn's parser only where it would do nothing more with them."""
    return getattr(cfg, "protocol", "http") == "http" and cfg.proxy_protocol in (False, None, "off")


class ConnectionWorker(base.Worker):
    """gunicorn worker class `extender.webhook.worker.ConnectionWorker`."""

    def init_process(self) -> None:
        self._connections: set[_Connection] = set()
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._requests_lock = threading.Lock()
        self._head_rules = plain_requests.HeadRules.from_config(self.cfg) if _plain_requests_allowed(self.cfg) else None
        self._verbs: VerbRoutes | None = None  # set in run(), once the app is loaded
        super().init_process()

    # ---- the accept loop (main thread) ---------------------------------------------

    def run(self) -> None:
        self._verbs = self._direct_verbs()
        if "h2" in (getattr(self.cfg, "http_protocols", None) or ()):
            self.log.warning("HTTP/2 is not supported by the ConnectionWorker; serving HTTP/1.1 only")
        selector = selectors.DefaultSelector()
        for listener in self.sockets:
            listener.setblocking(False)
            selector.register(listener, selectors.EVENT_READ, listener)
        selector.register(self.PIPE[0], selectors.EVENT_READ, None)
        try:
            while self.alive:
                self.notify()
                if not self._wait_for_room():
                    continue
                for key, _ in selector.select(TICK):
                    if key.data is None:
                        self._drain_pipe()
                    else:
                        self._accept(key.data)
                if self.ppid != os.getppid():
                    self.log.info("Parent changed, shutting down: %s", self)
                    break
        finally:
            selector.close()
            self._stop()

    def _wait_for_room(self) -> bool:
        """Stop accepting while `worker_connections` connections are open (the kernel's
        listen backlog holds newcomers); False to go round the loop (heartbeat) again."""
        with self._room:
            if len(self._connections) < self.cfg.worker_connections:
                return True
            self._room.wait(TICK)
            return len(self._connections) < self.cfg.worker_connections

    def _drain_pipe(self) -> None:
        try:
            while os.read(self.PIPE[0], 4096):
                pass
        except OSError:
            pass

    def _accept(self, listener: socket.socket) -> None:
        try:
            client, addr = listener.accept()
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                return
            raise
        client.setblocking(True)
        util.close_on_exec(client)
        connection = _Connection(client)
        with self._lock:
            self._connections.add(connection)
        thread = threading.Thread(target=self._serve, args=(connection, listener.getsockname(), addr),
                                  name="http-connection", daemon=True)
        thread.start()

    def _stop(self) -> None:
        """Refuse new connections, finish requests in flight, close idle connections soon."""
        self._drain_app()
        for listener in self.sockets:
            try:
                listener.close()
            except OSError:
                pass
        linger_until = time.monotonic() + STOP_LINGER
        deadline = time.monotonic() + self.cfg.graceful_timeout
        while True:
            now = time.monotonic()
            with self._lock:
                open_connections = list(self._connections)
            if not open_connections or now >= deadline:
                break
            if now >= linger_until:
                for connection in open_connections:
                    if connection.idle and not connection.closing:
                        connection.cut()
            self.notify()
            with self._room:
                self._room.wait(min(0.1, max(0.0, deadline - now)))
        with self._lock:
            left = list(self._connections)
        if left:
            self.log.warning("graceful timeout: closing %d connection(s) with a request in flight", len(left))

    def _drain_app(self) -> None:
        """Tell the app this process is stopping (SIGTERM, or its gunicorn master is gone): the
        gang binds it holds answer now, as errors kube-scheduler retries elsewhere, instead of
        keeping their connections, and the port, for the rest of their hold."""
        runtime = getattr(self.wsgi, "extensions", {}).get(EXTENSION)
        if runtime is not None:
            runtime.drain()

    # ---- a connection (its own thread) ------------------------------------------------------

    def _serve(self, connection: _Connection, server: Any, addr: Any) -> None:
        client: Any = connection.sock
        req: IncomingRequest | None = None
        try:
            # Blocking, without Python's socket timeout: in timeout mode every recv() and send()
            # is preceded by a poll(), which made a megabyte full-NodeList call twice as slow.
            # The keep-alive wait is a poll of its own (_Readable); a stalled transfer ends
            # by the kernel's timeouts (_limit_stalls).
            client.settimeout(None)
            _limit_stalls(client, self.cfg.timeout)
            if self.cfg.is_ssl:
                client = sock.ssl_wrap_socket(client, self.cfg)
                connection.sock = client
                # Now, while the connection counts as idle: the handshake's bytes make the
                # socket readable without a request, and a client may stop right after it
                # (kube-scheduler's spare connection); a stopping worker must not wait for it.
                client.do_handshake()
            parser = http.get_parser(self.cfg, client, addr)
            unreader = getattr(parser, "unreader", None)
            if unreader is not None and getattr(unreader, "mxchunk", RECV_CHUNK) < RECV_CHUNK:
                unreader.mxchunk = RECV_CHUNK
            rules = self._head_rules if unreader is not None else None
            environ = plain_requests.PlainEnviron(self.cfg, addr, server) \
                if rules and plain_requests.PlainEnviron.usable(server) else None
            readable = _Readable(client, unreader, self.cfg.keepalive)
            count = 0
            while self.alive and not connection.closing:
                connection.idle = True
                if not readable():
                    break  # idle for the keep-alive timeout, or shut down
                connection.idle = False  # a request is arriving: a stopping worker lets it finish
                count += 1
                req = plain_requests.read_plain_request(unreader, rules, addr, count) if rules else None
                if req is None:  # not a plain request: gunicorn's parser reads it (or the end of the stream)
                    req = next(parser)
                    if not req:
                        break
                if not self._handle_request(req, client, addr, server, environ):
                    break
                if not self._finish_body(req, parser):
                    break  # a body the app left unread and the client is slow to send: close
                req = None
        except StopIteration as exc:
            self.log.debug("Closing connection. %s", exc)
        except NoMoreData as exc:
            self.log.debug("Ignored premature client disconnection. %s", exc)
        except (TimeoutError, BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            self.log.debug("Closing a connection stalled for %s s", self.cfg.timeout)
        except ssl.SSLError as exc:
            if exc.args[0] == ssl.SSL_ERROR_EOF or connection.closing:
                self.log.debug("ssl connection closed")
            else:
                self.log.debug("Error processing SSL request.")
                self.handle_error(req, client, addr, exc)
        except OSError as exc:
            if connection.closing:
                pass
            elif exc.errno not in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN):
                self.log.exception("Socket error processing request.")
        except Exception as exc:
            if not connection.closing:
                self.handle_error(req, client, addr, exc)
        finally:
            util.close_graceful(client)
            with self._room:
                self._connections.discard(connection)
                self._room.notify_all()

    @staticmethod
    def _finish_body(req: IncomingRequest, parser: Parser) -> bool:
        """Skip what the app left of the body, so the next request can be read; False to close."""
        if isinstance(req, plain_requests.PlainRequest):
            left = req.unread_body()
            if left > DRAIN_LIMIT:
                return False
            while left > 0 and req.body.read(min(left, RECV_CHUNK)):  # stalls end by SO_RCVTIMEO
                left = req.unread_body()
            return left == 0
        return bool(parser.finish_body(deadline=time.monotonic() + DRAIN_TIMEOUT))

    def _direct_verbs(self) -> VerbRoutes | None:
        """The app's verb routes, when a plain verb call may skip WSGI: gunicorn's access log
        and its pre/post_request hooks, which want the WSGI request and response, are off
        (the defaults; the app logs and counts its verb calls itself)."""
        verbs = getattr(self.wsgi, "wsgi_app", None)
        hooks = (self.cfg.settings[name] for name in ("pre_request", "post_request"))
        if not isinstance(verbs, VerbRoutes) or self.log.access_log_enabled \
                or any(hook.value is not hook.default for hook in hooks):
            return None
        return verbs

    def _answer_directly(self, verbs: VerbRoutes, req: plain_requests.PlainRequest, client: Any) -> bool | None:
        """Answer a verb call without a WSGI environ or Response (a tenth of a call's CPU):
        whether the connection may serve another, or None when it is not a plain verb call."""
        if req.method != "POST" or "%" in req.path or req.query:
            return None
        headers = dict(req.headers)
        content_type, content_length = headers.get("CONTENT-TYPE"), headers.get("CONTENT-LENGTH")
        if not verbs.accepts_plain(req.path, content_type, content_length):
            return None
        plain_requests.read_whole(req)
        reply = verbs.answer_plain(req.path, content_type, content_length, req.body)
        self._count_request()
        close = req.should_close() or not self.alive or not self.cfg.keepalive
        head = [f"HTTP/1.1 {reply.status}\r\nServer: {SERVER}\r\nDate: {_Response.date()}\r\n"
                f"Connection: {'close' if close else 'keep-alive'}\r\n"]
        head.extend(f"{name}: {value}\r\n" for name, value in reply.headers)
        head.append("\r\n")
        out = _CoalescingSocket(client)
        out.sendall("".join(head).encode("latin-1"))
        out.sendall(reply.data)
        out.flush()
        reply.after()
        return not close

    def _count_request(self) -> None:
        with self._requests_lock:
            self.nr += 1
            if self.nr >= self.max_requests and self.alive:
                self.log.info("Autorestarting worker after current request.")
                self.alive = False

    def _handle_request(self, req: IncomingRequest, client: Any, addr: Any, server: Any,
                        plain_environ: plain_requests.PlainEnviron | None) -> bool:
        """Run the app for one request; whether the connection may serve another."""
        if self._verbs is not None and isinstance(req, plain_requests.PlainRequest):
            answered = self._answer_directly(self._verbs, req, client)
            if answered is not None:
                return answered
        environ: dict[str, Any] = {}
        resp: wsgi.Response | None = None
        out = _CoalescingSocket(client)
        try:
            self.cfg.pre_request(self, req)
            request_start = datetime.now()
            if plain_environ is not None and isinstance(req, plain_requests.PlainRequest):
                resp, environ = _Response(req, out, self.cfg), plain_environ.build(req, out)
            else:
                resp, environ = wsgi.create(req, out, addr, server, self.cfg, response_class=_Response)
                environ["wsgi.multithread"] = True
            self._count_request()
            if not self.alive or not self.cfg.keepalive:
                resp.force_close()
            respiter = self.wsgi(environ, resp.start_response)
            try:
                if isinstance(respiter, environ["wsgi.file_wrapper"]):
                    out.flush()
                    resp.sock = client
                    resp.write_file(respiter)
                else:
                    for item in respiter:
                        resp.write(item)
                resp.close()
                out.flush()
            finally:
                self.log.access(resp, req, environ, datetime.now() - request_start)
                # After the reply is on the wire: what the app deferred to close() (its
                # access log and metrics) no longer delays the client.
                if hasattr(respiter, "close"):
                    respiter.close()
            return not resp.should_close()
        except OSError:
            raise
        except (Exception, SystemExit):
            if resp is not None and resp.headers_sent:
                self.log.exception("Error handling request")
                raise StopIteration() from None
            raise
        finally:
            try:
                self.cfg.post_request(self, req, environ, resp)
            except Exception:
                self.log.exception("Exception in post_request hook")


__all__ = ["ConnectionWorker", "STOP_LINGER"]
