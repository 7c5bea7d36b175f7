"""Windows and crontab validation (stdlib only, shared by the config and the scheduler)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memd.schedule_windows import parse_crontab, parse_window


def test_windows() -> None:
    assert parse_window("01:00-04:59") == (60, 299)
    for bad in ("25:00-26:00", "04:00-01:00", "1-2", "01:60-02:00"):
        with pytest.raises(ValueError):
            parse_window(bad)


@pytest.mark.parametrize("expr", ["0 */2 * * *", "15,45 8-18/2 * jan-mar mon-fri", "0 3 1 * 0", "* * * * sun",
                                  "* * * * 7", "0 9 * * 1-7", "@daily", "@weekly"])
def test_good_crontabs(expr: str) -> None:
    assert parse_crontab(expr).expr == expr


@pytest.mark.parametrize(("expr", "why"), [
    ("99 99 * * *", "minute: 99 is out of range"),
    ("0 */0 * * *", "bad step"),
    ("0 5-2 * * *", "runs backwards"),
    ("0 * * foo *", "'foo' is not a number"),
    ("0 */2 * *", "expected 5 crontab fields"),
    ("* * * * 8", "out of range 0-7"),
    ("0 0 30 2 *", "30 never comes"),
    ("@reboot", "unknown shorthand"),
    ("0 0 * * mon-", "empty value"),
])
def test_bad_crontabs_say_which_field(expr: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_crontab(expr)


def _crontab5(expr: str) -> tuple[set[int], ...]:
    """crontab(5) itself, written out plainly (the test's oracle): the minutes, hours, days of month,
    months and days of week (0 = Sunday) expr names, and whether the two day fields are ORed."""
    fields = {"@daily": "0 0 * * *", "@weekly": "0 0 * * 0"}.get(expr, expr).split()
    names = {n: i for i, n in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
    names.update({n: i for i, n in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep",
                                             "oct", "nov", "dec"), 1)})

    def values(field: str, lo: int, hi: int) -> set[int]:
        out: set[int] = set()
        for part in field.split(","):
            rng, _, step = part.partition("/")
            a, b = (lo, hi) if rng == "*" else rng.split("-") if "-" in rng else (rng, hi if step else rng)
            first, last = (int(names.get(str(x), x)) for x in (a, b))
            out.update(range(first, last + 1, int(step or 1)))
        return out

    dow = {d % 7 for d in values(fields[4], 0, 7)}
    either = {1} if not fields[2].startswith("*") and not fields[4].startswith("*") else set()
    return (values(fields[0], 0, 59), values(fields[1], 0, 23), values(fields[2], 1, 31),
            values(fields[3], 1, 12), dow, either)


@pytest.mark.parametrize("expr", [
    "0 9 * * 1", "0 9 * * 0", "0 9 * * 7", "30 6 * * sun", "0 */6 * * 1-5", "0 0 * * 5-7", "0 12 * * */2",
    "15 3 13 * fri", "0 0 1,15 * 1", "45 23 * oct-dec 6", "0 */2 * * *", "@daily", "@weekly", "5 4 */3 * *",
])
def test_the_scheduler_fires_when_crontab5_says(expr: str) -> None:
    """One parser: the scheduler's next runs are the minutes crontab(5) names, over five weeks."""
    from memd.daemon.schedule import Cron

    rule = Cron(expr, UTC)
    t = datetime(2026, 11, 23, 0, 0, tzinfo=UTC)  # a Monday
    end = t + timedelta(days=35)
    minutes, hours, doms, months, dows, either = _crontab5(expr)
    oracle = []
    m = t
    while m < end:
        dom, dow = m.day in doms, (m.weekday() + 1) % 7 in dows  # Python's Monday is 0, crontab's Sunday
        if m.minute in minutes and m.hour in hours and m.month in months and ((dom or dow) if either else
                                                                              (dom and dow)):
            oracle.append(m)
        m += timedelta(minutes=1)
    got = []
    nxt = rule.next_after(t - timedelta(seconds=1))
    while nxt < end:
        got.append(nxt)
        nxt = rule.next_after(nxt)
    assert got == oracle and got


def test_monday_is_monday() -> None:
    """"0 9 * * 1" fired on Tuesdays: APScheduler's from_crontab counts weekday 0 as Monday."""
    from memd.daemon.schedule import Cron

    nxt = Cron("0 9 * * 1", UTC).next_after(datetime(2026, 12, 1, 0, 0, tzinfo=UTC))  # a Tuesday
    assert nxt == datetime(2026, 12, 7, 9, 0, tzinfo=UTC) and nxt.strftime("%A") == "Monday"
    for sunday in ("0 9 * * 0", "0 9 * * 7", "0 9 * * sun", "0 9 * * SUN"):
        assert Cron(sunday, UTC).next_after(datetime(2026, 12, 1, tzinfo=UTC)).strftime("%A") == "Sunday"


def test_validator_and_scheduler_agree() -> None:
    """What the config accepts the scheduler builds, and what it refuses the scheduler refuses too."""
    from memd.config import from_mapping
    from memd.daemon.schedule import Cron
    from memd.errors import ConfigError

    for expr in ["0 */2 * * *", "15,45 8-18/2 * jan-mar mon-fri", "0 3 1 * 0", "* * * * 7", "@hourly",
                 "0 0 1,15 * 1", "0 0 1-31/2 feb *"]:
        from_mapping({"schedule": {"catchup_cron": expr}})
        assert Cron(expr, UTC).next_after(datetime(2026, 1, 1, tzinfo=UTC)) is not None
    for bad in ["99 99 * * *", "* * * * 8", "0 0 31 2 *", "@reboot"]:
        with pytest.raises(ConfigError):
            from_mapping({"schedule": {"catchup_cron": bad}})
        with pytest.raises(ValueError):
            _ = Cron(bad, UTC).trigger


def test_config_reports_a_bad_crontab_with_every_other_problem() -> None:
    from memd.config import from_mapping
    from memd.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        from_mapping({"schedule": {"catchup_cron": "99 99 * * *", "dream_window": "25:00-99:00", "bogus": 1}})
    text = "\n".join(e.value.problems)
    assert "schedule.bogus: unknown key" in text
    assert "schedule.catchup_cron: minute: 99 is out of range" in text
    assert "schedule.dream_window" in text
