"""Starting a provider's program: ``os.posix_spawn``, in a process group of its own, on pipes.

The daemon is multi-threaded, so it never forks: ``posix_spawn`` starts the
program directly. Its own process group lets a timeout, a stop or a lost
lease kill whatever the program started too. One-shot script runs and
persistent provider processes start the same way.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
from typing import Any

# System calls that never wait, made with the interpreter's lock held (``PyDLL``), unlike ``os``'s
# (``os.pipe``, ``os.close``, ``os.read``, ``os.waitpid`` let go of it): with other script threads
# waiting for the lock, each letting go costs the caller a wait for one of them to hand it back.
# Only for calls that cannot wait: making a pipe, closing a pipe end or a pidfd, reading a pipe that
# poll said is ready, reaping a child whose pidfd said it exited. Files go through ``os``: a close
# or an unlink on a network file system can wait.
_libc = ctypes.PyDLL(None, use_errno=True)
_close = _libc.close
_close.argtypes = (ctypes.c_int,)
_close.restype = ctypes.c_int
_read = _libc.read
_read.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t)
_read.restype = ctypes.c_ssize_t
_pipe2 = _libc.pipe2
_pipe2.argtypes = (ctypes.POINTER(ctypes.c_int), ctypes.c_int)
_pipe2.restype = ctypes.c_int
_waitpid = _libc.waitpid
_waitpid.argtypes = (ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.c_int)
_waitpid.restype = ctypes.c_int


def _raise_errno() -> None:
    err = ctypes.get_errno()
    raise OSError(err, os.strerror(err))


def pipe() -> tuple[int, int]:
    """A pipe's read and write ends, both close-on-exec, as ``os.pipe`` makes them (never waits)."""
    fds = (ctypes.c_int * 2)()
    if _pipe2(fds, os.O_CLOEXEC) != 0:
        _raise_errno()
    return fds[0], fds[1]


def close_pipe(fd: int) -> None:
    """Close a pipe end or a pidfd (never waits)."""
    if _close(fd) != 0 and ctypes.get_errno() != errno.EINTR:  # on Linux, closed all the same after EINTR
        _raise_errno()


def read_ready(fd: int, buffer: ctypes.Array[ctypes.c_char]) -> bytes:
    """Read what a pipe that poll reported readable holds, up to ``len(buffer)`` bytes (never waits)."""
    while True:
        n = _read(fd, buffer, len(buffer))
        if n >= 0:
            return ctypes.string_at(buffer, n)
        if ctypes.get_errno() != errno.EINTR:
            _raise_errno()


def reap_exited(pid: int) -> int | None:
    """The wait status of child ``pid`` if it has exited (a readable pidfd says so), else None (never waits)."""
    status = ctypes.c_int()
    while True:
        got = _waitpid(pid, ctypes.byref(status), os.WNOHANG)
        if got == pid:
            return status.value
        if got == 0:
            return None
        if ctypes.get_errno() != errno.EINTR:
            _raise_errno()


def spawn(argv: list[str], env: dict[str, str], stdin: bool = False) -> tuple[int, int | None, int, int]:
    """Start ``argv``; returns its pid, the write end of its stdin (``stdin``: a pipe, else /dev/null),
    and the read ends of its stdout and stderr.

    Every descriptor made here is close-on-exec: no other program inherits
    it. Raises ``OSError`` when the program cannot be started (nothing is
    left open then).
    """
    in_r, in_w = pipe() if stdin else (-1, -1)
    out_r, out_w = pipe()
    err_r, err_w = pipe()
    child = (*((in_r,) if stdin else ()), out_w, err_w)
    ours = (*((in_w,) if stdin else ()), out_r, err_r)
    # No close actions: every pipe end is close-on-exec, so the program keeps only the three it is given
    # (each action is one more system call in the child, made while this thread holds the interpreter).
    actions: list[tuple[Any, ...]] = [
        (os.POSIX_SPAWN_DUP2, in_r, 0) if stdin else (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_DUP2, out_w, 1),
        (os.POSIX_SPAWN_DUP2, err_w, 2),
    ]
    try:
        pid = os.posix_spawn(
            argv[0],
            argv,
            env,
            file_actions=actions,
            setpgroup=0,
            # Python ignores SIGPIPE and SIGXFSZ; an ignored signal stays ignored across exec.
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
            setsigmask=(),
        )
    except OSError:
        for fd in ours:
            os.close(fd)
        raise
    finally:
        for fd in child:
            close_pipe(fd)
    return pid, (in_w if stdin else None), out_r, err_r
