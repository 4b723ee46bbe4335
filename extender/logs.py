"""Logging setup for the entry points (never called on import): text or JSON lines.

Structured fields travel in `extra={"fields": {...}}`; the JSON formatter puts
them at the top level of each line, the text formatter appends them as k=v.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

_SECRET_HINTS = ("token", "authorization", "password", "secret", "bearer")


def _clean(fields: dict[str, Any]) -> dict[str, Any]:
    """Never log credentials, whatever a caller passes."""
    return {k: ("<redacted>" if any(h in k.lower() for h in _SECRET_HINTS) else v) for k, v in fields.items()}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(_clean(getattr(record, "fields", {}) or {}))
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def _one_line(text: object) -> str:
    """Escape line breaks: a pod name from a request must not forge a second log line."""
    return str(text).replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        record.message = _one_line(record.message)
        return super().formatMessage(record)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = getattr(record, "fields", None)
        if fields:
            line += " " + " ".join(f"{k}={_one_line(v)}" for k, v in _clean(fields).items())
        return line


def setup_logging(fmt: str = "text", level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The kubernetes client logs request bodies at DEBUG; keep it quiet unless asked.
    logging.getLogger("kubernetes").setLevel(max(logging.INFO, root.level))
    logging.getLogger("urllib3").setLevel(logging.WARNING)
