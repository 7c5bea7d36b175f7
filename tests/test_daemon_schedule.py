"""Schedule arithmetic as pure functions with an injected clock: no sleeping."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from memd.daemon import schedule as S

NY = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")


def simulate(rule: S.Rule, tz: ZoneInfo, start: datetime, end: datetime, step: timedelta,
             *, nightly: bool) -> list[datetime]:
    """Tick a fake clock from start to end (UTC steps), running whatever is due; return the runs."""
    runs: list[datetime] = []
    last_slot = start
    last_night: str | None = None
    now = start
    while now <= end:
        slot = S.due_slot(rule, last_slot, now)
        if slot is not None:
            last_slot = slot
            if not nightly or S.nightly_allowed(slot, tz, last_night):
                runs.append(slot)
                last_night = S.night_of(slot, tz)
        now += step
    return runs


# ----------------------------------------------------------------------------- picked minutes


@given(st.integers(0, 2**32))
@settings(max_examples=200, deadline=None)
def test_picked_minute_stays_in_window_and_is_kept(seed: int) -> None:
    rng = random.Random(seed)
    minute, stored = S.pick_minute("01:00-04:59", None, rng)
    assert 60 <= minute <= 4 * 60 + 59
    assert stored is not None
    # a restart reads the stored pick back: same minute, nothing new to store
    again, new = S.pick_minute("01:00-04:59", stored, random.Random(seed + 1))
    assert (again, new) == (minute, None)


def test_picked_minute_is_redrawn_when_the_window_moves_away() -> None:
    minute, stored = S.pick_minute("07:00-08:59", None, random.Random(3))
    assert 420 <= minute <= 539
    moved, new = S.pick_minute("10:00-10:30", stored, random.Random(4))
    assert 600 <= moved <= 630 and new is not None
    # a window that still holds the old pick keeps it
    kept, none = S.pick_minute("06:00-09:00", stored, random.Random(5))
    assert (kept, none) == (minute, None)


def test_a_garbled_stored_pick_is_replaced() -> None:
    minute, new = S.pick_minute("01:00-01:00", "not json", random.Random(1))
    assert minute == 60 and new is not None


# ----------------------------------------------------------------------------- due slots


def test_on_time_run_happens_once_then_waits_for_the_next_day() -> None:
    rule = S.Daily(137, NY)  # 02:17
    setup = datetime(2026, 6, 1, 12, 0, tzinfo=NY)
    assert S.due_slot(rule, setup, datetime(2026, 6, 2, 2, 16, tzinfo=NY)) is None
    slot = S.due_slot(rule, setup, datetime(2026, 6, 2, 2, 17, tzinfo=NY))
    assert slot == datetime(2026, 6, 2, 2, 17, tzinfo=NY)
    assert S.due_slot(rule, slot, datetime(2026, 6, 2, 2, 18, tzinfo=NY)) is None
    assert S.due_slot(rule, slot, datetime(2026, 6, 3, 2, 16, tzinfo=NY)) is None


def test_runs_missed_while_stopped_are_caught_up_once() -> None:
    rule = S.Daily(137, NY)
    last = datetime(2026, 6, 1, 2, 17, tzinfo=NY)
    resumed = datetime(2026, 6, 4, 10, 0, tzinfo=NY)  # three nights missed
    slot = S.due_slot(rule, last, resumed)
    assert slot == datetime(2026, 6, 4, 2, 17, tzinfo=NY)  # the latest missed one, once
    assert slot is not None
    assert S.due_slot(rule, slot, resumed + timedelta(minutes=1)) is None
    assert S.due_slot(rule, slot, resumed + timedelta(hours=10)) is None


def test_catchup_cron_missed_during_suspend_runs_once() -> None:
    rule = S.Cron("0 */2 * * *", BERLIN)
    last = datetime(2026, 6, 1, 8, 0, tzinfo=BERLIN)
    # laptop lid closed at 08:30, opened at 17:10: slots 10, 12, 14, 16 were missed
    runs = simulate(rule, BERLIN, last, datetime(2026, 6, 1, 8, 30, tzinfo=BERLIN), timedelta(minutes=1),
                    nightly=False)
    assert runs == []
    woke = datetime(2026, 6, 1, 17, 10, tzinfo=BERLIN)
    slot = S.due_slot(rule, last, woke)
    assert slot == datetime(2026, 6, 1, 16, 0, tzinfo=BERLIN)
    assert slot is not None
    assert S.due_slot(rule, slot, woke + timedelta(minutes=49)) is None
    assert S.due_slot(rule, slot, datetime(2026, 6, 1, 18, 0, tzinfo=BERLIN)) is not None


def test_a_new_installation_catches_up_nothing() -> None:
    now = datetime(2026, 6, 1, 12, 0, tzinfo=NY)
    p = S.plan("dream", S.Daily(137, NY), None, now)
    assert p.last_slot == now
    assert p.next_slot == datetime(2026, 6, 2, 2, 17, tzinfo=NY)
    assert S.due_slot(p.rule, p.last_slot, now) is None


def test_a_month_away_runs_once_and_stays_cheap() -> None:
    rule = S.Cron("*/5 * * * *", NY)
    last = datetime(2026, 1, 1, tzinfo=NY)
    now = datetime(2026, 2, 15, 9, 3, tzinfo=NY)
    assert S.due_slot(rule, last, now) == datetime(2026, 2, 15, 9, 0, tzinfo=NY)


# ----------------------------------------------------------------------------- DST


def test_fall_back_night_runs_once_in_the_repeated_hour() -> None:
    # 2026-11-01 01:00-01:59 happens twice in New York; APScheduler's own cron fires twice there.
    rule = S.Daily(90, NY)  # 01:30
    start = datetime(2026, 10, 31, 18, 0, tzinfo=NY)
    end = datetime(2026, 11, 2, 6, 0, tzinfo=NY)
    runs = simulate(rule, NY, start, end, timedelta(minutes=1), nightly=True)
    nights = [S.night_of(r, NY) for r in runs]
    assert nights == ["2026-11-01", "2026-11-02"]
    assert runs[0].utcoffset() == timedelta(hours=-4)  # the first 01:30 (EDT)


def test_apscheduler_cron_alone_would_fire_twice_in_the_repeated_hour() -> None:
    # Why the once-a-night guard exists: the trigger itself yields two 01:30s that night.
    trig = S.Cron("30 1 * * *", NY).trigger
    t = datetime(2026, 11, 1, 0, 0, tzinfo=NY)
    fires = []
    prev = None
    for _ in range(3):
        nxt = trig.get_next_fire_time(prev, t)
        fires.append(nxt)
        prev = t = nxt
    same_night = [f for f in fires if f.astimezone(NY).date().isoformat() == "2026-11-01"]
    assert len(same_night) == 2  # 01:30 EDT and 01:30 EST
    guard = [f for i, f in enumerate(same_night)
             if S.nightly_allowed(f, NY, S.night_of(same_night[i - 1], NY) if i else None)]
    assert len(guard) == 1


def test_spring_forward_gap_slot_runs_once_an_hour_later() -> None:
    # 2026-03-08 02:00-02:59 does not exist in New York.
    rule = S.Daily(150, NY)  # 02:30
    slot = S.local_slot(datetime(2026, 3, 8).date(), 150, NY)
    assert (slot.hour, slot.minute) == (3, 30)
    runs = simulate(rule, NY, datetime(2026, 3, 7, 12, 0, tzinfo=NY), datetime(2026, 3, 9, 12, 0, tzinfo=NY),
                    timedelta(minutes=1), nightly=True)
    assert [S.night_of(r, NY) for r in runs] == ["2026-03-08", "2026-03-09"]


def test_berlin_transitions_run_once_a_night() -> None:
    for minute in (120, 150, 179):  # 02:00, 02:30, 02:59: inside both Berlin transition hours
        rule = S.Daily(minute, BERLIN)
        for start in (datetime(2026, 3, 28, 12, tzinfo=BERLIN), datetime(2026, 10, 24, 12, tzinfo=BERLIN)):
            runs = simulate(rule, BERLIN, start, start + timedelta(days=2), timedelta(minutes=1), nightly=True)
            nights = [S.night_of(r, BERLIN) for r in runs]
            assert len(nights) == 2 and len(set(nights)) == 2, (minute, start, runs)


@given(st.integers(60, 299), st.integers(1, 90), st.integers(0, 3))
@settings(max_examples=60, deadline=None)
def test_any_dream_minute_runs_once_per_night_with_coarse_ticks(minute: int, step_min: int, day: int) -> None:
    # coarse or irregular ticks (a loaded machine, a sleeping one) never cause a second run a night
    start = datetime(2026, 10, 30 + day, 12, tzinfo=UTC).astimezone(NY) if day < 2 else \
        datetime(2026, 3, 6 + day, 12, tzinfo=UTC).astimezone(NY)
    runs = simulate(S.Daily(minute, NY), NY, start, start + timedelta(days=3), timedelta(minutes=step_min),
                    nightly=True)
    nights = [S.night_of(r, NY) for r in runs]
    assert len(nights) == len(set(nights))
    assert 2 <= len(nights) <= 3


def test_clock_jump_detection() -> None:
    assert not S.clock_jumped(30.0, 30.0)
    assert S.clock_jumped(3600.0, 30.0)  # slept for an hour
    assert S.clock_jumped(-600.0, 1.0)  # clock set back
