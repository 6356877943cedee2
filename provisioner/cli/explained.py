"""Decisions as an operator reads them: the item, its need, then every candidate in rank order.

A table cell cannot hold "why each provider took what it took"; a decision
is printed as a short block instead, the same in ``provisioner decisions``
and ``provisioner plan``:

    batch (demand 7): need 6, in flight 0
      1. cloud/medium        took 6
      2. aws-east/m5.large   capacity: room for 0
      3. gcp                 no template has attribute gpus
      note: ...
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence


def _what(c: Mapping[str, Any]) -> str:
    key = c.get("template") or c.get("resource")
    return f"{c['provider']}/{key}" if key else str(c["provider"])


def _outcome(c: Mapping[str, Any]) -> str:
    if not c.get("count"):
        return str(c.get("why") or "took nothing")
    took = f"took {c['count']}" + (f" ({c['bundles']} bundles)" if c.get("bundles") is not None else "")
    return took + (f": {c['why']}" if c.get("why") else "")


def candidate_lines(candidates: Sequence[Mapping[str, Any]], indent: str = "  ") -> list[str]:
    """One line per candidate, numbered in rank order, the outcomes aligned."""
    if not candidates:
        return []
    names = [_what(c) for c in candidates]
    width = max(len(n) for n in names)
    digits = len(str(len(candidates)))
    return [f"{indent}{n:>{digits}}. {name.ljust(width)}  {_outcome(c)}"
            for n, (name, c) in enumerate(zip(names, candidates), start=1)]


def decision_lines(d: Mapping[str, Any]) -> list[str]:
    """A decision (a row of the decisions view, or a decision's JSON) as a block of lines."""
    answered = f" (demand {d['demand_seq']})" if d.get("demand_seq") else ""
    head = f"{d['item']}{answered}: need {d['need']}, in flight {d['in_flight']}"
    if d.get("at"):
        head = f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(d['at']))}  {head}"
    lines = [head]
    candidates = d.get("candidates") or []
    if candidates:
        lines += candidate_lines(candidates)
    elif d.get("chosen"):  # recorded before decisions listed their candidates
        lines += candidate_lines([{**c, "why": ""} for c in d["chosen"]])
        lines += [f"  {r['provider']}: {r['reason']}" for r in d.get("rejected") or []]
    if d.get("note"):
        lines.append(f"  note: {d['note']}")
    return lines


def decisions_text(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return "(none)"
    return "\n".join("\n".join(decision_lines(r)) for r in rows)
