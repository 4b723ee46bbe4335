from collections.abc import Callable
from typing import Any

class SettingMeta(type):
    def __new__(cls, name: str, bases: tuple[type, ...], attrs: dict[str, Any]) -> SettingMeta: ...

class Setting(metaclass=SettingMeta):
    value: Any
    default: Any
    def get(self) -> Any: ...
    def set(self, val: Any) -> None: ...

class Config:
    """Settings are read as attributes (Config.__getattr__): only those extender/ reads are named."""

    settings: dict[str, Setting]
    def __init__(self, usage: str | None = None, prog: str | None = None) -> None: ...
    def set(self, name: str, value: Any) -> None: ...
    @property
    def is_ssl(self) -> bool: ...
    workers: int
    worker_connections: int
    max_requests: int
    timeout: int
    graceful_timeout: int
    keepalive: int
    limit_request_line: int
    limit_request_fields: int
    limit_request_field_size: int
    secure_scheme_headers: dict[str, str]
    proxy_protocol: str  # off, v1, v2 or auto (validate_proxy_protocol)
    # Server hooks: (worker, req) and (worker, req, environ, resp).
    pre_request: Callable[[Any, Any], object]
    post_request: Callable[[Any, Any, dict[str, Any], Any], object]
