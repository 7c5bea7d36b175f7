"""Project-level maintenance with I/O: the rebuild of one project's MEMORY.md, and undoing a run.

``rebuild_project`` reads the folder once, plans with the pure core (``memd.core.rebuild``), and writes
only MEMORY.md: after a snapshot, atomically, and only if the file is still what was read. No topic
file and nothing in team/ is ever written. ``undo_project`` reverts a run through memd.history and
brings the index back in line when it had to be left alone; in a project sync shares, what an undo
changed stays on this machine until the user says otherwise (issue 21, finding 6: undo is local).
"""

from __future__ import annotations

import difflib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from memd.clock import SYSTEM, Clock
from memd.config import Config
from memd.core.files import INDEX_NAME
from memd.errors import ConflictError
from memd.layout import Project

if TYPE_CHECKING:
    from memd.core.files import FolderSnapshot
    from memd.history import UndoResult


UNDO_REBUILD_TRIES = 5


@dataclass(frozen=True)
class RebuildResult:
    diff: str  # unified diff of MEMORY.md (empty when nothing changes)
    written: bool
    fits: bool
    reasons: list[str] = field(default_factory=list)  # why nothing (or not all) was done
    snapshot: str | None = None  # the history commit taken before writing
    actions: list[str] = field(default_factory=list)
    refused: bool = False  # an unattended rebuild refused to drop too many entries
    error: str = ""  # MEMORY.md could not be written: the true reason ("no space left on device", ...)
    conflict: bool = False  # MEMORY.md changed while the rebuild was planned (Claude Code wrote it): not written
    run: str = ""  # the run's name in the history (its commits' ``memd-run``), once it is written

    @property
    def changed(self) -> bool:
        return bool(self.diff)


