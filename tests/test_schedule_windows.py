"""Windows and crontab validation (stdlib only, shared by the config and the scheduler)."""

from __future__ import annotations

import pytest

from memd.schedule_windows import parse_crontab, parse_window


def test_windows() -> None:
    assert parse_window("01:00-04:59") == (60, 299)
    for bad in ("25:00-26:00", "04:00-01:00", "1-2", "01:60-02:00"):
        with pytest.raises(ValueError):
            parse_window(bad)


@pytest.mark.parametrize("expr", ["0 */2 * * *", "15,45 8-18/2 * jan-mar mon-fri", "0 3 1 * 0", "* * * * sun"])
def test_good_crontabs(expr: str) -> None:
    assert len(parse_crontab(expr)) == 5


@pytest.mark.parametrize(("expr", "why"), [
    ("99 99 * * *", "minute: 99 is out of range"),
    ("0 */0 * * *", "bad step"),
    ("0 5-2 * * *", "runs backwards"),
    ("0 * * foo *", "'foo' is not a number"),
    ("0 */2 * *", "expected 5 crontab fields"),
    ("* * * * 7", "out of range 0-6"),
])
def test_bad_crontabs_say_which_field(expr: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_crontab(expr)


def test_agrees_with_apscheduler() -> None:
    from apscheduler.triggers.cron import CronTrigger

    for expr in ["0 */2 * * *", "15,45 8-18/2 * jan-mar mon-fri", "0 3 1 * 0"]:
        parse_crontab(expr)
        CronTrigger.from_crontab(expr)
    with pytest.raises(ValueError):
        CronTrigger.from_crontab("99 99 * * *")


def test_config_reports_a_bad_crontab_with_every_other_problem() -> None:
    from memd.config import from_mapping
    from memd.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        from_mapping({"schedule": {"catchup_cron": "99 99 * * *", "dream_window": "25:00-99:00", "bogus": 1}})
    text = "\n".join(e.value.problems)
    assert "schedule.bogus: unknown key" in text
    assert "schedule.catchup_cron: minute: 99 is out of range" in text
    assert "schedule.dream_window" in text
