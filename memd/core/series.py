"""The viewer's time series (issue 26's charts) as functions of values: no file, no clock, no store.

A **night** is the 24 hours from 12:00 local time, labelled by that evening's date: the night of
1 December runs from 1 December 12:00 to 2 December 12:00, so a night's dream (the early hours) and
the catch-ups around it (the evening before, the small hours after) fall in one bucket, and a morning's
check-in reports the night it follows. The boundary is wall-clock time in the given zone, so a night
across a daylight-saving change is 23 or 25 hours long and still ends at 12:00.

A **size point** is MEMORY.md measured as `memd status` measures it (the loaded view's lines and
characters) at a moment, against the limits it was measured with, from a history snapshot or from a
sample the daemon kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo

NIGHT_STARTS_AT = 12  # local hour a night begins (and the one before ends)


def night_of(t: float, tz: tzinfo) -> date:
    """The night (its evening's date) the moment ``t`` falls in."""
    return (datetime.fromtimestamp(t, tz).replace(tzinfo=None) - timedelta(hours=NIGHT_STARTS_AT)).date()


def night_start(night: date, tz: tzinfo) -> float:
    """When the night of ``night`` begins: 12:00 local on that date."""
    local = datetime(night.year, night.month, night.day, NIGHT_STARTS_AT)
    return local.replace(tzinfo=tz).timestamp()


def last_night(now: float, tz: tzinfo) -> date:
    """The night the first screen calls "last night": the one labelled yesterday's date (at 07:00 it
    holds the dream of a few hours ago; at 23:00 it is yesterday's, tonight's has not yet run)."""
    return datetime.fromtimestamp(now, tz).date() - timedelta(days=1)


@dataclass(frozen=True)
class RunCost:
    """What a night adds up of one run of the run log."""

    started: float
    cost_usd: float | None  # None: unknown (a model memd has no price for, nothing of the run priced)
    tokens: int  # all four kinds (the run log's tokens_total)
    cost_unknown: bool = False  # a model memd has no price for: cost_usd is only the priced part

    @property
    def called_model(self) -> bool:
        return self.tokens > 0 or bool(self.cost_usd) or self.cost_unknown


@dataclass(frozen=True)
class Night:
    night: date  # the evening's date
    start: float  # 12:00 local of that date
    runs: int  # rows of the run log that started in it
    model_runs: int  # those that called a model
    tokens: int
    cost_usd: float | None  # None: no run called a model (shown "-", never "$0.0000"); else the known part
    cost_unknown: int = 0  # runs whose cost is unknown, or only partly known (the cost is then "≥ $X")

    @property
    def label(self) -> str:
        return self.night.isoformat()


def nights(runs: Iterable[RunCost], *, through: date, count: int, tz: tzinfo) -> list[Night]:
    """``count`` nights ending with ``through``, oldest first, each with the cost and tokens of the
    runs that started in it (runs outside them are left out)."""
    first = through - timedelta(days=count - 1)
    sums: dict[date, list[RunCost]] = {}
    for r in runs:
        n = night_of(r.started, tz)
        if first <= n <= through:
            sums.setdefault(n, []).append(r)
    out: list[Night] = []
    for i in range(count):
        d = first + timedelta(days=i)
        got = sums.get(d, [])
        model = [r for r in got if r.called_model]
        out.append(Night(d, night_start(d, tz), len(got), len(model), sum(r.tokens for r in got),
                         round(sum(r.cost_usd or 0.0 for r in got), 6) if model else None,
                         sum(1 for r in got if r.cost_unknown)))
    return out


@dataclass(frozen=True)
class SizePoint:
    at: float
    lines: int
    chars: int
    max_lines: int
    max_chars: int
    source: str  # "snapshot" (a history snapshot) | "daemon" (a sample the daemon kept)

    @property
    def line_pct(self) -> float:
        return round(100.0 * self.lines / self.max_lines, 1) if self.max_lines > 0 else 0.0

    @property
    def char_pct(self) -> float:
        return round(100.0 * self.chars / self.max_chars, 1) if self.max_chars > 0 else 0.0


def size_series(points: Iterable[SizePoint], *, limit: int) -> list[SizePoint]:
    """The points in time order, the newest ``limit``; points of the same moment and figures (a run's
    "after" and a daemon sample of the same write, a commit read twice) are kept once."""
    out: list[SizePoint] = []
    seen: set[tuple[float, int, int]] = set()
    for p in sorted(points, key=lambda p: (p.at, p.source, p.lines, p.chars)):
        if (p.at, p.lines, p.chars) not in seen:
            seen.add((p.at, p.lines, p.chars))
            out.append(p)
    return out[-limit:] if limit > 0 else []
