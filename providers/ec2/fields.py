"""Where a validation error is: ``templates[0].subnets: ...``.

An operator fixes a settings file or a script input by the key it names, so
every error starts with the path to the bad value, in the spelling of the
file (list positions in brackets), never with pydantic's own wording of it.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError


def place(loc: tuple[Any, ...]) -> str:
    """``('templates', 0, 'subnets')`` as ``templates[0].subnets``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "document"


def first_error(exc: ValidationError, prefix: str = "") -> str:
    """The first problem of a validation error, as ``PLACE: MESSAGE (got VALUE)``.

    Only short scalar values are shown: a settings file holds no secrets, but
    a long value would drown the key it is about.
    """
    err = exc.errors(include_url=False)[0]
    where = place(tuple(err["loc"]))
    if prefix:
        where = f"{prefix}.{where}" if where != "document" else prefix
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = "unknown key"
    got = err.get("input")
    shown = ""
    if isinstance(got, (str, int, float, bool)) and err["type"] not in ("missing", "extra_forbidden"):
        text = repr(got)
        shown = f" (got {text[:40]}{'...' if len(text) > 40 else ''})"
    return f"{where}: {message}{shown}"
