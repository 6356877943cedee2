"""Slurm's hostlist expressions (``cloud[1-16]``, ``a[1-3,5],b7``), read and written by the python-hostlist library.

The config's ``slurm.nodes`` name node sets so, and the bridge reads Slurm's
node lists so: one reader, here on the config's floor, serves both.
"""

from __future__ import annotations

from collections.abc import Iterable

import hostlist

#: More names than this in one expression is a mistake (Slurm itself refuses far fewer nodes).
MOST = 100_000


class HostlistError(ValueError):
    """An expression that is not a hostlist; the message names it."""


def expand_hostlist(expr: str) -> list[str]:
    """Every name ``expr`` stands for, in its order, each once."""
    text = expr.strip()
    if not text:
        raise HostlistError("empty hostlist expression")
    try:
        names = hostlist.expand_hostlist(text, allow_duplicates=False)
    except hostlist.BadHostlist as exc:
        raise HostlistError(f"not a hostlist expression: {expr!r} ({exc})") from None
    if len(names) > MOST:
        raise HostlistError(f"hostlist expression {expr!r} names {len(names)} nodes, more than {MOST}")
    return names


def compress_hostlist(names: Iterable[str]) -> str:
    """The shortest expression for ``names`` (sorted as Slurm sorts them)."""
    return hostlist.collect_hostlist(list(names))
