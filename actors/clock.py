"""The daemon's clock: the wall clock's time, run at the rate of the monotonic clock.

Everything the daemon decides by time measures a duration between a fact's
stamp and now: idle time, minimum hold, join and request timeouts,
cooldowns, cost. The wall clock is a poor ruler for that: NTP steps it after
a suspend, an operator sets it by hand, a VM's clock jumps when it migrates.
A host that went idle while the clock stood a day ahead was stamped a day
ahead, and by its stamp stayed idle, and billed, until that day had passed.

So the daemon keeps its own time. It starts at the wall clock's and runs at
the rate of the monotonic clock (``CLOCK_BOOTTIME``, which counts a
suspend, where the system has one): a step of the wall clock does not move
it. It follows the wall clock all the same, but gradually: it moves toward
it by at most ``SLEW`` of the time that passed, so a duration the daemon
measures is within ``SLEW`` of the real one whatever the wall clock does.
Small differences (NTP's own adjustments) are absorbed without a word; a
step is logged, and so is its end. A step that lasts is caught up at that
rate (6 s a minute); a restart takes the wall clock's time at once.

What the daemon reads from the controller written under another clock (a
standby on another host, a restart after the clock was set back) can still
carry a stamp in the future: the projection takes it as now, with a warning
(``state.shared``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

#: The fraction of the time that passes by which the daemon's time may move toward the wall clock.
SLEW = 0.1
#: Seconds of difference from the wall clock that are a step, logged (below it, adjustments are silent).
STEP = 1.0
#: Seconds between the log lines that say the wall clock is still out of step.
SAY_EVERY = 60.0


def _steady() -> float:
    """Seconds of a clock no one sets: boot time where the system has it (it counts suspends), else monotonic."""
    return time.clock_gettime(time.CLOCK_BOOTTIME) if hasattr(time, "CLOCK_BOOTTIME") else time.monotonic()


class SteadyClock:
    """A callable clock (seconds since the epoch, as ``time.time``) that wall clock steps cannot move.

    ``wall`` and ``steady`` are the system's clocks; tests give their own.
    """

    def __init__(self, wall: Callable[[], float] = time.time, steady: Callable[[], float] = _steady) -> None:
        self._wall = wall
        self._steady = steady
        self._lock = threading.Lock()
        #: The daemon's time ``_now`` at the steady clock's ``_at``.
        self._at = steady()
        self._now = wall()
        #: Whether the wall clock is out of step now, and when that was last said (steady seconds).
        self._out = False
        self._said = float("-inf")

    def __call__(self) -> float:
        with self._lock:
            at = self._steady()
            passed = max(0.0, at - self._at)
            now = self._now + passed
            gap = self._wall() - now
            most = SLEW * passed
            now += max(-most, min(most, gap))
            self._at, self._now = at, now
            self._say(gap - max(-most, min(most, gap)), at)
            return now

    def _say(self, gap: float, at: float) -> None:
        if abs(gap) > STEP:
            if not self._out or at - self._said >= SAY_EVERY:
                log.warning("clock: the wall clock is %+.1fs from the daemon's time (it stepped, or was set): "
                            "durations keep running at the rate of the monotonic clock, and the daemon's time "
                            "moves toward the wall clock by at most %.0f s a minute (a restart takes it at once)",
                            gap, SLEW * 60)
                self._said = at
            self._out = True
        elif self._out:
            self._out = False
            log.warning("clock: the daemon's time is in step with the wall clock again")
