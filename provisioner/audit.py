"""The audit log: one JSON line per decision, order, budget event, admin action, orphan and lease change.

Each line carries ``prev``, the hash of the line before it, and ends with its
own ``hash`` (SHA-256 of the line up to that field), so changing, removing,
inserting or reordering a line breaks the chain where it happened, like LSF's
hash-protected ``rc.audit``. The chain runs on across size-based rotation
(``audit.log`` -> ``audit.log.1`` ...): a new file's first line carries the
hash of the rotated file's last.

Whoever commits a fact audits it (the daemon from its journal's commit hook,
the CLI for the facts it appends itself), so several processes may append:
they take an exclusive lock on ``<log>.lock`` and read the last hash from the
file, never from memory alone. Lines are flushed, not fsynced: the facts in
the controller are the durable record, this is their tamper-evident trail.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson

from messages.facts import Fact, GrantChanged, InstanceChanged, InstanceSeen, summary
from persistence.private import private_dir
from provisioner.views import BadCursor

log = logging.getLogger(__name__)

GENESIS = "0" * 64
_HASH_SUFFIX = len(',"hash":""}') + 64

#: Kinds that are always audited; orphans are picked out by state below.
AUDITED = frozenset({
    "decision", "order", "budget_event", "lease_acquired", "lease_lost",
    "provider_paused", "provider_resumed", "provider_drained", "provider_disabled",
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


class AuditLog:
    def __init__(self, path: Path, max_bytes: int = 16 * 1024 * 1024, keep: int = 10) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.keep = keep
        self._lock_path = path.with_name(path.name + ".lock")
        #: (inode, size) of the live file -> its last hash, so appends need not reread it.
        self._last: tuple[tuple[int, int], str] | None = None

    def files(self) -> list[Path]:
        """Every file of the log, oldest first."""
        rotated = [self.path.with_name(f"{self.path.name}.{n}") for n in range(self.keep, 0, -1)]
        return [p for p in rotated + [self.path] if p.exists()]

    # --- writing -------------------------------------------------------------------

    def record(self, facts: list[Fact]) -> int:
        """Append a line for each auditable fact; returns how many."""
        bodies = [entry(f) for f in facts if audited(f)]
        if bodies:
            self.append(bodies)
        return len(bodies)

    def append(self, bodies: list[dict[str, Any]]) -> None:
        private_dir(self.path.parent)
        with open(self._lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            prev = self._last_hash()
            lines: list[bytes] = []
            for body in bodies:
                line, prev = _line(body, prev)
                lines.append(line)
            data = b"".join(lines)
            if self.path.exists() and 0 < self.path.stat().st_size and \
                    self.path.stat().st_size + len(data) > self.max_bytes:
                self._rotate()
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

    def _rotate(self) -> None:
        oldest = self.path.with_name(f"{self.path.name}.{self.keep}")
        if oldest.exists():
            oldest.unlink()
        for n in range(self.keep - 1, 0, -1):
            src = self.path.with_name(f"{self.path.name}.{n}")
            if src.exists():
                src.rename(self.path.with_name(f"{self.path.name}.{n + 1}"))
        self.path.rename(self.path.with_name(f"{self.path.name}.1"))

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

    def verify(self) -> "Verified":
        """Walk the chain from the oldest file kept: each line's own hash, and its link to the line before."""
        count, prev, first = 0, None, None
        for path, n, line in self.lines():
            where = f"{path.name}:{n}"
            try:
                doc = parse(line)
            except AuditError as exc:
                return Verified(ok=False, lines=count, problem=f"{where}: {exc}")
            if prev is None:
                first = doc["prev"]
            elif doc["prev"] != prev:
                return Verified(ok=False, lines=count, problem=(
                    f"{where}: prev does not match the line before: a line was removed, inserted or changed"))
            prev = doc["hash"]
            count += 1
        return Verified(ok=True, lines=count, problem=None, starts_after_rotation=first not in (None, GENESIS))


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
