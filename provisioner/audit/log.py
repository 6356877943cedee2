"""The audit log: one JSON line per decision, order, budget event, admin action, orphan and lease change.

Each line carries ``prev``, the hash of the line before it, and ends with its
own ``hash`` (SHA-256 of the line up to that field), so changing, removing,
inserting or reordering a line breaks the chain where it happened, like LSF's
hash-protected ``rc.audit``. The chain runs on across size-based rotation
(``audit.log`` -> ``audit.log.1`` ...): a new file's first line carries the
hash of the rotated file's last.

A chain alone cannot tell a cut end: lines removed from the tail, or from the
head along with a rotated file, leave what remains intact. So the log is
anchored outside itself, in the facts the controller already holds: **each
log holds a line for every audited fact of the controller, in seq order**
(whoever wrote the fact: this daemon, another one, the CLI), and ``verify``
reads the controller to check it. A line must name a fact the controller
holds, and every audited fact up to the log's head must have its line: an
empty, missing or cut-short log, a cut first line or a missing rotated file
all leave facts without lines. Beside the log, ``audit.log.head`` records
how far it was written (``through``: the last seq looked at) and what
rotation deleted (the last seq and hash of the lines given up with the
oldest file), so facts written since (not yet looked at) and lines rotated
away on purpose are told from cut ones.

Writers catch up from the head: the daemon after each of its commits that
holds an operator's audited fact (so the action is in the log when its
request returns), a moment after a commit of its own audited facts, and
every few seconds for other writers' facts, the CLI after each fact it
appends. They take an exclusive lock on ``<log>.lock``
and read the last hash and the head from disk, never from memory alone.
Lines are flushed, not fsynced: the facts in the controller are the durable
record, this is their tamper-evident trail.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson

from messages.facts import Fact, GrantChanged, InstanceChanged, InstanceSeen, summary
from persistence.port import Controller
from persistence.private import private_dir
from provisioner.read.views import BadCursor

log = logging.getLogger(__name__)

GENESIS = "0" * 64
#: Facts read from the controller at a time, catching up or verifying.
CHUNK = 1000
_HASH_SUFFIX = len(',"hash":""}') + 64

#: Kinds that are always audited; orphans are picked out by state below.
AUDITED = frozenset({
    "decision", "order", "budget_event", "lease_acquired", "lease_lost",
    "provider_paused", "provider_resumed", "provider_drained", "provider_disabled",
    "provider_degraded", "provider_recovered", "provider_reconfigured",
})


def audited(fact: Fact) -> bool:
    p = fact.payload
    if fact.kind in AUDITED:
        return True
    if isinstance(p, (InstanceChanged, InstanceSeen, GrantChanged)):
        return p.state == "orphaned"
    return False


def entry(fact: Fact) -> dict[str, Any]:
    return {
        "at": fact.time,
        "seq": fact.seq,
        "id": fact.id,
        "kind": fact.kind,
        "provider": fact.provider,
        "lease": fact.lease,
        "fence": fact.fence,
        "what": summary(fact),
        "payload": fact.payload.to_dict(),
    }


def _line(body: dict[str, Any], prev: str) -> tuple[bytes, str]:
    head = orjson.dumps({**body, "prev": prev}, option=orjson.OPT_SORT_KEYS)
    digest = hashlib.sha256(head).hexdigest()
    return head[:-1] + b',"hash":"' + digest.encode() + b'"}\n', digest


class AuditError(Exception):
    """A line that is not an intact audit line."""


def parse(line: bytes) -> dict[str, Any]:
    """An audit line as a dict, its ``hash`` checked against its content."""
    line = line.rstrip(b"\n")
    if len(line) <= _HASH_SUFFIX or not line.endswith(b'"}') or line[-_HASH_SUFFIX:-66] != b',"hash":"':
        raise AuditError("not an audit line (no trailing hash)")
    head = line[:-_HASH_SUFFIX] + b"}"
    claimed = line[-66:-2].decode("ascii", "replace")
    try:
        doc = orjson.loads(head)
    except orjson.JSONDecodeError:
        raise AuditError("not valid JSON") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("prev"), str):
        raise AuditError("no prev hash")
    if hashlib.sha256(head).hexdigest() != claimed:
        raise AuditError("hash does not match the line's content: the line was changed")
    doc["hash"] = claimed
    return doc


@dataclass
class Head:
    """What the log itself cannot say: how far it was written, and what rotation deleted."""

    #: Every audited fact up to this seq has its line (or had one, in a file rotation deleted).
    through: int = 0
    #: The last seq, and hash, of the lines given up when rotation deleted the oldest file (0: none).
    dropped_seq: int = 0
    dropped_hash: str = GENESIS


class AuditLog:
    def __init__(self, path: Path, max_bytes: int = 16 * 1024 * 1024, keep: int = 10) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.keep = keep
        self._lock_path = path.with_name(path.name + ".lock")
        self.head_path = path.with_name(path.name + ".head")
        #: (inode, size) of the live file -> its last hash, so appends need not reread it.
        self._last: tuple[tuple[int, int], str] | None = None
        #: Whether the last ``catch_up`` reached the end of the log (not stopped by its limit).
        self.caught_up = True

    def files(self) -> list[Path]:
        """Every file of the log, oldest first."""
        rotated = [self.path.with_name(f"{self.path.name}.{n}") for n in range(self.keep, 0, -1)]
        return [p for p in rotated + [self.path] if p.exists()]

    # --- writing -------------------------------------------------------------------

    def catch_up(self, controller: Controller, limit: int | None = None) -> int:
        """Append a line for each audited fact the controller holds beyond the head; returns how many.

        ``limit``: look at no more than about this many facts (the rest waits for the next call).
        """
        added = looked = 0
        with self._locked():
            try:
                head = self.read_head()
            except AuditError as exc:
                log.error("audit: %s; going on from the last line, run 'provisioner audit verify'", exc)
                head = None
            after = head.through if head is not None else self._last_seq()
            head = head or Head(through=after)
            while limit is None or looked < limit:
                facts = controller.read(after=after, limit=CHUNK)
                if not facts:
                    break
                bodies = [entry(f) for f in facts if audited(f)]
                if bodies:
                    self._write(bodies, head)
                    added += len(bodies)
                after, looked = facts[-1].seq or after, looked + len(facts)
                if len(facts) < CHUNK:
                    break
            if after > head.through or not self.head_path.exists():
                head.through = max(head.through, after)
                self._write_head(head)
            self.caught_up = limit is None or looked < limit
        return added

    def record(self, facts: list[Fact]) -> int:
        """Append a line for each auditable fact of ``facts`` (which the caller knows are next); returns how many."""
        bodies = [entry(f) for f in facts if audited(f)]
        if bodies:
            self.append(bodies)
        return len(bodies)

    def append(self, bodies: list[dict[str, Any]]) -> None:
        with self._locked():
            try:
                head = self.read_head() or Head(through=self._last_seq())
            except AuditError:
                head = Head(through=self._last_seq())
            self._write(bodies, head)
            head.through = max(head.through, *(int(b.get("seq") or 0) for b in bodies))
            self._write_head(head)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        private_dir(self.path.parent)
        with open(os.open(self._lock_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _write(self, bodies: list[dict[str, Any]], head: Head) -> None:
        """Chain ``bodies`` on after the last line (under the lock), rotating first if the file would grow too big."""
        prev = self._last_hash()
        lines: list[bytes] = []
        for body in bodies:
            line, prev = _line(body, prev)
            lines.append(line)
        data = b"".join(lines)
        if self.path.exists() and 0 < self.path.stat().st_size and \
                self.path.stat().st_size + len(data) > self.max_bytes:
            self._rotate(head)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, data)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        self._last = ((st.st_ino, st.st_size), prev)

    def _last_hash(self) -> str:
        for path in reversed(self.files()):
            st = path.stat()
            if path == self.path and self._last is not None and self._last[0] == (st.st_ino, st.st_size):
                return self._last[1]
            last = _last_line(path)
            if last is not None:
                try:
                    return parse(last)["hash"]
                except AuditError as exc:
                    # Keep auditing: chain on from the damaged line's bytes; verify reports the damage.
                    log.error("audit: %s: last line: %s; run 'provisioner audit verify'", path, exc)
                    return hashlib.sha256(last).hexdigest()
        return GENESIS

    def _last_seq(self) -> int:
        """The seq of the last line kept: where a log with no head (written before heads were kept) goes on."""
        for path in reversed(self.files()):
            last = _last_line(path)
            if last is not None:
                try:
                    return int(parse(last).get("seq") or 0)
                except (AuditError, TypeError, ValueError):
                    return 0
        return 0

    def _rotate(self, head: Head) -> None:
        oldest = self.path.with_name(f"{self.path.name}.{self.keep}")
        if oldest.exists():
            # Its lines go for good: the head remembers the last, so the next file's first line still links up.
            last = _last_line(oldest)
            if last is not None:
                try:
                    doc = parse(last)
                    head.dropped_seq, head.dropped_hash = int(doc.get("seq") or 0), doc["hash"]
                except (AuditError, TypeError, ValueError) as exc:
                    log.error("audit: %s: last line: %s; deleting it all the same", oldest, exc)
            oldest.unlink()
        for n in range(self.keep - 1, 0, -1):
            src = self.path.with_name(f"{self.path.name}.{n}")
            if src.exists():
                src.rename(self.path.with_name(f"{self.path.name}.{n + 1}"))
        self.path.rename(self.path.with_name(f"{self.path.name}.1"))

    def read_head(self) -> Head | None:
        """The head beside the log; None when there is none (a log written before heads were kept, or none yet)."""
        try:
            doc = orjson.loads(self.head_path.read_bytes())
            return Head(through=int(doc["through"]), dropped_seq=int(doc.get("dropped_seq", 0)),
                        dropped_hash=str(doc.get("dropped_hash", GENESIS)))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise AuditError(f"{self.head_path.name} does not read: {exc}") from None

    def _write_head(self, head: Head) -> None:
        tmp = self.head_path.with_name(f"{self.head_path.name}.{os.getpid()}.tmp")
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            f.write(orjson.dumps({"through": head.through, "dropped_seq": head.dropped_seq,
                                  "dropped_hash": head.dropped_hash}))
        os.replace(tmp, self.head_path)

    # --- reading -------------------------------------------------------------------

    def lines(self) -> Iterator[tuple[Path, int, bytes]]:
        """Every line, oldest first, with its file and line number."""
        for path in self.files():
            with open(path, "rb") as f:
                for n, line in enumerate(f, 1):
                    yield path, n, line

    def read(self, after: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """Up to ``limit`` entries after the one whose hash is ``after``; without it, the last ``limit``."""
        if limit <= 0:
            return []
        if after is None:
            picked: list[bytes] = []
            for path in reversed(self.files()):
                if len(picked) >= limit:
                    break
                picked = path.read_bytes().splitlines()[-(limit - len(picked)):] + picked
            return [parse(line) for line in picked]
        out: list[dict[str, Any]] = []
        found = after == GENESIS
        for _, _, line in self.lines():
            if found:
                out.append(parse(line))
                if len(out) == limit:
                    break
            elif line.rstrip(b"\n").endswith(f'"hash":"{after}"}}'.encode()):
                found = True
        if not found:
            raise BadCursor(f"after: no audit line has hash {after!r}")
        return out

    def verify(self, controller: Controller | None = None) -> "Verified":
        """Check the chain from the oldest file kept and, given the controller, that no line is missing.

        Without a controller only the lines themselves are checked: each line's own hash, its
        link to the line before, and that the first links to the start of the chain or to
        what rotation deleted.
        """
        head = self.read_head()
        kept: list[tuple[int, str, str]] = []  # (seq, fact id, where) of every line, in order
        count, prev, first = 0, None, None
        for path, n, line in self.lines():
            where = f"{path.name}:{n}"
            try:
                doc = parse(line)
            except AuditError as exc:
                return Verified(ok=False, lines=count, problem=f"{where}: {exc}")
            if prev is None:
                first = doc["prev"]
                start = head.dropped_hash if head is not None and head.dropped_seq else GENESIS
                if first != start:
                    why = ("the line before it went with a rotated file deleted by rotation, but that file's last "
                           "line does not match") if start != GENESIS else \
                        "it is not the start of the chain, and no rotated file before it is kept or was deleted"
                    return Verified(ok=False, lines=count, problem=(
                        f"{where}: prev does not match the line before: {why}: the first lines, or a rotated "
                        "file, were cut"))
            elif doc["prev"] != prev:
                return Verified(ok=False, lines=count, problem=(
                    f"{where}: prev does not match the line before: a line was removed, inserted or changed"))
            seq = doc.get("seq")
            if not isinstance(seq, int) or (kept and seq <= kept[-1][0]):
                return Verified(ok=False, lines=count, problem=f"{where}: its seq {seq!r} does not follow the line "
                                                               "before's")
            kept.append((seq, str(doc.get("id")), where))
            prev = doc["hash"]
            count += 1
        rotated = head is not None and head.dropped_seq > 0
        problem = self._uncovered(controller, head, kept) if controller is not None else None
        return Verified(ok=problem is None, lines=count, problem=problem, starts_after_rotation=rotated)

    def _uncovered(self, controller: Controller, head: Head | None, kept: list[tuple[int, str, str]]) -> str | None:
        """Whether every audited fact the log should hold has its line, and every line its fact."""
        start = head.dropped_seq if head is not None else 0
        # Without a head (deleted, or never written), every audited fact the controller holds is due.
        through = max(head.through if head is not None else controller.last_seq(), kept[-1][0] if kept else 0)
        at, after = 0, start
        while after < through:
            facts = [f for f in controller.read(after=after, limit=CHUNK) if (f.seq or 0) <= through]
            if not facts:
                break
            for fact in facts:
                seq = fact.seq or 0
                if at < len(kept) and kept[at][0] < seq:
                    return self._unknown(kept[at])
                if at < len(kept) and kept[at][0] == seq:
                    if kept[at][1] != fact.id or not audited(fact):
                        return f"{kept[at][2]}: fact {seq} is {fact.id} in the controller, not {kept[at][1]}: " \
                               "the log belongs to another controller, or the line was made up"
                    at += 1
                elif audited(fact):
                    return self._missing(fact, kept, at, through)
            after = facts[-1].seq or after
            if len(facts) < CHUNK and after < through:
                break
        return self._unknown(kept[at]) if at < len(kept) else None

    @staticmethod
    def _unknown(line: tuple[int, str, str]) -> str:
        return (f"{line[2]}: fact {line[0]} ({line[1]}) is not in the controller: the line was made up, or the log "
                "belongs to another controller")

    def _missing(self, fact: Fact, kept: list[tuple[int, str, str]], at: int, through: int) -> str:
        what = f"fact {fact.seq} ({fact.kind}, {summary(fact)[:80]})"
        if not kept:
            state = "missing" if not self.files() else "empty"
            return (f"{self.path.name}: the log is {state}, but the controller holds audited facts it was "
                    f"written through (up to seq {through}), from {what} on: it was emptied or removed")
        if at == 0:
            return (f"{kept[0][2]}: the log begins at fact {kept[0][0]}, but {what} comes before it: its first "
                    "lines, or a rotated file, were cut")
        if at == len(kept):
            return (f"{kept[-1][2]}: the log ends at fact {kept[-1][0]}, but it was written through seq {through}: "
                    f"{what} and any after it are missing: its last lines were cut")
        return f"{kept[at][2]}: {what} before this line is missing: a line was removed"


@dataclass
class Verified:
    ok: bool
    lines: int
    problem: str | None
    #: The oldest file kept continues a chain whose start was rotated away.
    starts_after_rotation: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "lines": self.lines, "problem": self.problem,
                "starts_after_rotation": self.starts_after_rotation}


def _last_line(path: Path, chunk: int = 64 * 1024) -> bytes | None:
    with open(path, "rb") as f:
        end = f.seek(0, os.SEEK_END)
        data = b""
        pos = end
        while pos > 0:
            step = min(chunk, pos)
            pos -= step
            f.seek(pos)
            data = f.read(step) + data
            stripped = data.rstrip(b"\n")
            cut = stripped.rfind(b"\n")
            if cut >= 0:
                return stripped[cut + 1:]
        stripped = data.rstrip(b"\n")
        return stripped or None


Reader = Callable[[str | None, int], list[dict[str, Any]]]


def follow(read: Reader, after: str, poll: float = 0.5) -> Iterator[dict[str, Any]]:
    """Entries appended after the one whose hash is ``after``, through ``read(after, limit)``, until stopped."""
    while True:
        batch = read(after, 1000)
        yield from batch
        if batch:
            after = batch[-1]["hash"]
        else:
            time.sleep(poll)
