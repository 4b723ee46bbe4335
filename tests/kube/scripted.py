"""A tiny scripted API server for the few watch-stream faults the fake cannot produce.

kube-apiserver never sends a line that is not JSON, but a proxy, a bug or a cut
connection can; the fake only ever sends well-formed events. This server answers
each list with a fixed body and each watch with the byte chunks a test scripted
(split anywhere, even inside a line), then holds the stream open until closed.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson


def event_line(kind: str, obj: dict[str, Any]) -> bytes:
    return orjson.dumps({"type": kind, "object": obj}) + b"\n"


class ScriptedServer:
    """`lists[path]` is the list reply; `watches[path]` is a list of scripts, one per watch
    connection in order (a script is a list of byte chunks); later connections stay idle."""

    def __init__(self) -> None:
        self.lists: dict[str, dict[str, Any]] = {}
        self.watches: dict[str, list[list[bytes]]] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(url.query).items()}
                with server._lock:
                    server.requests.append((url.path, query))
                if query.get("watch") == "true":
                    with server._lock:
                        scripts = server.watches.get(url.path) or []
                        script = scripts.pop(0) if scripts else []
                    self._stream(script)
                    return
                body = orjson.dumps(server.lists.get(url.path, {"metadata": {"resourceVersion": "1"}, "items": []}))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _stream(self, script: list[bytes]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    for chunk in script:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                        time.sleep(0.01)  # separate TCP segments, so lines really arrive split
                    while not server._closing.wait(0.05):
                        pass
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    pass
                self.close_connection = True

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> ScriptedServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        self._httpd.shutdown()
        with contextlib.suppress(OSError):
            self._httpd.socket.shutdown(socket.SHUT_RDWR)
        self._httpd.server_close()

    def watch_requests(self, path: str) -> list[dict[str, str]]:
        with self._lock:
            return [q for p, q in self.requests if p == path and q.get("watch") == "true"]


