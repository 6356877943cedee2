"""Bearer tokens from a file, mapped to roles.

Roles: ``viewer`` reads; ``operator`` reads and steers providers and
instances; ``scheduler`` reads and feeds demand and host events. Without a
tokens file the API serves read-only views to anyone who can reach it, which
is why it then refuses to listen beyond loopback.

Tokens are compared in constant time and never printed: errors name the
token's entry (its ``name``), never its value.
"""

from __future__ import annotations

import hmac
import stat
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from messages.base import Model

Role = Literal["viewer", "operator", "scheduler"]

#: What each permission needs: any role may read.
READ: frozenset[str] = frozenset({"viewer", "operator", "scheduler"})
OPERATE: frozenset[str] = frozenset({"operator"})
SCHEDULE: frozenset[str] = frozenset({"scheduler"})

MIN_TOKEN = 16


class TokensError(Exception):
    """The tokens file cannot be used; the message names the file and the entry."""


class TokenEntry(Model):
    name: Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._@-]*$")]
    role: Role
    token: Annotated[str, Field(min_length=MIN_TOKEN, max_length=4096, pattern=r"^[\x21-\x7e]+$", repr=False)]


class TokensFile(Model):
    tokens: list[TokenEntry]

    @model_validator(mode="after")
    def _unique(self) -> "TokensFile":
        names: set[str] = set()
        for t in self.tokens:
            if t.name in names:
                raise ValueError(f"duplicate token name {t.name!r}")
            names.add(t.name)
        values = [t.token for t in self.tokens]
        if len(set(values)) != len(values):
            raise ValueError("two entries share one token value")
        return self


class Caller(Model):
    """Who made a request: the token entry's name and role (``anonymous`` without tokens)."""

    name: str
    role: Role


class Tokens:
    def __init__(self, entries: list[TokenEntry]) -> None:
        self._entries = [(t.token.encode(), Caller(name=t.name, role=t.role)) for t in entries]

    def caller(self, presented: str) -> Caller | None:
        """The entry whose token this is; every entry is compared, so timing tells nothing."""
        given = presented.encode()
        found = None
        for token, caller in self._entries:
            if hmac.compare_digest(token, given):
                found = caller
        return found

    def __len__(self) -> int:
        return len(self._entries)


def check_private(path: Path) -> None:
    """Refuse a secret file others could read: mode 0600 (or stricter) only."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise TokensError(f"{path}: no such file") from None
    except OSError as exc:
        raise TokensError(f"{path}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise TokensError(f"{path}: not a regular file")
    if mode & 0o077:
        raise TokensError(f"{path}: mode {stat.S_IMODE(mode):04o} is too open, use 0600 (chmod 600 {path})")


def load_tokens(path: Path) -> Tokens:
    check_private(path)
    try:
        doc = yaml.safe_load(path.read_bytes())
    except OSError as exc:
        raise TokensError(f"{path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise TokensError(f"{where}: not valid YAML") from None
    try:
        parsed = TokensFile.model_validate(doc)
    except ValidationError as exc:
        raise TokensError(f"{path}: {_first_error(exc, doc)}") from None
    if not parsed.tokens:
        raise TokensError(f"{path}: tokens: the list is empty")
    return Tokens(parsed.tokens)


def _first_error(exc: ValidationError, doc: object) -> str:
    """The first problem, naming the entry by its ``name`` and never echoing a token value."""
    err = exc.errors()[0]
    loc = list(err["loc"])
    where = ".".join(str(x) for x in loc) or "document"
    if len(loc) >= 2 and loc[0] == "tokens" and isinstance(loc[1], int) and isinstance(doc, dict):
        entries = doc.get("tokens") or []
        entry = entries[loc[1]] if loc[1] < len(entries) else None
        name = entry.get("name") if isinstance(entry, dict) else None
        if name:
            where = f"tokens[{name!r}]" + "".join(f".{x}" for x in loc[2:])
    msg = err["msg"]
    if loc[-1:] == ["token"]:
        msg = f"must be {MIN_TOKEN} to 4096 printable characters without spaces"
    return f"{where}: {msg}"
