"""Exit codes of the provider script contract, and the exception that carries one.

Every way a call can end other than success is a ``SimExit``, so the entry
point has one place that turns outcomes into the codes the daemon acts on.
(77, credentials, is never raised by the simulator itself; inject it with a fault.)
"""

from __future__ import annotations

import json
from typing import Any

FAILED = 1
USAGE = 64
BAD_INPUT = 65
CAPACITY = 69
TRANSIENT = 75
CONFIG = 78


class SimExit(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def read_json(path: str, code: int, what: str) -> Any:
    """The JSON document in ``path``, or a ``SimExit`` with ``code`` naming ``what`` and the file."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise SimExit(code, f"{what} {path}: cannot read: {e.strerror}") from None
    except ValueError as e:
        raise SimExit(code, f"{what} {path}: not valid JSON: {e}") from None
