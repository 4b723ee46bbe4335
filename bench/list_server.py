"""A minimal paginated list server for benchmarks: the API server's wire format, none of its logic.

The test fake (tests/fakeapi) deep-copies its whole store on every list page, so a
150,000-pod list in pages of 500 would take hours there. This server builds each page
from bench/objects.py templates (the same objects as the in-process benchmark; about
15 ms per page of 500, small beside the client's decoding), and answers watches with an idle chunked stream, so a KubeSource lists and then waits
exactly as it would against kube-apiserver.
"""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from objects import list_page  # noqa: E402

LIST_RV = "1000000"


def serve(nodes: int, pods: int, ready_file: str) -> None:
    """Serve until stdin closes; write the URL to `ready_file` once listening."""
    stopping = threading.Event()
    from objects import claim_count

    claims = claim_count(pods)
    counts = {"/api/v1/nodes": nodes, "/api/v1/pods": pods, "/api/v1/persistentvolumeclaims": claims,
              "/api/v1/persistentvolumes": claims, "/api/v1/namespaces": 0}
    kinds = {"/api/v1/nodes": "nodes", "/api/v1/pods": "pods", "/api/v1/persistentvolumeclaims": "claims",
             "/api/v1/persistentvolumes": "volumes"}
    for path in ("storageclasses", "csinodes", "csidrivers", "csistoragecapacities", "volumeattachments"):
        counts[f"/apis/storage.k8s.io/v1/{path}"] = 0  # served empty: the state waits for every list

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            if url.path not in counts:
                self._send(404, {"kind": "Status", "status": "Failure", "code": 404, "reason": "NotFound"})
                return
            if query.get("watch") == "true":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.flush()
                stopping.wait()
                self.close_connection = True
                return
            total = counts[url.path]
            start = int(query.get("continue") or 0)
            limit = int(query.get("limit") or total) or total
            end = min(total, start + limit)
            meta: dict[str, Any] = {"resourceVersion": LIST_RV}
            if end < total:
                meta["continue"] = str(end)
                meta["remainingItemCount"] = total - end
            self._send_bytes(200, list_page(kinds.get(url.path, ""), start, limit, total, nodes, meta))

        def _send(self, code: int, body: dict[str, Any]) -> None:
            self._send_bytes(code, orjson.dumps(body))

        def _send_bytes(self, code: int, payload: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    class Server(ThreadingHTTPServer):
        daemon_threads = True

    httpd = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    Path(ready_file).write_text(f"http://127.0.0.1:{httpd.server_address[1]}")
    sys.stdin.read()  # the parent closes stdin to stop us
    stopping.set()
    httpd.shutdown()
