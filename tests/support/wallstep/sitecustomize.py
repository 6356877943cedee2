"""Loaded at start-up by a drill's daemon (on its PYTHONPATH): the wall clock as its Python reads it can step.

``time.time`` is replaced before anything imports it, so every clock of the
process (defaults bound at import included) reads the system's wall clock
plus the offset in seconds that the file ``$WALLSTEP_FILE`` holds; the drill
writes that file to step the clock while the daemon runs. The monotonic
clocks are left alone, as a real step leaves them. Scripts the daemon runs
get an environment of their own, without this.
"""

import os
import time

_FILE = os.environ.get("WALLSTEP_FILE")
if _FILE:
    _real = time.time
    _seen = [None, 0.0]  # the file's mtime, and its offset

    def _stepped() -> float:
        try:
            mtime = os.stat(_FILE).st_mtime_ns
            if mtime != _seen[0]:
                with open(_FILE) as f:
                    _seen[1] = float(f.read().strip() or 0)
                _seen[0] = mtime
        except (OSError, ValueError):
            pass
        return _real() + _seen[1]

    time.time = _stepped
