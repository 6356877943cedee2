"""The simulator's notion of now: wall time, or a file that tests and demos move by hand."""

from __future__ import annotations

import os
import time

from simprov_exit import CONFIG, SimExit


def now() -> float:
    path = os.environ.get("SIM_NOW_FILE")
    if not path:
        return time.time()
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read().strip()
    except OSError as e:
        raise SimExit(CONFIG, f"SIM_NOW_FILE {path}: cannot read: {e.strerror}") from None
    try:
        return float(text)
    except ValueError:
        raise SimExit(CONFIG, f"SIM_NOW_FILE {path}: must hold epoch seconds, found {text[:40]!r}") from None
