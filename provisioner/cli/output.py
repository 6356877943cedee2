"""What commands print: tables for people, indented JSON with ``-o json``."""

from __future__ import annotations

import time
from typing import Any, Sequence

import orjson

#: Columns too wide for a table; ``-o json`` has them.
HIDDEN: dict[str, tuple[str, ...]] = {
    "providers": ("description", "status_reason"),
    "daemons": ("roles",),
    "audit": ("id", "lease", "fence", "payload", "prev", "hash"),
}


def print_json(doc: Any) -> None:
    print(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())


def emit(rows: list[dict[str, Any]], output: str, hidden: Sequence[str] = ()) -> None:
    if output == "json":
        print_json(rows)
    else:
        table([{k: v for k, v in r.items() if k not in hidden} for r in rows])


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(_brief(v) for v in value) or "-"
    if isinstance(value, float):
        if value > 1e9:  # an epoch time
            return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))
        return f"{value:.4g}"
    return str(value)


def _brief(value: Any) -> str:
    """A chosen or rejected entry of a decision, in a few words."""
    if isinstance(value, dict):
        if "reason" in value:
            return f"{value.get('provider')}: {value['reason']}"
        what = value.get("template") or value.get("resource")
        return f"{value.get('count')} {value.get('provider')}" + (f"/{what}" if what else "")
    return str(value)


def table(rows: list[dict[str, Any]]) -> None:
    if not rows:
        print("(none)")
        return
    cols = list(rows[0])
    cells = [[cell(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print("  ".join(c.upper().ljust(w) for c, w in zip(cols, widths)).rstrip())
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
