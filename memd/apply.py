"""A model run's changes: staged, edited, guarded, then applied file by file, or rejected whole.

The rule of every memd writer (rebuild, dream, catch-up, sync, undo, the memory tool through this
pipeline): the smallest edit that reaches its goal, planned from what was read, applied after a durable
snapshot, never over a file that changed since it was read. An unattended run never rewrites what is
healthy: the index repair that ends a run (``finalize``, ``memd.core.rebuild.REPAIR``) changes only what
the run left broken; the guard refuses a run that drops a word of the user's (prose in the index, the
words after an entry's link) that no file holds after it.

``run`` owns the whole pipeline and returns a typed ``RunResult``; a job passes only the model's
part, a callback that edits the staging copy (``edit(workspace) -> Edits``):

1. ``stage``: the project's ``*.md`` files are copied into ``state_dir/staging/<project>/<run>/``
   when the callback first asks for the copy (``Workspace.get``; a callback that never asks stages
   nothing); what each file was (bytes and ``memfolder.read.Signature``) is kept as the baseline. The model
   edits the copy only (``memd.llm.memtool.StagedMemory``).
2. ``finalize``: the deterministic index rebuild runs last, on the staged folder. When the index
   would pass its budget, a topic file the run added is kept without its index line rather than the
   run refused (``_without_new_lines`` says the rule and why).
3. ``guard``: the pure rules of ``memd.core.guard`` (parse, budget, links, deletions, content,
   team/, secrets), given what only the live folder can tell: whether a file the run would write or
   delete lies, in the live folder, behind a symlink or outside it (staging skips symlinks, so the
   model may "create" a file where the live folder has a symlinked folder), and which non-markdown
   link targets exist; for a model run (``Edits.resolutions`` given), its treatment of sync's
   conflict blocks with its decisions (``RunResult.blocks`` then says what became of each). Any
   failure rejects the run whole.
4. ``apply``: memd's own temp files left by a crash are swept (``store.sweep_temps``); the live
   folder is snapshotted (``memd.history``) first; then each file is written
   atomically (``store.atomic_write``) only if it still has the content it had when staged. A file
   Claude Code wrote meanwhile is never clobbered: that part of the run is dropped and logged, and
   then the run's deletions are skipped as well (a deletion may be the other half of a merge whose
   write did not land). A write that fails (no space left, permission denied, an immutable file) is
   dropped the same way, with its true reason, and makes the run partial (``RunResult.faults``).
   The index goes after the writes and before the deletions, so that a crash anywhere never leaves
   it linking a missing file; when any part was dropped, the planned index is rebuilt against the
   files as they landed (``landed_index``), so it never links a file that was not written. After applying,
   the history gets an "after" commit made of the before-snapshot plus exactly the changes applied,
   so ``memd undo`` reverts only those.
   Every write, delete and folder created is checked again right before it happens (no symlink on
   the way, nothing resolving outside the folder): a change that fails is dropped and logged.
5. ``review``: instead of applying (``--dry-run``, ``dream.apply = "review"``), the proposed diff is
   kept in ``state_dir/reviews/<project>/<run>.diff``.

A crash at any point leaves every file before or after (atomic replace per file); the staging copy
is memd's own and is removed when the run ends, however it ends (``Workspace`` is a context
manager). ``MEMD_FAULT`` (crash and fault campaigns only; ``memd.store`` reads it) kills the process,
or raises an OSError, at a named point: ``apply.after_snapshot``, ``apply.after_rename[:n]`` (after
the n-th file written), ``apply.after_delete``, ``apply.before_index``, and the store's own points.
"""

from __future__ import annotations

import contextlib
import difflib
import enum
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from memd import history
from memd.core import conflict as cblock
from memd.core import declared, secrets
from memd.core import guard as core_guard
from memd.core import index as mindex
from memd.core.guard import Change, GuardLimits
from memd.core.links import link_target
from memd.core.paths import INDEX_NAME, is_team
from memd.errors import ConflictError, MemdError
from memd.memfolder.folder import file_map, read_files
from memd.memfolder.read import Signature
from memd.memfolder.walk import confined_problem
from memd.store import (
    UnsafePathError,
    atomic_write,
    check_confined,
    ensure_private_dir,
    fault,
    make_parents_confined,
    os_reason,
    sweep_temps,
    unchanged,
)

if TYPE_CHECKING:
    from memd.config import BudgetConfig, Config
    from memd.layout import Project
    from memd.llm.client import Usage

