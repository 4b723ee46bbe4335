from typing import Any

from gunicorn.config import Config
from gunicorn.http.message import Request as Request
from gunicorn.http.parser import Parser, RequestParser as RequestParser

def get_parser(cfg: Config, source: Any, source_addr: Any, http2_connection: bool = False) -> Parser: ...
