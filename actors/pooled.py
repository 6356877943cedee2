"""Actors that take turns on a few shared threads instead of holding one each.

A daemon serving a thousand providers ran a thousand provider actors, each a
thread parked on its inbox: about 23 MiB of stacks and thread state, and a
thousand threads for the interpreter lock to hand around. A pooled actor is
a pykka actor all the same (refs, tell, ask, proxies, stop, the registry, the
failure rules), but a small pool of workers handles its messages: a worker
takes a turn of up to ``TURN`` messages when the actor has mail, and at most
one worker serves an actor at a time, in the order its messages came. So the
actor still needs no lock of its own, and one busy actor cannot starve the rest.

A pooled actor must never block waiting for another pooled actor (an ``ask``
answered on the same workers could hold all of them); the owners only tell.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
from typing import Any

import pykka
from pykka import ActorRegistry
from pykka._envelope import Envelope  # the inbox protocol carries them

log = logging.getLogger(__name__)

#: Workers shared by every pooled actor of the process. Handlers run under the interpreter lock
#: and wait for nothing but the shared projection's lock, so a few are plenty.
WORKERS = 4
#: Messages one actor handles in a turn before the others get theirs.
TURN = 32


class _Workers:
    """Threads that run mailboxes' turns, started as the first turns are asked for."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.turns: queue.SimpleQueue[_Mailbox] = queue.SimpleQueue()
        self.threads: list[threading.Thread] = []
        self.lock = threading.Lock()

    def run(self, mailbox: "_Mailbox") -> None:
        self.turns.put(mailbox)
        if len(self.threads) < self.size:
            with self.lock:
                if len(self.threads) < self.size:
                    # Daemon threads: each actor is stopped by its owner; an idle worker holds nothing.
                    thread = threading.Thread(target=self._work, name=f"ActorWorker-{len(self.threads)}", daemon=True)
                    self.threads.append(thread)
                    thread.start()

    def _work(self) -> None:
        while True:
            mailbox = self.turns.get()
            try:
                mailbox.turn()
            except BaseException:  # a worker must outlive any actor's failure
                log.exception("actor worker: a turn of %s failed", mailbox.actor)
            # Hold no actor while waiting: a stopped one (and its daemon's projection) must go.
            del mailbox


_WORKERS = _Workers(WORKERS)


class _Mailbox:
    """An actor's inbox: it has a worker take a turn whenever mail arrives and no turn is under way."""

    def __init__(self, actor: "PooledActor") -> None:
        self.actor = actor
        self.lock = threading.Lock()
        # Not a deque: an empty deque holds a 64-slot block, ten times a SimpleQueue's size.
        self.mail: queue.SimpleQueue[Envelope[Any]] = queue.SimpleQueue()
        self.started = False
        self.set_up = False
        #: A turn is queued or running: new mail waits for it.
        self.queued = False

    def put(self, envelope: Envelope[Any]) -> None:
        with self.lock:
            self.mail.put(envelope)
            if not self.started or self.queued:
                return
            self.queued = True
        _WORKERS.run(self)

    def get(self) -> Envelope[Any]:
        with self.lock:
            return self.mail.get_nowait()

    def empty(self) -> bool:
        with self.lock:
            return self.mail.empty()

    def start(self) -> None:
        """The first turn runs ``on_start``, then whatever mail came before it."""
        with self.lock:
            self.started = True
            self.queued = True
        _WORKERS.run(self)

    def turn(self) -> None:
        actor = self.actor
        if not self.set_up:
            self.set_up = True
            actor._actor_loop_setup()
        for _ in range(TURN):
            if actor.actor_stopped.is_set():
                break
            with self.lock:
                if self.mail.empty():
                    break
                envelope = self.mail.get_nowait()
            actor._handle_envelope(envelope)
        if actor.actor_stopped.is_set():
            actor._actor_loop_teardown()  # asks left unanswered learn the actor is dead
            return  # stays queued: nothing runs a stopped actor again
        with self.lock:
            if self.mail.empty():
                self.queued = False
                return
        _WORKERS.run(self)


class _Stopped:
    """pykka's ``actor_stopped`` Event, without an Event's Condition until someone waits on it.

    Turns ask it before every message; a thousand idle actors need only the flag.
    """

    __slots__ = ("_flag", "_event")
    _lock = threading.Lock()

    def __init__(self) -> None:
        self._flag = False
        self._event: threading.Event | None = None

    def set(self) -> None:
        self._flag = True
        event = self._event  # read after the flag: a waiter that made its event before sees it set
        if event is not None:
            event.set()

    def is_set(self) -> bool:
        return self._flag

    def wait(self, timeout: float | None = None) -> bool:
        if self._flag:
            return True
        with self._lock:
            if self._event is None:
                self._event = threading.Event()
        if self._flag:  # set before the event existed: nobody else will set it
            self._event.set()
        return self._event.wait(timeout)


class PooledActor(pykka.ThreadingActor):
    """A pykka actor whose messages the shared workers handle (see the module's docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Before anything can stop it: its ref reads the same flag (pykka copies it into the ref).
        self.actor_stopped = self._actor_ref.actor_stopped = _Stopped()  # type: ignore[assignment]

    def _create_actor_inbox(self) -> Any:  # type: ignore[override]
        self._mailbox = _Mailbox(self)
        return self._mailbox

    def _start_actor_loop(self) -> None:
        self._mailbox.start()

    def _handle_envelope(self, envelope: Envelope[Any]) -> None:
        """One message, under pykka's rules: an ask's error goes to its caller, a tell's to ``on_failure``.

        The body of pykka's ``_actor_loop_running``, which cannot be called per message: it blocks on the inbox.
        """
        try:
            response = self._handle_receive(envelope.message)
            if envelope.reply_to is not None:
                envelope.reply_to.set(response)
        except Exception:
            if envelope.reply_to is not None:
                log.info("Exception returned from %s to caller:", self, exc_info=sys.exc_info())
                envelope.reply_to.set_exception()
            else:
                self._handle_failure(*sys.exc_info())
                try:
                    self.on_failure(*sys.exc_info())
                except Exception:
                    self._handle_failure(*sys.exc_info())
        except BaseException:
            log.debug("%r in %s. Stopping all actors.", sys.exc_info()[1], self)
            self._stop()
            # Not blocking: the actors to stop may need this very worker.
            ActorRegistry.stop_all(block=False)

