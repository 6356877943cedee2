"""Seeded chance: every random choice is a hash of the seed and what it is for.

Drawing from a shared generator would make results depend on the order in
which concurrent calls happen to run; hashing the purpose (token, machine
index, ...) keeps two runs with the same seed and tokens identical.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def chance(seed: Any, *purpose: Any) -> float:
    """A number in [0, 1) fixed by the seed and the purpose."""
    blob = json.dumps([seed, *purpose], separators=(",", ":"), default=str).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") / 2.0**64
