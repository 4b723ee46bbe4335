"""gunicorn's own log lines (arbiter and workers) in the extender's format.

gunicorn writes "Booting worker", "Worker exiting" and its errors through its own
loggers with its own text format; with `--log-format json` those lines broke a log
pipeline that expects one JSON object per line. config/gunicorn.conf.py names this
class as `logger_class`, so every line gunicorn writes goes through the same
formatter as the extender's (extender/logs.py).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from gunicorn import glogging

from extender.logs import JsonFormatter, TextFormatter


class GunicornLogger(glogging.Logger):
    def _set_handler(self, log: logging.Logger, output: Any, fmt: logging.Formatter, stream: Any = None) -> None:
        """gunicorn's handler, with the formatter EXTENDER_LOG_FORMAT asks for."""
        ours = JsonFormatter() if os.environ.get("EXTENDER_LOG_FORMAT", "text") == "json" else TextFormatter()
        super()._set_handler(log, output, ours, stream)


__all__ = ["GunicornLogger"]
