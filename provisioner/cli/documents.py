"""Documents the CLI reads from a file or stdin (a demand snapshot, a supply view), checked as one model.

``demand put``, ``supply put`` and ``plan --demand`` read the same way, so a
bad file says the same everywhere: one line naming the file, the line, the
item by its id (or a host by its name), the field and the value, as config
errors do (``config.located``): ``demand.yaml:7: items[3] (id 'gpu').count:
must be at least 0, got -1``. A document is parsed with the fast JSON reader
when it is JSON; the lines are worked out only for an error.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from config.located import Where, one_line, parse_located

M = TypeVar("M", bound=BaseModel)


class DocumentError(ValueError):
    """A document that cannot be used: one line, its place first."""


def read_document(file: str, model: type[M], what: str) -> M:
    """``file`` (``-``: stdin) as ``model``; ``what`` says what an empty one should have held."""
    where = "stdin" if file == "-" else file
    try:
        data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    except OSError as exc:
        raise DocumentError(f"{where}: {exc.strerror}") from None
    try:
        doc = orjson.loads(data) if data.lstrip()[:1] in (b"{", b"[") else _yaml(data)
    except orjson.JSONDecodeError as exc:
        raise DocumentError(f"{where}: not valid JSON: {exc}") from None
    except _YamlError as exc:
        raise DocumentError(f"{where}: not valid JSON or YAML: {exc}") from None
    except RecursionError:  # the YAML reader recurses once per level: these documents are a few levels deep
        raise DocumentError(f"{where}: nested too deeply to be {what}") from None
    if doc is None:
        raise DocumentError(f"{where}: empty: expected {what}")
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        raise DocumentError(one_line(exc, doc, model, where=_lines(data, where), file=where)) from None
    except RecursionError:
        raise DocumentError(f"{where}: nested too deeply to be {what}") from None


class _YamlError(Exception):
    pass


def _yaml(data: bytes) -> Any:
    import yaml  # loads slowly: only for a document that is not JSON

    try:
        return yaml.safe_load(data)
    except yaml.YAMLError as exc:
        raise _YamlError(" ".join(str(exc).split())) from None


def _lines(data: bytes, file: str) -> Where | None:
    """The line of every key and entry of the document, for its error (JSON is YAML as far as lines go)."""
    try:
        _, where, _ = parse_located(data.decode("utf-8", errors="replace"), file)
    except RecursionError:
        return None
    return where if where.lines else None
