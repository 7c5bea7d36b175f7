"""Parsing of "HH:MM-HH:MM" windows and crontab strings (stdlib only; shared by config validation
and the scheduler, so the two can never disagree about what a config means).

A crontab string means what crontab(5) says: day of week 0 and 7 are Sunday, month and day names
work, ``*/n`` steps start at the field's first value, ``@daily`` and its friends are shorthands,
and when both day fields are restricted (neither starts with ``*``) either one matching is enough.
APScheduler does the date arithmetic (memd.daemon.schedule), but its ``CronTrigger.from_crontab``
reads day of week 0 as *Monday* ("0 9 * * 1" fired on Tuesdays) and always ANDs the day fields. So
its crontab parser is never used: :func:`parse_crontab` validates the string and hands the
scheduler explicit values (numbers, day names) that APScheduler cannot misread.
"""

from __future__ import annotations

import re

from memd.record import Record

_WINDOW = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*$")


def parse_window(text: str) -> tuple[int, int]:
    """Return (first, last) minute of the day, inclusive; the window must not wrap midnight."""
    m = _WINDOW.match(text)
    if not m:
        raise ValueError(f"expected HH:MM-HH:MM, got {text!r}")
    h1, m1, h2, m2 = (int(g) for g in m.groups())
    if h1 > 23 or h2 > 23 or m1 > 59 or m2 > 59:
        raise ValueError(f"not a time of day: {text!r}")
    first, last = h1 * 60 + m1, h2 * 60 + m2
    if last < first:
        raise ValueError(f"window must not wrap past midnight: {text!r}")
    return first, last


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")  # crontab's numbering: 0 (and 7) is Sunday
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_CRON_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, {m: i for i, m in enumerate(_MONTHS, 1)}),
    ("day of week", 0, 7, {d: i for i, d in enumerate(_DAYS)}),
)
_MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
           "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}


class CronSpec(Record):
    """A crontab string as APScheduler's ``CronTrigger`` keyword arguments that mean what crontab(5) says.

    Each field is ``"*"`` or an explicit comma list (numbers; day names for ``day_of_week``, which
    APScheduler numbers from Monday). ``day_or``: both day fields were restricted, so the job runs
    when either matches (the scheduler builds one trigger per day field and takes the earlier)."""

    expr: str
    minute: str
    hour: str
    day: str
    month: str
    day_of_week: str
    day_or: bool


def _cron_value(text: str, lo: int, hi: int, names: dict[str, int], what: str) -> int:
    v = names.get(text.lower()) if names else None
    if v is None:
        if not text.isdigit():
            raise ValueError(f"{what}: {text!r} is not a number" + (f" or a name ({', '.join(names)})"
                                                                    if names else ""))
        v = int(text)
    if not lo <= v <= hi:
        raise ValueError(f"{what}: {v} is out of range {lo}-{hi}")
    return v


def _cron_field(text: str, what: str, lo: int, hi: int, names: dict[str, int]) -> set[int] | None:
    """The values one field selects (None for a bare ``*``); raises ValueError naming the field."""
    if text == "*":
        return None
    out: set[int] = set()
    for part in text.split(","):
        rng, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) == 0:
                raise ValueError(f"{what}: bad step {step_text!r} in {part!r}")
            step = int(step_text)
        if rng == "*":
            first, last = lo, hi
        else:
            a, dash, b = rng.partition("-")
            if not a or (dash and not b):
                raise ValueError(f"{what}: empty value in {part!r}")
            first = _cron_value(a, lo, hi, names, what)
            # "a/n" runs from a to the end of the field (as cronie and APScheduler read it)
            last = _cron_value(b, lo, hi, names, what) if dash else (hi if slash else first)
            if last < first:
                raise ValueError(f"{what}: range {rng!r} runs backwards")
        out.update(range(first, last + 1, step))
    return out


def _listed(values: set[int] | None, names: tuple[str, ...] = ()) -> str:
    if values is None:
        return "*"
    return ",".join(names[v] if names else str(v) for v in sorted(values))


def parse_crontab(expr: str) -> CronSpec:
    """Validate a crontab string ("0 */2 * * *", "0 9 * * mon-fri", "@daily") as crontab(5) reads it;
    returns its :class:`CronSpec` or raises ValueError naming the bad field. Stdlib only, so
    validating a config never imports the scheduler."""
    text = _MACROS.get(expr.strip().lower(), expr)
    if text.strip().startswith("@"):
        raise ValueError(f"unknown shorthand {expr.strip()!r} (known: {', '.join(_MACROS)})")
    parts = text.split()
    if len(parts) != 5:
        raise ValueError(f"expected 5 crontab fields (minute hour day month weekday), got {len(parts)}")
    got = [_cron_field(t, what, lo, hi, names) for t, (what, lo, hi, names) in zip(parts, _CRON_FIELDS, strict=True)]
    minute, hour, dom, month, dow = got
    if dow is not None:
        dow = {d % 7 for d in dow}  # 7 is Sunday too
    day_or = dom is not None and dow is not None and not parts[2].startswith("*") and not parts[4].startswith("*")
    if dom is not None and not day_or:
        longest = max(_MONTH_DAYS[m - 1] for m in (month or range(1, 13)))
        if min(dom) > longest:
            raise ValueError(f"day of month: {min(dom)} never comes in the months given")
    return CronSpec(expr, _listed(minute), _listed(hour), _listed(dom), _listed(month), _listed(dow, _DAYS),
                    day_or)
