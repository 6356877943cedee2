"""Rate limits: at most so many new hosts or units ordered from a provider per interval.

Counted from the order facts themselves (their time and count), so the limit
holds across restarts and planner failovers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from messages.records import OrderRecord


def ordered_recently(orders: Iterable[OrderRecord], now: float, windows: Mapping[str, float]) -> dict[str, int]:
    """Per provider with a window (seconds): hosts or units ordered within it, up to ``now``."""
    out: dict[str, int] = {}
    for order in orders:
        window = windows.get(order.provider)
        if window is not None and order.order.action == "request" and now - window < order.at <= now:
            out[order.provider] = out.get(order.provider, 0) + order.order.count
    return out
