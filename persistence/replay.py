"""State from the controller's log: a projection built by reading it, page by page.

The CLI's views, the demo workload and the read model all start here; the
daemon's journal reads the log its own way (it also feeds its subscribers).
"""

from __future__ import annotations

from persistence.port import Controller
from state.projection import Projection, bulk
from state.shared import SharedProjection

#: Facts read at a time. A page is decoded, then applied, then let go: a small one stays in
#: the processor's caches in between (100,000 facts replay some 15% faster than in pages of
#: 10,000).
PAGE = 200


def replay(controller: Controller) -> Projection:
    p = Projection()
    catch_up(p, controller)
    return p


def catch_up(p: Projection | SharedProjection, controller: Controller) -> int:
    """Apply every fact after ``p.seq``; returns how many were read."""
    read = 0
    with bulk():
        while True:
            facts = controller.read(after=p.seq, limit=PAGE)
            p.apply_all(facts)
            read += len(facts)
            if len(facts) < PAGE:
                return read
