"""The daemon's decisions as pure functions (memd.daemon.policy): no process, no state store, no sleeping."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from memd.daemon import policy as P
from memd.daemon import schedule as S

NY = ZoneInfo("America/New_York")


# ----------------------------------------------------------------------------- once a night


def test_nothing_due_before_the_slot() -> None:
    rule = S.Daily(90, NY)
    last = datetime(2026, 6, 1, 12, 0, tzinfo=NY)
    assert P.decide_slot("dream", rule, last, datetime(2026, 6, 2, 1, 29, tzinfo=NY), NY, None) is None


def test_a_nightly_slot_runs_and_names_its_night() -> None:
    rule = S.Daily(90, NY)
    last = datetime(2026, 6, 1, 12, 0, tzinfo=NY)
    due = P.decide_slot("dream", rule, last, datetime(2026, 6, 2, 1, 31, tzinfo=NY), NY, "2026-06-01")
    assert due is not None and due.run
    assert due.slot == datetime(2026, 6, 2, 1, 30, tzinfo=NY)
    assert due.night == "2026-06-02" and due.late_s == 60.0 and not due.caught_up


def test_a_second_slot_the_same_night_is_skipped() -> None:
    rule = S.Daily(180, NY)  # the pick moved (a reload) after tonight's dream already ran at 01:30
    last = datetime(2026, 6, 2, 1, 30, tzinfo=NY)
    due = P.decide_slot("dream", rule, last, datetime(2026, 6, 2, 3, 1, tzinfo=NY), NY, "2026-06-02")
    assert due is not None and not due.run and due.night is None
    assert due.skip_reason == "ran this night already"


def test_repeated_dst_hour_runs_once() -> None:
    # 2026-11-01 in New York: 01:00-01:59 happens twice; a cron rule fires in both
    rule = S.Cron("30 1 * * *", NY)
    start = datetime(2026, 10, 31, 12, 0, tzinfo=NY)
    last, night, runs, skips = start, None, 0, 0
    t = start
    while t < datetime(2026, 11, 1, 12, 0, tzinfo=NY):
        t = (t.astimezone(ZoneInfo("UTC")) + timedelta(minutes=5)).astimezone(NY)
        due = P.decide_slot("dream", rule, last, t, NY, night)
        if due is None:
            continue
        last = due.slot
        if due.run:
            runs += 1
            night = due.night
        else:
            skips += 1
    assert runs == 1 and skips == 1


def test_non_nightly_jobs_catch_up_once_without_a_night() -> None:
    rule = S.Cron("0 */2 * * *", NY)
    last = datetime(2026, 6, 1, 0, 0, tzinfo=NY)
    due = P.decide_slot("catchup", rule, last, datetime(2026, 6, 1, 9, 0, tzinfo=NY), NY, None)
    assert due is not None and due.run and due.night is None
    assert due.slot == datetime(2026, 6, 1, 8, 0, tzinfo=NY) and due.caught_up  # the latest missed slot


# ----------------------------------------------------------------------------- warnings


@pytest.mark.parametrize(("open_level", "level", "action"), [
    (None, "ok", "quiet"),
    ("near", "ok", "clear"),
    ("over", "ok", "clear"),
    (None, "near", "warn"),
    (None, "over", "warn"),
    ("near", "over", "warn"),  # a crossing up the scale
    ("near", "near", "hold"),
    ("over", "over", "hold"),
    ("over", "near", "hold"),  # easing says nothing new
])
def test_index_action(open_level: str | None, level: str, action: str) -> None:
    assert P.index_action(open_level, level) == action


@pytest.mark.parametrize(("is_open", "files", "action"), [
    (False, 200, "quiet"), (False, 201, "warn"), (True, 250, "hold"), (True, 200, "clear"), (True, 3, "clear"),
])
def test_files_action(is_open: bool, files: int, action: str) -> None:
    assert P.files_action(is_open, files, 200) == action


def test_relief_only_for_a_fresh_crossing_into_over_when_on() -> None:
    assert P.wants_relief("warn", "over", True)
    assert not P.wants_relief("warn", "over", False)
    assert not P.wants_relief("warn", "near", True)
    assert not P.wants_relief("hold", "over", True)  # already warned: relief was asked for then
