"""Parsing of "HH:MM-HH:MM" windows (stdlib only; shared by config validation and the scheduler)."""

from __future__ import annotations

import re

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


_CRON_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, {m: i for i, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}),
    ("day of week", 0, 6, {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}),
)


def _cron_value(text: str, lo: int, hi: int, names: dict[str, int], what: str) -> int:
    v = names.get(text.lower()) if names else None
    if v is None:
        if not text.isdigit():
            raise ValueError(f"{what}: {text!r} is not a number")
        v = int(text)
    if not lo <= v <= hi:
        raise ValueError(f"{what}: {v} is out of range {lo}-{hi}")
    return v


def parse_crontab(expr: str) -> list[str]:
    """Validate a 5-field crontab ("0 */2 * * *"); returns its fields or raises ValueError naming
    the bad field. Stdlib only, so validating a config never imports the scheduler."""
    fields = expr.split()
    if len(fields) != 5:
        raise ValueError(f"expected 5 crontab fields (minute hour day month weekday), got {len(fields)}")
    for text, (what, lo, hi, names) in zip(fields, _CRON_FIELDS, strict=True):
        for part in text.split(","):
            rng, _, step = part.partition("/")
            if step and (not step.isdigit() or int(step) == 0):
                raise ValueError(f"{what}: bad step {step!r} in {part!r}")
            if rng == "*":
                continue
            a, dash, b = rng.partition("-")
            if not a:
                raise ValueError(f"{what}: empty value in {part!r}")
            first = _cron_value(a, lo, hi, names, what)
            if dash and _cron_value(b, lo, hi, names, what) < first:
                raise ValueError(f"{what}: range {rng!r} runs backwards")
    return fields
