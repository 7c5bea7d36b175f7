"""When the daemon's jobs are due: pure functions of "now" and persisted state (no sleeping, no I/O).

Why APScheduler *and* pure functions: APScheduler 3.11's BackgroundScheduler is the in-process
alarm clock (it wakes the daemon at the right wall-clock instant, through the triggers below), but
it is not trusted with decisions. Its defaults skip a run that was due while the machine slept
(``misfire_grace_time``), and a daily cron in the repeated DST hour fires twice. So every wake-up
only asks the question these functions answer from persisted state: the last slot each job has
handled and the last calendar night the dream ran. The daemon's periodic tick asks the same
question, which is how a run missed during suspend or while memd was stopped is caught up once
(systemd's ``Persistent=true``), never twice.

Times are aware datetimes in the local zone; tests inject the zone and "now". Comparisons are made
in UTC: Python compares two datetimes that share a tzinfo by their wall time, ignoring ``fold``, so
01:30 of the second pass through a repeated DST hour would look earlier than 01:35 of the first.
"""

from __future__ import annotations

import functools
import json
import random
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Any

from memd.schedule_windows import parse_crontab, parse_window

JOBS = ("dream", "checkin", "catchup")
# A missed-run search never looks further back than this (a laptop shut for a month runs once).
_LOOKBACK = timedelta(days=8)


# ----------------------------------------------------------------------------- picked minutes


def pick_minute(window: str, stored: str | None, rng: random.Random | None = None) -> tuple[int, str | None]:
    """The job's minute of the day: the stored pick when it is still inside ``window``, else a new one.

    Returns (minute, value to store or None when the stored one stands). Picking once and keeping
    the pick is the point: APScheduler's jitter is re-drawn at every run, which would move the time
    at every restart.
    """
    first, last = parse_window(window)
    if stored:
        try:
            data = json.loads(stored)
            minute = int(data["minute"])
        except (ValueError, KeyError, TypeError):
            minute = -1
        if first <= minute <= last:
            return minute, None
    minute = (rng or random.SystemRandom()).randint(first, last)
    return minute, json.dumps({"minute": minute, "window": window})


def hhmm(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


# ----------------------------------------------------------------------------- slots


def local_slot(day: date, minute: int, tz: tzinfo) -> datetime:
    """The instant of ``minute`` on ``day`` in ``tz``.

    A time inside a spring-forward gap (02:30 in New York) lands an hour later, the way clocks
    do; a time in the repeated fall-back hour is its first occurrence (fold=0). Either way each
    calendar day has exactly one slot.
    """
    naive = datetime.combine(day, time(minute // 60, minute % 60))
    # Through UTC and back: the identity for times that exist; a gap time (fold=0 takes the
    # offset before the change) moves forward by the gap, which is what a wall clock shows.
    return naive.replace(tzinfo=tz, fold=0).astimezone(UTC).astimezone(tz)


@dataclass(frozen=True)
class Daily:
    """Once a day at a picked minute (dream, check-in)."""

    minute: int
    tz: tzinfo

    def next_after(self, after: datetime) -> datetime:
        after = after.astimezone(UTC)
        day = after.astimezone(self.tz).date() - timedelta(days=1)
        for _ in range(4):
            slot = local_slot(day, self.minute, self.tz)
            if slot > after:
                return slot
            day += timedelta(days=1)
        raise AssertionError("no slot within three days")  # pragma: no cover


@dataclass(frozen=True)
class Cron:
    """A crontab expression (catch-up) as crontab(5) reads it, through APScheduler's CronTrigger arithmetic.

    The string is parsed by ``memd.schedule_windows.parse_crontab``, the parser the config's
    validation uses, never by ``CronTrigger.from_crontab`` (which reads day of week 0 as Monday)."""

    expr: str
    tz: tzinfo

    @functools.cached_property
    def trigger(self) -> Any:
        """Parsed once per rule: the loop asks for the next slot at every tick and heartbeat."""
        from apscheduler.triggers.cron import CronTrigger

        spec = parse_crontab(self.expr)

        def cron(day: str, day_of_week: str) -> Any:
            return CronTrigger(minute=spec.minute, hour=spec.hour, day=day, month=spec.month,
                               day_of_week=day_of_week, timezone=self.tz)

        if not spec.day_or:
            return cron(spec.day, spec.day_of_week)
        from apscheduler.triggers.combining import OrTrigger

        # both day fields restricted: crontab(5) runs on either, so the earlier of the two wins
        return OrTrigger([cron(spec.day, "*"), cron("*", spec.day_of_week)])

    def next_after(self, after: datetime) -> datetime:
        # from UTC: given the second 01:30 of a repeated DST hour (fold=1) in its own zone, CronTrigger
        # answers that same instant again, and the caller's search would never end
        nxt = self.trigger.get_next_fire_time(None, after.astimezone(UTC) + timedelta(microseconds=1))
        if nxt is None:  # pragma: no cover - only with an end date, which we never set
            raise ValueError(f"crontab {self.expr!r} never fires again")
        return nxt.astimezone(self.tz)  # type: ignore[no-any-return]


Rule = Daily | Cron


def due_slot(rule: Rule, last_slot: datetime, now: datetime) -> datetime | None:
    """The slot to run now, or None.

    ``last_slot`` is the last slot already handled (or the moment the schedule was first set up).
    When one or more slots passed since, the latest of them is returned: the missed ones are
    caught up by a single run. The caller stores the returned slot as the new ``last_slot``.
    """
    now = now.astimezone(UTC)
    start = max(last_slot.astimezone(UTC), now - _LOOKBACK)
    slot = rule.next_after(start)
    if slot > now:
        return None
    while True:
        nxt = rule.next_after(slot)
        if nxt > now:
            return slot
        slot = nxt


def night_of(slot: datetime, tz: tzinfo) -> str:
    """The calendar night a nightly slot belongs to (its local date), as stored for the once-a-night guard."""
    return slot.astimezone(tz).date().isoformat()


def nightly_allowed(slot: datetime, tz: tzinfo, last_night: str | None) -> bool:
    """At most one nightly run per calendar night, whatever the clock does in between."""
    return last_night != night_of(slot, tz)


def clock_jumped(wall_delta: float, mono_delta: float, tolerance: float = 60.0) -> bool:
    """True when the wall clock moved much further than the monotonic one: the machine slept
    (the monotonic clock stops during suspend) or the clock was set."""
    return abs(wall_delta - mono_delta) > tolerance


# ----------------------------------------------------------------------------- persisted form


def parse_stamp(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        return None
    return dt if dt.tzinfo is not None else None


@dataclass
class Plan:
    """What the scheduler has decided for one job: its rule, the last slot handled, the next slot."""

    job: str
    rule: Rule
    last_slot: datetime
    next_slot: datetime


def plan(job: str, rule: Rule, last_slot: datetime | None, now: datetime) -> Plan:
    """A job's plan; a job seen for the first time starts from now (nothing to catch up)."""
    base = last_slot if last_slot is not None else now
    return Plan(job, rule, base, rule.next_after(base))
