"""The Flask app factory. Importing this module creates no app and starts nothing.

`create_app()` is what gunicorn calls in each worker (`extender.webhook:create_app()`),
so every worker gets its own cluster state, watches and policy, started after fork.
"""

from __future__ import annotations

import logging
import platform

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from extender import __version__, metrics
from extender.logs import setup_logging
from extender.settings import Settings
from extender.startup import tune_gc
from extender.webhook import verbs
from extender.webhook.bodies import error_message, explain_off_message, json_response
from extender.webhook.nodeviews import NodeViewCache
from extender.webhook.openapi import build_openapi
from extender.webhook.podviews import PodViewCache
from extender.webhook.runtime import Runtime, build_runtime
from extender.webhook.verb_routes import Route, VerbRoutes

log = logging.getLogger(__name__)

EXTENSION = "extender"


def create_app(settings: Settings | None = None, *, runtime: Runtime | None = None, start: bool = True) -> Flask:
    """Build the app. Without arguments, settings come from EXTENDER_* variables."""
    settings = settings or Settings.from_env()
    if not logging.getLogger().handlers:  # plain `gunicorn -c ...`: nobody configured logging yet
        setup_logging(settings.log_format, settings.log_level)
    tune_gc()
    runtime = runtime or build_runtime(settings)
    if start:
        runtime.start()
    app = Flask("extender")
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.extensions[EXTENSION] = runtime
    cache = NodeViewCache()
    pods = PodViewCache()

    # ExtenderArgs bodies (filter, prioritize, explain) are read with the node cache: a full
    # NodeList comes as the bytes of nodes it has seen (nodeviews.py).
    handlers: dict[str, Route] = {
        "filter": Route(lambda body: verbs.filter_verb(runtime, cache, body, pods=pods), cache.args),
        "prioritize": Route(lambda body: verbs.prioritize_verb(runtime, cache, body, pods=pods), cache.args),
        "bind": Route(lambda body: verbs.bind_verb(runtime, settings, body)),
        "preempt": Route(lambda body: verbs.preempt_verb(runtime, body)),
    }
    if settings.enable_explain:
        handlers["explain"] = Route(lambda body: verbs.explain_verb(runtime, cache, body, pods=pods), cache.args)
    _add_status_routes(app, runtime, settings)
    _add_error_handlers(app)
    # The verbs are answered in front of Flask (verb_routes.py says why); the rest is Flask's.
    routes = {settings.verb_path(verb): (verb, route) for verb, route in handlers.items()}
    app.wsgi_app = VerbRoutes(app.wsgi_app, routes, settings.max_body_bytes,  # type: ignore[method-assign]  # Flask's way to wrap its WSGI app
                              runtime.state.serving, log_successes=settings.access_log)
    return app


def _add_status_routes(app: Flask, runtime: Runtime, settings: Settings) -> None:
    spec = build_openapi(settings)

    @app.get("/healthz")
    def healthz() -> Response:
        return json_response({"status": "ok"})

    @app.get("/readyz")
    def readyz() -> Response:
        state = runtime.state
        body = {"ready": state.ready, "nodesSynced": state.nodes_synced, "podsSynced": state.pods_synced,
                "storageSynced": state.volumes.synced,
                "nodes": state.node_count(), "pods": state.pod_count(), "podsWatched": runtime.source.pods_watched,
                "source": runtime.source.kind,
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

    if not settings.enable_explain:
        explain_path = settings.verb_path("explain")

        @app.route(explain_path, methods=["POST"], endpoint="explain_disabled")
        def explain_disabled() -> Response:
            return json_response({"Error": explain_off_message(explain_path)}, 404)

    @app.get("/version")
    def version() -> Response:
        return json_response({"version": __version__, "python": platform.python_version(),
                              "policy": runtime.engine.policy.source,
                              "policyDigest": runtime.engine.policy.digest})


def _add_error_handlers(app: Flask) -> None:
    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        message = error_message(exc, method=request.method, path=request.path,
                                limit=app.config["MAX_CONTENT_LENGTH"])
        return json_response({"Error": message}, exc.code or 400)

    @app.errorhandler(Exception)
    def internal_error(exc: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return json_response({"Error": "internal error; see the extender's log"}, 500)
