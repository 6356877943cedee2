"""How a persistent provider's process is doing, for the owner (``health``), metrics and operators.

``degraded`` is the reason when the provider cannot start or keeps dying,
empty otherwise. It clears once a started process has answered something.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: starting: spawned, no hello yet; ready: serving calls; draining: serving the calls it has, then restarted
#: (its env_file changed); down: waiting to be started again; stopped: the runner is stopped.
Phase = Literal["starting", "ready", "draining", "down", "stopped"]

#: Failures in a row (of processes that had started) after which a provider keeps dying: it is degraded.
KEEPS_DYING = 3


@dataclass(frozen=True, slots=True)
class Status:
    phase: Phase
    #: The process's id while one runs.
    pid: int | None
    #: Processes started after the first one.
    restarts: int
    #: Failures since the process last ran steadily (restart_backoff_max without one).
    failures: int
    degraded: str
    #: Calls sent and not yet answered, and calls waiting to be sent.
    outstanding: int
    queued: int


def restart_delay(failures: int, base: float, cap: float) -> float:
    """Seconds before the next start after ``failures`` failures in a row: ``base``, doubling, at most ``cap``."""
    return min(cap, base * 2.0 ** max(0, failures - 1))
