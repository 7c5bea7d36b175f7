"""Snapshot history of memory folders, kept outside them: one bare git repository per project.

``state_dir/history/<project>/`` is a bare repository written with dulwich (no system git needed),
so ``git --git-dir=<that folder> log`` works on it. Each commit's tree holds every ``*.md`` file of
the memory folder as it was (team/ included, so a snapshot is the folder as Claude Code sees it).

Commits memd makes:
- before any change, a snapshot of the folder (``kind: before``), and
- after a run is applied, the folder as it is then (``kind: after``), whose message carries the run's
  summary. ``list_runs`` reads these back; ``undo_run`` reverts one run.

Commit messages end with trailers (``memd-run: <id>``, ``memd-kind: before|after|undo|snapshot``,
``memd-job: <job>``), which is how runs are found again.

Undo reverts exactly what the run changed, file by file: a file the run changed or deleted gets
its before-content back, a file the run added is removed, and a file that changed again since
the run (someone wrote it later) is left alone and reported. Writes are atomic per file; nothing
under team/ is ever written; nothing is read, written or removed through a symlink or outside the
folder (``store.confined_problem``: such a file is skipped and reported); the folder is
snapshotted before the undo touches anything.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memd.errors import MemdError, UsageError
from memd.store import (
    UnsafePathError,
    atomic_write,
    check_confined,
    confined_problem,
    current_signature,
    is_memd_temp,
    make_parents_confined,
)

BRANCH = b"refs/heads/main"
IDENTITY = b"memd <memd@localhost>"
MAX_FILES = 20_000
MAX_FILE_BYTES = 4_000_000
_TRAILER = re.compile(r"^memd-([a-z]+):\s*(.*)$", re.M)


class HistoryError(MemdError):
    pass


def repo_dir(state_dir: Path, project: str) -> Path:
    return state_dir / "history" / project


def _open(state_dir: Path, project: str, *, create: bool) -> Any:
    from dulwich.repo import Repo

    path = repo_dir(state_dir, project)
    if (path / "HEAD").exists():
        return Repo(str(path))
    if not create:
        return None
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        repo = Repo.init_bare(str(path), default_branch=b"main")
    except FileExistsError:
        return Repo(str(path))
    return repo


def read_md_files(memory_dir: Path) -> dict[str, bytes]:
    """Every regular ``*.md`` file under memory_dir (symlinks and memd temp files are skipped)."""
    out: dict[str, bytes] = {}
    if not memory_dir.is_dir():
        return out
    for rel in md_files(memory_dir):
        try:
            fd = os.open(memory_dir / rel, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
                continue
            with os.fdopen(os.dup(fd), "rb") as f:
                out[rel] = f.read(MAX_FILE_BYTES + 1)[:MAX_FILE_BYTES]
        finally:
            os.close(fd)
    return out


def md_files(root: Path) -> Iterator[str]:
    """Relative paths of the regular ``*.md`` files under root (no symlinks, no hidden folders),
    bounded by MAX_FILES entries."""
    stack = [("", root)]
    seen = 0
    while stack:
        prefix, folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for e in entries:
            seen += 1
            if seen > MAX_FILES:
                return
            if e.is_symlink():
                continue
            if e.is_dir(follow_symlinks=False):
                if not e.name.startswith("."):
                    stack.append((prefix + e.name + "/", Path(e.path)))
            elif e.name.endswith(".md") and not is_memd_temp(e.name):
                yield prefix + e.name


def _tree_for(repo: Any, files: dict[str, bytes]) -> bytes:
    from dulwich.objects import Blob, Tree

    def build(entries: dict[str, Any]) -> Any:
        tree = Tree()
        for name, value in sorted(entries.items()):
            if isinstance(value, dict):
                tree.add(name.encode(), 0o040000, build(value))
            else:
                blob = Blob.from_string(value)
                repo.object_store.add_object(blob)
                tree.add(name.encode(), 0o100644, blob.id)
        repo.object_store.add_object(tree)
        return tree.id

    nested: dict[str, Any] = {}
    for rel, data in files.items():
        parts = rel.split("/")
        node = nested
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = data
    return bytes(build(nested))


def _files_of_tree(repo: Any, tree_id: bytes, prefix: str = "") -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    tree = repo[tree_id]
    for entry in tree.items():
        name = entry.path.decode("utf-8", "surrogateescape")
        if stat.S_ISDIR(entry.mode):
            out.update(_files_of_tree(repo, entry.sha, prefix + name + "/"))
        else:
            out[prefix + name] = bytes(repo[entry.sha].data)
    return out


def _head(repo: Any) -> Any:
    try:
        return repo.refs[BRANCH]
    except KeyError:
        return None


def _message(summary: str, trailers: dict[str, str]) -> bytes:
    summary = summary.strip() or "snapshot"
    lines = [summary, ""] + [f"memd-{k}: {v}" for k, v in trailers.items() if v]
    return ("\n".join(lines) + "\n").encode("utf-8")


def commit_files(state_dir: Path, project: str, files: dict[str, bytes], summary: str, *,
                 kind: str = "snapshot", run: str = "", job: str = "") -> str:
    """Commit a set of files (rel path -> bytes) as the project's newest snapshot; returns its id."""
    from dulwich.objects import Commit

    repo = _open(state_dir, project, create=True)
    try:
        tree = _tree_for(repo, files)
        for _ in range(20):  # another writer (the CLI beside the daemon) may move the branch
            parent = _head(repo)
            c = Commit()
            c.tree = tree
            c.parents = [parent] if parent else []
            c.author = c.committer = IDENTITY
            now = int(time.time())
            c.author_time = c.commit_time = now
            c.author_timezone = c.commit_timezone = time.localtime(now).tm_gmtoff
            c.encoding = b"UTF-8"
            c.message = _message(summary, {"kind": kind, "run": run, "job": job})
            repo.object_store.add_object(c)
            if repo.refs.set_if_equals(BRANCH, parent, c.id):
                return str(c.id.decode("ascii"))
            time.sleep(0.01)
        raise HistoryError("history is busy (another memd is writing it)", path=str(repo_dir(state_dir, project)))
    finally:
        repo.close()


