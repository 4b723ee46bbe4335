from typing import Any

from gunicorn.config import Config
from gunicorn.http.body import Body

class Message:
    # Class attributes are None until the request line is parsed.
    scheme: str | None
    version: tuple[int, int] | None
    method: str
    uri: str
    path: str
    query: str
    fragment: str
    headers: list[tuple[str, str]]
    trailers: list[tuple[str, str]]
    body: Body
    def __init__(self, cfg: Config, unreader: Any, peer_addr: Any) -> None: ...
    def force_close(self) -> None: ...
    def should_close(self) -> bool: ...

class Request(Message):
    req_number: int
    def __init__(self, cfg: Config, unreader: Any, peer_addr: Any, req_number: int = 1) -> None: ...
