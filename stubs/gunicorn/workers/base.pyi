import socket
from collections.abc import Callable, Iterable
from typing import Any

from gunicorn.app.base import BaseApplication
from gunicorn.config import Config
from gunicorn.glogging import Logger

# A WSGI application: (environ, start_response) -> the body's chunks.
_WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

class Worker:
    age: int
    pid: int | str
    ppid: int
    sockets: list[socket.socket]
    app: BaseApplication
    timeout: int
    cfg: Config
    booted: bool
    aborted: bool
    nr: int
    max_requests: int
    alive: bool
    log: Logger
    PIPE: list[int] | tuple[int, int]  # a class attribute [], then os.pipe() in init_process
    wsgi: _WSGIApp  # set by load_wsgi, in init_process
    def __init__(self, age: int, ppid: int, sockets: list[socket.socket], app: BaseApplication,
                 timeout: int, cfg: Config, log: Logger) -> None: ...
    def notify(self) -> None: ...
    def run(self) -> None: ...
    def init_process(self) -> None: ...
    def load_wsgi(self) -> None: ...
    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None: ...
