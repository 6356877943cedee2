"""Per demand item, the decisions a planning round reads, however many items there are.

A round asks two things of past decisions: is the new decision for an item
news (does it differ from the last one recorded)? And until when did each
item last want supply (``policy.reclaim.wanted_until``)? For that it needs,
per item, the last decision and, of the item's last spell of wanting, its
last wanting decision and the first one after it: three records at most.

Reading them from the last N decisions of the log failed past N items: a
demand of 1,001 items compared some items with nothing, wrote their
unchanged decisions again each round, and the log grew without bound. So
they are kept per item here, up to ``limit`` items; an item unseen for
longest goes first when more come (it is then news once more, no worse).
"""

from __future__ import annotations

from messages.records import DecisionRecord

#: Items whose decisions are kept: well above the largest demand a snapshot may hold.
LIMIT = 250_000


class ItemDecisions:
    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        #: item -> [last wanting, first not wanting after it, last]; dict order: least recently decided first
        self.items: dict[str, list[DecisionRecord | None]] = {}
        self._records: list[DecisionRecord] | None = None

    def add(self, rec: DecisionRecord) -> None:
        item = rec.decision.item
        slots = self.items.pop(item, None) or [None, None, None]
        if rec.decision.need > 0:
            slots[0], slots[1] = rec, None
        elif slots[0] is not None and slots[1] is None:
            slots[1] = rec
        slots[2] = rec
        self.items[item] = slots
        if len(self.items) > self.limit:
            del self.items[next(iter(self.items))]
        self._records = None

    def records(self) -> list[DecisionRecord]:
        """The records kept, in log order (each once)."""
        if self._records is None:
            kept = {id(r): r for slots in self.items.values() for r in slots if r is not None}
            self._records = sorted(kept.values(), key=lambda r: (r.seq, r.at))
        return self._records

    def __eq__(self, other: object) -> bool:
        # In order too: which item goes first when more come follows the order of last decisions.
        return isinstance(other, ItemDecisions) and list(self.items.items()) == list(other.items.items())

    __hash__ = None  # type: ignore[assignment]

    def last(self, item: str) -> DecisionRecord | None:
        slots = self.items.get(item)
        return slots[2] if slots else None
