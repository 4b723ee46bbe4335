"""Plain HTTP/1.1 requests read without gunicorn's general parser; anything else goes to it.

kube-scheduler's calls are all alike: `POST /filter HTTP/1.1`, five or six ordinary
headers, a Content-Length body. gunicorn's Python parser spends about a third of the
webhook's time per call on them (profiled with `python -m bench e2e --py-spy`), because
it must handle every shape HTTP allows. Here a request head whose every part is in the
narrow shape below becomes a `PlainRequest`, which gunicorn's WSGI environ, Response
and Body code take as they take its own Request. Any request outside that shape (another
method or version, chunked bodies, Expect, Upgrade, forwarding or scheme headers,
repeated or underscored names, obsolete line folding, bytes outside visible ASCII,
anything over the configured limits, a head too large for one read) is pushed back
unread and parsed by gunicorn, which answers it exactly as before: its checks are not
duplicated, only its work on requests that cannot need them is skipped.
"""

from __future__ import annotations

import io
import os
import re
from dataclasses import dataclass
from typing import Any, TypeAlias

from gunicorn import util
from gunicorn.http import wsgi
from gunicorn.http.body import Body, LengthReader

# Larger heads are not kube-scheduler's: gunicorn reads them, with its own limits.
MAX_HEAD = 8192
# Bodies up to this size are read with the head; larger ones as the app reads them.
PRELOAD_LIMIT = 256 * 1024
_METHODS = {b"GET": "GET", b"POST": "POST"}
# The whole head: an origin-form target ("/" then visible ASCII, no fragment, not "//",
# which gunicorn's parser reads as an authority), HTTP/1.1, and header lines whose names
# are RFC 9110 tokens without "_" (gunicorn's header_map decides about those) and whose
# values are visible ASCII, space and tab (no obs-text, no control characters).
_HEAD = re.compile(
    rb"(GET|POST) (/(?!/)[\x21\x22\x24-\x7e]*) HTTP/1\.1"
    rb"((?:\r\n[!#$%&'*+\-.^`|~0-9A-Za-z]+:[\x20-\x7e\t]*)*)"
)
# Headers that change framing, the scheme or the environ beyond a plain mapping.
_GUNICORN_ONLY = frozenset({"TRANSFER-ENCODING", "EXPECT", "UPGRADE", "FORWARDED", "HTTP2-SETTINGS"})


# A plain request's wsgi.input: read with the head (small), gunicorn's reader (large), or
# a large one read whole for a verb call (read_whole).
PlainBody: TypeAlias = "io.BytesIO | Body | WholeBody"


class PlainRequest:
    """What gunicorn's wsgi.create, Response and worker read of a parsed request."""

    version = (1, 1)
    fragment = ""
    trailers: list[tuple[str, str]] = []
    proxy_protocol_info = None
    _expected_100_continue = False

    def __init__(self, method: str, uri: str, headers: list[tuple[str, str]], body: PlainBody,
                 scheme: str, peer_addr: Any, req_number: int) -> None:
        self.method = method
        self.uri = uri
        self.path, _, self.query = uri.partition("?")
        self.headers = headers
        self.body: PlainBody = body
        self.scheme = scheme
        self.peer_addr = self.remote_addr = peer_addr
        self.req_number = req_number
        self.must_close = False
        self.close_asked = any(name == "CONNECTION" and value.lower() == "close" for name, value in headers)

    def force_close(self) -> None:
        self.must_close = True

    def should_close(self) -> bool:
        return self.must_close or self.close_asked

    def unread_body(self) -> int:
        """Bytes of the body the application left unread (the next request starts after them)."""
        body = self.body
        if isinstance(body, io.BytesIO | WholeBody):
            return 0  # read from the connection already
        return int(body.reader.length) + body.buf.getbuffer().nbytes


@dataclass(frozen=True)
class HeadRules:
    """gunicorn's settings as the plain path reads them, taken once per worker."""

    line_limit: int
    field_limit: int
    field_size: int
    scheme: str
    left_to_gunicorn: frozenset[str]

    @classmethod
    def from_config(cls, cfg: Any) -> HeadRules:
        return cls(
            line_limit=cfg.limit_request_line if cfg.limit_request_line > 0 else MAX_HEAD,
            field_limit=cfg.limit_request_fields if cfg.limit_request_fields > 0 else 100,
            field_size=cfg.limit_request_field_size if cfg.limit_request_field_size > 0 else MAX_HEAD,
            scheme="https" if cfg.is_ssl else "http",
            left_to_gunicorn=_GUNICORN_ONLY | {name.upper() for name in cfg.secure_scheme_headers},
        )


def parse_head(head: bytes, rules: HeadRules) -> tuple[str, str, list[tuple[str, str]], int] | None:
    """(method, target, headers, content length) of a plain head (without its blank line), or None."""
    match = _HEAD.fullmatch(head)  # every byte checked in one pass of the regex engine
    if match is None:
        return None
    method, target, fields = match.groups()
    lines = fields.split(b"\r\n")  # lines[0] is empty: the fields start with a line break
    if len(head) - len(fields) > rules.line_limit or len(lines) - 1 > rules.field_limit:
        return None
    field_size, left_to_gunicorn = rules.field_size - 2, rules.left_to_gunicorn
    headers: list[tuple[str, str]] = []
    seen: set[str] = set()
    length = 0
    for line in lines[1:]:
        if len(line) > field_size:
            return None
        raw_name, _, raw_value = line.partition(b":")
        name = raw_name.decode("ascii").upper()
        if name in seen or name in left_to_gunicorn:
            return None
        seen.add(name)
        value = raw_value.strip(b" \t").decode("ascii")
        if name == "CONTENT-LENGTH":
            if not value.isdigit() or len(value) > 18:
                return None
            length = int(value)
        elif name == "CONNECTION" and value.lower() not in ("close", "keep-alive"):
            return None
        headers.append((name, value))
    return _METHODS[method], target.decode("ascii"), headers, length