def unified_diff(old: str, new: str, path: str) -> str:
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 f"a/{path}", f"b/{path}")
    out = []
    for ln in lines:
        out.append(ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n")
    return "".join(out)


def dropped_entries(old: str | None, new: str) -> tuple[int, int]:
    """(entries of the old index whose target no link of the new index keeps, entries of the old index)."""
    from memd.core import index

    if not old:
        return 0, 0
    before = index.parse(old).entries
    kept = {e.file for e in index.parse(new).entries}
    return sum(1 for e in before if e.file not in kept), len(before)


def lost_words(old: str, snap: FolderSnapshot, new_index: str) -> list[str]:
    """The user's words (prose lines, the words after entries' links) of ``old`` that are in no file of
    the folder once its index is ``new_index`` (``core.guard.lost_prose`` and ``lost_notes``)."""
    from memd.core import guard

    before = {f.rel: f.text.encode("utf-8") for f in snap.files if f.text is not None}
    after = dict(before)
    after[INDEX_NAME] = new_index.encode("utf-8")
    return guard.lost_prose(old, after) + guard.lost_notes(old, before, after)


def rebuild_project(project: Project, config: Config, state_dir: Path, *, dry_run: bool, mode: str,
                    max_drop_share: float | None = None, drop_notes: bool = False,
                    clock: Clock = SYSTEM) -> RebuildResult:
    """Plan, and unless dry_run write, the rebuilt MEMORY.md of one project (``_rebuild_locked``).

    A writing rebuild holds the project's write lock (``memd.projlock``) from reading the folder to its
    history's "after" commit: another memd writing the project is waited for (a bounded wait, then
    ``ProjectBusyError``, nothing written). A dry run writes nothing and takes no lock. A ``HistoryError``
    (the snapshot cannot be written) propagates with nothing written: the caller fails that project.
    A rebuild that took its snapshot and then could not write (a conflict, a fault) is closed in the
    history (``history.close_run``), so its "planned" commit does not list it as interrupted."""
    if dry_run:
        return _rebuild_locked(project, config, state_dir, dry_run=True, mode=mode, max_drop_share=max_drop_share,
                               drop_notes=drop_notes, clock=clock)
    from memd import history
    from memd.errors import MemdError
    from memd.projlock import project_lock

    with project_lock(state_dir, project.name, "rebuild"):
        res = _rebuild_locked(project, config, state_dir, dry_run=False, mode=mode, max_drop_share=max_drop_share,
                              drop_notes=drop_notes, clock=clock)
        if res.snapshot is not None and not res.written:
            try:
                history.close_run(state_dir, project.name, res.snapshot, "; ".join(res.reasons[-1:]) or "not written")
            except MemdError:
                pass  # the run then shows as interrupted: undo finds nothing to revert, which is true
        return res


def _rebuild_locked(project: Project, config: Config, state_dir: Path, *, dry_run: bool, mode: str,
                    max_drop_share: float | None = None, drop_notes: bool = False,
                    clock: Clock = SYSTEM) -> RebuildResult:
    """Plan, and unless dry_run write, the rebuilt MEMORY.md of one project.

    ``mode``: ``core.rebuild.REPAIR`` for every unattended caller (only what is broken, only the lines
    it must: a healthy index is never rewritten), ``NORMALISE`` for ``memd rebuild`` (see
    ``core.rebuild.plan_rebuild``). ``drop_notes``: ``memd rebuild --drop-notes`` only.
    A repair is checked once more before it is written: it may drop no word of the user's (a line
    of prose, the words after an entry's link) that no file holds after it (``core.guard``'s rules).

    ``max_drop_share``: for unattended callers (the dream without a model, auto relief). A rebuild
    that would drop more than this share of the index's entries (dangling links), or all of them, is
    not written: a folder whose topic files vanished wholesale needs a person, not a janitor.
    ``memd rebuild`` (a person asking, diff shown, snapshot taken) passes None. ``clock`` names the run.
    """
    from memd import history
    from memd.core.rebuild import REPAIR, plan_rebuild, topics_of
    from memd.memfolder.folder import read_folder
    from memd.store import atomic_write, os_reason, sweep_temps

    if not dry_run and project.memory_dir.is_dir():
        sweep_temps(project.memory_dir)  # a crashed write's leftovers (memd's own temp names only)
    snap = read_folder(project.memory_dir, config.budget)
    if not snap.exists:
        return RebuildResult("", False, True, ["no memory folder"])
    if snap.problem:
        return RebuildResult("", False, False, [f"the memory folder cannot be read: {snap.problem}"])
    if snap.truncated:  # files past the walk's bound are unknown, not missing: no entry may be judged dangling
        return RebuildResult("", False, False, ["the memory folder holds more files (or deeper folders) than memd "
                                                "reads; not rebuilt"])
    rec = snap.index
    if rec is not None and rec.symlink is not None:
        return RebuildResult("", False, False, [f"{INDEX_NAME} is a symlink; memd does not rewrite it"])
    if rec is not None and rec.text is None:
        return RebuildResult("", False, False, [f"{INDEX_NAME} cannot be read: {rec.problem}"])
    old = rec.text if rec is not None else None
    plan = plan_rebuild(old, topics_of(snap), config.budget, mode=mode, drop_notes=drop_notes)
    diff = unified_diff(old or "", plan.text, f"{project.name}/{INDEX_NAME}") if plan.changed else ""
    reasons = list(plan.reasons)
    if plan.changed and mode == REPAIR and old:
        lost = lost_words(old, snap, plan.text)
        if lost:  # the plan's own rule says this never happens: an invariant, checked before writing
            reasons.append(f"the repair would drop the user's words \"{lost[0][:80]}\" from {INDEX_NAME}; not written")
            return RebuildResult(diff, False, plan.fits, reasons, None, plan.actions, refused=True)
    if plan.changed and max_drop_share is not None:
        dropped, total = dropped_entries(old, plan.text)
        if dropped and (dropped == total or dropped > max_drop_share * total):
            reasons.append(f"the rebuild would drop {dropped} of {total} index entries (their files are missing), "
                           f"more than the {max_drop_share:.0%} an unattended run may drop; "
                           f"review it with `memd rebuild {project.name} --dry-run`")
            return RebuildResult(diff, False, plan.fits, reasons, None, plan.actions, refused=True)
    if not plan.changed or dry_run or not plan.fits:
        if plan.changed and not plan.fits and not dry_run:
            reasons.append(f"{INDEX_NAME} was not written")
        return RebuildResult(diff, False, plan.fits, reasons, None, plan.actions)
    run = f"rebuild-{time.strftime('%Y%m%dT%H%M%S', time.localtime(clock.time()))}-{os.urandom(2).hex()}"
    snap_id = history.snapshot_before(state_dir, project.name, project.memory_dir, "rebuild", run=run,
                                      planned={INDEX_NAME: plan.text.encode("utf-8")})  # listed if killed
    expect = rec.signature if rec is not None else None
    try:
        atomic_write(project.index_path, plan.text, expect=expect)
    except ConflictError:
        reasons.append(f"{INDEX_NAME} changed since it was read; not overwritten (run rebuild again)")
        return RebuildResult(diff, False, plan.fits, reasons, snap_id, plan.actions, conflict=True)
    except OSError as e:
        why = f"{INDEX_NAME} was not written: {os_reason(e)}"
        return RebuildResult(diff, False, plan.fits, [*reasons, why], snap_id, plan.actions, error=why)
    summary = f"rebuild {INDEX_NAME}: " + ("; ".join(plan.actions) or "reformatted")
    history.record_after(state_dir, project.name, snap_id, {INDEX_NAME: plan.text.encode("utf-8")}, "rebuild", run,
                         summary[:300])
    return RebuildResult(diff, True, plan.fits, reasons, snap_id, plan.actions, run=run)


def undo_project(project: Project, config: Config, state_dir: Path, run: str | None, *,
                 dry_run: bool, only: str | None = None) -> tuple[UndoResult, RebuildResult | None]:
    """Revert one run (default: the newest). When MEMORY.md changed again after the run it is left
    alone, so the index is then rebuilt to match the files as they are now (snapshot first, no
    clobbering); the second value is that rebuild, None when none was needed or on a dry run.
    ``only``: one memory of the run comes back (or goes) with its index entry; the rest stays
    (``memd undo --file``; the index is then repaired, only where it is broken)."""
    if dry_run:
        return _undo_locked(project, config, state_dir, run, dry_run=True, only=only)
    from memd.projlock import project_lock

    # one lock over the undo and the rebuild after it: no other memd writes between them
    with project_lock(state_dir, project.name, "undo"):
        return _undo_locked(project, config, state_dir, run, dry_run=False, only=only)


def _undo_locked(project: Project, config: Config, state_dir: Path, run: str | None, *,
                 dry_run: bool, only: str | None = None) -> tuple[UndoResult, RebuildResult | None]:
    from memd import history
    from memd.core.rebuild import REPAIR

    res = history.undo_run(state_dir, project.name, project.memory_dir, run, dry_run=dry_run, only=only)
    # one memory put back: its entry was put back with it when the index before the run had one; the
    # repair adds a line for it otherwise (and changes nothing of a healthy index)
    one = only is not None and bool(res.restored) and INDEX_NAME not in res.restored
    if dry_run or not (res.restored or res.removed) or (
            not one and not any(rel == INDEX_NAME for rel, _ in res.skipped)):
        _keep_undo_local(res, None, project, config, state_dir, dry_run=dry_run)
        return res, None
    # A file the undo removed may still be linked: the index is rebuilt, read again when Claude Code
    # wrote it meanwhile (a few times: a busy session appends often), so no link to it is left behind.
    for _ in range(UNDO_REBUILD_TRIES):
        rb = rebuild_project(project, config, state_dir, dry_run=False, mode=REPAIR)
        if not rb.conflict:
            break
    _keep_undo_local(res, rb, project, config, state_dir, dry_run=False)
    return res, rb


def _keep_undo_local(res: UndoResult, rb: RebuildResult | None, project: Project, config: Config,
                     state_dir: Path, *, dry_run: bool) -> None:
    """Finding 6 of issue 21, "undo is local": in a project sync has shared, what the undo changed (the
    index its repair rewrote included) is kept on this machine: the next sync neither sends it nor takes
    the remote's version into it until the user says (``memd sync --keep-local`` / ``--take-remote``).
    A project never synced, or sync off: nothing to keep apart, the undo is as it always was."""
    changed = sorted(set(res.restored) | set(res.removed) | ({INDEX_NAME} if rb is not None and rb.written else set()))
    if dry_run or not changed or not config.sync.remote.strip():
        return
    from memd.sync import gitremote, held

    if project.name not in gitremote.seen(state_dir):
        return
    held.keep_undone(state_dir, project.name, changed, res.run, time.time(), before=res.snapshot,
                     after=res.undo_commit)
    res.kept_local = changed
