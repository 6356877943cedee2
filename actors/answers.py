"""Answers of mutating calls that are not in the facts yet: kept by the process until the controller takes them.

A ``request`` or ``return`` call that was answered has happened: the cloud
made the machines, the pool lent the units. Its answer becomes facts through
the journal, and the controller may refuse them for a while (a full disk, a
file another process holds locked, an unreachable etcd). Were the answer
dropped, the intent would still read ``planned`` and the owner would call
again: with a provider that takes no token (LSF-style scripts), everything
the first call made would be made once more, and the first lot would sit in
no fact, billed, where nothing finds it.

So the answer is kept here, from the moment it arrives until its facts are
committed, and while it is kept no owner of this process calls for that
request again. The store belongs to the process, not to an owner: an owner
that loses its lease stops, and the one this process starts when it takes
the lease back takes the kept answers up first, before the restart rules of
the facts it inherits could fail the request as an unknown outcome.

What a process never learns survives it only in its log: a daemon that
stops with answers still kept says which (``unrecorded``), for an operator.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from messages.scripts import Accepted
from owner.calls import CallDone, Carry


@dataclass(frozen=True, slots=True)
class Kept:
    """One answer whose facts the controller has not taken yet."""

    done: CallDone
    #: When it came (the daemon's clock), for what an operator is told.
    at: float

    @property
    def request_id(self) -> str:
        purpose = self.done.call.purpose
        assert isinstance(purpose, Carry)
        return purpose.request_id

    def describe(self) -> str:
        """The answer in a line an operator can act on (its strings were scrubbed when it was read)."""
        result = self.done.result
        said = f"accepted as provider request {result.output.provider_request_id}" \
            if isinstance(result.output, Accepted) else f"{result.outcome}: {result.reason}"
        return f"{self.done.call.action} of request {self.request_id}: {said}"


class KeptAnswers:
    """Every provider's kept answers in this process, by provider and request id.

    Read and changed by the provider's owner on its actor's thread; a lock,
    because an owner that lost its lease may still be stopping while the next
    one starts.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[str, dict[str, Kept]] = {}

    def keep(self, provider: str, done: CallDone, at: float) -> None:
        purpose = done.call.purpose
        if not isinstance(purpose, Carry):
            raise TypeError(f"only the answers of request and return calls are kept, not {done.call.action}")
        with self._lock:
            self._kept.setdefault(provider, {})[purpose.request_id] = Kept(done, at)

    def of(self, provider: str) -> list[Kept]:
        with self._lock:
            return list(self._kept.get(provider, {}).values())

    def holds(self, provider: str, request_id: str) -> bool:
        with self._lock:
            return request_id in self._kept.get(provider, {})

    def release(self, provider: str, request_id: str) -> None:
        """Its facts are committed (or nothing of it is left to write)."""
        with self._lock:
            mine = self._kept.get(provider)
            if mine is not None:
                mine.pop(request_id, None)
                if not mine:
                    del self._kept[provider]

    def count(self) -> dict[str, int]:
        """Kept answers per provider (a gauge: while above 0, the controller refuses what they record)."""
        with self._lock:
            return {provider: len(kept) for provider, kept in self._kept.items()}

    def unrecorded(self) -> list[tuple[str, Kept]]:
        """Every answer still kept, oldest first: what a stopping daemon must tell an operator."""
        with self._lock:
            out = [(provider, k) for provider, kept in self._kept.items() for k in kept.values()]
        return sorted(out, key=lambda pk: pk[1].at)
