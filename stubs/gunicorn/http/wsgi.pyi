from collections.abc import Callable
from typing import Any

from gunicorn.config import Config

class FileWrapper:
    def __init__(self, filelike: Any, blksize: int = 8192) -> None: ...

def base_environ(cfg: Config) -> dict[str, Any]: ...
def create(req: Any, sock: Any, client: Any, server: Any, cfg: Config,
           response_class: type[Response] | None = None,
           response_args: tuple[Any, ...] = ()) -> tuple[Response, dict[str, Any]]: ...

class Response:
    """req: gunicorn's Request, or anything with its attributes (extender's PlainRequest)."""

    req: Any
    sock: Any
    version: str
    status: str | None
    chunked: bool
    must_close: bool
    headers: list[tuple[str, str]]
    headers_sent: bool
    response_length: int | None
    sent: int
    upgrade: bool
    cfg: Config
    def __init__(self, req: Any, sock: Any, cfg: Config) -> None: ...
    def force_close(self) -> None: ...
    def should_close(self) -> bool: ...
    def start_response(self, status: str, headers: list[tuple[str, str]],
                       exc_info: Any = None) -> Callable[[bytes], None]: ...
    def default_headers(self) -> list[str]: ...
    def write(self, arg: bytes) -> None: ...
    def write_file(self, respiter: Any) -> None: ...
    def close(self) -> None: ...
