"""Reading stored rows back: one that no longer decodes is skipped, with one warning.

A row written by a newer schema, or edited by hand, must not stop every
reader of the log; the reader moves past it, and says so once per row.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable, TypeVar

from messages.facts import Fact

log = logging.getLogger(__name__)

T = TypeVar("T")

#: A stored fact's JSON to the fact, without the model's wrapper (see ``Decoder.fact``).
_validate_fact: Callable[[bytes], Fact] = Fact.__pydantic_validator__.validate_json


class Decoder:
    """Decodes rows of one controller, warning once per undecodable ``(what, seq)``."""

    def __init__(self, location: str) -> None:
        self.location = location
        self._warned: set[tuple[str, int]] = set()

    def __call__(self, what: str, seq: int, decode: Callable[[], T]) -> T | None:
        try:
            return decode()
        except ValueError as exc:  # orjson and pydantic decode errors are ValueErrors
            self._skip(what, seq, exc)
            return None

    def fact(self, seq: int, stored: bytes) -> Fact | None:
        """A fact stored as the JSON object of the whole fact without ``seq``."""
        out: list[Fact] = []
        self.facts(((seq, stored),), out)
        return out[0] if out else None

    def facts(self, rows: Iterable[tuple[int, bytes]], out: list[Fact]) -> None:
        """``fact`` of each ``(seq, stored)`` row, appended to ``out`` where it decodes: a page of a replay in
        one loop, without a call per row."""
        # Pydantic parses the stored bytes as they are, its validator called directly (a
        # dict first, or the model's wrapper and a closure per row, cost a replay of 100,000
        # facts about a quarter of its decoding); seq, which the store keeps beside them, goes
        # into the fresh fact before anyone sees it, as if it had been parsed with the rest.
        # Splicing it into the bytes instead cost every row two copies and a sixth of its
        # decoding. The store's position is the seq, whatever the row may say.
        validate, append = _validate_fact, out.append
        for seq, stored in rows:
            try:
                fact = validate(stored)
            except ValueError as exc:
                self._skip("fact", seq, exc)
                continue
            fact.__dict__["seq"] = seq
            fact.__pydantic_fields_set__.add("seq")
            append(fact)

    def _skip(self, what: str, seq: int, exc: ValueError) -> None:
        if (what, seq) not in self._warned:
            self._warned.add((what, seq))
            log.warning(
                "controller %s: skipping %s seq %d that does not decode: %s",
                self.location, what, seq, " ".join(str(exc).split()),
            )
