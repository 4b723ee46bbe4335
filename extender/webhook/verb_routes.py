"""The verb routes as a WSGI layer in front of Flask: kube-scheduler's calls skip Flask's machinery.

kube-scheduler waits for every filter and prioritize call, one pod at a time, so each
microsecond of a call is its throughput. Flask's request context, routing, hooks and
Response object cost about as much as the webhook's default policy itself; the verbs
need none of it. Requests to the verb paths are answered here with the same functions
(`extender.webhook.verbs`), the same body checks (`bodies.read_json`; kube-scheduler's plain
`application/json` bodies with a Content-Length are read directly) and the same error
replies as Flask's handlers; every other path goes on to Flask.

The access log line and the request metrics (prometheus_client's multiprocess files)
are written from the reply's `close()`, which the WSGI server calls once the reply is
on the wire: they keep every field, and kube-scheduler no longer waits for them.
Successful filter and prioritize calls are logged only when asked (`--access-log`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from werkzeug.exceptions import HTTPException
from werkzeug.http import HTTP_STATUS_CODES
from werkzeug.wrappers import Request

from extender import metrics
from extender.cluster.gate import ServingGate
from extender.errors import WireError
from extender.policy.engine import PluginError
from extender.webhook import bodies, verbs

log = logging.getLogger("extender.webhook.app")
access_log = logging.getLogger("extender.access")

Handler = Callable[[Any], verbs.Outcome]
StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
_ALLOW = "OPTIONS, POST"


class Route(NamedTuple):
    """A verb's handler of the decoded body, and how a plain body's bytes are decoded for it."""

    handle: Handler
    decode: Callable[[bytes | bytearray], Any] = bodies.decode_json


class _Reply:
    """A one-chunk WSGI body whose close() runs after the server has sent it."""

    __slots__ = ("data", "after")

    def __init__(self, data: bytes, after: Callable[[], None]) -> None:
        self.data = data
        self.after = after

    def __iter__(self) -> Iterator[bytes]:
        yield self.data

    def close(self) -> None:
        try:
            self.after()
        except Exception:  # the reply is out: a failing log handler must not turn into an error page
            log.exception("recording a verb request failed")


class PlainReply(NamedTuple):
    """A verb's reply for the worker to write: `after()` once it is on the wire."""

    status: str
    headers: list[tuple[str, str]]
    data: bytes
    after: Callable[[], None]


