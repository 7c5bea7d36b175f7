"""One clock for the daemon, the worker, the job runner and the jobs (injected, never global).

``SystemClock`` reads the machine's clocks; ``ManualClock`` is moved by hand, so schedule rules,
queue dedupe and deferrals are tested in-process without sleeping. Code that needs "now" takes a
``Clock`` (or reads ``JobContext.clock``) instead of calling ``time.time()`` / ``time.monotonic()``.
Imports only the standard library; not on the hook path.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, tzinfo
from typing import Protocol


class Clock(Protocol):
    def time(self) -> float:
        """Wall-clock seconds since the epoch (what run rows and history record)."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (durations, deadlines, debounce)."""

    def now(self) -> datetime:
        """The wall clock as an aware local datetime (schedules, report dates)."""


class SystemClock:
    __slots__ = ()

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now().astimezone()


SYSTEM = SystemClock()


class ManualClock:
    """A clock moved by ``advance`` (both clocks) or ``jump`` (wall only: a suspend or a clock set)."""

    def __init__(self, start: datetime, tz: tzinfo | None = None) -> None:
        if start.tzinfo is None:
            raise ValueError("ManualClock needs an aware datetime")
        self._wall = start.timestamp()
        self._mono = 1000.0
        self._tz = tz or start.tzinfo

    def time(self) -> float:
        return self._wall

    def monotonic(self) -> float:
        return self._mono

    def now(self) -> datetime:
        return datetime.fromtimestamp(self._wall, self._tz)

    def advance(self, seconds: float) -> None:
        self._wall += seconds
        self._mono += seconds

    def jump(self, seconds: float) -> None:
        self._wall += seconds

    def set(self, when: datetime) -> None:
        self.advance((when - self.now()) / timedelta(seconds=1))
