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

from messages.commands import Recipient

log = logging.getLogger(__name__)


class Runs(Recipient, Protocol):
    """An actor's ref that its holder also stops (``pykka.ActorRef``)."""

    def stop(self, block: bool = True, timeout: float | None = None) -> Any: ...


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

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Ping):
            return True  # answered after everything queued before it: a barrier
        return self._dispatch(message)

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
