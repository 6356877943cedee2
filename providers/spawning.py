"""Starting a provider's program: ``os.posix_spawn``, in a process group of its own, on pipes.

The daemon is multi-threaded, so it never forks: ``posix_spawn`` starts the
program directly. Its own process group lets a timeout, a stop or a lost
lease kill whatever the program started too. One-shot script runs and
persistent provider processes start the same way.
"""

from __future__ import annotations

import os
import signal
from typing import Any


def spawn(argv: list[str], env: dict[str, str], stdin: bool = False) -> tuple[int, int | None, int, int]:
    """Start ``argv``; returns its pid, the write end of its stdin (``stdin``: a pipe, else /dev/null),
    and the read ends of its stdout and stderr.

    Every descriptor made here is close-on-exec: no other program inherits
    it. Raises ``OSError`` when the program cannot be started (nothing is
    left open then).
    """
    in_r, in_w = os.pipe() if stdin else (-1, -1)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
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
            os.close(fd)
    return pid, (in_w if stdin else None), out_r, err_r
