"""Bytes read from a pipe, cut into lines, none allowed past a limit.

A provider that writes a line longer than the limit, or never ends one, is
broken (or hostile); buffering it whole would let it take the daemon's memory.
"""

from __future__ import annotations


class LineTooLong(Exception):
    """More than ``limit`` bytes came without a newline."""


class Lines:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._partial = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` completes (without their newline); raises ``LineTooLong``."""
        end = chunk.rfind(b"\n")
        if end < 0:
            self._partial += chunk
            if len(self._partial) > self.limit:
                raise LineTooLong(len(self._partial))
            return []
        head = chunk[:end]
        if self._partial:
            head = bytes(self._partial) + head
            self._partial.clear()
        self._partial += chunk[end + 1:]
        lines = head.split(b"\n")
        if len(self._partial) > self.limit or any(len(line) > self.limit for line in lines):
            raise LineTooLong(max(len(self._partial), *map(len, lines)))
        return lines

    def rest(self) -> bytes:
        """What came after the last newline."""
        return bytes(self._partial)
