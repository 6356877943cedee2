"""Exit codes of the provider script contract, and the exception that carries one.

Every way a call can end other than success is a ``SimExit``, so the entry
point has one place that turns outcomes into the codes the daemon acts on.
(77, credentials, is never raised by the simulator itself; inject it with a fault.)
"""

from __future__ import annotations

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
