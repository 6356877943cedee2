"""The way into the journal for threads that are not actors: REST handlers and a reload.

An operator's request is an unfenced fact (``lease == ""``) that the owner
of the provider carries out. The handler's thread tells the journal and
waits for its commit, bounded, on a queue of its own: a thread that is not
an actor cannot take an actor's reply any other way, and it must know the
fact is durable before it answers.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from typing import Any

from messages.commands import Append, Appended
from messages.facts import Fact
from provisioner.surface.operations import CommitFailed


class JournalBridge:
    """``journal``: the journal actor's ref once the daemon has started it (None before: nothing is written)."""

    def __init__(self, journal: Callable[[], Any]) -> None:
        self._journal = journal

    def write(self, facts: list[Fact], timeout: float = 10.0) -> Appended:
        """Commit ``facts`` and wait for the journal's answer, at most ``timeout`` seconds."""
        journal = self._journal()
        if journal is None:
            return Appended(tag="external", error="the daemon has not started its journal yet")
        replies: queue.Queue[Appended] = queue.Queue()

        class _Reply:
            def tell(self, msg: Appended) -> None:
                replies.put(msg)

        journal.tell(Append(facts=facts, reply_to=_Reply(), tag="external"))
        try:
            return replies.get(timeout=timeout)
        except queue.Empty:
            return Appended(tag="external", error=f"no answer from the journal within {timeout:.0f}s")

    def commit(self, facts: list[Fact]) -> list[Fact]:
        """``write``, raising ``CommitFailed`` when the facts were not committed (for ``Operations``)."""
        reply = self.write(facts)
        if reply.error:
            raise CommitFailed(reply.error)
        if reply.refused:
            raise CommitFailed("; ".join(reason for _, _, reason in reply.refused))
        return facts
