"""Reading request bodies and writing JSON replies.

Every way a body can be wrong ends here as a WireError with a 4xx status and a
message naming the problem; nothing below this layer sees bytes.
"""

from __future__ import annotations

from typing import Any

import orjson
from flask import Request, Response

from extender.errors import WireError

JSON = "application/json"


def read_json(request: Request) -> Any:
    mimetype = request.mimetype
    if mimetype != JSON:
        raise WireError(f"Content-Type must be {JSON}, got {mimetype or 'none'}", status=415)
    data = request.get_data(cache=False)  # raises 413 past MAX_CONTENT_LENGTH
    if not data:
        raise WireError("request body is empty; expected a JSON object")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise WireError(f"malformed JSON: {exc}") from None


def json_response(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status=status, mimetype=JSON)
