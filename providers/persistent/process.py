"""The one long-running process of a persistent provider: started, signalled and collected safely.

The daemon is multi-threaded, so the process starts with ``os.posix_spawn``
(forking a threaded process can deadlock the child on a lock another thread
held), in a process group of its own: whatever the provider starts is killed
with it. Its exit is watched through a pidfd, not through the end of its
output, since a child it left behind may hold stdout open.
"""

from __future__ import annotations

import os
import select
import signal
import threading

from providers.spawning import spawn as spawn_group


class ServeProcess:
    """A started ``serve`` process and the daemon's ends of its three pipes.

    Signals go to the group only while the leader is unreaped, so the group id
    cannot have been reused by an unrelated process; ``stop`` may signal from
    another thread than the one that reaps.
    """

    def __init__(self, pid: int, stdin: int, stdout: int, stderr: int) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.pidfd = os.pidfd_open(pid)
        self.lock = threading.Lock()
        self.reaped = False
        self.exit_code: int | None = None

    def signal(self, sig: int) -> None:
        with self.lock:
            if not self.reaped:
                try:
                    os.killpg(self.pid, sig)
                except ProcessLookupError:
                    pass

    def exited(self, within: float = 0.0) -> bool:
        """Whether the leader has exited (waiting up to ``within`` seconds)."""
        return bool(select.select([self.pidfd], [], [], within)[0])

    def end(self, grace: float = 0.0) -> int:
        """Kill the whole group (SIGTERM first when ``grace`` > 0, then SIGKILL) and collect the exit status.

        Also called once the leader exited by itself: what it left in its group goes with it.
        """
        if grace > 0 and not self.exited():
            self.signal(signal.SIGTERM)
            self.exited(grace)
        self.signal(signal.SIGKILL)
        select.select([self.pidfd], [], [])  # SIGKILL was sent: the leader is on its way out
        with self.lock:
            if not self.reaped:
                _, status = os.waitpid(self.pid, 0)
                self.reaped = True
                self.exit_code = os.waitstatus_to_exitcode(status)
        return self.exit_code if self.exit_code is not None else -signal.SIGKILL

    def close(self) -> None:
        for fd in (self.stdin, self.stdout, self.stderr, self.pidfd):
            try:
                os.close(fd)
            except OSError:
                pass


def spawn(argv: list[str], env: dict[str, str]) -> ServeProcess:
    """Start ``argv`` in its own process group with pipes on stdin, stdout and stderr (``providers.spawning``).

    The daemon's ends are non-blocking. Raises ``OSError`` when the program cannot be started.
    """
    pid, in_w, out_r, err_r = spawn_group(argv, env, stdin=True)
    assert in_w is not None
    ours = (in_w, out_r, err_r)
    for fd in ours:
        os.set_blocking(fd, False)
    return ServeProcess(pid, in_w, out_r, err_r)
