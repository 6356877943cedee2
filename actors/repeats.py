"""A failure that repeats at every poll is logged once a minute, with a count, not every time.

A status script printing garbage fails at every ``poll_every``: a WARNING
per poll buries everything else in the log without saying more. The owner
marks such notes (``Note.repeats``); the driver says the first at once,
then at most one per minute per provider and kind, with how many were
held back since the last one said (``... (12 more like this in the last
60s)``). A note of a kind that was quiet for a minute is said at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Seconds between two lines of one repeating failure.
EVERY = 60.0


@dataclass
class Repeats:
    every: float = EVERY
    #: kind -> (when last said, held back since)
    _said: dict[str, tuple[float, int]] = field(default_factory=dict)

    def say(self, kind: str, text: str, now: float) -> str | None:
        """The line to log for this note now, or None to hold it back."""
        if not kind:
            return text
        last = self._said.get(kind)
        if last is not None and now - last[0] < self.every:
            self._said[kind] = (last[0], last[1] + 1)
            return None
        held = last[1] if last is not None else 0
        self._said[kind] = (now, 0)
        if held:
            return f"{text} ({held} more like this in the last {now - last[0]:.0f}s)"  # type: ignore[index]
        return text

    def clear(self, kind: str) -> None:
        """The failure stopped (a call of that kind succeeded): its next one is said at once."""
        self._said.pop(kind, None)
