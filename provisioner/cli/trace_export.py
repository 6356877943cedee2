"""``provisioner trace export``: the controller's past demand as a simulator trace (``sim/export.py``).

It reads the controller itself (as ``plan`` does): the demand snapshots it
kept (``Controller.demand_history``, 35 days) and the fact log for what
served them. The trace it writes is for ``provisioner sim --trace``.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from config.load import public_url
from persistence.controller import open_controller
from persistence.port import DEMAND_HISTORY
from state.projection import Projection

#: Facts read per call.
PAGE = 10_000


class ExportError(Exception):
    """Nothing to export, or a period that cannot be: one line."""


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def export_main(url: str, out: Path, since_s: float, step: float, now: float | None = None) -> int:
    # The simulator's modules are imported here, not above: the CLI imports this module for its
    # error, and a running daemon (``provisioner run``) would otherwise hold them for nothing.
    from sim.export import export
    from sim.trace import write_trace

    now = time.time() if now is None else now
    if since_s <= 0:
        raise ExportError("--since: give how far back, e.g. 30d or 12h")
    if step <= 0:
        raise ExportError("--step: must be more than 0s")
    if since_s > DEMAND_HISTORY:
        print(f"note: the controller keeps {DEMAND_HISTORY / 86400:.0f} days of demand; older has gone")
    since = now - since_s
    controller = open_controller(url)
    try:
        history = controller.demand_history(since=since, until=now)
        if not history:
            raise ExportError(f"no demand recorded since {_iso(since)} on {public_url(url)}: nothing to export "
                              "(the controller keeps the demand snapshots put since it was upgraded, for 35 days)")
        p, facts = Projection(), []
        after = 0
        while True:
            page = controller.read(after=after, limit=PAGE)
            p.apply_all(page)
            facts += [f for f in page if f.kind in ("usage_observed", "lease_acquired", "lease_lost")]
            if len(page) < PAGE:
                break
            after = page[-1].seq or after
    finally:
        controller.close()
    result = export(history, p, facts, since, now, step)
    note = f"provisioner trace export from {public_url(url)}: {result.snapshots} demand snapshots since {_iso(since)}"
    n = write_trace(out, result.steps, result.start, note)
    print(f"{out}: {n} steps over {(now - result.start) / 86400:.1f} days, {len(result.items)} items "
          f"({result.snapshots} demand snapshots from {_iso(result.start)})")
    return 0
