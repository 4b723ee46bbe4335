"""A real Prometheus for the PromQL source's tests, scraping a tiny exporter the test controls.

Both listen on 127.0.0.1 only. The exporter serves node-labelled gauges from a dict the
test edits; Prometheus scrapes it every second with `honor_labels`, so the `node` label
reaches the queries as the exporter wrote it. Prometheus runs from Debian's package
(`apt-get install prometheus`, done by .ci/run); tests skip with a reason without it.
`stop()` and `start()` reuse the port and the data directory: an outage and a recovery.
Every wait is bounded.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.helpers import free_port, wait_for

BINARY = shutil.which("prometheus")
MISSING_REASON = "the prometheus binary is not installed (apt-get install prometheus; .ci/run does it)"


class Exporter:
    """Serves `/metrics` in the text format from `values`: {(metric, node): value-text}."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - stdlib naming
                body = exporter.render().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="test-exporter", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self._server.server_address[1]}"

    def set(self, metric: str, node: str, value: str | float | None) -> None:
        with self._lock:
            if value is None:
                self.values.pop((metric, node), None)
            else:
                self.values[(metric, node)] = str(value)

    def render(self) -> str:
        with self._lock:
            items = sorted(self.values.items())
        lines = []
        for metric in sorted({m for (m, _), _ in items}):
            lines.append(f"# TYPE {metric} gauge")
            lines += [f'{m}{{node="{n}"}} {v}' for (m, n), v in items if m == metric]
        return "\n".join(lines) + "\n"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class PrometheusServer:
    def __init__(self, directory: Path, scrape_target: str) -> None:
        assert BINARY is not None, MISSING_REASON
        self.directory = directory
        self.port = free_port()
        self.config = directory / "prometheus.yml"
        self.config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            "  - job_name: nodes\n"
            "    honor_labels: true\n"
            f"    static_configs: [{{targets: ['{scrape_target}']}}]\n",
            encoding="utf-8",
        )
        self.process: subprocess.Popen[bytes] | None = None
        self.log = directory / "prometheus.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        assert BINARY is not None
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [BINARY, f"--config.file={self.config}", f"--storage.tsdb.path={self.directory / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT)
        wait_for(lambda: self._ready(), timeout, f"Prometheus ready on {self.url} (log: {self.log})")

    def _ready(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"prometheus exited with {self.process.returncode}: {self.log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=1) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
        self.process = None