def snapshot(state_dir: Path, project: str, memory_dir: Path, summary: str, *, kind: str = "snapshot",
             run: str = "", job: str = "") -> str:
    """Snapshot every ``*.md`` file of memory_dir; returns the commit id."""
    return commit_files(state_dir, project, read_md_files(memory_dir), summary, kind=kind, run=run, job=job)


@dataclass(frozen=True)
class HistoryEntry:
    commit: str
    time: float
    summary: str  # first line of the message
    kind: str
    run: str
    job: str
    parent: str | None
    message: str = ""


def _entry(c: Any) -> HistoryEntry:
    msg = c.message.decode("utf-8", "replace")
    tr = dict(_TRAILER.findall(msg))
    return HistoryEntry(c.id.decode(), float(c.commit_time), msg.split("\n", 1)[0], tr.get("kind", ""),
                        tr.get("run", ""), tr.get("job", ""), c.parents[0].decode() if c.parents else None, msg)


def log(state_dir: Path, project: str, limit: int = 200) -> list[HistoryEntry]:
    """Commits newest first (at most limit)."""
    repo = _open(state_dir, project, create=False)
    if repo is None:
        return []
    try:
        if BRANCH not in repo.refs:
            return []
        out: list[HistoryEntry] = []
        cur: bytes | None = repo.refs[BRANCH]
        while cur is not None and len(out) < limit:
            c = repo[cur]
            out.append(_entry(c))
            cur = c.parents[0] if c.parents else None
        return out
    finally:
        repo.close()


def files_at(state_dir: Path, project: str, commit: str) -> dict[str, bytes]:
    repo = _open(state_dir, project, create=False)
    if repo is None:
        raise HistoryError("no history yet", path=str(repo_dir(state_dir, project)))
    try:
        try:
            c = repo[commit.encode()]
        except (KeyError, ValueError):
            raise UsageError(f"no such snapshot: {commit}") from None
        return _files_of_tree(repo, c.tree)
    finally:
        repo.close()


@dataclass(frozen=True)
class RunRecord:
    run: str
    job: str
    time: float
    summary: str
    after: str  # commit after the run
    before: str | None  # commit before the run (the snapshot taken first)
    complete: bool = True  # False: the run was interrupted while applying ("after" is what it planned)


