"""Arguments checked as the API checks the same values, and the documents commands read, in one line each."""

from __future__ import annotations

import argparse
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from config.located import one_line, shown
from provisioner.api.models import ActionBody
from provisioner.cli.documents import read_document
from provisioner.cli.where import CliError

#: A document model the CLI reads from a file.
M = TypeVar("M", bound=BaseModel)


def document(file: str, model: type[M], what: str) -> M:
    """A JSON or YAML document (a file, or - for stdin) as ``model``; one line naming the place if not."""
    return read_document(file, model, what)


def checked(model: type[BaseModel], fields: dict[str, Any], named: dict[str, str], reword: Any = None) -> None:
    """Refuse arguments ``model`` refuses, in one line naming the argument (``named``: field -> option)."""
    try:
        model.model_validate(fields)
    except ValidationError as exc:
        raise CliError(one_line(exc, named=named, reword=reword)) from None


def reason(args: argparse.Namespace) -> str:
    """``--reason`` as the REST API takes it (one line of text, at most 500 characters), in both modes."""
    checked(ActionBody, {"reason": args.reason}, {"reason": "--reason"},
            lambda kind, _, value: f"not valid: {shown(value)} (one line of text, no control characters)"
            if kind == "string_pattern_mismatch" else None)
    return args.reason


def duration(option: str, value: str) -> float:
    from config.values import parse_duration

    try:
        return parse_duration(value)
    except ValueError as exc:
        raise CliError(f"{option}: {exc}") from None


def pair(spec: str, kind: type, form: str) -> tuple[str, Any]:
    name, sep, value = spec.partition(":")
    try:
        if not sep or not name:
            raise ValueError
        return name, kind(value)
    except ValueError:
        raise CliError(f"{spec!r}: expected {form}") from None
