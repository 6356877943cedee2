"""Where a run's input file goes: a folder in memory when the machine has one, else the provider's work folder.

The contract (docs/script-contract.md) gives a script a path it can read,
readable by the daemon's user only, removed after the run. On a disk,
creating, writing and removing that file cost a run about 130 µs (the
folder's entries are journaled); in a memory file system (``/dev/shm``, a
tmpfs on Linux) the same steps touch no disk, and the contract is the same.

``/dev/shm`` is shared by every user of the machine, so the files go into a
folder of the daemon's user there, ``provisioner-<uid>``, made 0700. It is
used only while it is what this module makes: a folder (not a link), owned
by the daemon's user, that no one else may enter, in a parent where no one
else can rename it (sticky, or writable by its owner only). Anything else
(someone made it first, a read-only or missing ``/dev/shm``) leaves the
files in the work folder's ``in/``, as before; why is logged once.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from pathlib import Path

log = logging.getLogger(__name__)

#: The memory file system input files go to where it is there and writable.
MEMORY = Path("/dev/shm")

#: The folders found unfit, and why: each said once (a thousand runners meet the same folder).
_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def memory_folder(root: Path | str = MEMORY) -> str | None:
    """``root/provisioner-<uid>``, made 0700 if missing, when the daemon may keep private files there;
    None where it may not (why is logged once per folder and reason)."""
    root = str(root)
    uid = os.geteuid()
    try:
        parent = os.stat(root)
    except OSError:
        return None  # no memory file system here: the work folder, without a word
    if not stat.S_ISDIR(parent.st_mode) or not os.access(root, os.W_OK | os.X_OK):
        return None
    folder = os.path.join(root, f"provisioner-{uid}")
    if parent.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not parent.st_mode & stat.S_ISVTX:
        _warn(folder, f"{root} may be written by other users and is not sticky: one of them could swap the folder")
        return None
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        _warn(folder, f"cannot create it: {exc.strerror}")
        return None
    try:
        made = os.lstat(folder)
    except OSError as exc:  # removed right after it was made: the next run makes it again
        _warn(folder, f"cannot look at it: {exc.strerror}")
        return None
    if not stat.S_ISDIR(made.st_mode):
        _warn(folder, "it is not a folder")
        return None
    if made.st_uid != uid:
        _warn(folder, f"it belongs to uid {made.st_uid}, not to the daemon's user ({uid})")
        return None
    if made.st_mode & 0o077:
        _warn(folder, f"its mode is {stat.S_IMODE(made.st_mode):04o}: other users may enter it")
        return None
    return folder


def _warn(folder: str, why: str) -> None:
    with _warned_lock:
        if (folder, why) in _warned:
            return
        _warned.add((folder, why))
    log.warning("script input files stay in each provider's work folder, not in %s: %s", folder, why)
