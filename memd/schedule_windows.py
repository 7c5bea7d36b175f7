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
