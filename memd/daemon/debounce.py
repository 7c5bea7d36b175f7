"""Per-path debouncing: a path is handled once it has been quiet for a while, or after a maximum wait.

The watcher's threads only call ``add`` (cheap, under a lock); the main loop asks ``next_deadline``
to know how long it may sleep and ``pop_due`` for the paths to handle. An editor's save (several
events within milliseconds) or a session appending line after line becomes one piece of work; a
path written without pause is still handled every ``max_wait`` seconds. ``clock`` is a monotonic
reading (the daemon passes its ``Clock.monotonic``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from memd.clock import SYSTEM

K = TypeVar("K", bound=Hashable)


@dataclass
class _Pending:
    first: float
    last: float


class Debouncer(Generic[K]):
    def __init__(self, quiet_s: float, max_wait_s: float, clock: Callable[[], float] = SYSTEM.monotonic) -> None:
        self.quiet_s = quiet_s
        self.max_wait_s = max(max_wait_s, quiet_s)
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: dict[K, _Pending] = {}

    def add(self, key: K) -> bool:
        """Note an event for key; True when key was not pending yet (the caller may wake the loop)."""
        now = self._clock()
        with self._lock:
            p = self._pending.get(key)
            if p is None:
                self._pending[key] = _Pending(now, now)
                return True
            p.last = now
            return False

    def _due_at(self, p: _Pending) -> float:
        return min(p.last + self.quiet_s, p.first + self.max_wait_s)

    def next_deadline(self) -> float | None:
        """When the earliest pending key becomes due (clock units), or None when nothing is pending."""
        with self._lock:
            if not self._pending:
                return None
            return min(self._due_at(p) for p in self._pending.values())

    def pop_due(self, now: float | None = None) -> list[K]:
        t = self._clock() if now is None else now
        with self._lock:
            due = [k for k, p in self._pending.items() if self._due_at(p) <= t]
            for k in due:
                del self._pending[k]
        return due

    def __len__(self) -> int:
        with self._lock:
            return len(self._pending)
