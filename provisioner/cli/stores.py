"""Where the state is, and never inventing an empty one by accident.

Opening a SQLite controller creates its file. For the daemon's first start
that is what is wanted; for a view it is not: ``provisioner instances`` on
a host with no config used to create an empty store and print ``(none)``,
as if the cluster held nothing. So a command that only reads refuses a
store that is not there, and says where it looked; and ``run`` refuses a
missing SQLite file in a home a daemon has used before (a typo in the
path would otherwise start an empty store and lose sight of everything the
old one holds, money included).
"""

from __future__ import annotations

from pathlib import Path

from persistence.controller import sqlite_file

WHERE = "--config FILE, --controller URL or --url URL (or $PROVISIONER_CONFIG, ./provisioner.yaml)"


class NoStore(Exception):
    """The command would have to invent the store it was asked to read."""


def missing_sqlite(url: str) -> Path | None:
    """The SQLite file ``url`` names when it does not exist (None: it exists, or is not SQLite)."""
    path = sqlite_file(url)
    if path is None or Path(path).exists():
        return None
    return Path(path)


def nothing_here(home: Path) -> str:
    """Why a view with no config and no controller given has nothing to read."""
    return (f"no config found and no state in {home} (no state.db): nothing to show. Give {WHERE}, "
            "or start the daemon first (provisioner run)")


def used_by(home: Path) -> str | None:
    """What shows that a daemon has used this home (its audit log, its snapshots), or None."""
    if (home / "audit.log").exists():
        return f"its audit log {home / 'audit.log'}"
    snapshots = home / "snapshots"
    if snapshots.is_dir() and any(snapshots.glob("*.snapshot")):
        return f"its snapshots in {snapshots}"
    return None


def check_run_store(url: str, home: Path) -> None:
    """Refuse to start a fresh SQLite store in a home that a daemon has used: most likely a typo."""
    missing = missing_sqlite(url)
    if missing is None:
        return
    used = used_by(home)
    if used is not None:
        raise NoStore(f"controller.url: {missing} does not exist, but {home} has been used by a daemon before "
                      f"({used}): is the path mistyped? Nothing was created. To start an empty store there on "
                      f"purpose, create the file first (touch {missing})")
