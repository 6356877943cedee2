"""A daemon refuses to start on a controller that lost facts it knows were committed.

An emptied controller (its SQLite file deleted or replaced, an etcd
namespace wiped, a restore from an older backup) looks like a new one: a
daemon that started on it would take its own hosts for orphans and give them
back while they run jobs, and order again what it already holds. Two things
in the daemon's home remember what the controller held:

- the **mark** (``<home>/marks/<hash of the controller URL>.json``): the seq
  and id of the last fact this daemon saw committed by its own hand, written
  right after each of its commits, on a thread of its own (``MarkKeeper``),
  so a controller emptied before the first snapshot is caught too;
- the **snapshot** (``persistence.snapshot``): the seq and id of the fact it
  was taken at.

``provisioner run`` checks both before it starts anything: the controller
must still hold each of those facts, at that seq and with that id. If it
does not, the daemon refuses to start (``ControllerReset``, exit 3), having
called no provider. ``--accept-reset-controller`` starts it anyway: the old
snapshot is removed and the mark set to what the controller holds now.

The CLI's views do not look: they read, quietly, whatever the controller holds.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from pathlib import Path

import orjson

from config.load import public_url
from messages.facts import Fact
from persistence.port import Controller
from persistence.private import private_dir
from persistence.snapshot import SnapshotStore

log = logging.getLogger(__name__)

FLAG = "--accept-reset-controller"
#: ``provisioner run``'s exit status when it refuses a reset controller (a bad config is 2).
EXIT = 3


class ControllerReset(Exception):
    """The controller does not hold facts this daemon knows were committed; the message says what to check."""


class Mark:
    """The last fact this daemon saw committed on one controller, kept in its home."""

    def __init__(self, home: Path, controller_url: str) -> None:
        digest = hashlib.sha256(controller_url.encode()).hexdigest()[:16]
        self.path = home / "marks" / f"{digest}.json"
        self.seq = 0

    def read(self) -> tuple[int, str, float] | None:
        """``(seq, fact_id, when)``; None when there is no mark (or it does not read: a warning)."""
        try:
            doc = orjson.loads(self.path.read_bytes())
            return int(doc["seq"]), str(doc["fact_id"]), float(doc["at"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("controller mark %s does not read (%s); only the snapshot is checked", self.path, exc)
            return None

    def write(self, seq: int, fact_id: str) -> None:
        """Replace the mark (a write and a rename: a crash leaves the old mark or the new one)."""
        private_dir(self.path.parent)
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            f.write(orjson.dumps({"seq": seq, "fact_id": fact_id, "at": time.time()}))
        os.replace(tmp, self.path)
        self.seq = seq


class MarkKeeper:
    """Writes a daemon's mark after its commits, on a thread of its own, the newest when several wait.

    A mark is a write and a rename, and a rename waits for the file system's journal, which the
    controller's fsync'd commits keep busy: on the journal's thread it held up the next commit by
    as long as the commit itself took. ``stop`` writes the last one.
    """

    def __init__(self, mark: Mark) -> None:
        self.mark = mark
        self._lock = threading.Lock()
        self._newest: tuple[int, str] | None = None
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="marks", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def committed(self, facts: list[Fact]) -> None:
        """The journal's commit hook: the newest fact of a commit is to become the mark."""
        newest = max(facts, key=lambda f: f.seq or 0, default=None)
        if newest is None:
            return
        with self._lock:
            if (newest.seq or 0) > (self._newest[0] if self._newest else self.mark.seq):
                self._newest = (newest.seq or 0, newest.id)
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            self._write()
            if self._stopping:
                return

    def _write(self) -> None:
        with self._lock:
            newest, self._newest = self._newest, None
        if newest is not None and newest[0] > self.mark.seq:
            try:
                self.mark.write(*newest)
            except OSError as exc:
                log.error("controller mark %s not written: %s", self.mark.path, exc)

    def stop(self) -> None:
        """Write the last mark (on the caller's thread if the keeper never started)."""
        self._stopping = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self._write()


def check(controller: Controller, mark: Mark, snapshots: SnapshotStore, url: str) -> str | None:
    """What shows that the controller lost facts this daemon saw, or None when nothing does."""
    seen = mark.read()
    if seen is not None:
        mark.seq = seen[0]
        why = _missing(controller, seen[0], seen[1])
        if why:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seen[2]))
            return (f"the controller {public_url(url)} {why}, which this daemon saw committed (last at {when}; "
                    f"{mark.path})")
    head = snapshots.head()
    if head is not None and head[0] > 0:
        why = _missing(controller, head[0], head[1])
        if why:
            return f"the controller {public_url(url)} {why}, which this daemon's snapshot holds ({snapshots.path})"
    return None


def _missing(controller: Controller, seq: int, fact_id: str) -> str:
    last = controller.last_seq()
    if seq > last:
        return (f"holds no fact {seq} ({fact_id}): its log ends at seq {last}" if last else
                f"holds no facts at all, not even fact {seq} ({fact_id})")
    at = controller.read(after=seq - 1, limit=1)
    if not at or at[0].seq != seq:
        return f"holds no fact {seq} ({fact_id})"
    if at[0].id != fact_id:
        return f"holds another fact at seq {seq} ({at[0].id}) than {fact_id}"
    return ""


def refusal(problem: str) -> str:
    """The error ``provisioner run`` prints: what is wrong, what to check, and how to go on anyway."""
    return (f"refusing to start: {problem}. The controller was emptied, replaced or restored from an older "
            f"backup, or controller.url names another one. Check controller.url, and restore the controller "
            f"(the SQLite file or the etcd cluster) from its latest backup if it was lost: started on a "
            f"controller without those facts, this daemon would take supply it holds for orphans and give it "
            f"back, and order again what is already held. Nothing was called. If the controller was reset on "
            f"purpose, start once with 'provisioner run {FLAG}'")


def accept(controller: Controller, mark: Mark, snapshots: SnapshotStore, problem: str) -> None:
    """Go on with a reset controller: forget the old snapshot and mark what the controller holds now."""
    log.warning("starting on a reset controller, as %s asks: %s", FLAG, problem)
    try:
        snapshots.path.unlink()
        log.warning("the snapshot of the controller as it was, %s, is removed", snapshots.path)
    except FileNotFoundError:
        pass
    last = controller.last_seq()
    at = controller.read(after=last - 1, limit=1) if last else []
    if at and at[0].seq == last:
        mark.write(last, at[0].id)
    else:
        mark.path.unlink(missing_ok=True)
        mark.seq = 0
