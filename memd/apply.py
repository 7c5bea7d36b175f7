"""A model run's changes: staged, guarded, then applied file by file, or rejected whole.

The life of a run's changes:

1. ``stage``: the project's memory files (``memd.core.paths``) are copied into
   ``state_dir/staging/<project>/<run>/``; what each file was (bytes and ``memfolder.read.Signature``)
   is kept as the baseline. The model edits the copy only (``memd.llm.memtool.StagedMemory``).
2. ``finalize``: the deterministic index rebuild runs last, on the staged folder.
3. ``guard``: every file parses; the index fits the budget and has no dangling links; the run
   deletes no more than ``dream.max_delete_share`` of the topic files and never all of them; it
   empties no memory, strips no name or description, and shrinks the memories' content by no more
   than ``MAX_SHRINK_SHARE``; nothing in team/ changed; no secret was written; and no file it would
   write or delete lies, in the live folder, behind a symlink or outside it (staging skips
   symlinks, so the model may "create" a file where the live folder has a symlinked folder). Any
   failure rejects the run whole.
4. ``apply``: memd's own temp files left by a crash are swept (``store.sweep_temps``); the live
   folder is snapshotted (``memd.history``) first; then each file is written
   atomically (``store.atomic_write``) only if it still has the content it had when staged. A file
   Claude Code wrote meanwhile is never clobbered: that part of the run is dropped and logged, and
   then the run's deletions are skipped as well (a deletion may be the other half of a merge whose
   write did not land). The index goes last. After applying, the history gets an "after" commit made
   of the before-snapshot plus exactly the changes applied, so ``memd undo`` reverts only those.
   Every write, delete and folder created is checked again right before it happens (no symlink on
   the way, nothing resolving outside the folder): a change that fails is dropped and logged.
5. ``review``: instead of applying (``--dry-run``, ``dream.apply = "review"``), the proposed diff is
   kept in ``state_dir/reviews/<project>/<run>.diff``.

A crash at any point leaves every file before or after (atomic replace per file); the staging copy
is memd's own and is removed when the run ends. ``MEMD_FAULT=<point>`` (tests only) kills the process
with SIGKILL at a named point: ``apply.after-snapshot``, ``apply.mid``.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memd import history
from memd.core import frontmatter, secrets
from memd.core import index as mindex
from memd.core.links import fold_path, link_target
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
    make_parents_confined,
    sweep_temps,
    unchanged,
)

if TYPE_CHECKING:
    from memd.config import Config
    from memd.layout import Project

FAULT_ENV = "MEMD_FAULT"
# A run may shrink the total characters of the topic files' bodies (deleted files count as lost) by
# at most this share, and never by more than MIN_SHRINK_CHARS in a folder so small that the share is
# less than that (tidying two short duplicates may cut half of a tiny folder). The share is the config
# key ``dream.max_shrink_share``; this is its default, for callers without a config.
MAX_SHRINK_SHARE = 0.5
MIN_SHRINK_CHARS = 200
TEMP_MAX_AGE_S = 3600  # a memd temp file older than this is a crash's leftover even if its pid lives


def fault(point: str) -> None:
    """Fault injection for crash tests: SIGKILL this process at ``point`` when MEMD_FAULT names it."""
    if os.environ.get(FAULT_ENV) == point:
        os.kill(os.getpid(), signal.SIGKILL)


def new_run_id(job: str, now: float | None = None) -> str:
    t = time.strftime("%Y%m%dT%H%M%S", time.localtime(time.time() if now is None else now))
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

    @property
    def root(self) -> Path:
        """What /memories means for the model."""
        return self.folder / "memories"

    def cleanup(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


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
    return Staging(project, state_dir, job, run_id, folder, baseline)


@dataclass(frozen=True)
class Change:
    rel: str
    kind: str  # "added", "changed" or "deleted"
    before: bytes | None
    after: bytes | None


def changes(st: Staging) -> list[Change]:
    """What the staged folder changed against the baseline, sorted by path."""
    after = file_map(st.root)
    out: list[Change] = []
    for rel in sorted(set(after) | set(st.baseline)):
        b = st.baseline.get(rel)
        a = after.get(rel)
        if b is None and a is not None:
            out.append(Change(rel, "added", None, a))
        elif b is not None and a is None:
            out.append(Change(rel, "deleted", b.data, None))
        elif b is not None and a is not None and a != b.data:
            out.append(Change(rel, "changed", b.data, a))
    return out


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


def finalize(st: Staging, config: Config) -> list[str]:
    """The deterministic index rebuild, last, on the staged folder. Returns its actions."""
    from memd.core.rebuild import TopicInfo, plan_rebuild, topics_of
    from memd.memfolder.folder import read_folder

    snap = read_folder(st.root, config.budget)
    idx = snap.index
    old = idx.text if idx is not None else None
    if idx is not None and old is None:
        return []  # an unreadable index is left alone (and the guards say why)
    topics = topics_of(snap)
    # Staging holds only the memory files memd could read (memd.core.paths: nothing behind a symlink
    # out of the folder, nothing too large): a file the index links that exists in the live folder
    # but was never staged is not dangling, and the rebuild must not drop its entry. Marked as team/
    # files are: a linked entry stays, none is added anew.
    for e in mindex.parse(old or "").entries:
        t, leaves = link_target(e.target, "")
        if t is not None and not leaves and t.lower().endswith(".md") and t not in topics \
                and t not in st.baseline and os.path.lexists(st.project.memory_dir / t):
            topics[t] = TopicInfo(t, team=True)
    plan = plan_rebuild(old, topics, config.budget)
    if plan.text != (old or "") and plan.text.strip():
        (st.root / INDEX_NAME).write_text(plan.text, encoding="utf-8", newline="")
        return list(plan.actions) or ["index rebuilt"]
    return []


# --------------------------------------------------------------------------- guards


def _topics(files: dict[str, bytes] | dict[str, Base]) -> set[str]:
    return {r for r in files if r != INDEX_NAME and not is_team(r)}


def guard(st: Staging, chs: list[Change], config: Config) -> list[str]:
    """Every reason the staged result may not be applied (empty: it may). chs is ``changes(st)``:
    the staged folder is the baseline with chs on top, so it is not read again."""
    reasons: list[str] = []
    after = _overlay({rel: b.data for rel, b in st.baseline.items()}, chs)

    @functools.cache  # each file is parsed once though several guards look at it, before and after
    def parsed(data: bytes) -> frontmatter.TopicFile:
        return frontmatter.parse(data.decode("utf-8", "replace"))

    for c in chs:
        if is_team(c.rel):
            reasons.append(f"{c.rel}: team/ memory changed (it is read-only)")
    for c in chs:
        if c.after is None or is_team(c.rel):
            continue
        try:
            c.after.decode("utf-8")
        except UnicodeDecodeError:
            reasons.append(f"{c.rel}: not valid UTF-8")
            continue
        if c.rel != INDEX_NAME:
            tf = parsed(c.after)
            had = c.before is not None and parsed(c.before).has_frontmatter
            if tf.error:
                reasons.append(f"{c.rel}: frontmatter does not parse ({tf.error[:80]})")
            elif (c.kind == "added" or had) and not tf.has_frontmatter:
                reasons.append(f"{c.rel}: has no frontmatter")
            elif c.kind == "added" and tf.type not in frontmatter.MEMORY_TYPES:
                reasons.append(f"{c.rel}: type is not one of {', '.join(frontmatter.MEMORY_TYPES)}")
        before_hits = _secret_kinds(c.before)
        for kind, n in _secret_kinds(c.after).items():
            if n > before_hits.get(kind, 0):
                reasons.append(f"{c.rel}: a secret was written ({kind})")
    # the index
    idx = after.get(INDEX_NAME)
    if idx is not None:
        text = idx.decode("utf-8", "replace")
        b = config.budget
        budget = mindex.measure(text, b.max_lines, b.max_chars, b.warn_ratio)
        if budget.level == "over":
            # An index that was over its budget before the run may stay over as long as the run does
            # not make it longer (nothing newly pushed past the cut); anything else is rejected.
            old = st.baseline.get(INDEX_NAME)
            was = mindex.measure(old.data.decode("utf-8", "replace"), b.max_lines, b.max_chars, b.warn_ratio) \
                if old is not None else None
            if was is None or was.level != "over" or budget.lines > was.lines or budget.chars > was.chars:
                reasons.append(f"MEMORY.md is over its budget ({budget.lines} lines, {budget.chars} characters)")
        reasons.extend(_link_reasons(st, after, text))
    elif INDEX_NAME in st.baseline:
        reasons.append("MEMORY.md was deleted")
    # deletions
    before_topics = _topics(st.baseline)
    gone = before_topics - _topics(after)
    if before_topics and gone:
        if gone == before_topics:
            reasons.append(f"the run deletes every memory ({len(gone)} of {len(before_topics)})")
        else:
            # Why max(1, ...): int(share * n) is 0 for any folder of fewer than 1/share files (under 4
            # at the default 25%), so without the floor a tiny folder could never merge its two
            # duplicates (a merge is one write plus one deletion). One deletion is always allowed,
            # unless the share is 0, which forbids deleting altogether; "every memory" stays
            # forbidden above, so a one-file folder still cannot be emptied.
            share = config.dream.max_delete_share
            allowed = max(1, int(share * len(before_topics))) if share > 0 else 0
            if len(gone) > allowed:
                reasons.append(f"the run deletes {len(gone)} of {len(before_topics)} memories "
                               f"(at most {allowed} allowed, dream.max_delete_share = "
                               f"{config.dream.max_delete_share:g})")
    reasons.extend(_content_reasons(st, chs, after, config, parsed))
    reasons.extend(live_path_reasons(st, chs))
    return reasons


def live_path_reasons(st: Staging, chs: list[Change]) -> list[str]:
    """Changes whose target in the live folder lies behind a symlink or resolves outside it.

    Staging copies no symlink, so a symlinked folder ``ext -> /elsewhere`` in the live folder is
    just absent from the copy, and the model may "create" ``ext/x.md`` there; applied, that write
    would land in /elsewhere. Checked here for the whole run, and again for each write in apply."""
    out: list[str] = []
    for c in chs:
        if is_team(c.rel):
            continue
        problem = confined_problem(st.project.memory_dir, c.rel)
        if problem is not None:
            out.append(f"{c.rel}: {problem} in the memory folder (memd never writes through one)")
    return out


def _link_reasons(st: Staging, after: dict[str, bytes], text: str) -> list[str]:
    """Links of the staged index that the run leaves pointing nowhere.

    Staging holds only ``*.md`` files, so a link to anything else (a picture, a sub-folder without
    markdown) is live when it exists in the live folder, confined (no symlink on the way). A link the
    index already had before the run, to something already missing, is not the run's doing (the
    rebuild leaves non-.md links alone): it does not reject the run. A link the run deleted the
    target of, or a new link to nowhere or out of the folder, does."""
    old = st.baseline.get(INDEX_NAME)
    old_links: set[str] = set()
    if old is not None:
        for e in mindex.parse(old.data.decode("utf-8", "replace")).entries:
            t, _ = link_target(e.target, "")
            if t is not None:
                old_links.add(t.rstrip("/"))
    folded = {fold_path(r) for r in after}
    out: list[str] = []
    for e in mindex.parse(text).entries:
        target, leaves = link_target(e.target, "")
        if target is None:
            continue  # a URL
        t = target.rstrip("/")
        if t in ("", "."):
            continue  # the memory folder itself
        if leaves:
            if t not in old_links:
                out.append(f"MEMORY.md links outside the memory folder ({target[:80]})")
            continue
        if t in after or fold_path(t) in folded or any(k.startswith(t + "/") for k in after):
            continue
        if t in st.baseline:
            out.append(f"MEMORY.md links to a file the run deleted ({t[:80]})")
        elif t in old_links:
            continue  # missing before the run too
        elif t.lower().endswith(".md") or not _live_exists(st.project.memory_dir, t):
            out.append(f"MEMORY.md links to a missing file ({t[:80]})")
    return out


def _live_exists(mem: Path, rel: str) -> bool:
    return confined_problem(mem, rel) is None and os.path.lexists(mem / rel)


def _content_reasons(st: Staging, chs: list[Change], after: dict[str, bytes], config: Config,
                     parsed: Callable[[bytes], frontmatter.TopicFile]) -> list[str]:
    """The deletion count does not see content: a run that rewrites every memory to an empty body
    deletes nothing (facts.md section 8: "an empty reflection that wiped memory"). Rejected: a topic
    file left empty or stripped of the name or description it had; and a run that shrinks the
    topic files' bodies, in all (deleted files included), by more than the share."""
    out: list[str] = []
    for c in chs:
        if c.kind != "changed" or c.rel == INDEX_NAME or is_team(c.rel) or c.before is None or c.after is None:
            continue
        b, a = parsed(c.before), parsed(c.after)
        if b.body.strip() and not a.body.strip():
            out.append(f"{c.rel}: the run empties this memory (write it or delete it, not blank it)")
        for field_name in ("name", "description"):
            if getattr(b, field_name) and not getattr(a, field_name):
                out.append(f"{c.rel}: the run removes its {field_name}")
    before_total = sum(len(parsed(base.data).body.strip()) for rel, base in st.baseline.items()
                       if rel != INDEX_NAME and not is_team(rel))
    after_total = sum(len(parsed(data).body.strip()) for rel, data in after.items()
                      if rel != INDEX_NAME and not is_team(rel))
    share = config.dream.max_shrink_share
    lost = before_total - after_total
    if before_total and lost > max(share * before_total, MIN_SHRINK_CHARS):
        out.append(f"the run shrinks the memories' content by {lost / before_total:.0%} ({lost} of "
                   f"{before_total} characters; at most {share:.0%} allowed)")
    return out


