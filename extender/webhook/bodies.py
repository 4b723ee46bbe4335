"""Reading request bodies and writing JSON replies.

Every way a body can be wrong ends here as a WireError with a 4xx status and a
message naming the problem; nothing below this layer sees bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from flask import Request, Response
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge
from werkzeug.wrappers import Request as WerkzeugRequest

from extender.errors import WireError

JSON = "application/json"


def read_json(request: Request | WerkzeugRequest) -> Any:
    mimetype = request.mimetype
    if mimetype != JSON:
        raise WireError(f"Content-Type must be {JSON}, got {mimetype or 'none'}", status=415)
    try:
        data = request.get_data(cache=False)  # raises 413 past MAX_CONTENT_LENGTH
    except HTTPException:
        raise
    except Exception as exc:  # the WSGI server failing on the body (gunicorn: bad chunk size, early EOF)
        raise WireError(f"cannot read the request body: {type(exc).__name__}: {exc}") from None
    limit = request.max_content_length
    if request.content_length is None and limit is not None and len(data) >= limit:
        raise RequestEntityTooLarge()  # a chunked body is silently cut at the limit, not refused
    return decode_json(data)


def plain_length(environ: Mapping[str, Any], limit: int) -> int | None:
    """The Content-Length of what kube-scheduler sends (exactly `application/json`, a length
    within `limit`), or None for anything else, which `read_json` judges with werkzeug."""
    length = environ.get("CONTENT_LENGTH")
    if environ.get("CONTENT_TYPE") != JSON or not length or not length.isdigit():
        return None
    expected = int(length)
    return expected if 0 < expected <= limit else None


def read_plain(environ: Mapping[str, Any], limit: int) -> bytes | bytearray:
    """A plain body (`plain_length`) read straight from the WSGI input; NotPlain for any
    other, which `read_json` then judges with werkzeug's full parsing."""
    expected = plain_length(environ, limit)
    if expected is None:
        raise NotPlain()
    try:
        data: bytes | bytearray = environ["wsgi.input"].read(expected)
    except Exception as exc:  # the WSGI server failing on the body (early EOF)
        raise WireError(f"cannot read the request body: {type(exc).__name__}: {exc}") from None
    if len(data) != expected:
        raise WireError(f"cannot read the request body: it ended after {len(data)} of {expected} bytes")
    return data


class NotPlain(Exception):
    """Internal: the request needs `read_json`'s general path."""


def decode_json(data: bytes | bytearray) -> Any:
    if not data:
        raise WireError("request body is empty; expected a JSON object")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise WireError(f"malformed JSON: {exc}") from None


def encode_json(body: Any) -> bytes:
    try:
        return orjson.dumps(body)
    except orjson.JSONEncodeError as exc:
        # Only a reply that echoes the request's own objects can fail here (filter returns the
        # NodeList it was sent): orjson decodes 1024 levels of nesting but encodes only 254.
        raise WireError(f"the request nests JSON too deeply to be echoed in the reply: {exc}") from None


def json_response(body: Any, status: int = 200) -> Response:
    return Response(encode_json(body), status=status, mimetype=JSON)


def error_message(exc: HTTPException, *, method: str, path: str, limit: int | None) -> str:
    """The `Error` of a reply to an HTTP-level refusal, naming what to do about it.

    Verbs (POST only) are refused in verb_routes.py; a 405 here is a status route
    (/healthz, /readyz, ...): it names the methods that route takes."""
    allowed = sorted(set(getattr(exc, "valid_methods", None) or ()) - {"HEAD", "OPTIONS"})
    messages = {
        404: f"unknown path {path}: not an extender verb or status route",
        405: f"method {method} is not allowed on {path}; it takes {' or '.join(allowed) or 'no method'}",
        413: f"request body exceeds the limit of {limit} bytes",
    }
    return messages.get(exc.code or 0, exc.description or exc.name)


def explain_off_message(path: str) -> str:
    """The `Error` of a POST to the explain path when it is not served."""
    return f"{path} is off: start the webhook with --enable-explain (EXTENDER_ENABLE_EXPLAIN=true) to serve it"
