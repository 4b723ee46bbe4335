"""The verb routes answered in front of Flask (extender.webhook.verb_routes): what differs from Flask's path."""

from __future__ import annotations

import io
import logging
from dataclasses import replace
from typing import Any

import orjson
import pytest
from flask import Flask

from extender import metrics
from extender.settings import Settings
from extender.webhook import create_app, verbs
from extender.webhook.podviews import PodViewCache
from extender.webhook.runtime import Runtime
from tests.helpers import wire_body


def call(app: Flask, body: bytes, *, length: int | None = None, method: str = "POST", path: str = "/filter",
         content_type: str = "application/json") -> tuple[str, dict[str, str], bytes, Any]:
    """One WSGI call as gunicorn makes it; returns status, headers, body and the reply iterable."""
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "SCRIPT_NAME": "", "QUERY_STRING": "",
               "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8888", "SERVER_PROTOCOL": "HTTP/1.1",
               "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(body), "wsgi.errors": io.StringIO(),
               "CONTENT_TYPE": content_type, "CONTENT_LENGTH": str(len(body) if length is None else length)}
    started: list[Any] = []
    reply = app.wsgi_app(environ, lambda status, headers: started.extend([status, dict(headers)]))
    data = b"".join(reply)
    return started[0], started[1], data, reply


def test_kube_schedulers_request_is_answered_and_recorded_after_the_reply(
        settings: Settings, runtime: Runtime, caplog: pytest.LogCaptureFixture) -> None:
    app = create_app(replace(settings, access_log=True), runtime=runtime)
    caplog.set_level(logging.INFO, logger="extender.access")
    status, headers, data, reply = call(app, orjson.dumps(wire_body("filter-request.json")))
    assert status == "200 OK" and headers["Content-Type"] == "application/json"
    assert int(headers["Content-Length"]) == len(data)
    assert orjson.loads(data)["NodeNames"] == ["node-1", "node-2", "node-3"]
    assert not [r for r in caplog.records if r.name == "extender.access"]  # not before close()
    reply.close()  # what the WSGI server does once the reply is sent
    (line,) = [r for r in caplog.records if r.name == "extender.access"]
    assert line.fields["verb"] == "filter" and line.fields["result"] == "ok"  # type: ignore[attr-defined]
    assert line.fields["pod"] == "default/pod-cache-true" and line.fields["nodes"] == 3  # type: ignore[attr-defined]


def test_successful_filter_and_prioritize_calls_are_only_counted_by_default(
        app: Flask, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="extender.access")
    before = metrics.REQUESTS.labels(verb="filter", result="ok")._value.get()
    for path in ("/filter", "/prioritize"):
        status, _, _, reply = call(app, orjson.dumps(wire_body("filter-request.json")), path=path)
        reply.close()
        assert status == "200 OK"
    assert metrics.REQUESTS.labels(verb="filter", result="ok")._value.get() == before + 1
    assert not [r for r in caplog.records if r.name == "extender.access"]
    # A failed call is always logged.
    status, _, _, reply = call(app, b"{", path="/prioritize")
    reply.close()
    (line,) = [r for r in caplog.records if r.name == "extender.access"]
    assert status.startswith("400") and line.fields["result"] == "bad-request"  # type: ignore[attr-defined]


def test_a_body_shorter_than_its_content_length_is_a_400(app: Flask) -> None:
    body = orjson.dumps(wire_body("filter-request.json"))
    status, _, data, _ = call(app, body[:100], length=len(body))
    assert status.startswith("400") and b"cannot read the request body" in data


def test_content_type_with_parameters_takes_the_general_path(app: Flask) -> None:
    body = orjson.dumps(wire_body("filter-request.json"))
    status, _, data, _ = call(app, body, content_type="application/json; charset=utf-8")
    assert status == "200 OK" and orjson.loads(data)["Error"] == ""


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "HEAD"])
def test_other_methods_on_a_verb_are_405_with_allow(app: Flask, method: str) -> None:
    status, headers, data, _ = call(app, b"", method=method)
    assert status.startswith("405") and headers["Allow"] == "OPTIONS, POST"
    assert "verbs take POST" in orjson.loads(data)["Error"]


def test_options_on_a_verb_lists_the_methods(app: Flask) -> None:
    status, headers, data, _ = call(app, b"", method="OPTIONS")
    assert status == "200 OK" and headers["Allow"] == "OPTIONS, POST" and data == b""


def test_other_paths_still_reach_flask(app: Flask) -> None:
    status, _, data, _ = call(app, b"", method="GET", path="/healthz")
    assert status == "200 OK" and orjson.loads(data) == {"status": "ok"}
    status, _, data, _ = call(app, b"{}", path="/nowhere")
    assert status.startswith("404") and "unknown path /nowhere" in orjson.loads(data)["Error"]


def test_a_bug_in_a_verb_is_a_500_counted_as_an_error(app: Flask, monkeypatch: pytest.MonkeyPatch,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    def broken(*args: Any, **kwargs: Any) -> verbs.Outcome:
        raise RuntimeError("boom")

    monkeypatch.setattr(verbs, "filter_verb", broken)
    caplog.set_level(logging.INFO)
    status, _, data, reply = call(app, orjson.dumps(wire_body("filter-request.json")))
    reply.close()
    assert status.startswith("500") and orjson.loads(data) == {"Error": "internal error; see the extender's log"}
    (line,) = [r for r in caplog.records if r.name == "extender.access"]
    assert line.fields["result"] == "error"  # type: ignore[attr-defined]
    assert any("unhandled error on POST /filter" in r.getMessage() for r in caplog.records)


def test_the_pod_of_filter_is_parsed_once_for_prioritize() -> None:
    pods = PodViewCache()
    raw = wire_body("filter-request.json")["Pod"]
    parsed: list[Any] = []

    def parse(pod: Any) -> Any:
        parsed.append(pod)
        return object()

    first = pods.view(raw, parse)
    assert pods.view(raw, parse) is first and len(parsed) == 1
    changed = {**raw, "metadata": {**raw["metadata"], "resourceVersion": "changed"}}
    assert pods.view(changed, parse) is not first and len(parsed) == 2
    anonymous = {**raw, "metadata": {k: v for k, v in raw["metadata"].items() if k != "uid"}}
    pods.view(anonymous, parse)
    pods.view(anonymous, parse)
    assert len(parsed) == 4  # no uid: never cached


def test_a_verb_holds_the_states_gate_while_it_runs(settings: Settings, runtime: Runtime,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    busy: list[bool] = []
    original = verbs.filter_verb

    def observed(*args: Any, **kwargs: Any) -> verbs.Outcome:
        busy.append(runtime.state.serving.busy)
        return original(*args, **kwargs)

    monkeypatch.setattr(verbs, "filter_verb", observed)
    app = create_app(settings, runtime=runtime)
    reply = app.test_client().post("/filter", json=wire_body("filter-request.json"))
    assert reply.status_code == 200 and busy == [True]
    assert not runtime.state.serving.busy
    monkeypatch.setattr(verbs, "filter_verb", lambda *a, **k: 1 / 0)
    assert app.test_client().post("/filter", json=wire_body("filter-request.json")).status_code == 500
    assert not runtime.state.serving.busy  # left on errors too