INDEX = INDEX_NAME
# A run may shrink the total characters of the topic files' bodies (deleted files count as lost) by
# at most this share, and never by more than MIN_SHRINK_CHARS in a folder so small that the share is
# less than that (tidying two short duplicates may cut half of a tiny folder). The share is the config
# key ``dream.max_shrink_share``; this is its default, for callers without a config.
MAX_SHRINK_SHARE = 0.5
MIN_SHRINK_CHARS = 200
TEMP_MAX_AGE_S = 3600  # a memd temp file older than this is a crash's leftover even if its pid lives


def new_run_id(job: str, now: float) -> str:
    """``<job>-<local time>-<4 hex>``; ``now`` comes from the caller's clock."""
    t = time.strftime("%Y%m%dT%H%M%S", time.localtime(now))
    return f"{job}-{t}-{os.urandom(2).hex()}"


@dataclass(frozen=True)
class Base:
    data: bytes
    signature: Signature


@dataclass
class Staging:
    project: Project
    state_dir: Path
    job: str
    run_id: str
    folder: Path  # state_dir/staging/<project>/<run>
    baseline: dict[str, Base]
    max_file_bytes: int = 4_000_000  # the size limit it was read with (``budget.max_file_bytes``)

    @property
    def root(self) -> Path:
        """What /memories means for the model."""
        return self.folder / "memories"

    def cleanup(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Staging:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.cleanup()


def stage(state_dir: Path, project: Project, job: str, run_id: str, *, max_file_bytes: int = 4_000_000) -> Staging:
    """Copy the project's ``*.md`` files into a fresh staging folder (see the module doc)."""
    parent = ensure_private_dir(state_dir / "staging" / project.name)
    for old in parent.iterdir():  # a crashed run's copy: it was never applied, drop it
        if old.is_dir() and old.name != run_id:
            shutil.rmtree(old, ignore_errors=True)
    folder = parent / run_id
    shutil.rmtree(folder, ignore_errors=True)
    root = ensure_private_dir(folder / "memories")
    baseline: dict[str, Base] = {}
    for rel, r in read_files(project.memory_dir, max_file_bytes).items():  # memory files only (core.paths)
        if r.data is None or r.signature is None:
            continue
        baseline[rel] = Base(r.data, r.signature)
        dst = root / rel
        dst.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        dst.write_bytes(r.data)
    return Staging(project, state_dir, job, run_id, folder, baseline, max_file_bytes)


class Workspace:
    """A run's staging copy, made when first asked for (``get``) and removed when the run ends."""

    def __init__(self, state_dir: Path, project: Project, job: str, run_id: str, max_file_bytes: int) -> None:
        self.state_dir, self.project, self.job, self.run_id = state_dir, project, job, run_id
        self.max_file_bytes = max_file_bytes
        self.staging: Staging | None = None

    def get(self) -> Staging:
        if self.staging is None:
            self.staging = stage(self.state_dir, self.project, self.job, self.run_id,
                                 max_file_bytes=self.max_file_bytes)
        return self.staging

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        if self.staging is not None:
            self.staging.cleanup()


def changes(st: Staging) -> list[Change]:
    """What the staged folder changed against the baseline, sorted by path."""
    # read with the limit the baseline was read with: a file over the default limit but within the user's is
    # no deletion (issue 33 #6: a 5 MB file this machine may read was "deleted" by every run, refused by the guard)
    return core_guard.diff({rel: b.data for rel, b in st.baseline.items()}, file_map(st.root, st.max_file_bytes))


def _overlay(files: dict[str, bytes], chs: Iterable[Change]) -> dict[str, bytes]:
    """files with chs applied on top (a copy)."""
    out = dict(files)
    for c in chs:
        if c.after is None:
            out.pop(c.rel, None)
        else:
            out[c.rel] = c.after
    return out


# --------------------------------------------------------------------------- finalize


def finalize(st: Staging, config: Config, *, merged: bool = False) -> list[str]:
    """The deterministic index rebuild, last, on the staged folder. Returns its actions. ``merged`` (a
    sync: the staged index is the merge of both machines' indexes): the repair never shortens it, and
    its budget is measured against it, not against this machine's index (``Edits.index_merged``)."""
    from memd.core.rebuild import REPAIR, TopicInfo, plan_rebuild, topics_of
    from memd.memfolder.folder import read_folder

    snap = read_folder(st.root, config.budget)
    idx = snap.index
    old = idx.text if idx is not None else None
    if idx is not None and old is None:
        return []  # an unreadable index is left alone (and the guards say why)
    topics = topics_of(snap)
    # Staging holds only the *.md files memd could read (no symlink, nothing too large): a file the
    # index links that exists in the live folder but was never staged is not dangling, and the rebuild
    # must not drop its entry. Marked as team/ files are: a linked entry stays, none is added anew.
    for e in mindex.parse(old or "").entries:
        t, leaves = link_target(e.target, "")
        if t is not None and not leaves and t.lower().endswith(".md") and t not in topics \
                and t not in st.baseline and os.path.lexists(st.project.memory_dir / t):
            topics[t] = TopicInfo(t, team=True)
    # only what the run left broken (a link to a file it deleted, a file it added unlinked): the
    # model's lines and the user's stay as they are (an unattended writer never normalises)
    former = former_topics(st.baseline, topics)
    # condense: an index over its budget in characters makes room by cutting hooks that only repeat
    # their file's description (no word lost) before any file is kept without its line
    plan = plan_rebuild(old, topics, config.budget, mode=REPAIR, former=former, condense=not merged,
                        shrink=not merged)
    notes: list[str] = []
    base = st.baseline.get(INDEX)
    before = (old or "").encode("utf-8") if merged else base.data if base else None
    if plan.text.strip() and core_guard.budget_reasons(plan.text, before, limits_of(config)):
        roomy = _without_new_lines(st, old or "", topics, config, former, merged=merged)
        if roomy is not None:
            plan, notes = roomy
    if plan.text != (old or "") and plan.text.strip():
        (st.root / INDEX).write_text(plan.text, encoding="utf-8", newline="")
        return [*notes, *plan.actions] or ["index rebuilt"]
    return notes


def _without_new_lines(st: Staging, text: str, topics: Mapping[str, Any], config: Config,
                       former: Mapping[str, Any], *, merged: bool = False) -> tuple[Any, list[str]] | None:
    """The repair for a run whose index would pass its budget (which the guard refuses: an index may
    not go past its budget, nor, when it was past it already, get longer), or None when it cannot help.

    The rule: a topic file without a line in the index is kept without one when its line does not fit.
    The index lines the run itself added that link a topic file the run added are withdrawn (they are
    the model's words of this run, and the memory they point to is whole in its file), then the
    unindexed files are indexed, in name order, only as far as the index stays within the guard's
    rule. Why this rule: it is the only move that needs no judgement: nothing the index held before
    the run is touched, so no word of the user's can go (and the guard's prose rule still checks
    that), no file is dropped, and the memory is still found, as recall picks files by their
    description; a line past the cut would be hidden from every session anyway. Before this, the
    repair has condensed what it safely can (``plan_rebuild(..., condense=True)``: hooks that only
    repeat their file's description, in an index over in characters); merging files is the dream's.

    ``merged`` (a sync, issue 33): the index is both machines' lines, the other machine's user's words
    among them: no line is withdrawn and none condensed, the budget is measured against the merge itself,
    and only unindexed files are left without a line. An index over its budget after a merge stays
    over (a warning for the dream, the hooks and ``memd status``), never shortened by a sync: a sync that
    shortened it made every other machine's version differ, so the project never settled."""
    from memd.core.rebuild import REPAIR, plan_rebuild

    base = st.baseline.get(INDEX)
    before = text.encode("utf-8") if merged else base.data if base is not None else None
    limits = limits_of(config)
    added = {rel for rel in topics if rel not in st.baseline}
    had = Counter((before or b"").decode("utf-8", "replace").splitlines())
    entries = {e.line: e for e in mindex.parse(text).entries}
    kept: list[str] = []
    notes: list[str] = []
    for n, raw in enumerate(text.splitlines(keepends=True), 1):
        bare = raw.rstrip("\r\n")
        e = entries.get(n)
        target = link_target(e.target, "") if e is not None and had[bare] <= 0 and not merged else (None, True)
        if target[0] is not None and not target[1] and target[0] in added:
            notes.append(f"withdrew the index line the run added for {target[0]}: the index has no room for it")
            continue
        had[bare] -= 1
        kept.append(raw)
    text = "".join(kept)
    linked = {t for e in mindex.parse(text).entries for t, leaves in [link_target(e.target, "")]
              if t is not None and not leaves}
    unindexed = [rel for rel, t in sorted(topics.items())
                 if rel not in linked and not t.team and not t.not_memory and rel != INDEX]
    # the files kept without a line are the least used ones, not the last by name (issue 31)
    unindexed = list(reversed(_least_used_first(st, unindexed)))

    def plan(k: int) -> Any:  # the repair with the first k unindexed files indexed
        return plan_rebuild(text, topics, config.budget, mode=REPAIR, former=former, withhold=set(unindexed[k:]),
                            condense=not merged, shrink=not merged)

    def fits(p: Any) -> bool:
        return not core_guard.budget_reasons(p.text, before, limits)

    best = plan(0)
    if not fits(best):
        return None
    lo, hi = 0, len(unindexed)  # the most files whose lines fit (more files, more lines)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        p = plan(mid)
        if fits(p):
            lo, best = mid, p
        else:
            hi = mid - 1
    if lo == len(unindexed) and not notes:
        return None  # nothing held back: not this rule's case
    return best, [*notes, *(r for r in best.reasons if r.startswith("left "))]


def _least_used_first(st: Staging, rels: list[str]) -> list[str]:
    """``rels`` least used first by the use counts the scan keeps (``memd.state``: reads, recalls, writes,
    then seen longest ago); name order where the state cannot be read (the counts are evidence, not a
    condition of the run)."""
    from memd.core.evidence import Use
    from memd.state import StateStore

    try:
        with StateStore.open(st.state_dir, timeout=2.0) as state:
            raw = state.memory_uses(st.project.name)
    except Exception:  # a busy or unreadable state: name order, as before
        return list(reversed(rels))
    uses = {rel: Use(d["reads"], d["recalls"], d["writes"], d["weak"], d["last_seen"]) for rel, d in raw.items()}
    # among files used alike, the last by name first (the order before counts existed)
    def key(rel: str) -> tuple[int, float]:
        u = uses.get(rel) or Use()
        return (u.used, u.last_seen or 0.0)

    return sorted(sorted(rels, reverse=True), key=key)


def former_topics(files: Mapping[str, Base | bytes | None], now: Collection[str]) -> dict[str, Any]:
    """TopicInfo of the topic files in ``files`` (what the run began with, or planned) that are not in
    ``now``: an index entry whose hook only repeats one of their descriptions went with its file."""
    from memd.core.files import FileRecord
    from memd.core.paths import is_topic
    from memd.core.rebuild import TopicInfo

    out: dict[str, Any] = {}
    for rel, f in files.items():
        data = f.data if isinstance(f, Base) else f
        if rel in now or data is None or not is_topic(rel) or is_team(rel):
            continue
        out[rel] = TopicInfo.from_record(FileRecord(rel, data.decode("utf-8", "replace")))
    return out


# --------------------------------------------------------------------------- guards


def limits_of(config: Config) -> GuardLimits:
    """The plain values the pure guard takes, from the config."""
    b = config.budget
    return GuardLimits(max_lines=b.max_lines, max_chars=b.max_chars, warn_ratio=b.warn_ratio,
                       max_delete_share=config.dream.max_delete_share,
                       max_shrink_share=config.dream.max_shrink_share, min_shrink_chars=MIN_SHRINK_CHARS)


def guard(st: Staging, chs: list[Change], config: Config, *, removed_by_user: Collection[str] = (),
          resolved: Collection[cblock.Resolution] | None = None,
          forgotten: Collection[declared.Forgotten] | None = None,
          budget_base: bytes | None = None) -> list[str]:
    """Every reason the staged result may not be applied (empty: it may). chs is ``changes(st)``:
    the staged folder is the baseline with chs on top, so it is not read again. The rules are
    ``memd.core.guard``'s; here only what the live folder tells is looked up for them."""
    before = {rel: b.data for rel, b in st.baseline.items()}
    after = _overlay(before, chs)
    mem = st.project.memory_dir
    # Staging copies no symlink, so a symlinked folder ``ext -> /elsewhere`` in the live folder is
    # just absent from the copy, and the model may "create" ``ext/x.md`` there; applied, that write
    # would land in /elsewhere. Checked here for the whole run, and again for each write in apply.
    problems = {c.rel: p for c in chs if not is_team(c.rel)
                and (p := confined_problem(mem, c.rel)) is not None}
    # Staging holds only *.md files: a link to anything else is live when it exists, confined.
    idx = after.get(INDEX)
    exists = {t for t in core_guard.link_targets(idx.decode("utf-8", "replace"))
              if not t.lower().endswith(".md") and t not in after and _live_exists(mem, t)} \
        if idx is not None else set()
    res = core_guard.check(before, after, limits_of(config), live_problems=problems, live_exists=exists,
                           removed_by_user=removed_by_user, resolved=resolved, forgotten=forgotten,
                           budget_base=budget_base)
    return list(res.reasons)


def _live_exists(mem: Path, rel: str) -> bool:
    return confined_problem(mem, rel) is None and os.path.lexists(mem / rel)


# --------------------------------------------------------------------------- review


def diff_text(chs: list[Change], max_chars: int = 200_000) -> str:
    out: list[str] = []
    for c in chs:
        a = (c.before or b"").decode("utf-8", "replace").splitlines(keepends=True)
        b = (c.after or b"").decode("utf-8", "replace").splitlines(keepends=True)
        out.extend(difflib.unified_diff(a, b, "/dev/null" if c.before is None else f"a/{c.rel}",
                                        "/dev/null" if c.after is None else f"b/{c.rel}"))
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n"
    text = "".join(out)
    return text if len(text) <= max_chars else text[:max_chars] + "\n... (diff cut)\n"


def review_path(state_dir: Path, project: str, run_id: str) -> Path:
    """Where a review run's proposed diff is kept (``keep_review``)."""
    return state_dir / "reviews" / project / f"{run_id}.diff"


def keep_review(st: Staging, chs: list[Change], header: str) -> Path:
    ensure_private_dir(st.state_dir / "reviews" / st.project.name)
    path = review_path(st.state_dir, st.project.name, st.run_id)
    atomic_write(path, header.rstrip("\n") + "\n\n" + diff_text(chs), mode=0o600)
    return path


REVIEW_MAX_BYTES = 1_000_000


def read_review(state_dir: Path, project: str, run_id: str) -> str | None:
    """A review run's kept diff (its ``# `` header lines, a blank line, the unified diff), None when there is
    none (never kept, or removed since); a run id that is not a plain name is none (never a path)."""
    if not run_id or "/" in run_id or "\\" in run_id or run_id.startswith("."):
        return None
    try:
        with open(review_path(state_dir, project, run_id), "rb") as f:
            data = f.read(REVIEW_MAX_BYTES + 1)
    except OSError:
        return None
    text = data[:REVIEW_MAX_BYTES].decode("utf-8", "replace")
    return text + ("\n... (diff cut)\n" if len(data) > REVIEW_MAX_BYTES else "")


# --------------------------------------------------------------------------- apply


@dataclass
class ApplyResult:
    applied: list[Change] = field(default_factory=list)
    dropped: list[tuple[str, str]] = field(default_factory=list)  # (file, why)
    faults: list[str] = field(default_factory=list)  # files dropped for a fault (no space, permission, ...)
    before_commit: str = ""
    after_commit: str = ""

    def drop(self, c: Change, why: str, *, fault: bool, st: Staging, log: Any) -> None:
        self.dropped.append((c.rel, why))
        if fault:
            self.faults.append(c.rel)
        if log is not None:
            log.warning("apply.dropped", job=st.job, project=st.project.name, file=c.rel, reason=why)


CONFLICT = "written by someone else since staging; kept theirs"


def _write(mem: Path, c: Change, base: Base | None) -> tuple[str, bool] | None:
    """Write one change's file (the last line of defence: no symlink on the way, nothing outside the
    folder, no clobbering). None when written, else (why not, whether it was a fault)."""
    assert c.after is not None
    try:
        if base is None:
            atomic_write(make_parents_confined(mem, c.rel), c.after, expect=None, mode=0o644)
        else:
            atomic_write(check_confined(mem, c.rel), c.after, expect=base.signature)
    except ConflictError:
        return CONFLICT, False
    except UnsafePathError as e:
        return f"not written: {e}", True
    except OSError as e:
        return f"not written: {os_reason(e)}", True
    return None


def _delete(mem: Path, c: Change, base: Base) -> tuple[str, bool] | None:
    """Delete one change's file unless it changed since staging. None when deleted, else as ``_write``."""
    path = mem / c.rel
    problem = confined_problem(mem, c.rel)
    if problem is not None:
        return f"not deleted: {problem}", True
    if not unchanged(path, base.signature):
        return "changed by someone else since staging; not deleted", False
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as e:
        return f"not deleted: {os_reason(e)}", True
    with contextlib.suppress(OSError):
        if path.parent != mem and not any(path.parent.iterdir()):
            path.parent.rmdir()
    return None


def landed_index(mem: Path, planned: bytes, budget: BudgetConfig | None,
                 files: Mapping[str, Base | bytes | None] | None = None) -> bytes | None:
    """The planned index rebuilt against the folder as it is now, after part of a run was dropped:
    no entry for a file that was not written, an entry for a file whose deletion was skipped.
    None when the folder cannot be read (the index is then left alone)."""
    from memd.core.rebuild import REPAIR, plan_rebuild, topics_of
    from memd.memfolder.folder import read_folder

    snap = read_folder(mem, budget)
    if snap.problem or snap.truncated:
        return None
    topics = topics_of(snap)
    plan = plan_rebuild(planned.decode("utf-8", "replace"), topics, budget, mode=REPAIR,
                        former=former_topics(files or {}, topics))
    return plan.text.encode("utf-8")


def apply(st: Staging, chs: list[Change], summary: str, log: Any = None, *,
          budget: BudgetConfig | None = None) -> ApplyResult:
    """Snapshot, then write each change atomically unless its file changed since staging; then the
    index (rebuilt from what landed when a part was dropped), then the deletions (see the module doc).

    Holds the project's write lock (``memd.projlock``) from the snapshot to the "after" commit, and
    only that: the model's minutes happen before, on the staging copy, whose baseline signatures keep
    anything another writer did meanwhile from being clobbered. ``ProjectBusyError`` (another memd
    kept the project past the wait) and ``HistoryError`` (the snapshot could not be written) leave
    the folder untouched."""
    from memd.projlock import project_lock

    with project_lock(st.state_dir, st.project.name, st.job):
        return _apply_locked(st, chs, summary, log, budget=budget)


def _apply_locked(st: Staging, chs: list[Change], summary: str, log: Any, *,
                  budget: BudgetConfig | None) -> ApplyResult:
    mem = st.project.memory_dir
    res = ApplyResult()
    swept = sweep_temps(mem, TEMP_MAX_AGE_S) if mem.is_dir() else []
    if swept and log is not None:
        log.info("apply.swept_temps", project=st.project.name, files=swept[:20], count=len(swept))
    before_files = file_map(mem, st.max_file_bytes)
    res.before_commit = history.commit_files(st.state_dir, st.project.name, before_files,
                                             f"before {st.job} {st.run_id}", kind="before", run=st.run_id,
                                             job=st.job)
    planned = _overlay(before_files, (c for c in chs if not is_team(c.rel)))
    # What the run is about to write, recorded before the first write: a run killed half-way can
    # still be undone file by file (``memd undo`` reverts files that hold the planned content).
    history.commit_files(st.state_dir, st.project.name, planned, f"planned {summary}", kind="planned",
                         run=st.run_id, job=st.job)
    fault("apply.after_snapshot")
    mine = [c for c in chs if not is_team(c.rel)]
    index = next((c for c in mine if c.rel == INDEX), None)
    writes = sorted((c for c in mine if c.after is not None and c is not index), key=lambda c: c.rel)
    deletes = [c for c in mine if c.after is None and c is not index]
    if (writes or index is not None) and not mem.is_dir():
        with contextlib.suppress(OSError):  # a project's first memory (a failure drops each write below)
            mem.mkdir(parents=True, exist_ok=True)
    for c in writes:
        failed = _write(mem, c, st.baseline.get(c.rel))
        if failed is not None:
            res.drop(c, failed[0], fault=failed[1], st=st, log=log)
            continue
        res.applied.append(c)
        fault("apply.after_rename")
        if len(res.applied) == 1:
            fault("apply.mid")
    if res.dropped and deletes:
        # a deletion may be the other half of a merge whose write did not land
        for c in deletes:
            res.dropped.append((c.rel, "deletion skipped: part of the run was dropped"))
        deletes = []
    # The index after the files it links are written and before the files it stopped linking are
    # deleted: killed at any point, it never links a file that is not there.
    fault("apply.before_index")
    if index is not None:
        _apply_index(st, index, res, budget, log, {**{r: b.data for r, b in st.baseline.items()}, **planned})
    for c in deletes:
        failed = _delete(mem, c, st.baseline[c.rel])
        if failed is not None:
            res.drop(c, failed[0], fault=failed[1], st=st, log=log)
            continue
        res.applied.append(c)
        fault("apply.after_delete")
    after_files = _overlay(before_files, res.applied)
    # a deletion that did not land did not forget its memory: the message's list says only what happened
    summary = declared.keep_forgotten(summary, {c.rel for c in res.applied if c.after is None})
    try:
        res.after_commit = history.commit_files(st.state_dir, st.project.name, after_files, summary,
                                                kind="after", run=st.run_id, job=st.job)
    except MemdError as e:  # the changes are applied; only their history entry is missing
        if log is not None:
            log.warning("history.failed", project=st.project.name, error=str(e))
    return res


def _apply_index(st: Staging, c: Change, res: ApplyResult, budget: BudgetConfig | None, log: Any,
                 planned: Mapping[str, bytes]) -> None:
    """The index, written last. When a part of the run was dropped, the planned index would link a file
    that was not written (or miss one whose deletion was skipped): it is rebuilt from what landed."""
    mem = st.project.memory_dir
    base = st.baseline.get(INDEX)
    if c.after is not None and res.dropped:
        text = landed_index(mem, c.after, budget, planned)
        if text is None:
            res.drop(c, "not written: the memory folder could not be read again after a part was dropped",
                     fault=True, st=st, log=log)
            return
        if text == (base.data if base is not None else None):
            return  # what landed needs no index change
        c = Change(c.rel, c.kind, c.before, text)
    failed = _write(mem, c, base) if c.after is not None else (
        _delete(mem, c, base) if base is not None else None)
    if failed is not None:
        res.drop(c, failed[0], fault=failed[1], st=st, log=log)
        return
    res.applied.append(c)


def dropped_note(dropped: Iterable[tuple[str, str]]) -> str:
    """The dropped parts of a run in one line, each with its own reason: "user_lang.md: not written: no
    space left on device; MEMORY.md: ..." (a note, not a log: at most five named)."""
    items = list(dropped)
    note = "; ".join(f"{rel}: {why}" for rel, why in items[:5])
    return note + (f"; and {len(items) - 5} more" if len(items) > 5 else "")


def summarize(chs: Iterable[Change], note: str = "") -> str:
    """``+added ~changed -deleted`` over every file written, the index included, what became of the
    index, and the model's note: "+0 ~0 -0" means nothing changed, byte for byte."""
    f = _files(chs)
    s = f"+{len(f['added'])} ~{len(f['changed'])} -{len(f['deleted'])}"
    index = next((kind for kind in ("added", "changed", "deleted") if INDEX in f[kind]), None)
    if index is not None:
        s += f" ({_INDEX_DONE[index]})"
    if note:
        s += " - " + " ".join(note.split())[:200]
    return s


_INDEX_DONE = {"added": "index written", "changed": "index updated", "deleted": "index deleted"}


# --------------------------------------------------------------------------- the pipeline


class Verdict(enum.StrEnum):
    """How a run ended."""

    APPLIED = "applied"  # guarded and applied (some parts may have been dropped: see ``dropped``)
    REVIEW = "review"  # guarded; the diff was kept instead of applied
    REJECTED = "rejected"  # a guard failed: nothing applied (``reasons``)
    UNCHANGED = "unchanged"  # the model changed nothing (or never asked for the staging copy)
    ABANDONED = "abandoned"  # shutdown while the model worked: nothing applied


@dataclass(frozen=True)
class Edits:
    """What the job's callback reports about the model's work on the staging copy."""

    note: str = ""  # the model's closing words: untrusted, redacted before they reach a log
    model_called: bool = False
    usage: Usage | None = None  # the run's token use and cost, when the model was called
    abandoned: bool = False  # shutdown mid-work: apply nothing
    # index lines the user removed or corrected themselves (a sync carrying another machine's edit):
    # the guard's prose rule does not count them as lost
    removed_by_user: tuple[str, ...] = ()
    # a model run's decisions about sync's conflict blocks (``memd.core.conflict``): the guard judges
    # the run's treatment of every block (``memd.core.guard.block_reasons``); None: a writer whose
    # changes are the user's own (a sync), whose blocks are not judged
    resolutions: tuple[cblock.Resolution, ...] | None = None
    # a model run's declared forgetting (``memd.core.declared``): the memories it deleted or merged away,
    # each with its reason; the guard lets an entry go only with such a file and refuses an undeclared
    # deletion that loses words. None: a writer whose deletions are not judged so (the guard's old rules)
    forgotten: tuple[declared.Forgotten, ...] | None = None
    # a sync (issue 33): the staged index is the merge of both machines' indexes. Over its budget it is a
    # warning, never a refusal: the repair never shortens it and the guard measures the budget against it
    index_merged: bool = False


@dataclass(frozen=True)
class RunResult:
    verdict: Verdict
    run_id: str
    staged: bool = False  # a staging copy was made (the model had something to work on)
    model_called: bool = False
    usage: Usage | None = None
    reasons: tuple[str, ...] = ()  # why the guard rejected the run
    # every file written, the index too (also said by ``index_updated``): applied, or proposed
    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    index_updated: bool = False
    dropped: tuple[tuple[str, str], ...] = ()  # (file, why): parts that could not be applied
    faults: tuple[str, ...] = ()  # dropped for a fault (no space, permission, ...), not a conflict: a partial run
    history: str = ""  # the history commit made after applying
    rebuild: tuple[str, ...] = ()  # what the deterministic index rebuild did on the staged folder
    review_path: Path | None = None
    diff: str = ""  # the proposed diff (review only), cut at 20,000 characters
    note: str = ""  # the model's note, redacted, on one line
    summary: str = ""  # "+a ~c -d (index updated) - note", the index counted
    blocks: tuple[cblock.Outcome, ...] = ()  # what became of each conflict block the run found (judged runs)
    forgotten: tuple[declared.Forgotten, ...] = ()  # the memories forgotten or merged away (applied or proposed)

    @property
    def changed_anything(self) -> bool:
        return bool(self.added or self.changed or self.deleted or self.index_updated)


def run(project: Project, edit: Callable[[Workspace], Edits], *, state_dir: Path, job: str, run_id: str,
        config: Config, review: bool, log: Any = None) -> RunResult:
    """The whole pipeline (see the module doc): stage on demand, the model's edits (``edit``),
    the rebuild, the guard, then review or apply. The staging copy is gone when this returns or
    raises; an exception from ``edit`` (a failed model call) propagates with nothing applied."""
    with Workspace(state_dir, project, job, run_id, config.budget.max_file_bytes) as ws:
        edits = edit(ws)
        base = RunResult(Verdict.UNCHANGED, run_id, staged=ws.staging is not None,
                         model_called=edits.model_called, usage=edits.usage)
        if edits.abandoned:
            return replace(base, verdict=Verdict.ABANDONED)
        note = " ".join(secrets.redact(edits.note).split())
        if ws.staging is None:
            return replace(base, note=note)
        st = ws.staging
        chs = changes(st)
        if not chs:  # the model changed nothing (the index alone is `memd rebuild`'s business)
            return replace(base, note=note)
        merged = (st.root / INDEX).read_bytes() if edits.index_merged and (st.root / INDEX).is_file() else None
        actions = tuple(finalize(st, config, merged=merged is not None))
        if actions:  # the rebuild rewrote the staged index
            chs = changes(st)
        reasons = tuple(guard(st, chs, config, removed_by_user=edits.removed_by_user,
                              resolved=edits.resolutions, forgotten=edits.forgotten,
                              budget_base=merged))
        if reasons:
            if log is not None:
                log.warning(f"{job}.rejected", project=project.name, run=run_id, reasons=list(reasons))
            return replace(base, verdict=Verdict.REJECTED, reasons=reasons, rebuild=actions, note=note)
        blocks = tuple(block_outcomes(st, chs, edits.resolutions)) if edits.resolutions is not None else ()
        title = f"{job} {run_id}: {summarize(chs, note)}"  # the history's and the review's title
        decided = [b.line_text() for b in blocks if b.resolved]
        if decided:  # the history says, per block, what the run decided (the message's body)
            title += "\n\nconflict blocks resolved:\n" + "\n".join(f"- {secrets.redact(t)}" for t in decided)
        gone = {c.rel for c in chs if c.after is None}
        forgot = tuple(declared.effective(edits.forgotten or (), set(st.baseline), set(st.baseline) - gone))
        if forgot:  # the history says what was forgotten and why (``declared.forgotten_in``)
            title += f"\n\n{declared.FORGOTTEN_HEAD}\n" + "\n".join(f"- {secrets.redact(f.line())}" for f in forgot)
        if review:
            path = keep_review(st, chs, "\n".join(f"# {ln}" for ln in title.split("\n")) + "\n# proposed, not applied")
            return replace(base, verdict=Verdict.REVIEW, rebuild=actions, review_path=path,
                           diff=diff_text(chs, 20_000), note=note, summary=summarize(chs, note), blocks=blocks,
                           forgotten=forgot, **_files(chs))
        res = apply(st, chs, title, log, budget=config.budget)
        landed = {c.rel for c in res.applied}
        # a resolution whose file was dropped (written meanwhile by Claude Code) did not happen
        blocks = tuple(b if b.file in landed else b._replace(choice="", reason="") for b in blocks)
        # a memory whose deletion was skipped (part of the run dropped) was not forgotten
        forgot = tuple(f for f in forgot if f.file in landed)
        return replace(base, verdict=Verdict.APPLIED, rebuild=actions, dropped=tuple(res.dropped),
                       faults=tuple(res.faults), history=res.after_commit, note=note,
                       summary=summarize(res.applied, note), blocks=blocks, forgotten=forgot,
                       **_files(res.applied))


def block_outcomes(st: Staging, chs: list[Change], resolved: Iterable[cblock.Resolution]) -> list[cblock.Outcome]:
    """What the run did to each conflict block of the folder it found (``memd.core.conflict.outcomes``)."""
    before = {rel: b.data.decode("utf-8", "replace") for rel, b in st.baseline.items()
              if not is_team(rel) and cblock.BEGIN.encode() in b.data}
    if not before:
        return []
    after = dict(before)
    for c in chs:
        if c.rel in after:
            after[c.rel] = c.after.decode("utf-8", "replace") if c.after is not None else ""
    return cblock.outcomes(before, after, list(resolved))


def _files(chs: Iterable[Change]) -> dict[str, Any]:
    by: dict[str, list[str]] = {"added": [], "changed": [], "deleted": []}
    for c in chs:
        by[c.kind].append(c.rel)
    return {k: tuple(v) for k, v in by.items()} | {"index_updated": any(INDEX in v for v in by.values())}
