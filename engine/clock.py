"""Clocks: the engine asks one for "now" so that tests and replays control time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """Returns the current time, timezone-aware."""

    def now(self) -> datetime: ...


class SystemClock:
    """The wall clock, in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told to; for tests and dataset replays.

    >>> from datetime import UTC, datetime, timedelta
    >>> clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    >>> clock.advance(timedelta(days=1)).day
    2
    """

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("ManualClock needs a timezone-aware start")
        self._now = start

    def now(self) -> datetime:
        return self._now

    def set(self, when: datetime) -> None:
        if when.tzinfo is None:
            raise ValueError("ManualClock needs timezone-aware times")
        self._now = when

    def advance(self, delta: timedelta) -> datetime:
        self._now = self._now + delta
        return self._now
