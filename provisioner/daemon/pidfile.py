"""The running daemon's process id in its home, so ``provisioner reload`` on that host can signal it.

Written when ``provisioner run`` starts and removed when it stops (only if
it is still ours: a second daemon on the same home may have replaced it).
A pid file left by a daemon that died is recognised: its process is gone,
or is not a provisioner.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

NAME = "provisioner.pid"


@contextmanager
def pid_file(home: Path) -> Iterator[Path]:
    path = home / NAME
    path.write_text(f"{os.getpid()}\n")
    try:
        yield path
    finally:
        try:
            if path.read_text().strip() == str(os.getpid()):
                path.unlink()
        except OSError:
            pass


def running_daemon(home: Path) -> int | None:
    """The pid of the daemon running on ``home``, or None (no pid file, or its process is gone)."""
    try:
        pid = int((home / NAME).read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid  # alive, another user's: signalling it will say so
    cmdline = Path(f"/proc/{pid}/cmdline")
    if cmdline.exists():
        try:
            if b"provisioner" not in cmdline.read_bytes():
                return None  # the pid was reused by something else
        except OSError:
            pass
    return pid
