"""Log lines for people (text) or for log shippers (one JSON object per line).

Every state change is one line already (the journal logs each committed fact's
summary); JSON only changes the wrapping. Nothing here adds fields from the
environment, so no secret can ride along.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Literal

import orjson

Format = Literal["text", "json"]
TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "thread": record.threadName,
            "message": record.getMessage(),
        }
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(doc).decode()


def setup(level: str = "INFO", fmt: Format = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
