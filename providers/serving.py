"""The provider's side of the persistent protocol, version 1: a loop any Python provider can serve with.

``serve(handle, actions)`` says hello, then reads calls from stdin and
answers each on a thread of its own, so pings are answered while calls run
and answers go back in whatever order they finish. ``handle(action, input,
deadline)`` returns the answer without its id: ``{"exit": 0, "output":
{...}}`` or ``{"exit": 75, "message": "throttled"}``, or None to give no
answer at all (a call abandoned at its deadline: the daemon has ended it
already, with an unknown outcome). The loop ends when the daemon closes stdin.

Standard library only, and nothing of the daemon: a provider imports this
and nothing else of the project (docs/script-contract.md has the protocol).
"""

from __future__ import annotations

import json
import sys
import threading
import traceback
from typing import IO, Any, Callable, Dict, Iterable, Optional

PROTOCOL = 1
#: The exit of a call the provider could not make sense of (as a one-shot script's usage error).
USAGE = 64
FAILED = 1

Handler = Callable[[str, Dict[str, Any], Optional[float]], Optional[Dict[str, Any]]]


class Server:
    """One serving loop: its streams, the lock its answers are written under, its calls running."""

    def __init__(self, handle: Handler, actions: Iterable[str], stdin: IO[bytes], stdout: IO[bytes],
                 log: Callable[[str], None]) -> None:
        self.handle = handle
        self.actions = list(actions)
        self.stdin = stdin
        self.stdout = stdout
        self.log = log
        self.lock = threading.Lock()
        self.closed = threading.Event()

    def run(self) -> int:
        self.write({"hello": {"protocol": PROTOCOL, "actions": self.actions}})
        for raw in self.stdin:
            if self.closed.is_set():
                break
            line = raw.strip()
            if line:
                self.take(line)
        return 0

    def take(self, line: bytes) -> None:
        try:
            call = json.loads(line)
        except ValueError:
            self.log(f"a line from the daemon that is not JSON ignored: {line[:80]!r}")
            return
        if not isinstance(call, dict) or not isinstance(call.get("id"), str):
            self.log("a line from the daemon without an id ignored")
            return
        call_id, action = call["id"], call.get("action")
        if action == "ping":
            self.write({"id": call_id, "exit": 0, "output": {}})
            return
        doc = call.get("input")
        deadline = call.get("deadline")
        if action not in self.actions or not isinstance(doc, dict):
            self.write({"id": call_id, "exit": USAGE, "message": f"no such action here: {action!r}"
                        if action not in self.actions else "the call's input is not an object"})
            return
        deadline = float(deadline) if isinstance(deadline, (int, float)) else None
        threading.Thread(target=self.answer, args=(call_id, action, doc, deadline), daemon=True,
                         name=f"call-{call_id}").start()

    def answer(self, call_id: str, action: str, doc: Dict[str, Any], deadline: Optional[float]) -> None:
        try:
            given = self.handle(action, doc, deadline)
            if given is None:
                return
            answer = dict(given)
        except Exception as exc:  # a bug in the handler: this call fails, the provider serves on
            for line in traceback.format_exc().splitlines():
                self.log(line)
            answer = {"exit": FAILED, "message": f"{action}: {type(exc).__name__}"}
        answer["id"] = call_id
        self.write(answer)

    def write(self, doc: Dict[str, Any]) -> None:
        data = json.dumps(doc, separators=(",", ":")).encode("utf-8") + b"\n"
        with self.lock:
            try:
                self.stdout.write(data)
                self.stdout.flush()
            except (BrokenPipeError, ValueError, OSError):
                self.closed.set()  # the daemon is gone; the loop ends with its stdin


def serve(handle: Handler, actions: Iterable[str], *, stdin: Optional[IO[bytes]] = None,
          stdout: Optional[IO[bytes]] = None, log: Optional[Callable[[str], None]] = None) -> int:
    """Serve calls until the daemon closes stdin; the exit status to end with (0)."""
    def say(line: str) -> None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    return Server(handle, actions, stdin or sys.stdin.buffer, stdout or sys.stdout.buffer, log or say).run()
