"""A pykka actor that dispatches messages by type and survives a bad one.

pykka stops an actor whose ``on_receive`` raises for a ``tell``. An actor here
holds no state that facts cannot rebuild, and its next tick retries whatever
a failed handler left undone, so a handler's unexpected error is logged with
its traceback and the actor lives on (the daemon must survive bad input).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Protocol

import pykka

from messages.commands import CaughtUp, Committed
from state.projection import pause_gc, resume_gc

log = logging.getLogger(__name__)


class Tells(Protocol):
    """What a message can be told to: an actor's ref (or a test's inbox standing in for one)."""

    def tell(self, message: Any) -> None: ...


class Mandate(Protocol):
    """Whether an actor may still act under its lease (``actors.lease.Revocation``): set once it may not."""

    def is_set(self) -> bool: ...

    def set(self) -> None: ...


class Ping:
    """Asked of an actor to learn that it has handled every message sent before."""


class Actor(pykka.ThreadingActor):
    #: message type -> method name; filled per subclass by ``__init_subclass__``.
    _handlers: dict[type, str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own_stop = vars(cls).get("on_stop")
        if own_stop is not None:
            # An actor stopped mid-replay must not leave the collector paused for the process.
            def on_stop(self: "Actor", _own: Callable = own_stop) -> None:
                try:
                    _own(self)
                finally:
                    self._end_replay()

            cls.on_stop = on_stop  # type: ignore[method-assign]
        handlers: dict[type, str] = {}
        for base in reversed(cls.__mro__):
            handlers.update(getattr(base, "_own_handlers", {}))
        own = {}
        for name, fn in vars(cls).items():
            typ = getattr(fn, "_handles", None)
            if typ is not None:
                own[typ] = name
        cls._own_handlers = own  # type: ignore[attr-defined]
        handlers.update(own)
        cls._handlers = handlers

    _replaying = False

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Ping):
            return True  # answered after everything queued before it: a barrier
        # A replay (history, then CaughtUp) builds the projection in one go: no GC scans meanwhile.
        if isinstance(message, Committed) and message.replay and not self._replaying:
            self._replaying = True
            pause_gc()
        try:
            return self._dispatch(message)
        finally:
            if isinstance(message, CaughtUp) and self._replaying:
                self._replaying = False
                resume_gc()

    def on_stop(self) -> None:
        self._end_replay()

    def _end_replay(self) -> None:
        if self._replaying:
            self._replaying = False
            resume_gc()

    def _dispatch(self, message: Any) -> Any:
        name = self._handlers.get(type(message))
        if name is None:
            log.warning("%s: no handler for %s; dropped", type(self).__name__, type(message).__name__)
            return None
        try:
            return getattr(self, name)(message)
        except Exception:
            log.exception("%s: handling %s failed; the next tick retries", type(self).__name__, type(message).__name__)
            return None


def handles(message_type: type) -> Callable[[Callable], Callable]:
    def mark(fn: Callable) -> Callable:
        fn._handles = message_type  # type: ignore[attr-defined]
        return fn

    return mark
