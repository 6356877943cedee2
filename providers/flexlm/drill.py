"""Pauses at named points of a write, for the drills that ``kill -9`` the provider there.

A crash between two steps of a grant is the case idempotency exists for, and
a drill that kills at random rarely lands there. With ``FLEXLM_DRILL_PAUSE``
naming a point, the provider says so on stderr and waits there (bounded) for
the drill's signal. The daemon never sets the variable, so in service each
point costs one dictionary lookup.
"""

from __future__ import annotations

import os
import sys
import time

ENV = "FLEXLM_DRILL_PAUSE"
#: Long enough for any drill to kill the process; short enough that a forgotten variable cannot wedge a call.
HOLD_S = 30.0


def pause(point: str) -> None:
    """``FLEXLM_DRILL_PAUSE=POINT`` waits there for the drill's signal; ``POINT=SECONDS`` waits that long and
    goes on, which widens the window between deciding and writing for drills that race processes."""
    wanted, _, hold = os.environ.get(ENV, "").partition("=")
    if wanted != point:
        return
    sys.stderr.write(f"provisioner-flexlm: paused at {point}\n")
    sys.stderr.flush()
    time.sleep(min(float(hold), HOLD_S) if hold else HOLD_S)
