"""Waking when an SQLite file's write-ahead log is written, by any process (Linux's inotify).

SQLite tells no other connection of a commit: ``PRAGMA data_version`` moves,
but only for a connection that asks. A reader that asks every 10 ms learns
of a commit 5 ms late on average, 10 ms at worst. Every commit in WAL mode
writes the ``-wal`` file first, so a watch on the file's folder wakes the
reader as the commit is being written; it then asks ``data_version`` every
``FAST`` seconds for a little while, since the commit becomes visible only
once its frames are synced and indexed (in the ``-shm`` file, which is
mapped, not written, and wakes nobody).

Where inotify is missing (not Linux) or says nothing (a network file system
does not report other hosts' writes), the reader falls back to asking at its
own pace: the watch only ever wakes it sooner.
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import struct

log = logging.getLogger(__name__)

#: Seconds between looks at ``data_version`` after the log was written, until the commit shows.
FAST = 0.0005

_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
_IN_MODIFY = 0x00000002
_IN_MOVED_TO = 0x00000080
_IN_CREATE = 0x00000100
_IN_Q_OVERFLOW = 0x00004000
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name


def _inotify() -> tuple[ctypes._CFuncPtr, ctypes._CFuncPtr] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        init, add = libc.inotify_init1, libc.inotify_add_watch
    except (OSError, AttributeError):
        return None
    init.argtypes, init.restype = (ctypes.c_int,), ctypes.c_int
    add.argtypes, add.restype = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32), ctypes.c_int
    return init, add


_CALLS = _inotify()


class WalWatch:
    """Wakes ``wait`` when the ``-wal`` file of the database at ``path`` is created or written.

    One watcher per waiting thread: the events are read (and so taken) by whoever waits.
    """

    def __init__(self, path: str) -> None:
        self.name = os.fsencode(os.path.basename(path)) + b"-wal"
        self.fd = -1
        self._poll: select.poll | None = None
        if _CALLS is None:
            return
        init, add = _CALLS
        fd = init(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            log.info("sqlite: no inotify (%s); commits by others are found by polling",
                     os.strerror(ctypes.get_errno()))
            return
        folder = os.path.dirname(os.path.abspath(path))
        if add(fd, os.fsencode(folder), _IN_MODIFY | _IN_CREATE | _IN_MOVED_TO) < 0:
            log.info("sqlite: cannot watch %s (%s); commits by others are found by polling", folder,
                     os.strerror(ctypes.get_errno()))
            os.close(fd)
            return
        self.fd = fd
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN)

    @property
    def watching(self) -> bool:
        return self.fd >= 0

    def wait(self, timeout: float) -> bool:
        """Until the log is written or ``timeout`` seconds pass; True if it was written (since the last wait)."""
        if self._poll is None:
            return False
        if not self._poll.poll(max(0, int(timeout * 1000 + 0.999))):
            return False
        return self._written()

    def _written(self) -> bool:
        """Reads every event queued; True if one was the log's (others are the folder's other files)."""
        written = False
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return written
            except OSError:
                return True  # wake and look: polling finds whatever there is
            if not data:
                return written
            at = 0
            while at + _EVENT.size <= len(data):
                _, mask, _, size = _EVENT.unpack_from(data, at)
                name = data[at + _EVENT.size:at + _EVENT.size + size].rstrip(b"\0")
                written = written or name == self.name or bool(mask & _IN_Q_OVERFLOW)
                at += _EVENT.size + size

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            self._poll = None
