"""Named crash points for durability drills.

``PROVISIONER_FAILPOINTS=request.after_intent`` makes the process kill itself
(SIGKILL: no cleanup, no flush, like a power cut or ``kill -9``) the first
time it reaches that point; ``name@3`` on the third time. Several points may
be given, comma-separated. Unset, a failpoint costs one dictionary lookup.

Points (where the daemon can die and must still never forget or double anything):

- ``request.before_intent`` / ``return.before_intent``: an order is seen, its intent not yet written
- ``request.after_intent`` / ``return.after_intent``: the intent is committed, the script not yet run
- ``request.after_script`` / ``return.after_script``: the script answered, its result not yet recorded
- ``journal.before_commit``: facts are batched in memory, not yet committed
- ``journal.mid_batch``: inside the commit transaction, after the rows are written, before it commits
- ``journal.after_commit``: committed, but no writer has heard so yet
"""

from __future__ import annotations

import os
import signal
import threading

ENV = "PROVISIONER_FAILPOINTS"

POINTS = frozenset({
    "request.before_intent", "request.after_intent", "request.after_script",
    "return.before_intent", "return.after_intent", "return.after_script",
    "journal.before_commit", "journal.mid_batch", "journal.after_commit",
})


def _parse(spec: str) -> dict[str, int]:
    armed: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, nth = part.partition("@")
        if name not in POINTS:
            raise ValueError(f"{ENV}: unknown failpoint {name!r} (known: {', '.join(sorted(POINTS))})")
        armed[name] = int(nth) if nth else 1
    return armed


_armed = _parse(os.environ.get(ENV, ""))
_hits: dict[str, int] = {}
_lock = threading.Lock()


def failpoint(name: str) -> None:
    """Die here if this point is armed and its turn has come."""
    if name not in _armed:
        return
    with _lock:
        _hits[name] = _hits.get(name, 0) + 1
        if _hits[name] != _armed[name]:
            return
    os.write(2, f"failpoint {name}: killing process {os.getpid()}\n".encode())
    os.kill(os.getpid(), signal.SIGKILL)
