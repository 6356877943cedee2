"""``sim-provider serve``: the simulator as a persistent provider (protocol version 1, JSON lines).

The same calls as the one-shot actions, on one long-running process: a hello
first, then each call on a thread of its own, so pings are answered while a
call hangs and answers go back in the order they finish. Config, state
folder and clock are read per call, as in one-shot mode, so the simulator
behaves the same either way; only ``print`` faults differ in what breaks
(a line the daemon cannot read kills this process rather than one run).
Standard library only, like the rest of the simulator.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any, Callable, Dict, Mapping, Optional

from simprov_calls import parse_v2
from simprov_clock import now
from simprov_config import ACTIONS, load_config
from simprov_engine import perform
from simprov_exit import BAD_INPUT, SimExit
from simprov_store import locked_state

PROTOCOL = 1
#: What a ``huge`` print fault writes: past the daemon's 16 MiB output limit.
HUGE = 17 * 1024 * 1024

_lock = threading.Lock()
#: Where the config and the state folder are, from the environment (the one-shot entry point's rules).
Finder = Callable[[Mapping[str, str]], str]


def _write(data: bytes) -> None:
    with _lock:
        try:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass  # the daemon is gone; this process ends with its stdin


def _send(doc: Dict[str, Any]) -> None:
    _write(json.dumps(doc, separators=(",", ":")).encode("utf-8") + b"\n")


def _answer(call_id: str, action: str, doc: Dict[str, Any], config_path: Finder, state_dir: Finder) -> None:
    env = os.environ
    try:
        cfg = load_config(config_path(env))
        folder = state_dir(env)
        call = parse_v2(action, doc, cfg, None)
        with locked_state(folder) as state:
            answer = perform(cfg, state, now(), call)
    except SimExit as e:
        sys.stderr.write(f"sim-provider: {e.message}\n")
        sys.stderr.flush()
        _send({"id": call_id, "exit": e.code, "message": e.message})
        return
    if answer.hang:
        time.sleep(answer.hang)
    if answer.printed == "garbage":
        _write(b"sim-provider: this line is not JSON\n")
    elif answer.printed == "huge":
        _write(b'{"id": "%s", "pad": "' % call_id.encode() + b"x" * HUGE + b'"}\n')
    else:
        _send({"id": call_id, "exit": 0, "output": answer.output})


def _take(line: bytes, config_path: Finder, state_dir: Finder) -> None:
    try:
        call = json.loads(line)
    except ValueError:
        sys.stderr.write("sim-provider: a line from the daemon that is not JSON ignored\n")
        return
    call_id: Optional[str] = call.get("id") if isinstance(call, dict) else None
    if not isinstance(call_id, str):
        sys.stderr.write("sim-provider: a line from the daemon without an id ignored\n")
        return
    action, doc = call.get("action"), call.get("input")
    if action == "ping":
        _send({"id": call_id, "exit": 0, "output": {}})
    elif action not in ACTIONS or not isinstance(doc, dict):
        _send({"id": call_id, "exit": BAD_INPUT, "message": f"no such call: {action!r} with input {doc!r}"[:200]})
    else:
        threading.Thread(target=_answer, args=(call_id, action, doc, config_path, state_dir), daemon=True).start()


def serve(config_path: Finder, state_dir: Finder) -> int:
    """Serve calls until the daemon closes stdin."""
    _send({"hello": {"protocol": PROTOCOL, "actions": list(ACTIONS)}})
    for line in sys.stdin.buffer:
        if line.strip():
            _take(line, config_path, state_dir)
    return 0
