"""A project's timeline: every run of it the run log holds, newest first, each with what it did.

The rows are the run log's (``memd.state.StateStore.runs``: dream, catch-up, sync, rebuild, undo, relief...,
whatever their outcome: changed, unchanged, proposed, refused, partial, skipped, failed), with their
reason or summary, tokens and cost. A row that applied something is matched to its record in memd's
history (``memd.history.list_runs``) and opens to that record's diff (its "before" to its "after"
snapshot) with the `memd undo` that reverts it:

- by name: a row written since state schema 9 carries the run's name in the history (``Run.history_run``,
  the ``memd-run`` trailer of its commits), so two runs in the same second cannot be mixed up;
- by time, for older rows (no name) that changed files: the record of the same job made between the row's
  start and end (a second's slack each side), each record given to one row at most and never one a
  named row has (a failed or refused run wrote nothing, and is never given a record).

A proposed run (a dream with ``dream.apply = "review"``) opens to the diff memd kept for review
(``memd.apply.read_review``). History records no row claims (runs from before the run log had them, a
`memd forget`) are shown too, as "applied", so the timeline hides no change made to the folder.

Paging: ``PAGE`` rows a page, older ones behind a link (``?before=<row id>``).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from memd.core.secrets import redact

if TYPE_CHECKING:
    from memd.history import RunRecord
    from memd.state import Run

PAGE = 50
HISTORY_DEPTH = 500  # applied runs of the history read for one page (the newest ones)
_MAX_DIFF_LINES = 4000
TIME_SLACK_S = 1.0
# the outcomes of a run that wrote files (memd.jobs.Outcome): only such an old row is matched by time
APPLIED = frozenset(("changed", "partial"))


@dataclass
class Entry:
    when: float
    job: str
    outcome: str  # the run log's outcome; "applied" for a history record no row claims
    summary: str = ""
    error: str = ""
    row: int | None = None  # the run-log row's id
    ended: float | None = None
    tokens: int = 0
    cost_usd: float | None = 0.0  # None: unknown (no price for the run's model)
    cost_unknown: bool = False
    model: bool = False  # the run called a model (tokens or a cost): its cost is shown, else "-"
    history_run: str = ""  # the run's name in the history (its commits' ``memd-run``)
    linked: str = ""  # how its history record was found: "name", "time" ("" : none)
    diff_kind: str = ""  # "applied" (the history's before -> after), "proposed" (the kept review), ""
    diff: list[str] = field(default_factory=list)
    more: int = 0  # diff lines not shown
    complete: bool = True  # False: the history record is of a run interrupted while applying
    undo: str = ""  # the command that reverts it
    # the memories the run forgot or merged away, each with its reason and the command that brings it back
    forgotten: list[tuple[str, str]] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"row-{self.row}" if self.row is not None else f"run-{self.history_run}"


@dataclass
class Timeline:
    entries: list[Entry]
    older: int | None = None  # ``?before=`` of the next (older) page; None: this is the last
    before: int | None = None  # the ``?before=`` this page was asked with
    problems: list[str] = field(default_factory=list)
    pending: list[tuple[Entry, RunRecord]] = field(default_factory=list)  # applied entries whose diff is to read


def _cut(lines: list[str]) -> tuple[list[str], int]:
    return [redact(d) for d in lines[:_MAX_DIFF_LINES]], max(0, len(lines) - _MAX_DIFF_LINES)


def timeline(project: str, state_dir: Path, *, before: int | None = None, limit: int = PAGE) -> Timeline:
    """``project``'s runs, newest first: at most ``limit`` run-log rows (older than row ``before``) with
    the history records that fall among them."""
    from memd import apply, history
    from memd.errors import MemdError
    from memd.state import StateStore

    out = Timeline([], before=before)
    rows: list[Run] = []
    upper: float | None = None
    try:
        records = history.list_runs(state_dir, project, limit=HISTORY_DEPTH)
    except MemdError as err:
        records = []
        out.problems.append(f"the history cannot be read: {err}")
    by_name = {r.run: r for r in records}
    named: set[str] = set()  # records a row names, on this page or another
    if (state_dir / "state.sqlite3").exists():  # the viewer never creates memd's state
        try:
            with StateStore.open(state_dir) as st:
                rows = st.runs(project=project, limit=limit + 1, before_id=before)
                if before is not None:
                    anchor = st.run(before)
                    upper = anchor.started if anchor is not None else None
                named = st.named_runs(project, list(by_name))
        except MemdError as err:
            out.problems.append(f"the run log cannot be read: {err}")
    if len(rows) > limit:
        rows = rows[:limit]
        out.older = rows[-1].id
    # names first: a named row's record is never taken by an old row's time match, nor shown on its own
    claimed = set(named)
    for row in rows:
        e = Entry(row.started, row.job, row.outcome, redact(row.summary), redact(row.error or ""), row.id, row.ended,
                  row.tokens_total, row.cost_usd, row.cost_unknown,
                  model=row.tokens_total > 0 or bool(row.cost_usd) or row.cost_unknown, history_run=row.history_run)
        rec = by_name.get(row.history_run) if row.history_run else None
        if rec is None and not row.history_run and row.outcome in APPLIED:
            rec = _by_time(row, records, claimed)
            if rec is not None:
                claimed.add(rec.run)
        if rec is not None:
            e.linked = "name" if row.history_run else "time"
            e.history_run = rec.run
            _with_record(e, rec, project, state_dir, out)
        elif row.outcome == "proposed" and row.history_run:
            kept = apply.read_review(state_dir, project, row.history_run)
            if kept is not None:
                e.diff_kind = "proposed"
                e.diff, e.more = _cut([ln for ln in kept.splitlines() if not ln.startswith("# ")])
        out.entries.append(e)
    # the history's records no row claims, within this page's span of time
    lower = rows[-1].started - TIME_SLACK_S if out.older is not None else None
    for rec in records:
        if rec.run in claimed or (lower is not None and rec.time < lower) or (upper is not None and rec.time >= upper):
            continue
        e = Entry(rec.time, rec.job, "applied", redact(rec.summary), history_run=rec.run)
        _with_record(e, rec, project, state_dir, out)
        out.entries.append(e)
    _diffs(out, project, state_dir)
    out.entries.sort(key=lambda x: (x.when, x.row or 0), reverse=True)
    return out


def _by_time(row: Run, records: list[RunRecord], claimed: set[str]) -> RunRecord | None:
    """An old row's history record (no name to go by): the same job's record made while the row ran."""
    end = (row.ended if row.ended is not None else row.started) + TIME_SLACK_S
    for rec in records:
        if rec.run not in claimed and rec.job == row.job and row.started - TIME_SLACK_S <= rec.time <= end:
            return rec
    return None


def _with_record(e: Entry, rec: RunRecord, project: str, state_dir: Path, out: Timeline) -> None:
    """Mark ``e`` as ``rec``'s (its diff is read afterwards, for the whole page at once: ``_diffs``)."""
    e.complete = rec.complete
    e.undo = "" if rec.job == "undo" else f"memd undo {shlex.quote(project)} {shlex.quote(rec.run)}"
    if e.undo:
        from memd.core.declared import forgotten_file, forgotten_in

        e.forgotten = [(redact(line), f"{e.undo} --file {shlex.quote(forgotten_file(line))}")
                       for line in forgotten_in(rec.message)]
    e.diff_kind = "applied"
    out.pending.append((e, rec))


def _diffs(out: Timeline, project: str, state_dir: Path) -> None:
    """The applied entries' diffs, from their records' snapshots (``history.changes_between``: one
    repository open, only the changed files read)."""
    from memd import history
    from memd.errors import MemdError
    from memd.ui.diffs import folder_diff

    if not out.pending:
        return
    try:
        changes = history.changes_between(state_dir, project, [(rec.before, rec.after) for _, rec in out.pending])
    except MemdError as err:
        out.problems.append(f"the runs' snapshots cannot be read: {err}")
        for e, _ in out.pending:
            e.diff_kind = ""
        return
    for (e, _), changed in zip(out.pending, changes, strict=True):
        before = {rel: a for rel, (a, _) in changed.items() if a is not None}
        after = {rel: b for rel, (_, b) in changed.items() if b is not None}
        e.diff, e.more = _cut(folder_diff(before, after))
    out.pending.clear()