def list_runs(state_dir: Path, project: str, limit: int = 50) -> list[RunRecord]:
    """Applied runs, newest first, each with its before and after snapshot. A run that was killed
    while applying has no "after" commit: its "planned" commit stands in (``complete`` False)."""
    entries = log(state_dir, project, limit=limit * 4 + 10)
    befores = {e.run: e.commit for e in entries if e.kind == "before" and e.run}
    finished = {e.run for e in entries if e.kind in ("after", "undo") and e.run}
    out: list[RunRecord] = []
    for e in entries:
        if not e.run:
            continue
        if e.kind in ("after", "undo"):
            out.append(RunRecord(e.run, e.job, e.time, e.summary, e.commit, befores.get(e.run, e.parent)))
        elif e.kind == "planned" and e.run not in finished:
            out.append(RunRecord(e.run, e.job, e.time, e.summary.removeprefix("planned ") + " (interrupted)",
                                 e.commit, befores.get(e.run, e.parent), complete=False))
        if len(out) >= limit:
            break
    return out


def find_run(state_dir: Path, project: str, run: str | None) -> RunRecord:
    runs = [r for r in list_runs(state_dir, project, limit=500) if r.job != "undo"]
    if not runs:
        raise UsageError(f"no runs in the history of {project}")
    if run is None:
        return runs[0]
    for r in runs:
        if r.run == run or r.after.startswith(run.lower()) or r.run.startswith(run):
            return r
    raise UsageError(f"no run {run!r} in the history of {project} (see `memd history`)")


@dataclass
class UndoResult:
    run: str
    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, why)
    snapshot: str = ""
    undo_commit: str = ""


def is_team(rel: str) -> bool:
    """True for a path (relative to the memory folder) inside team/, which memd never writes."""
    return rel.split("/", 1)[0] == "team"


def undo_run(state_dir: Path, project: str, memory_dir: Path, run: str | None = None, *,
             dry_run: bool = False) -> UndoResult:
    """Revert one run (default: the newest) in the live folder, file by file (see the module doc)."""
    rec = find_run(state_dir, project, run)
    if rec.before is None:
        raise HistoryError(f"run {rec.run} has no snapshot from before it")
    before = files_at(state_dir, project, rec.before)
    after = files_at(state_dir, project, rec.after)
    res = UndoResult(rec.run)
    touched = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    plan: list[tuple[str, bytes | None]] = []
    for rel in touched:
        if is_team(rel):
            res.skipped.append((rel, "in team/ (never written by memd)"))
            continue
        problem = confined_problem(memory_dir, rel)
        if problem is not None:
            res.skipped.append((rel, f"{problem}; memd never writes through one"))
            continue
        live = memory_dir / rel
        sig = current_signature(live)
        now = None if sig is None else live.read_bytes()
        if now == before.get(rel):
            continue  # already as it was before the run (an interrupted run never wrote it)
        if now != after.get(rel):
            res.skipped.append((rel, "changed since the run; left as it is"))
            continue
        plan.append((rel, before.get(rel)))
    if dry_run:
        for rel, data in plan:
            (res.removed if data is None else res.restored).append(rel)
        return res
    res.snapshot = snapshot(state_dir, project, memory_dir, f"before undo of {rec.run}", kind="before",
                            run=f"undo-{rec.run}", job="undo")
    if any(data is not None for _, data in plan):
        with contextlib.suppress(OSError):  # restoring into a folder removed since
            memory_dir.mkdir(parents=True, exist_ok=True)
    for rel, data in plan:
        try:
            # checked again right before each write: the folder may have changed since the plan
            if data is None:
                live = check_confined(memory_dir, rel)
                sig = current_signature(live)
                if sig is not None and live.read_bytes() == after.get(rel):
                    live.unlink()
                    res.removed.append(rel)
            else:
                live = make_parents_confined(memory_dir, rel)
                expect = current_signature(live)
                atomic_write(live, data, expect=expect)
                res.restored.append(rel)
        except UnsafePathError as e:
            res.skipped.append((rel, f"not written: {e}"))
        except (OSError, MemdError) as e:
            res.skipped.append((rel, f"not written ({type(e).__name__})"))
    with contextlib.suppress(OSError):
        _remove_empty_dirs(memory_dir, res.removed)
    res.undo_commit = snapshot(
        state_dir, project, memory_dir,
        f"undo {rec.run}: {len(res.restored)} restored, {len(res.removed)} removed, {len(res.skipped)} skipped",
        kind="undo", run=f"undo-{rec.run}", job="undo")
    return res


def _remove_empty_dirs(root: Path, rels: list[str]) -> None:
    for rel in rels:
        parent = (root / rel).parent
        while parent != root and root in parent.parents:
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent
