"""The simulator's memory: one JSON file, changed only under an exclusive lock.

Several calls run at once (the daemon polls while it requests), so every call
reads, changes and writes the state while holding ``flock`` on a lock file;
writing a temporary file, fsyncing it and renaming it over the old one means a
killed call leaves the old state or the new one, never half of each.
"""

from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
from typing import Any, Dict, Iterator

from simprov_exit import CONFIG, FAILED, SimExit

STATE_FILE = "state.json"
#: Only ever written under the lock, so one fixed name suffices (a killed writer's leftover is overwritten).
TEMP_FILE = "state.json.tmp"
LOCK_FILE = "state.lock"
FORMAT = 1


def empty_state() -> Dict[str, Any]:
    return {
        "format": FORMAT,
        "next_request": 1,
        "next_machine": 1,
        "requests": {},
        "tokens": {},
        "machines": {},
        "grants": {},
        "faults_used": {},
        "in_use": {},
        "calls": {},
    }


def _load(folder: str) -> Dict[str, Any]:
    path = os.path.join(folder, STATE_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return empty_state()
    except OSError as e:
        raise SimExit(FAILED, f"state file {path}: cannot read: {e.strerror}") from None
    try:
        state = json.loads(text)
    except ValueError as e:
        raise SimExit(FAILED, f"state file {path}: not valid JSON ({e}); left untouched") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise SimExit(FAILED, f"state file {path}: not a simulator state of format {FORMAT}; left untouched")
    return state


def _save(folder: str, state: Dict[str, Any]) -> None:
    tmp = os.path.join(folder, TEMP_FILE)
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(folder, STATE_FILE))
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


@contextmanager
def locked_state(folder: str) -> Iterator[Dict[str, Any]]:
    """Yield the state for change; it is saved when the block ends, also by a SimExit.

    A SimExit is a decided outcome (an injected fault was consumed, a counter
    moved), so its changes are kept; any other exception discards them.
    """
    try:
        os.makedirs(folder, exist_ok=True)
        lock = open(os.path.join(folder, LOCK_FILE), "a")
    except OSError as e:
        raise SimExit(CONFIG, f"state folder {folder}: {e.strerror}") from None
    with lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        state = _load(folder)
        try:
            yield state
        except SimExit:
            _save(folder, state)
            raise
        _save(folder, state)
