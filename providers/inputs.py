"""Where a run's input file goes: a folder in memory when the machine has one, else the provider's work folder.

The contract (docs/script-contract.md) gives a script a path it can read,
readable by the daemon's user only, removed after the run. On a disk,
creating, writing and removing that file cost a run 170 to 240 µs with
eight runs at once (the folder's entries are journaled); in a memory file
system (``/dev/shm``, a tmpfs on Linux) 16 to 25 µs, and the contract is
the same.

``/dev/shm`` is shared by every user of the machine, so the files go into a
folder of the daemon's user there, ``provisioner-<uid>``, made 0700. It is
used only while it is what this module makes: a folder (not a link), owned
by the daemon's user, that no one else may enter, in a parent where no one
else can rename it (sticky, or writable by its owner only). Anything else
(someone made it first, a read-only or missing ``/dev/shm``) leaves the
files in the work folder's ``in/``, as before; why is logged once.

Memory is not given back until the files go, and a process killed during a
run cannot remove its file. So each process keeps its files in a folder of
its own in there, and holds a lock on it (``flock``) for as long as it
lives: the kernel lets go of the lock when the process ends, however it
ends. The first run of each process removes the folders whose lock it can
take: those of processes that are gone. The locks hold across containers
that share the folder, where process ids would not tell.
"""

from __future__ import annotations

import atexit
import fcntl
import logging
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path

log = logging.getLogger(__name__)

#: The memory file system input files go to where it is there and writable.
MEMORY = Path("/dev/shm")
#: The lock file of a process's folder, and of the user's folder (held while a process makes its own or sweeps).
LOCK = ".lock"

_lock = threading.Lock()
#: The user's folder -> this process's folder in it, and the descriptor holding its lock.
_owned: dict[str, tuple[str, int]] = {}
#: Whether ``_leave`` is to run at exit.
_leaving = False
#: The folders found unfit, and why: each said once (a thousand runners meet the same folder).
_warned: set[tuple[str, str]] = set()


def memory_folder(root: Path | str = MEMORY) -> str | None:
    """This process's folder for input files under ``root``, made at the first call (and again when it has
    gone, then with the folders of ended processes removed); None where the daemon may not keep private files
    under ``root`` (why is logged once per folder and reason)."""
    global _leaving
    with _lock:
        user = _user_folder(str(root))
        if user is None:
            return None
        owned = _owned.get(user)
        if owned is not None:
            if os.path.isdir(owned[0]):
                return owned[0]
            os.close(owned[1])  # someone removed it: its lock goes with it
        try:
            _owned[user] = _claim(user)
        except OSError as exc:
            _warn(user, f"cannot make a folder of this process in it: {exc.strerror}")
            _owned.pop(user, None)
            return None
        if not _leaving:
            _leaving = True
            atexit.register(_leave)
        return _owned[user][0]


def _user_folder(root: str) -> str | None:
    """``root/provisioner-<uid>``, made 0700 if missing, when it is a private folder of the daemon's user."""
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


def _claim(user: str) -> tuple[str, int]:
    """A folder of this process in ``user``, locked for the process's life; the ended processes' swept away.

    Under the user folder's lock, so that no process sweeps a folder another has made and not yet locked.
    """
    guard = _open_lock(user)
    try:
        fcntl.flock(guard, fcntl.LOCK_EX)
        own = tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=user)  # 0700
        held = _open_lock(own)
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # nobody else knows of it yet
        except BaseException:
            os.close(held)
            raise
        _sweep(user, own)
        return own, held
    finally:
        os.close(guard)  # and its lock


def _sweep(user: str, own: str) -> None:
    """Remove the folders in ``user`` whose lock no live process holds, with the input files left in them."""
    for entry in os.scandir(user):
        if entry.path == own or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            fd = _open_lock(entry.path)
        except OSError:
            continue  # gone meanwhile, or not one of ours
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue  # its process lives
        try:
            shutil.rmtree(entry.path, ignore_errors=True)
        finally:
            os.close(fd)


def _leave() -> None:
    """At a clean exit, this process's folders go, where no run left a file in them."""
    with _lock:
        for folder, held in _owned.values():
            try:
                os.unlink(os.path.join(folder, LOCK))
                os.rmdir(folder)
            except OSError:
                pass  # a file is left: the next process's first run removes the folder
            os.close(held)
        _owned.clear()


def _open_lock(folder: str) -> int:
    """The lock file of ``folder``, made 0600 if missing; not handed to the scripts (close on exec)."""
    return os.open(os.path.join(folder, LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)


def _warn(folder: str, why: str) -> None:
    if (folder, why) in _warned:  # under _lock
        return
    _warned.add((folder, why))
    log.warning("script input files stay in each provider's work folder, not in %s: %s", folder, why)
