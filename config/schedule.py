"""Weekly schedules (``08:00-20:00 Mon-Fri``) and time zones, as a config writes them.

A schedule is one window or a list of them. A window is ``HH:MM-HH:MM``
followed by the days it opens on (``Mon-Fri``, ``Sat,Sun``, ``Mon,Wed-Fri``;
every day when none are named). It is open from its start, that minute
included, until its end, that minute excluded: ``08:00-20:00`` is open at
08:00:00 and closed at 20:00:00. An end before its start runs past midnight
into the next day (``22:00-06:00 Fri`` is open from Friday 22:00 to Saturday
06:00); ``24:00`` ends a window at midnight.

Wall-clock times are read in a time zone (``policy.timezone``): ``open_at``
and ``next_edge`` are pure functions of a moment and that zone, so a window
moves with daylight saving time as the clocks on the wall do.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BeforeValidator, PlainSerializer, PlainValidator

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_DAY = {d.lower(): i for i, d in enumerate(DAYS)}
_WINDOW = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*(.*?)\s*$")
_EXAMPLE = "e.g. 08:00-20:00 Mon-Fri"
DAY_S = 86400


@dataclass(frozen=True)
class Window:
    """Open from ``start`` to ``end`` (seconds after midnight) on ``days`` (0 is Monday); an ``end`` not
    after ``start`` runs into the next day."""

    start: int
    end: int
    days: frozenset[int]

    @property
    def overnight(self) -> bool:
        return self.end <= self.start

    def open_at(self, weekday: int, second: float) -> bool:
        if not self.overnight:
            return weekday in self.days and self.start <= second < self.end
        return (weekday in self.days and second >= self.start) or ((weekday - 1) % 7 in self.days
                                                                   and second < self.end)


@dataclass(frozen=True)
class Schedule:
    """The windows of a schedule, with the text they were read from (what decisions quote)."""

    text: str
    windows: tuple[Window, ...]

    def __str__(self) -> str:
        return self.text

    def open_at(self, t: float, tz: tzinfo = UTC) -> bool:
        """Whether the schedule is open at the moment ``t`` (seconds since the epoch), read in ``tz``."""
        local = datetime.fromtimestamp(t, tz)
        second = local.hour * 3600 + local.minute * 60 + local.second + local.microsecond / 1e6
        weekday = local.weekday()
        return any(w.open_at(weekday, second) for w in self.windows)

    def next_edge(self, t: float, tz: tzinfo = UTC) -> float | None:
        """The first moment after ``t`` at which the schedule may open or close (None: it never does).

        Never later than the change itself: a window edge that falls in a daylight-saving gap or in an
        hour the clocks repeat is also looked for at the moment the clocks jump.
        """
        found: float | None = None
        for moment in self._edges(datetime.fromtimestamp(t, tz).date(), tz):
            if moment > t and (found is None or moment < found):
                found = moment
        return found

    def _edges(self, today: date, tz: tzinfo) -> Iterator[float]:
        """The moments of every window edge from the day before ``today`` to a week after it."""
        for k in range(-1, 9):
            day = today + timedelta(days=k)
            for w in self.windows:
                if day.weekday() not in w.days:
                    continue
                yield from _moments(day, w.start, tz)
                yield from _moments(day + timedelta(days=1) if w.overnight else day, w.end, tz)


def _moments(day: date, second: int, tz: tzinfo) -> Iterator[float]:
    """When the wall clock in ``tz`` shows ``second`` after midnight of ``day``: once, or (a time the clocks
    skip or repeat) both readings and the moment the clocks jump, where the window's state may change."""
    wall = (datetime.combine(day, time()) + timedelta(seconds=second)).replace(tzinfo=tz)
    first, second_ = wall.replace(fold=0).timestamp(), wall.replace(fold=1).timestamp()
    yield first
    if first != second_:
        yield second_
        lo, hi = min(first, second_), max(first, second_)
        offset = datetime.fromtimestamp(lo, tz).utcoffset()
        while hi - lo > 0.001:  # the jump is between the two readings: halve until it is found
            mid = (lo + hi) / 2
            if datetime.fromtimestamp(mid, tz).utcoffset() == offset:
                lo = mid
            else:
                hi = mid
        yield hi


def _clock(h: str, m: str, what: str, window: str) -> int:
    hours, minutes = int(h), int(m)
    if minutes > 59 or hours > 24 or (hours == 24 and minutes):
        raise ValueError(f"not a time of day: {h}:{m} in {window!r} ({what} must be 00:00 to 24:00)")
    return hours * 3600 + minutes * 60


def _days(text: str, window: str) -> frozenset[int]:
    if not text:
        return frozenset(range(7))
    out: set[int] = set()
    for part in text.replace(" ", "").split(","):
        first, sep, last = part.partition("-")
        ends = [first, last] if sep else [first]
        bad = [e for e in ends if e.lower() not in _DAY]
        if not part or bad:
            raise ValueError(f"not a day: {(bad[0] if bad else part)!r} in {window!r} (days are "
                             f"{', '.join(DAYS)}, or ranges and lists of them such as Mon-Fri or Sat,Sun)")
        a, b = _DAY[ends[0].lower()], _DAY[ends[-1].lower()]
        out.update((a + i) % 7 for i in range((b - a) % 7 + 1))
    return frozenset(out)


def parse_window(text: str) -> Window:
    m = _WINDOW.match(text)
    if not m:
        raise ValueError(f"not a schedule window: {text!r} (HH:MM-HH:MM, then the days, {_EXAMPLE})")
    start = _clock(m.group(1), m.group(2), "a start", text)
    end = _clock(m.group(3), m.group(4), "an end", text)
    if start == DAY_S:
        raise ValueError(f"a window cannot start at 24:00: {text!r} (write 00:00 of the next day)")
    if start == end:
        raise ValueError(f"an empty window: {text!r} (it starts when it ends)")
    return Window(start=start, end=end, days=_days(m.group(5), text))


def parse_schedule(value: object) -> Schedule:
    """``08:00-20:00 Mon-Fri``, or a list of such windows."""
    if isinstance(value, Schedule):
        return value
    if isinstance(value, str):
        texts = [value]
    elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        texts = list(value)
    else:
        raise ValueError(f"a schedule is a window or a list of windows ({_EXAMPLE}), not {value!r}")
    return Schedule(text=", ".join(t.strip() for t in texts), windows=tuple(parse_window(t) for t in texts))


#: A schedule field of a config: read from its text, written back as it.
ScheduleField = Annotated[Schedule, PlainValidator(parse_schedule), PlainSerializer(str, return_type=str)]


def parse_timezone(value: object) -> str:
    """An IANA time zone name (``Europe/Paris``, ``UTC``), checked against the time zone database."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"a time zone name such as UTC or Europe/Paris, not {value!r}")
    try:
        ZoneInfo(value.strip())
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {value!r} (an IANA name such as UTC, Europe/Paris or "
                         "America/New_York)") from None
    return value.strip()


TimeZone = Annotated[str, BeforeValidator(parse_timezone)]


def zone(name: str) -> tzinfo:
    """The zone of a name ``parse_timezone`` accepted; UTC itself needs no database."""
    return UTC if name == "UTC" else ZoneInfo(name)
