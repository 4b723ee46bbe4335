"""Credentials never reach a log line: our formatters redact them, and the kubernetes client stays quiet."""

from __future__ import annotations

import http.client
import http.server
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from extender.errors import ClusterError
from extender.kube import client as kube_client
from extender.logs import JsonFormatter, TextFormatter, setup_logging

TOKEN = "eyJhbGciOiJSUzI1NiJ9.sekrit-service-account-token-do-not-log"


def record(fields: dict[str, object]) -> logging.LogRecord:
    entry = logging.LogRecord("extender.test", logging.INFO, __file__, 1, "calling the API server", None, None)
    entry.fields = fields  # type: ignore[attr-defined]
    return entry


@pytest.mark.parametrize("formatter", [JsonFormatter(), TextFormatter()], ids=["json", "text"])
def test_formatters_redact_credential_fields(formatter: logging.Formatter) -> None:
    fields = {"token": TOKEN, "Authorization": f"Bearer {TOKEN}", "bearerToken": TOKEN, "password": TOKEN,
              "client_secret": TOKEN, "X-Api-Token": TOKEN, "pod": "default/web"}
    line = formatter.format(record(fields))
    assert TOKEN not in line
    assert line.count("<redacted>") == 6
    assert "default/web" in line
    if isinstance(formatter, JsonFormatter):
        assert json.loads(line)["Authorization"] == "<redacted>"


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        type(self).seen.append(self.headers.get("Authorization", ""))
        status, body = (403, {"kind": "Status", "reason": "Forbidden", "message": "nodes is forbidden"}) \
            if "forbidden" in self.path else (200, {"kind": "NodeList", "items": []})
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def apiserver() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Recorder.seen = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def debug_logging() -> Iterator[None]:
    """setup_logging at DEBUG, the most talkative level an operator can ask for; restored afterwards."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level,
             {name: logging.getLogger(name).level for name in ("kubernetes", "urllib3", "client")})
    yield
    root.handlers[:], root.level = saved[0], saved[1]
    for name, level in saved[2].items():
        logging.getLogger(name).setLevel(level)


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_kubernetes_client_never_logs_the_bearer_token(apiserver: str, debug_logging: None, fmt: str,
                                                       capfd: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    setup_logging(fmt, "DEBUG")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": apiserver}}],
        "users": [{"name": "test", "user": {"token": TOKEN}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
    }))
    for api in (kube_client.build_api_client(str(kubeconfig)), kube_client.api_client_for(apiserver, token=TOKEN)):
        assert api.configuration.debug is False
        assert kube_client.request_json(api, "GET", "/api/v1/nodes") == {"kind": "NodeList", "items": []}
        with pytest.raises(ClusterError) as err:
            kube_client.request_json(api, "GET", "/api/v1/forbidden")
        assert TOKEN not in str(err.value)
        logging.getLogger("extender.test").error("bind failed: %s", err.value)
    assert http.client.HTTPConnection.debuglevel == 0  # http.client would print every header to stdout
    assert _Recorder.seen == [f"Bearer {TOKEN}"] * 4  # the token was sent, so it was there to leak
    out, err_text = capfd.readouterr()
    assert "API server" in err_text  # logging was really on
    assert TOKEN not in out and TOKEN not in err_text
