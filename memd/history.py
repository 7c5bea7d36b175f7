"""The history of memory folders, and nothing else: one bare git repository per project, kept outside.

``state_dir/history/<project>/`` is a bare repository written with dulwich (no system git needed),
so ``git --git-dir=<that folder> log`` works on it. Each commit's tree holds every memory file of
the folder as it was (the index and the topic files, team/ included: a snapshot is the folder as
Claude Code sees it). History never walks a folder itself: the file maps come from the folder's
owner (``memd.memfolder.folder.file_map``: the rules of ``memd.core.paths``, no hidden files, no
symlink leaving the folder, nothing memd cannot read whole).

Commits memd makes:
- before any change, a snapshot of the folder (``kind: before``; ``snapshot_before``), and
- after a run is applied, its "before" commit with exactly what the run wrote laid over it
  (``kind: after``; ``record_after``, or ``commit_files`` with exactly the map applied), never the
  folder re-read: what Claude Code wrote meanwhile is not the run's, and undo must not revert it.
  The message carries the run's summary.
  ``list_runs`` reads these back; ``undo_run`` reverts one run.

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
import re
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memd.core.paths import is_team
from memd.errors import ConflictError, MemdError, UsageError
from memd.memfolder.folder import file_map
from memd.memfolder.read import read_bounded
from memd.memfolder.walk import DEFAULT_MAX_BYTES, confined_problem
from memd.store import (
    UnsafePathError,
    atomic_write,
    check_confined,
    current_signature,
    make_parents_confined,
    os_reason,
)

BRANCH = b"refs/heads/main"
IDENTITY = b"memd <memd@localhost>"
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


def tree_for(repo: Any, files: dict[str, bytes]) -> bytes:
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
    """Commit a set of files (rel path -> bytes) as the project's newest snapshot; returns its id.
    Raises HistoryError with the true reason when the history cannot be written (a full disk, ...):
    a caller that snapshots before rewriting then rewrites nothing."""
    try:
        return _commit_files(state_dir, project, files, summary, kind=kind, run=run, job=job)
    except OSError as e:
        raise HistoryError(f"cannot write the history: {os_reason(e)}",
                           path=str(repo_dir(state_dir, project))) from None


def _commit_files(state_dir: Path, project: str, files: dict[str, bytes], summary: str, *,
                  kind: str, run: str, job: str) -> str:
    from dulwich.objects import Commit

    repo = _open(state_dir, project, create=True)
    try:
        tree = tree_for(repo, files)
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
             run: str = "", job: str = "", max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """Snapshot every memory file of memory_dir (``memfolder.folder.file_map``); returns the commit id."""
    return commit_files(state_dir, project, file_map(memory_dir, max_bytes), summary, kind=kind, run=run, job=job)


def _job(reason: str) -> str:
    """The reason as a name safe in a history commit's job field."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", reason).strip("-") or "snapshot"


def snapshot_before(state_dir: Path, project: str, memory_dir: Path, reason: str, *, run: str = "") -> str:
    """Commit memory_dir as it is before memd rewrites anything in it; returns the commit id.

    With ``run``, the commit is the "before" half of that run, so ``memd undo`` can revert it once
    its "after" commit (``record_after``) is written."""
    job = _job(reason)
    return snapshot(state_dir, project, memory_dir, f"before {job}" + (f" {run}" if run else ""),
                    kind="before" if run else "snapshot", run=run, job=job)


def record_after(state_dir: Path, project: str, before: str, changes: dict[str, bytes | None], reason: str,
                 run: str, summary: str, *, kind: str = "after") -> str:
    """Commit what a run did (the "after" half): the run's "before" commit with exactly the run's own
    ``changes`` laid over it (rel path -> new bytes, None: removed). Never the folder as it is then: a
    file Claude Code wrote while the run worked is not the run's change, and undoing the run must
    not take it back. The run then shows in ``memd history``."""
    files = files_at(state_dir, project, before)
    for rel, data in changes.items():
        if data is None:
            files.pop(rel, None)
        else:
            files[rel] = data
    return commit_files(state_dir, project, files, summary, kind=kind, run=run, job=_job(reason))


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
        now = _live_bytes(memory_dir / rel)
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
                if _live_bytes(live) == after.get(rel):
                    live.unlink()
                    res.removed.append(rel)
            else:
                live = make_parents_confined(memory_dir, rel)
                expect = current_signature(live)
                atomic_write(live, data, expect=expect)
                res.restored.append(rel)
        except UnsafePathError as e:
            res.skipped.append((rel, f"not written: {e}"))
        except ConflictError:
            res.skipped.append((rel, "changed while undoing; left as it is"))
        except OSError as e:
            res.skipped.append((rel, f"not written: {os_reason(e)}"))
        except MemdError as e:
            res.skipped.append((rel, f"not written: {e}"))
    with contextlib.suppress(OSError):
        _remove_empty_dirs(memory_dir, res.removed)
    done: dict[str, bytes | None] = {rel: data for rel, data in plan if rel in res.restored or rel in res.removed}
    res.undo_commit = record_after(
        state_dir, project, res.snapshot, done, "undo",
        f"undo-{rec.run}",
        f"undo {rec.run}: {len(res.restored)} restored, {len(res.removed)} removed, {len(res.skipped)} skipped",
        kind="undo")
    return res


def _live_bytes(path: Path) -> bytes | None:
    """What the live file holds (None: missing, or not readable whole: never equal to a snapshot)."""
    return read_bounded(path, DEFAULT_MAX_BYTES, hash=False).data


def _remove_empty_dirs(root: Path, rels: list[str]) -> None:
    for rel in rels:
        parent = (root / rel).parent
        while parent != root and root in parent.parents:
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent
