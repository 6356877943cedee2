"""Keeps the snapshot close to the log's end, so a restart replays little.

A thread looks every ``period`` seconds and writes a snapshot of the read
model once ``every`` facts were committed since the last one; the daemon
writes a last one when it stops cleanly. A failed write is logged and tried
again at the next look: the snapshot is only ever a shortcut.
"""

from __future__ import annotations

import logging
import threading

from messages.errors import ControllerUnavailable
from persistence.port import Controller
from provisioner.read.model import ReadModel

log = logging.getLogger(__name__)

#: Facts committed since the last snapshot that make the next one due.
EVERY = 10_000
#: Seconds between looks.
PERIOD = 30.0


class Snapshotter:
    def __init__(self, read_model: ReadModel, controller: Controller, every: int = EVERY,
                 period: float = PERIOD) -> None:
        self.read_model = read_model
        self.controller = controller
        self.every = every
        self.period = period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="snapshotter", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop looking and write a last snapshot of everything committed so far."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.write()

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            try:
                due = self.controller.last_seq() - self.read_model.snapshot_seq >= self.every
            except ControllerUnavailable:
                continue
            if due:
                self.write()

    def write(self) -> int | None:
        """Write a snapshot now if anything is new; the seq written, or None."""
        try:
            seq = self.read_model.write_snapshot()
        except (OSError, ControllerUnavailable) as exc:
            log.warning("snapshot: not written (the next start replays more of the log): %s", exc)
            return None
        except Exception:
            log.exception("snapshot: not written (the next start replays more of the log)")
            return None
        if seq is not None:
            log.info("snapshot: written at seq %d", seq)
        return seq