class VerbRoutes:
    """WSGI middleware: `routes` maps a path to (verb, handler); other paths go to `fallback`."""

    def __init__(self, fallback: WSGIApp, routes: dict[str, tuple[str, Route]], max_body_bytes: int,
                 gate: ServingGate, log_successes: bool = True) -> None:
        self.fallback = fallback
        self.gate = gate  # the cluster state's: its watches wait while a verb is being answered
        self.routes = routes
        self.max_body_bytes = max_body_bytes
        # kube-scheduler makes two of these calls per pod: logging each successful one costs
        # as much as answering it, and the metrics count them anyway.
        self.quiet_when_ok = () if log_successes else ("filter", "prioritize")
        # werkzeug's plain Request: the body and header parsing Flask would do, without its context.
        self.request_class = type("VerbRequest", (Request,), {"max_content_length": max_body_bytes})
        self._counters: dict[tuple[str, str], tuple[Any, Any, Any, Any]] = {}  # labelled children, looked up once

    def _record(self, verb: str, result: str, pod: str, nodes: int, size: int, elapsed: float, note: str) -> None:
        children = self._counters.get((verb, result))
        if children is None:
            children = self._counters[(verb, result)] = (
                metrics.REQUESTS.labels(verb=verb, result=result),
                metrics.REQUEST_LATENCY.labels(verb=verb, result=result),
                metrics.REQUEST_NODES.labels(verb=verb),
                metrics.REQUEST_BYTES.labels(verb=verb),
            )
        requests, latency, node_counts, sizes = children
        requests.inc()
        latency.observe(elapsed)
        node_counts.observe(nodes)
        sizes.observe(size)
        if access_log.isEnabledFor(logging.INFO) and not (result == "ok" and verb in self.quiet_when_ok):
            access_log.info(
                "%s %s", verb, result,
                extra={"fields": {"verb": verb, "pod": pod, "nodes": nodes, "result": result,
                                  "duration_ms": round(elapsed * 1000, 3), **({"note": note} if note else {})}},
            )

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        route = self.routes.get(environ.get("PATH_INFO", ""))
        if route is None:
            return self.fallback(environ, start_response)
        method = environ.get("REQUEST_METHOD", "")
        if method == "POST":
            return self._answer(route, environ, start_response)
        if method == "OPTIONS":  # as Flask answers it for a POST-only route
            start_response("200 OK", [("Allow", _ALLOW), ("Content-Length", "0")])
            return []
        message = f"method {method} is not allowed on {environ.get('PATH_INFO', '')}; verbs take POST"
        return self._send(start_response, 405, bodies.encode_json({"Error": message}), lambda: None, [("Allow", _ALLOW)])

    def accepts_plain(self, path: str, content_type: str | None, content_length: str | None) -> bool:
        """Whether `answer_plain` takes this call: a verb path, and a plain JSON body within the limit."""
        return path in self.routes and bodies.plain_length(
            {"CONTENT_TYPE": content_type, "CONTENT_LENGTH": content_length}, self.max_body_bytes) is not None

    def answer_plain(self, path: str, content_type: str | None, content_length: str | None,
                     body: Any) -> PlainReply:
        """A call `accepts_plain` took, answered without a WSGI environ or response: the
        worker writes the reply itself (worker.py)."""
        environ = {"PATH_INFO": path, "REQUEST_METHOD": "POST", "CONTENT_TYPE": content_type,
                   "CONTENT_LENGTH": content_length, "wsgi.input": body}
        started: list[Any] = []
        reply = self._answer(self.routes[path], environ, lambda status, headers: started.extend((status, headers)))
        return PlainReply(started[0], started[1], reply.data, reply.close)

    def _answer(self, route: tuple[str, Route], environ: dict[str, Any],
                start_response: StartResponse) -> _Reply:
        verb, (handler, decode) = route
        started = time.perf_counter()
        path = environ.get("PATH_INFO", "")
        size = 0
        result, pod, nodes, note = "bad-request", "", 0, ""
        status = 200
        try:
            try:
                raw = bodies.read_plain(environ, self.max_body_bytes)
                size = len(raw)
                body = decode(raw)
            except bodies.NotPlain:
                request = self.request_class(environ)
                size = request.content_length or 0
                body = bodies.read_json(request)
            gate = self.gate
            gate.enter()
            try:
                outcome = handler(body)
            finally:
                gate.leave()
            result, pod, nodes, note = outcome.result, outcome.pod, outcome.nodes, outcome.note
            data = bodies.encode_json(outcome.reply)
        except WireError as exc:
            status, note = exc.status, str(exc)
            data = bodies.encode_json({"Error": note})
        except HTTPException as exc:  # 413 from reading the body
            status = exc.code or 400
            note = bodies.error_message(exc, method="POST", path=path, limit=self.max_body_bytes)
            data = bodies.encode_json({"Error": note})
        except PluginError as exc:
            status, result, note = 500, "plugin-error", str(exc)
            log.error("%s failed in a plugin: %s", verb, exc, exc_info=True)
            # The plugin's own message may hold paths or internals: it stays in the log.
            data = bodies.encode_json({"Error": f"{verb} failed in a policy plugin; see the extender's log"})
        except Exception:
            status, result = 500, "error"
            log.exception("unhandled error on POST %s", path)
            data = bodies.encode_json({"Error": "internal error; see the extender's log"})
        elapsed = time.perf_counter() - started
        return self._send(start_response, status, data,
                          lambda: self._record(verb, result, pod, nodes, size, elapsed, note))

    @staticmethod
    def _send(start_response: StartResponse, status: int, data: bytes, after: Callable[[], None],
              headers: list[tuple[str, str]] | None = None) -> _Reply:
        start_response(f"{status} {HTTP_STATUS_CODES.get(status, 'Unknown')}",
                       [("Content-Type", bodies.JSON), ("Content-Length", str(len(data))), *(headers or [])])
        return _Reply(data, after)


__all__ = ["PlainReply", "Route", "VerbRoutes"]
