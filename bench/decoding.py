"""What checking a stored fact costs a replay: decoding rows as the controller does, beside the same rows
built into the same models without any check.

A replay decodes every stored row with the fact's pydantic model
(``persistence.decoding``): parsing, checking and building the objects, in
one call per row. A row the daemon checked when it wrote it could be
trusted instead (a checksum proving it unchanged) and built without the
checks. What that could save is what this floor measures: the same rows,
parsed with orjson one page at a time (one call, not one a row) and built
into the same models by setting their fields directly, as ``model_construct``
does but cheaper. If the checked decoding costs little more than that, the
checks cost little, and a proof, which costs its own check per row, would
save nothing.

The floor's builder knows the fact's models without nested ones, which are
all a bench log holds (``bench.ready.fill``); the benchmark checks, untimed,
that it builds facts equal to the decoder's.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

import orjson

from messages.facts import Fact, Payload
from persistence.decoding import Decoder
from state.projection import bulk

_new = object.__new__
_set = object.__setattr__
#: Stands in for a required field in a model's template: a row that lacks one is not of the bench log.
_REQUIRED = object()


def _templates() -> dict[str, tuple[type, dict[str, Any], int]]:
    """Each payload kind's model, its fields in order with their defaults, and how many there are."""
    out = {}
    for model in get_args(get_args(Payload)[0]):
        fields = {name: _REQUIRED if f.is_required() or f.default_factory is not None else f.default
                  for name, f in model.model_fields.items()}
        for kind in get_args(model.model_fields["kind"].annotation):
            out[kind] = (model, fields, len(fields))
    return out


def pages(path: Path, page: int) -> list[list[tuple[int, bytes]]]:
    """The stored rows, ``(seq, payload)``, in pages of ``page`` (read untimed)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT seq, payload FROM facts ORDER BY seq").fetchall()
    finally:
        conn.close()
    return [rows[i:i + page] for i in range(0, len(rows), page)]


def unchecked(page: list[tuple[int, bytes]], templates: dict[str, tuple[type, dict[str, Any], int]]) -> list[Fact]:
    """A page of rows built into facts without any check: orjson, then each model's fields set directly."""
    out: list[Fact] = []
    append = out.append
    for (seq, _), fact in zip(page, orjson.loads(b"[" + b",".join([stored for _, stored in page]) + b"]")):
        fields = fact["payload"]
        model, template, n = templates[fields["kind"]]
        payload = _new(model)
        _set(payload, "__pydantic_fields_set__", set(fields))
        _set(payload, "__dict__", fields if len(fields) == n else {**template, **fields})
        _set(payload, "__pydantic_extra__", None)
        _set(payload, "__pydantic_private__", None)
        built = _new(Fact)
        fact["payload"] = payload
        given = set(fact)
        given.add("seq")
        _set(built, "__pydantic_fields_set__", given)
        _set(built, "__dict__", {"seq": seq, **fact})
        _set(built, "__pydantic_extra__", None)
        _set(built, "__pydantic_private__", None)
        append(built)
    return out


def checked(page: list[tuple[int, bytes]], decoder: Decoder) -> list[Fact]:
    """A page decoded as a replay decodes it."""
    out: list[Fact] = []
    decoder.facts(page, out)
    return out


def _seconds(decode: Callable[[list[tuple[int, bytes]]], list[Fact]], rows: list[list[tuple[int, bytes]]]) -> float:
    """Seconds to decode every page, each let go before the next, as a replay does."""
    started = time.perf_counter()
    for page in rows:
        decode(page)
    return time.perf_counter() - started


def _shape(fact: Fact) -> tuple[Any, ...]:
    """What equality leaves out: the order of the fields and which were given."""
    return (list(fact.__dict__), list(fact.payload.__dict__), fact.model_fields_set, fact.payload.model_fields_set)


def decoding(path: Path, page: int, rounds: int) -> tuple[float, float]:
    """Seconds to decode the stored facts checked, and the same built unchecked: the best of ``rounds``, alternated."""
    rows = pages(path, page)
    templates = _templates()
    decoder = Decoder(str(path))
    for sample in rows[:3]:  # the floor does the same work: the same facts, fields and all
        fast, slow = unchecked(sample, templates), checked(sample, decoder)
        if fast != slow or [_shape(f) for f in fast] != [_shape(f) for f in slow]:
            raise RuntimeError("decoding bench: the unchecked floor builds other facts than the decoder")
    figures, floors = [], []
    with bulk():  # as in a replay: the collector paused
        for _ in range(rounds):
            figures.append(_seconds(lambda p: checked(p, decoder), rows))
            floors.append(_seconds(lambda p: unchecked(p, templates), rows))
    return min(figures), min(floors)
