"""Folders and files only their owner may read: the daemon's home, the controller's file, its snapshots.

The controller's file holds every fact and lease; the home holds snapshots,
the audit log and the providers' work folders. Readable by all (0644/0755,
what a common umask gives) they would show any local user what the cluster
holds and does. Created here, they are 0700 and 0600 whatever the umask
allows beyond that; a folder or file that already exists keeps its mode: it
is the operator's.
"""

from __future__ import annotations

import os
from pathlib import Path

FOLDER = 0o700
FILE = 0o600


def private_dir(path: Path | str) -> Path:
    """``path`` and every missing folder above it, each created 0700."""
    path = Path(path)
    missing = []
    at = path
    while not at.exists() and at != at.parent:
        missing.append(at)
        at = at.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=FOLDER)
        except FileExistsError:  # another process made it meanwhile
            pass
    return path


def private_file(path: Path | str) -> None:
    """Create ``path`` empty with mode 0600 if it is missing; an existing file is left as it is.

    SQLite gives its ``-wal`` and ``-shm`` files the mode of the database
    file, so creating the database this way makes those private too.
    """
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE))
    except FileExistsError:
        pass
