"""Keeps a daemon's audit log caught up with every audited fact of the controller, on a thread of its own.

The daemon's commit hook appends an operator's audited facts at once, before
the operator's request returns; this thread takes the daemon's other audited
facts (its decisions, orders, budget events, lease changes) a moment after
each commit that holds some (``soon``), off the journal's thread, so a
demand's orders reach their owner without waiting for the audit log's
writes; what other writers (other daemons, the CLI) committed every few
seconds; and at a first start the history the log does not hold yet, a
slice at a time so that it does not crowd out the daemon's own work: it
pauses after each slice nine times as long as the slice took (a tenth of
the time at most, the less the busier the daemon), so a first start on a
long log is not slowed by the catch-up, which runs on once it is ready.
"""

from __future__ import annotations

import logging
import threading
import time

from messages.errors import ControllerUnavailable
from persistence.port import Controller
from provisioner.audit.log import AuditError, AuditLog

log = logging.getLogger(__name__)

#: Seconds between two looks at the controller once caught up.
EVERY = 5.0
#: Seconds from a commit of the daemon's own audited facts to their lines: the commits of the same burst
#: (a demand's orders, then its owners' intents) are done first, and go into the log together.
SOON = 0.05
#: Facts looked at in one go while catching up on a long history, and the least pause between two goes.
SLICE = 5_000
PACE = 0.2
#: The share of the time the catch-up of a long history takes at most: it pauses after each slice for
#: the rest. Decoding a slice holds the interpreter's lock, so every other thread of the daemon waits
#: meanwhile; at a fixed pause of 0.2 s it held it some 30% of the time while a daemon took up 1,000 providers.
SHARE = 0.1


def pause(took: float) -> float:
    """Seconds to wait after a slice of the catch-up that took ``took`` seconds."""
    return max(PACE, took * (1 - SHARE) / SHARE)


class Auditor:
    def __init__(self, audit: AuditLog, controller: Controller, every: float = EVERY) -> None:
        self.audit = audit
        self.controller = controller
        self.every = every
        self._stop = threading.Event()
        #: Set by ``soon``: the daemon committed audited facts of its own.
        self._poked = threading.Event()
        self._thread = threading.Thread(target=self._run, name="auditor", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def soon(self) -> None:
        """The daemon committed audited facts of its own: take them in a moment (``SOON``)."""
        self._poked.set()

    def _run(self) -> None:
        delay = self.every  # the commits' hook takes what this daemon writes; others' can wait a moment
        pacing = False
        while True:
            if pacing:  # a long history's slices keep to their share of the time, whatever commits meanwhile
                stopped = self._stop.wait(delay)
            else:
                poked = self._poked.wait(delay)
                stopped = self._stop.is_set() or (poked and self._stop.wait(SOON))
            if stopped:
                return
            self._poked.clear()
            delay = self.every
            pacing = False
            try:
                started = time.monotonic()
                self.audit.catch_up(self.controller, limit=SLICE)
                if not self.audit.caught_up:
                    delay = pause(time.monotonic() - started)
                    pacing = True
            except ControllerUnavailable as exc:
                log.warning("audit: cannot read the controller to catch up: %s", exc)
            except (OSError, AuditError) as exc:
                log.error("audit: cannot write %s: %s", self.audit.path, exc)

    def stop(self) -> None:
        """Stop the thread, then take what the last commits left (bounded: the rest waits for the next start)."""
        self._stop.set()
        self._poked.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        try:
            self.audit.catch_up(self.controller, limit=SLICE)
        except (ControllerUnavailable, OSError, AuditError) as exc:
            log.warning("audit: last catch-up failed; the next start takes it: %s", exc)