def read_plain_request(unreader: Any, rules: HeadRules, peer_addr: Any, req_number: int) -> PlainRequest | None:
    """The next request if it is plain; None with every byte pushed back into `unreader` if not.

    Returns None too when the client closed the connection before a head arrived; the
    caller's gunicorn parser then sees the end of the stream as it would have.
    """
    data = b""
    while True:
        chunk = unreader.read()
        if not chunk:
            unreader.unread(data)
            return None
        data += chunk
        end = data.find(b"\r\n\r\n")
        if end >= 0:
            break
        if len(data) > MAX_HEAD:
            unreader.unread(data)
            return None
    parsed = parse_head(data[:end], rules) if end <= MAX_HEAD else None
    if parsed is None:
        unreader.unread(data)
        return None
    method, uri, headers, length = parsed
    return PlainRequest(method, uri, headers, _body(unreader, data[end + 4:], length), rules.scheme, peer_addr,
                        req_number)


def _body(unreader: Any, received: bytes, length: int) -> io.BytesIO | Body:
    """The body as wsgi.input: read in full now when small (kube-scheduler's node-cache calls,
    about 10 KB: one copy instead of gunicorn's buffer juggling on every read), else
    gunicorn's reader, which the app reads as it goes (and may refuse unread: 413)."""
    if length > PRELOAD_LIMIT:
        unreader.unread(received)
        return Body(LengthReader(unreader, length))
    while len(received) < length:
        chunk = unreader.read()
        if not chunk:
            break  # the client closed early: the app sees a short body and says so
        received += chunk
    unreader.unread(received[length:])
    return io.BytesIO(received[:length])


class WholeBody:
    """A large plain body read at once into one buffer of its exact size, for a caller that
    reads it whole anyway (the verb calls): gunicorn's Body copies a large body several
    times on its way (each chunk, its buffer, the value, a slice, again), which for a
    full-NodeList call of a few MB cost as much as decoding it."""

    def __init__(self, data: bytearray) -> None:
        self._data = data
        self._position = 0

    def read(self, size: int | None = -1) -> bytes | bytearray:
        data, start = self._data, self._position
        if start == 0 and (size is None or size < 0 or size >= len(data)):
            self._position = len(data)
            return data  # the whole body, not copied
        end = len(data) if size is None or size < 0 else min(len(data), start + size)
        self._position = end
        return bytes(data[start:end])


def read_whole(req: PlainRequest) -> None:
    """Read a large body not read yet (a gunicorn Body) into a WholeBody; a small one was
    read with the head. Stops early at the end of the stream: the caller sees a short body."""
    body = req.body
    if not isinstance(body, Body) or body.buf.tell():
        return
    unreader, length = body.reader.unreader, body.reader.length
    pending = unreader.buf.getvalue()
    unreader.buf = io.BytesIO()
    unreader.unread(pending[length:])  # never more than the body: a pipelined request stays
    data = bytearray(length)
    view = memoryview(data)
    received = min(len(pending), length)
    view[:received] = pending[:received]
    while received < length:
        count = unreader.sock.recv_into(view[received:])
        if not count:
            del view
            del data[received:]
            break
        received += count
    body.reader.length = 0
    req.body = WholeBody(data)


class PlainEnviron:
    """The WSGI environ of a connection's plain requests: what gunicorn's wsgi.create builds
    for them, with the connection's part (about half of the keys, and a logging wrapper
    for wsgi.errors) built once instead of for every request. Not `wsgi.early_hints`,
    which this app never sends.
    """

    def __init__(self, cfg: Any, client: Any, server: Any) -> None:
        base = wsgi.base_environ(cfg)
        base.update({
            "wsgi.multithread": True,
            "wsgi.url_scheme": "https" if cfg.is_ssl else "http",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "SERVER_NAME": str(server[0]),
            "SERVER_PORT": str(server[1]),
            "SCRIPT_NAME": "",
        })
        if isinstance(client, tuple):
            base["REMOTE_ADDR"], base["REMOTE_PORT"] = client[0], str(client[1])
        else:
            base["REMOTE_ADDR"] = client.decode() if isinstance(client, bytes) else client
        self.base = base

    @staticmethod
    def usable(server: Any) -> bool:
        """TCP listeners only (a UNIX socket's server name comes from each request's Host), and
        no SCRIPT_NAME from the environment (gunicorn strips it from each path)."""
        return isinstance(server, tuple) and not os.environ.get("SCRIPT_NAME")

    def build(self, req: PlainRequest, sock: Any) -> dict[str, Any]:
        environ = self.base.copy()
        environ["gunicorn.socket"] = sock
        environ["wsgi.input"] = req.body
        environ["REQUEST_METHOD"] = req.method
        environ["QUERY_STRING"] = req.query
        environ["RAW_URI"] = req.uri
        path = req.path
        environ["PATH_INFO"] = util.unquote_to_wsgi_str(path) if "%" in path else path
        for name, value in req.headers:
            if name == "CONTENT-TYPE":
                environ["CONTENT_TYPE"] = value
            elif name == "CONTENT-LENGTH":
                environ["CONTENT_LENGTH"] = value
            else:
                environ["HTTP_" + name.replace("-", "_")] = value
        return environ
