"""Where the pool ledger lives, from the settings' ``ledger`` URL.

``sqlite:///PATH`` (the path is absolute) or
``etcd://HOST:PORT[,HOST:PORT...]/PREFIX[?timeout=SECONDS]``. The etcd backend
is imported only when used: most calls of a SQLite site should not pay for
an HTTP library they never touch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from providers.flexlm.errors import ConfigError
from providers.flexlm.ledger.port import Ledger

DEFAULT_PREFIX = "flexlm"
DEFAULT_TIMEOUT = 3.0
_ENDPOINT = re.compile(r"^(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*)(?::(?P<port>\d{1,5}))?$")
_PREFIX = re.compile(r"^[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*$")


@dataclass(frozen=True)
class EtcdLocation:
    endpoints: tuple[tuple[str, int], ...]
    prefix: str
    timeout: float

    @property
    def shown(self) -> str:
        return "etcd://" + ",".join(f"{h}:{p}" for h, p in self.endpoints) + "/" + self.prefix


def check_url(url: str) -> Path | EtcdLocation:
    """The parsed location, or ``ValueError`` saying what is wrong (the settings turn it into exit 78)."""
    if url.startswith("sqlite://"):
        path = url[len("sqlite://"):]
        if not path.startswith("/") or path.endswith("/"):
            raise ValueError("expected sqlite:///ABSOLUTE/PATH/TO/FILE")
        return Path(path)
    parts = urlsplit(url)
    if parts.scheme != "etcd":
        raise ValueError("expected sqlite:///PATH or etcd://HOST:PORT/PREFIX")
    if "@" in parts.netloc:
        raise ValueError("user names and passwords in the ledger URL are not supported")
    endpoints = []
    for item in parts.netloc.split(","):
        m = _ENDPOINT.match(item.strip())
        if m is None or not 0 < int(m["port"] or 2379) < 65536:
            raise ValueError(f"etcd endpoint {item!r} is not HOST:PORT")
        endpoints.append((m["host"], int(m["port"] or 2379)))
    prefix = parts.path.strip("/") or DEFAULT_PREFIX
    if not _PREFIX.match(prefix):
        raise ValueError(f"etcd prefix {prefix!r}: use letters, digits, '.', '_', '-' and '/'")
    query = parse_qs(parts.query)
    if set(query) - {"timeout"}:
        raise ValueError(f"unknown parameter {sorted(set(query) - {'timeout'})[0]!r} (known: timeout)")
    try:
        timeout = float(query.get("timeout", [DEFAULT_TIMEOUT])[0])
    except ValueError:
        raise ValueError("timeout is not a number of seconds") from None
    if not 0 < timeout <= 60:
        raise ValueError("timeout must be between 0 and 60 seconds")
    return EtcdLocation(tuple(endpoints), prefix, timeout)


def open_ledger(url: str) -> Ledger:
    try:
        where = check_url(url)
    except ValueError as exc:
        raise ConfigError(f"ledger: {exc}") from None
    if isinstance(where, Path):
        from providers.flexlm.ledger.sqlite import SqliteLedger

        return SqliteLedger(where)
    from providers.flexlm.ledger.etcd import EtcdLedger

    return EtcdLedger(where)
