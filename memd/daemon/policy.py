"""The daemon's decisions as pure functions of values and an injected "now" (no I/O, no state store).

- ``decide_slot``: is a job due, and may it run (the once-a-night rule for nightly jobs)?
- ``index_action`` / ``files_action``: what one measurement means for the open warnings (warn once per
  crossing up the scale ok -> near -> over, hold while it stays or eases, clear on the way back to ok).
- ``wants_relief``: whether a fresh warning asks for automatic relief.

The daemon (memd.daemon.server, memd.daemon.budget) reads and writes the state, logs and enqueues; the
choices are made here, next to the slot arithmetic of memd.daemon.schedule, and tested without a process.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Literal

from memd.daemon import schedule as S

# Jobs that run at most once per calendar night, whatever the clock does (DST, a clock set back, a restart).
NIGHTLY = frozenset({"dream"})
# A run this late is logged as a catch-up (a suspend or a stopped daemon slept through its slot).
CAUGHT_UP_S = 120.0

RANK = {"ok": 0, "near": 1, "over": 2}

Action = Literal["warn", "hold", "clear", "quiet"]


@dataclass(frozen=True)
class Due:
    """A slot that came due: the caller stores ``slot`` as the job's last slot, and, when ``run``, stores
    ``night`` (if any) before queueing the job ("never twice" beats "surely once": a crash mid-dream must
    not make a restart dream again that night)."""

    job: str
    slot: datetime
    late_s: float
    run: bool
    night: str | None = None  # the calendar night to record (nightly jobs that run)
    skip_reason: str | None = None

    @property
    def caught_up(self) -> bool:
        return self.late_s > CAUGHT_UP_S


def decide_slot(job: str, rule: S.Rule, last_slot: datetime, now: datetime, tz: tzinfo,
                last_night: str | None) -> Due | None:
    """What to do about ``job`` at ``now``: None when no slot passed since ``last_slot``.

    Missed slots are caught up by one run (the latest of them). A nightly job whose slot falls on a
    night it already ran in is skipped (the repeated DST hour, a clock set back, a restart).
    """
    slot = S.due_slot(rule, last_slot, now)
    if slot is None:
        return None
    late = now.timestamp() - slot.timestamp()  # not now - slot: one tzinfo means wall-time arithmetic
    if job not in NIGHTLY:
        return Due(job, slot, late, True)
    if not S.nightly_allowed(slot, tz, last_night):
        return Due(job, slot, late, False, skip_reason="ran this night already")
    return Due(job, slot, late, True, night=S.night_of(slot, tz))


def index_action(open_level: str | None, level: str) -> Action:
    """The index's warning after a measurement at ``level`` with ``open_level`` open (None: none open).

    warn: a crossing up the scale (a new event, the warning updated); hold: still near or over, nothing
    new to say (the open warning's figures are updated); clear: back to ok with a warning open; quiet: ok.
    """
    if level == "ok":
        return "clear" if open_level is not None else "quiet"
    return "warn" if RANK[level] > RANK.get(open_level or "ok", 0) else "hold"


def files_action(is_open: bool, files: int, limit: int) -> Action:
    """The topic-file-count warning: over the limit warns once, back under it clears."""
    if files > limit:
        return "hold" if is_open else "warn"
    return "clear" if is_open else "quiet"


def wants_relief(action: Action, level: str, auto_relief: bool) -> bool:
    """Automatic relief is asked for by a fresh crossing into "over", and only when it is switched on."""
    return auto_relief and action == "warn" and level == "over"

