"""The Flask app factory. Importing this module creates no app and starts nothing.

`create_app()` is what gunicorn calls in each worker (`extender.webhook:create_app()`),
so every worker gets its own cluster state, watches and policy, started after fork.
"""

from __future__ import annotations

import logging
import platform
import time
from collections.abc import Callable
from typing import Any

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from extender import __version__, metrics
from extender.errors import WireError
from extender.policy.engine import PluginError
from extender.runtime import Runtime, build_runtime
from extender.settings import Settings
from extender.webhook import verbs
from extender.webhook.bodies import json_response, read_json
from extender.webhook.nodeviews import NodeViewCache

log = logging.getLogger(__name__)
access_log = logging.getLogger("extender.access")

EXTENSION = "extender"


def create_app(settings: Settings | None = None, *, runtime: Runtime | None = None, start: bool = True) -> Flask:
    """Build the app. Without arguments, settings come from EXTENDER_* variables."""
    settings = settings or Settings.from_env()
    if not logging.getLogger().handlers:  # plain `gunicorn -c ...`: nobody configured logging yet
        from extender.logs import setup_logging

        setup_logging(settings.log_format, settings.log_level)
    runtime = runtime or build_runtime(settings)
    if start:
        runtime.start()
    app = Flask("extender")
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.extensions[EXTENSION] = runtime
    cache = NodeViewCache()

    handlers: dict[str, Callable[[Any], verbs.Outcome]] = {
        "filter": lambda body: verbs.filter_verb(runtime, cache, body),
        "prioritize": lambda body: verbs.prioritize_verb(runtime, cache, body),
        "bind": lambda body: verbs.bind_verb(runtime, settings, body),
        "preempt": lambda body: verbs.preempt_verb(runtime, body),
    }
    if settings.enable_explain:
        handlers["explain"] = lambda body: verbs.explain_verb(runtime, cache, body)
    for verb, handler in handlers.items():
        app.add_url_rule(settings.verb_path(verb), verb, _verb_view(verb, handler), methods=["POST"])
    _add_status_routes(app, runtime, settings)
    _add_error_handlers(app)
    return app


def _verb_view(verb: str, handler: Callable[[Any], verbs.Outcome]) -> Callable[[], Response]:
    def view() -> Response:
        started = time.perf_counter()
        size = request.content_length or 0
        result, pod, nodes, note = "bad-request", "", 0, ""
        try:
            outcome = handler(read_json(request))
            result, pod, nodes, note = outcome.result, outcome.pod, outcome.nodes, outcome.note
            return json_response(outcome.reply)
        except WireError as exc:
            result, note = "bad-request", str(exc)
            raise
        except PluginError as exc:
            result, note = "plugin-error", str(exc)
            log.error("%s failed in a plugin: %s", verb, exc, exc_info=True)
            # The plugin's own message may hold paths or internals: it stays in the log.
            return json_response({"Error": f"{verb} failed in a policy plugin; see the extender's log"}, 500)
        finally:
            elapsed = time.perf_counter() - started
            metrics.REQUESTS.labels(verb=verb, result=result).inc()
            metrics.REQUEST_LATENCY.labels(verb=verb, result=result).observe(elapsed)
            metrics.REQUEST_NODES.labels(verb=verb).observe(nodes)
            metrics.REQUEST_BYTES.labels(verb=verb).observe(size)
            access_log.info(
                "%s %s", verb, result,
                extra={"fields": {"verb": verb, "pod": pod, "nodes": nodes, "result": result,
                                  "duration_ms": round(elapsed * 1000, 3), **({"note": note} if note else {})}},
            )

    view.__name__ = f"{verb}_view"
    return view


def _add_status_routes(app: Flask, runtime: Runtime, settings: Settings) -> None:
    from extender.webhook.openapi import build_openapi

    spec = build_openapi(settings)

    @app.get("/healthz")
    def healthz() -> Response:
        return json_response({"status": "ok"})

    @app.get("/readyz")
    def readyz() -> Response:
        state = runtime.state
        body = {"ready": state.ready, "nodesSynced": state.nodes_synced, "podsSynced": state.pods_synced,
                "storageSynced": state.volumes.synced,
                "nodes": state.node_count(), "pods": state.pod_count(), "source": runtime.source.kind,
                # Informational: without usage the load plugins see no data, requests still get answers.
                "usage": runtime.usage.status() if runtime.usage is not None else {"source": "", "state": "off"}}
        return json_response(body, 200 if state.ready else 503)

    @app.get("/metrics")
    def metrics_view() -> Response:
        metrics.CACHE_SYNCED.set(1 if runtime.state.ready else 0)
        payload, content_type = metrics.render()
        return Response(payload, content_type=content_type)

    @app.get("/openapi.json")
    def openapi() -> Response:
        return json_response(spec)

    @app.get("/version")
    def version() -> Response:
        return json_response({"version": __version__, "python": platform.python_version(),
                              "policy": runtime.engine.policy.source,
                              "policyDigest": runtime.engine.policy.digest})


def _add_error_handlers(app: Flask) -> None:
    @app.errorhandler(WireError)
    def wire_error(exc: WireError) -> Response:
        return json_response({"Error": str(exc)}, exc.status)

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        messages = {
            404: f"unknown path {request.path}: not an extender verb or status route",
            405: f"method {request.method} is not allowed on {request.path}; verbs take POST",
            413: f"request body exceeds the limit of {app.config['MAX_CONTENT_LENGTH']} bytes",
        }
        return json_response({"Error": messages.get(exc.code or 0, exc.description or exc.name)}, exc.code or 400)

    @app.errorhandler(Exception)
    def internal_error(exc: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return json_response({"Error": "internal error; see the extender's log"}, 500)
