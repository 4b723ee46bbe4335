"""The cheapest extender a Python server can be: the yardstick of `python -m bench e2e`.

Standard library HTTP server (one thread per connection, HTTP/1.1 keep-alive,
TCP_NODELAY), orjson, no state, no policy, no logging: /filter keeps every node it
is sent (NodeNames, or the NodeList object in full-NodeList mode) and /prioritize
gives each node 0. Whatever our webhook costs above this is what our own HTTP
stack, framework and policy add on kube-scheduler's path.

Usage: python bench/empty_extender.py PORT  (serves 127.0.0.1:PORT until killed)
"""

from __future__ import annotations

import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson


def _names(args: dict[str, Any]) -> list[str]:
    if args.get("NodeNames") is not None:
        return list(args["NodeNames"])
    return [item["metadata"]["name"] for item in (args.get("Nodes") or {}).get("items") or []]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as kube-scheduler's client expects
    disable_nagle_algorithm = True  # TCP_NODELAY: no 40 ms delayed-ACK stall on small replies

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        args = orjson.loads(body)
        if self.path.endswith("/filter"):
            if args.get("NodeNames") is not None:
                reply: Any = {"NodeNames": args["NodeNames"], "FailedNodes": {}, "Error": ""}
            else:
                reply = {"Nodes": args.get("Nodes"), "FailedNodes": {}, "Error": ""}
        elif self.path.endswith("/prioritize"):
            reply = [{"Host": name, "Score": 0} for name in _names(args)]
        else:
            reply = {"Error": ""}
        data = orjson.dumps(reply)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the stdlib's name)
        """No access log: the point is to do nothing."""


def main(argv: list[str]) -> int:
    server = ThreadingHTTPServer(("127.0.0.1", int(argv[0])), Handler)
    server.daemon_threads = True
    server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
