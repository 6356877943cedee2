"""Open the controller a URL names (config ``controller.url``; docs/controller.md).

``sqlite://PATH``: everything after ``sqlite://`` is the file path, as in
``file://`` URLs, so ``sqlite:///var/lib/provisioner/state.db`` is the
absolute path ``/var/lib/provisioner/state.db`` (``sqlite:////var/...`` means
the same), and ``sqlite://state.db`` is relative to the working directory.
Missing parent folders are created, 0700 (``persistence.private``).

``etcd://HOST:PORT[,HOST:PORT...][/NAMESPACE][?ca=&cert=&key=&timeout=]``: an
etcd cluster (``persistence.etcd``); see docs/deployment.md.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from typing import Callable, TypeVar

from messages.errors import ControllerUnavailable
from persistence.port import Controller
from persistence.private import private_dir
from persistence.sqlite import SqliteController

log = logging.getLogger(__name__)

T = TypeVar("T")

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def open_controller(url: str, clock: Callable[[], float] | None = None) -> Controller:
    """The controller ``url`` names. ``clock``: for tests, the clock it stamps and (SQLite) judges leases by."""
    match = _SCHEME.match(url)
    if match is None:
        raise ValueError(f"controller url {url!r}: expected sqlite://PATH or etcd://HOST:PORT")
    scheme = match.group(1).lower()
    if scheme == "sqlite":
        return SqliteController(sqlite_path(url), clock=clock)
    if scheme == "etcd":
        # Imported here: the etcd client's libraries take a while to load, and most hosts use SQLite.
        from persistence.etcd import EtcdController

        return EtcdController(url, clock=clock or time.time)
    raise ValueError(f"controller url {url!r}: unknown scheme {scheme!r}; expected sqlite or etcd")


def sqlite_file(url: str) -> str | None:
    """The file a ``sqlite://`` URL names (None for other schemes), touching nothing."""
    if not url.lower().startswith("sqlite://"):
        return None
    path = url[len("sqlite://") :]
    return "/" + path.lstrip("/") if path.startswith("//") else path


def sqlite_path(url: str) -> str:
    """The file path of a ``sqlite://`` URL, with its missing parent folders created 0700."""
    path = sqlite_file(url) or ""
    if not path or path.endswith("/"):
        raise ValueError(f"controller url {url!r}: expected sqlite://PATH naming a database file")
    if path == ":memory:":
        # Every thread has its own connection, and each would see its own empty database.
        raise ValueError(f"controller url {url!r}: an in-memory database cannot be shared; name a file")
    if "?" in path:
        raise ValueError(f"controller url {url!r}: query parameters are not supported")
    parent = os.path.dirname(path)
    if parent:
        try:
            private_dir(parent)
        except OSError as exc:
            raise ControllerUnavailable(
                f"controller database {path}: cannot create folder {parent}: {exc.strerror}"
            ) from exc
    return path


def patiently(what: str, call: Callable[[], T], stopping: threading.Event,
              first_delay: float = 0.5, max_delay: float = 10.0) -> T | None:
    """``call()`` until the controller answers; None if ``stopping`` is set first.

    A daemon that starts while its controller is briefly out of reach (etcd
    restarting, another process holding SQLite's write lock) waits for it and
    says so, rather than exiting: the supervisor would only start it again.
    Anything but ``ControllerUnavailable`` (a bad URL) is raised at once.
    """
    delay, attempt = first_delay, 0
    while not stopping.is_set():
        attempt += 1
        try:
            return call()
        except ControllerUnavailable as exc:
            log.warning("%s: controller unavailable (attempt %d), retrying in %.1fs: %s", what, attempt, delay, exc)
        stopping.wait(delay)
        delay = min(max_delay, delay * 2)
    return None
