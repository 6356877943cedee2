"""The value types a config is written in: durations, sizes and names.

Shared by every file the project reads (the daemon's config, the simulator's,
demand traces), so ``10m`` means the same everywhere.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, Field

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}


def parse_duration(value: object) -> float:
    """``90s``, ``10m``, ``2h``, ``1.5d``, ``250ms`` or a bare number of seconds."""
    if isinstance(value, bool):
        raise ValueError("a duration like 90s, 10m or 2h, not a boolean")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return float(value)
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            return float(m.group(1)) * _UNIT[m.group(2)]
    raise ValueError(f"not a duration: {value!r} (use e.g. 90s, 10m, 2h)")


Duration = Annotated[float, BeforeValidator(parse_duration)]

_SIZE = re.compile(r"^\s*(\d+)\s*(B|KiB|MiB|GiB|kB|KB|MB|GB)?\s*$")
_BYTES = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3, "kB": 1000, "KB": 1000, "MB": 1000 ** 2,
          "GB": 1000 ** 3, None: 1}


def parse_size(value: object) -> int:
    """``32MiB``, ``512KiB``, ``1GB`` or a bare number of bytes."""
    if isinstance(value, bool):
        raise ValueError("a size like 32MiB or 512KiB, not a boolean")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("a size cannot be negative")
        return value
    if isinstance(value, str):
        m = _SIZE.match(value)
        if m:
            return int(m.group(1)) * _BYTES[m.group(2)]
    raise ValueError(f"not a size: {value!r} (use e.g. 32MiB, 512KiB or a number of bytes)")


Size = Annotated[int, BeforeValidator(parse_size)]
Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")]

_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_variable(value: str) -> str:
    """An environment variable's name, as an env_file may set it."""
    if not _VARIABLE.fullmatch(value):
        shown = value if len(value) <= 40 else value[:37] + "..."
        raise ValueError(f"not a variable name: {shown!r} (letters, digits and '_', not starting with a digit)")
    return value


Variable = Annotated[str, AfterValidator(check_variable)]