def _secret_kinds(data: bytes | None) -> dict[str, int]:
    if data is None:
        return {}
    out: dict[str, int] = {}
    for h in secrets.scan(data.decode("utf-8", "replace")):
        out[h.kind] = out.get(h.kind, 0) + 1
    return out


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


def keep_review(st: Staging, chs: list[Change], header: str) -> Path:
    folder = ensure_private_dir(st.state_dir / "reviews" / st.project.name)
    path = folder / f"{st.run_id}.diff"
    atomic_write(path, header.rstrip("\n") + "\n\n" + diff_text(chs), mode=0o600)
    return path


# --------------------------------------------------------------------------- apply


@dataclass
class ApplyResult:
    applied: list[Change] = field(default_factory=list)
    dropped: list[tuple[str, str]] = field(default_factory=list)  # (file, why)
    before_commit: str = ""
    after_commit: str = ""

    def count(self, kind: str) -> int:
        return sum(1 for c in self.applied if c.kind == kind and c.rel != INDEX_NAME)


def apply(st: Staging, chs: list[Change], summary: str, log: Any = None) -> ApplyResult:
    """Snapshot, then write each change atomically unless its file changed since staging."""
    mem = st.project.memory_dir
    res = ApplyResult()
    swept = sweep_temps(mem, TEMP_MAX_AGE_S) if mem.is_dir() else []
    if swept and log is not None:
        log.info("apply.swept_temps", project=st.project.name, files=swept[:20], count=len(swept))
    before_files = file_map(mem)
    res.before_commit = history.commit_files(st.state_dir, st.project.name, before_files,
                                             f"before {st.job} {st.run_id}", kind="before", run=st.run_id,
                                             job=st.job)
    planned = _overlay(before_files, (c for c in chs if not is_team(c.rel)))
    # What the run is about to write, recorded before the first write: a run killed half-way can
    # still be undone file by file (``memd undo`` reverts files that hold the planned content).
    history.commit_files(st.state_dir, st.project.name, planned, f"planned {summary}", kind="planned",
                         run=st.run_id, job=st.job)
    fault("apply.after-snapshot")
    writes = sorted((c for c in chs if c.after is not None and not is_team(c.rel)),
                    key=lambda c: (c.rel == INDEX_NAME, c.rel))
    deletes = [c for c in chs if c.after is None and not is_team(c.rel)]
    if writes and not mem.is_dir():
        with contextlib.suppress(OSError):  # a project's first memory (a failure drops each write below)
            mem.mkdir(parents=True, exist_ok=True)
    for n, c in enumerate(writes):
        assert c.after is not None
        base = st.baseline.get(c.rel)
        try:
            # the last line of defence: no symlink on the way, nothing outside the folder
            if base is None:
                path = make_parents_confined(mem, c.rel)
                atomic_write(path, c.after, expect=None, mode=0o644)
            else:
                path = check_confined(mem, c.rel)
                atomic_write(path, c.after, expect=base.signature)
        except (ConflictError, UnsafePathError, OSError) as e:
            if isinstance(e, ConflictError):
                why = "written by someone else since staging; kept theirs"
            elif isinstance(e, UnsafePathError):
                why = f"not written: {e}"
            else:
                why = f"not written ({type(e).__name__})"
            res.dropped.append((c.rel, why))
            if log is not None:
                log.warning("apply.dropped", job=st.job, project=st.project.name, file=c.rel, reason=why)
            continue
        res.applied.append(c)
        if n == 0:
            fault("apply.mid")
    if res.dropped and deletes:
        for c in deletes:
            res.dropped.append((c.rel, "deletion skipped: part of the run was dropped"))
        deletes = []
    for c in deletes:
        path = mem / c.rel
        base = st.baseline[c.rel]
        problem = confined_problem(mem, c.rel)
        if problem is not None:
            res.dropped.append((c.rel, f"not deleted: {problem}"))
            if log is not None:
                log.warning("apply.dropped", job=st.job, project=st.project.name, file=c.rel,
                            reason=f"not deleted: {problem}")
            continue
        if not unchanged(path, base.signature):
            res.dropped.append((c.rel, "changed by someone else since staging; not deleted"))
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as e:
            res.dropped.append((c.rel, f"not deleted ({type(e).__name__})"))
            continue
        res.applied.append(c)
        with contextlib.suppress(OSError):
            if path.parent != mem and not any(path.parent.iterdir()):
                path.parent.rmdir()
    after_files = _overlay(before_files, res.applied)
    try:
        res.after_commit = history.commit_files(st.state_dir, st.project.name, after_files, summary,
                                                kind="after", run=st.run_id, job=st.job)
    except MemdError as e:  # the changes are applied; only their history entry is missing
        if log is not None:
            log.warning("history.failed", project=st.project.name, error=str(e))
    return res


def summarize(job: str, run_id: str, res: ApplyResult | None, chs: list[Change], note: str = "") -> str:
    if res is None:
        a = sum(1 for c in chs if c.kind == "added" and c.rel != INDEX_NAME)
        ch = sum(1 for c in chs if c.kind == "changed" and c.rel != INDEX_NAME)
        d = sum(1 for c in chs if c.kind == "deleted")
    else:
        a, ch, d = res.count("added"), res.count("changed"), res.count("deleted")
    s = f"{job} {run_id}: +{a} ~{ch} -{d}"
    if any(c.rel == INDEX_NAME for c in (res.applied if res is not None else chs)):
        s += " (index updated)"
    if note:
        s += " - " + " ".join(note.split())[:200]
    return s
