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
snapshotted before the undo touches anything, and what it is about to write is recorded first (a
"planned" commit), so an undo killed half-way is listed and the next ``memd undo`` finishes it. Its
writes are ordered as a run's apply (``memd.apply``): the files it restores, then MEMORY.md, then the
files it removes, so a kill anywhere never leaves the index linking a missing file.

Writing the history (issue 20):
- Every write of a project's history holds the project's write lock (``memd.projlock``): ``commit_files``
  takes it (reentrantly: the rebuild, the undo and apply's window hold it already), so no two memd
  processes or threads ever write one history at once, and none trips over dulwich's lock files.
- A SIGKILL inside dulwich's ``GitFile`` leaves its ``<file>.lock`` behind (an empty
  ``objects/xx/<sha>.lock``, a ``refs/heads/main.lock``), and dulwich refuses to write that file again
  (``FileLocked``) until it is deleted. Holding the project lock, memd knows no live writer owns such
  a file (the flock dies with its holder, and every history writer holds it), so before it writes it
  removes every ``*.lock`` in the repository and logs ``history.lock_recovered`` (path, age).
  (An older memd, without the project lock, still running beside a new one could lose a lock file
  this way; the service files restart the daemon on upgrade.)
- The repository is made whole or not at all: ``Repo.init_bare`` runs in a temp folder beside it
  (``state_dir/history/.memd-init.<pid>.<hex>``) that is renamed into place; an older memd's half-made
  folder (no HEAD, no objects/ or refs/) is made again when it holds no commit, and completed around
  its commits when it does (``history.repaired``). Readers open a repository that has objects/ and refs/.
- Durable before anything is written: loose objects are fsynced (dulwich's ``fsync_object_files``),
  the ref file is fsynced by dulwich and its folder by memd, so a snapshot a rebuild relies on
  survives a power cut, not only a kill.
- A damaged repository (an object that does not parse or is missing, a checksum that does not match:
  a disk error, a copy cut short) is a ``HistoryError`` naming the project, the folder and what is
  wrong (``_damage``), from every reader and writer here: the command or page that needed the history
  fails with that reason, and moving the folder aside starts a new history at the next write. A
  snapshot never relies on a damaged object: one it needs is read back and written again from the
  live bytes (``_add_intact``), so a rewrite after it can always be undone. ``log`` stops at a damaged
  older commit (a ``DAMAGED`` entry): the newer runs still list and undo.
- ``MEMD_FAULT`` points (``memd.store``): ``history.init`` (the temp repository is made),
  ``history.init_renamed`` (renamed into place), ``history.after_objects`` (a commit's objects are
  written, the ref not moved), ``history.after_ref`` (the ref moved), and, only while such a point is
  armed, inside dulwich's lock-file writer: ``history.gitfile_write`` (the ``.lock`` file created,
  empty) and ``history.gitfile_close`` (written, not yet renamed), qualified ``@object``, ``@ref``,
  ``@config`` or the file's name.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from memd.core import declared
from memd.core.paths import INDEX_NAME, is_team
from memd.errors import ConflictError, MemdError, UsageError
from memd.memfolder.folder import file_map
from memd.memfolder.read import read_bounded
from memd.memfolder.walk import DEFAULT_MAX_BYTES, confined_problem
from memd.store import (
    UnsafePathError,
    atomic_write,
    check_confined,
    current_signature,
    fault,
    faults_armed,
    fsync_dir,
    make_parents_confined,
    os_reason,
    pid_alive,
    sweep_temps,
)

BRANCH = b"refs/heads/main"
IDENTITY = b"memd <memd@localhost>"
_TRAILER = re.compile(r"^memd-([a-z]+):\s*(.*)$", re.M)


class HistoryError(MemdError):
    pass


def repo_dir(state_dir: Path, project: str) -> Path:
    return state_dir / "history" / project


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _damage(e: BaseException) -> bool:
    """Whether ``e`` says the repository's own data is damaged (not memd's or the caller's mistake)."""
    import zlib

    from dulwich import errors as de

    if isinstance(e, de.ChecksumMismatch | de.WrongObjectException | de.FileFormatException | de.ObjectMissing
                  | de.ApplyDeltaError | de.MissingCommitError | zlib.error):
        return True
    if isinstance(e, KeyError):  # an object the history points to is not in it: only when dulwich raised it
        tb = e.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        return tb is not None and tb.tb_frame.f_globals.get("__name__", "").startswith("dulwich")
    return False


def _damaged(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """A reader or writer of a project's history (``fn(state_dir, project, ...)``) whose damaged repository
    is a HistoryError with the reason, never an unexpected error (see the module doc)."""

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            if not _damage(e):
                raise
            state_dir, project = args[0], args[1]
            assert isinstance(state_dir, Path) and isinstance(project, str)
            where = repo_dir(state_dir, project)
            raise HistoryError(f"the history of {project} is damaged ({type(e).__name__}: {str(e)[:160]}), a disk "
                               f"error?; move {where} aside and memd starts a new history at its next write",
                               path=str(where)) from None

    return wrapper


INIT_PREFIX = ".memd-init."  # a repository being made, beside the others (renamed into place)
_BASE_DIRS = ("objects", "refs")


def _log() -> Any:
    from memd.logs import get_logger

    return get_logger("memd.history")


def _whole(path: Path) -> bool:
    """A repository dulwich can write: HEAD (not empty), objects/ and refs/."""
    try:
        return (path / "HEAD").stat().st_size > 0 and all((path / d).is_dir() for d in _BASE_DIRS)
    except OSError:
        return False


def _open(state_dir: Path, project: str, *, create: bool) -> Any:
    """The project's repository; None when there is none (``create`` False). ``create`` only under the
    project lock (``commit_files``): the repository is made whole first (``_ensure``)."""
    from dulwich.errors import NotGitRepository
    from dulwich.repo import Repo

    _arm_library_faults()
    path = repo_dir(state_dir, project)
    if create:
        _ensure(state_dir, project)
        return Repo(str(path))
    if not all((path / d).is_dir() for d in _BASE_DIRS):
        return None
    try:
        return Repo(str(path))
    except NotGitRepository:
        return None


def _ensure(state_dir: Path, project: str) -> None:
    """Make the repository whole (the project lock is held): made atomically when absent, repaired when
    an older memd left it half-made, and rid of the lock files a killed writer left (see the module doc)."""
    path = repo_dir(state_dir, project)
    parent = path.parent
    parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _sweep_inits(parent)
    if not _whole(path):
        if os.path.lexists(path):
            _repair(path)
        else:
            _init_into(path)
    from memd.projlock import first_in_hold

    if first_in_hold(state_dir, project, "history.locks"):  # a walk of the repository: once per hold
        _recover_locks(path)


def _fresh(parent: Path) -> Path:
    """A new bare repository in a temp folder of parent (made whole there, then moved)."""
    from dulwich.repo import Repo

    tmp = parent / f"{INIT_PREFIX}{os.getpid()}.{os.urandom(4).hex()}"
    os.mkdir(tmp, 0o700)
    try:
        Repo.init_bare(str(tmp), default_branch=b"main").close()
        fault("history.init")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return tmp


def _init_into(path: Path) -> None:
    tmp = _fresh(path.parent)
    try:
        os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_dir(path.parent)
    fault("history.init_renamed")


def _has_commits(path: Path) -> bool:
    refs = path / "refs"
    if refs.is_dir():
        for _root, _dirs, files in os.walk(refs):
            if any(not f.endswith(".lock") for f in files):
                return True
    try:
        return (path / "packed-refs").stat().st_size > 0
    except OSError:
        return False


def _repair(path: Path) -> None:
    """An older memd's half-made repository (killed inside dulwich's init): without commits it is made
    again; with commits (written while HEAD was missing) the missing parts are added around them."""
    if path.is_symlink() or not path.is_dir():
        raise HistoryError("the history is not a folder; memd leaves it as it is", path=str(path))
    if not _has_commits(path):
        aside = path.parent / f"{INIT_PREFIX}{os.getpid()}.{os.urandom(4).hex()}.old"
        os.rename(path, aside)
        _init_into(path)
        shutil.rmtree(aside, ignore_errors=True)
        _log().warning("history.repaired", path=str(path), action="made again (it held no commit)")
        return
    tmp = _fresh(path.parent)
    try:
        added = _fill(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    fsync_dir(path)
    _log().warning("history.repaired", path=str(path), action="completed around its commits", added=added)


def _fill(template: Path, path: Path) -> list[str]:
    """Move into path what the template repository has and path lacks (an empty HEAD counts as lacking)."""
    added: list[str] = []
    for src in sorted(template.rglob("*")):
        rel = src.relative_to(template)
        dst = path / rel
        if src.is_dir():
            if not dst.is_dir():
                dst.mkdir(parents=True, exist_ok=True, mode=0o700)
                added.append(f"{rel}/")
            continue
        try:
            there = dst.stat().st_size > 0 or str(rel) != "HEAD"
        except OSError:
            there = False
        if not there:
            os.replace(src, dst)
            added.append(str(rel))
    return added


def _sweep_inits(parent: Path) -> None:
    """Temp repositories a killed init left in the history folder (their process is gone)."""
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    for e in entries:
        if not e.name.startswith(INIT_PREFIX):
            continue
        pid = e.name[len(INIT_PREFIX):].split(".", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and pid_alive(int(pid)):
            continue
        shutil.rmtree(e.path, ignore_errors=True)


def _recover_locks(path: Path) -> None:
    """Remove the ``*.lock`` files a killed dulwich write left (the project lock is held: no live
    writer owns one; see the module doc), each logged."""
    now = time.time()
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
        for f in files:
            if not f.endswith(".lock"):
                continue
            p = os.path.join(root, f)
            try:
                st = os.lstat(p)
                if not stat.S_ISREG(st.st_mode):
                    continue
                os.unlink(p)
            except OSError:
                continue
            _log().warning("history.lock_recovered", path=p, age_s=round(now - st.st_mtime, 1), size=st.st_size)


_library_faults = False


def _arm_library_faults() -> None:
    """When ``MEMD_FAULT`` arms a ``history.gitfile_*`` point (crash campaigns only), wrap dulwich's
    lock-file writer so a kill can land inside it. Unarmed, nothing is wrapped (one truth test)."""
    global _library_faults
    if _library_faults or not faults_armed("history.gitfile"):
        return
    from dulwich import file as dfile

    cls: Any = dfile._GitFile
    init, close = cls.__init__, cls.close

    def init_hooked(self: Any, filename: Any, *a: Any, **kw: Any) -> None:
        init(self, filename, *a, **kw)
        fault("history.gitfile_write", _file_kind(self._filename))

    def close_hooked(self: Any) -> None:
        if not self._closed:
            fault("history.gitfile_close", _file_kind(self._filename))
        close(self)

    cls.__init__, cls.close = init_hooked, close_hooked
    _library_faults = True


def _file_kind(filename: str | bytes) -> str:
    name = os.fsdecode(filename)
    if f"{os.sep}objects{os.sep}" in name:
        return "object"
    if f"{os.sep}refs{os.sep}" in name or name.endswith(("HEAD", "packed-refs")):
        return "ref"
    return os.path.basename(name)


def _add_intact(repo: Any, obj: Any) -> None:
    """Add ``obj`` to the store so that it reads back as ``obj``. dulwich skips an object whose loose file
    exists; a damaged one (a disk error) would then stand in a new snapshot for bytes it no longer holds,
    and a rewrite relying on that snapshot could lose them. So an existing loose object is read back,
    and one that does not parse or holds other bytes is replaced, atomically, by the bytes it must hold
    (memd's own store: the object's id is the hash of exactly those bytes)."""
    store = repo.object_store
    path = store._get_shafile_path(obj.id)
    if not os.path.exists(path):
        store.add_object(obj)
        return
    try:
        if store[obj.id].as_raw_string() == obj.as_raw_string():
            return
    except Exception as e:
        if not _damage(e):
            raise
    _log().warning("history.object_repaired", object=obj.id.decode("ascii"), path=path)
    tmp = f"{path}.memd-{os.getpid()}-{os.urandom(4).hex()}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(obj.as_legacy_object())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    fsync_dir(Path(path).parent)


def tree_for(repo: Any, files: dict[str, bytes]) -> bytes:
    from dulwich.objects import Blob, Tree

    def build(entries: dict[str, Any]) -> Any:
        tree = Tree()
        for name, value in sorted(entries.items()):
            if isinstance(value, dict):
                tree.add(name.encode(), 0o040000, build(value))
            else:
                blob = Blob.from_string(value)
                _add_intact(repo, blob)
                tree.add(name.encode(), 0o100644, blob.id)
        _add_intact(repo, tree)
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


@_damaged
def commit_files(state_dir: Path, project: str, files: dict[str, bytes], summary: str, *,
                 kind: str = "snapshot", run: str = "", job: str = "") -> str:
    """Commit a set of files (rel path -> bytes) as the project's newest snapshot; returns its id.
    Raises HistoryError with the true reason when the history cannot be written (a full disk, ...):
    a caller that snapshots before rewriting then rewrites nothing. Holds the project lock
    (``memd.projlock``; ProjectBusyError when another memd keeps it past the wait)."""
    from dulwich.file import FileLocked

    from memd.projlock import project_lock

    with project_lock(state_dir, project, job or kind):
        try:
            return _commit_files(state_dir, project, files, summary, kind=kind, run=run, job=job)
        except OSError as e:
            raise HistoryError(f"cannot write the history: {os_reason(e)}",
                               path=str(repo_dir(state_dir, project))) from None
        except FileLocked as e:  # a writer that does not take the project lock (an older memd)
            raise HistoryError(f"cannot write the history: {os.fsdecode(e.lockfilename)} is held by a writer "
                               "without memd's project lock (an older memd?); try again",
                               path=str(repo_dir(state_dir, project))) from None


def _commit_files(state_dir: Path, project: str, files: dict[str, bytes], summary: str, *,
                  kind: str, run: str, job: str) -> str:
    from dulwich.objects import Commit

    repo = _open(state_dir, project, create=True)
    repo.object_store.fsync_object_files = True  # durable before the memory file is written
    try:
        tree = tree_for(repo, files)
        for _ in range(20):  # the lock excludes memd's writers; a foreign one may still move the branch
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
            fault("history.after_objects", project)
            if repo.refs.set_if_equals(BRANCH, parent, c.id):
                fsync_dir(repo_dir(state_dir, project) / "refs" / "heads")
                fault("history.after_ref", project)
                return str(c.id.decode("ascii"))
            time.sleep(0.01)
        raise HistoryError("history is busy (another memd is writing it)", path=str(repo_dir(state_dir, project)))
    finally:
        repo.close()


@_damaged
def snapshot(state_dir: Path, project: str, memory_dir: Path, summary: str, *, kind: str = "snapshot",
             run: str = "", job: str = "", max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """Snapshot every memory file of memory_dir (``memfolder.folder.file_map``); returns the commit id."""
    return commit_files(state_dir, project, file_map(memory_dir, max_bytes), summary, kind=kind, run=run, job=job)


def _job(reason: str) -> str:
    """The reason as a name safe in a history commit's job field."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", reason).strip("-") or "snapshot"


@_damaged
def snapshot_before(state_dir: Path, project: str, memory_dir: Path, reason: str, *, run: str = "",
                    planned: dict[str, bytes | None] | None = None) -> str:
    """Commit memory_dir as it is before memd rewrites anything in it; returns the commit id.

    With ``run``, the commit is the "before" half of that run, so ``memd undo`` can revert it once
    its "after" commit (``record_after``) is written. With ``planned`` (rel path -> the bytes about
    to be written, None: to be removed), what the run is about to write is committed too (``kind:
    planned``), before anything is written: a run killed between its writes and its "after" commit is
    then listed (interrupted) and undoable, as an applied run is (``list_runs``)."""
    job = _job(reason)
    files = file_map(memory_dir, DEFAULT_MAX_BYTES)
    before = commit_files(state_dir, project, files, f"before {job}" + (f" {run}" if run else ""),
                          kind="before" if run else "snapshot", run=run, job=job)
    if planned and run:
        commit_files(state_dir, project, _laid_over(files, planned), f"planned {job} " + ", ".join(sorted(planned)),
                     kind="planned", run=run, job=job)
    return before


def _laid_over(files: dict[str, bytes], changes: dict[str, bytes | None]) -> dict[str, bytes]:
    out = dict(files)
    for rel, data in changes.items():
        if data is None:
            out.pop(rel, None)
        else:
            out[rel] = data
    return out


@_damaged
def close_run(state_dir: Path, project: str, before: str, why: str) -> str:
    """Mark a run that wrote nothing after all (its write was refused: a conflict, a full disk) as
    finished, so its "planned" commit does not list it as interrupted: a ``dropped`` commit holding
    the "before" files. ``list_runs`` shows no dropped run."""
    entry = next((e for e in log(state_dir, project, limit=10) if e.commit == before), None)
    if entry is None or not entry.run:
        return ""
    return commit_files(state_dir, project, files_at(state_dir, project, before), f"{entry.job} not applied: {why}",
                        kind="dropped", run=entry.run, job=entry.job)


@_damaged
def record_after(state_dir: Path, project: str, before: str, changes: dict[str, bytes | None], reason: str,
                 run: str, summary: str, *, kind: str = "after") -> str:
    """Commit what a run did (the "after" half): the run's "before" commit with exactly the run's own
    ``changes`` laid over it (rel path -> new bytes, None: removed). Never the folder as it is then: a
    file Claude Code wrote while the run worked is not the run's change, and undoing the run must
    not take it back. The run then shows in ``memd history``."""
    files = _laid_over(files_at(state_dir, project, before), changes)
    return commit_files(state_dir, project, files, summary, kind=kind, run=run, job=_job(reason))


DAMAGED = "damaged"  # ``log``'s last entry when an older commit cannot be read: the walk stops there


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


@_damaged
def log(state_dir: Path, project: str, limit: int = 200) -> list[HistoryEntry]:
    """Commits newest first (at most limit). A damaged older commit ends the walk with an entry of kind
    ``DAMAGED`` (its id, no time): the newer ones are still listed and undoable; a damaged newest one is
    a HistoryError."""
    repo = _open(state_dir, project, create=False)
    if repo is None:
        return []
    try:
        if BRANCH not in repo.refs:
            return []
        out: list[HistoryEntry] = []
        cur: bytes | None = repo.refs[BRANCH]
        while cur is not None and len(out) < limit:
            try:
                c = repo[cur]
            except Exception as e:  # an older commit damaged: what is newer still reads (and undoes)
                if not out or not _damage(e):
                    raise
                out.append(HistoryEntry(cur.decode("ascii", "replace"), 0.0, "older snapshots unreadable: the "
                                        f"history is damaged here ({type(e).__name__})", DAMAGED, "", "", None))
                break
            out.append(_entry(c))
            cur = c.parents[0] if c.parents else None
        return out
    finally:
        repo.close()


@_damaged
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


@_damaged
def file_history(state_dir: Path, project: str, name: str, limit: int = 200) -> list[tuple[HistoryEntry, bytes | None]]:
    """Commits newest first (at most limit, as ``log``), each with the bytes of the top-level file
    ``name`` (MEMORY.md) in its snapshot (None: not in it). One walk: a tree or blob that several
    commits share (a run's "after" is the next run's "before") is read once. The viewer's index-size
    chart measures every snapshot's index this way; ``files_at`` would read every topic file too."""
    repo = _open(state_dir, project, create=False)
    if repo is None:
        return []
    want = name.encode("utf-8", "surrogateescape")
    by_tree: dict[bytes, bytes | None] = {}
    by_blob: dict[bytes, bytes] = {}
    out: list[tuple[HistoryEntry, bytes | None]] = []
    try:
        if BRANCH not in repo.refs:
            return []
        cur: bytes | None = repo.refs[BRANCH]
        while cur is not None and len(out) < limit:
            try:
                c = repo[cur]
                if c.tree not in by_tree:
                    found = next((e for e in repo[c.tree].items() if e.path == want and not stat.S_ISDIR(e.mode)),
                                 None)
                    if found is not None and found.sha not in by_blob:
                        by_blob[found.sha] = bytes(repo[found.sha].data)
                    by_tree[c.tree] = by_blob[found.sha] if found is not None else None
            except Exception as e:  # an older commit damaged: the newer ones are the series (as ``log``)
                if not out or not _damage(e):
                    raise
                break
            out.append((_entry(c), by_tree[c.tree]))
            cur = c.parents[0] if c.parents else None
        return out
    finally:
        repo.close()


@_damaged
def changes_between(state_dir: Path, project: str,
                    pairs: list[tuple[str | None, str]]) -> list[dict[str, tuple[bytes | None, bytes | None]]]:
    """For each (before, after) commit pair (before None: an empty folder), the files that differ: rel path ->
    (its bytes before or None, its bytes after or None). The repository is opened once and the trees are
    compared by id, so only what changed is read (a page of 50 runs reads their changes, not 100 folders)."""
    repo = _open(state_dir, project, create=False)
    if repo is None:
        raise HistoryError("no history yet", path=str(repo_dir(state_dir, project)))
    try:
        out: list[dict[str, tuple[bytes | None, bytes | None]]] = []
        for before, after in pairs:
            changed: dict[str, tuple[bytes | None, bytes | None]] = {}
            _tree_changes(repo, _tree_id(repo, before) if before else None, _tree_id(repo, after), "", changed)
            out.append(changed)
        return out
    finally:
        repo.close()


def _tree_id(repo: Any, commit: str) -> bytes:
    try:
        return bytes(repo[commit.encode()].tree)
    except (KeyError, ValueError):
        raise UsageError(f"no such snapshot: {commit}") from None


def _tree_changes(repo: Any, a: bytes | None, b: bytes | None, prefix: str,
                  out: dict[str, tuple[bytes | None, bytes | None]]) -> None:
    if a == b:
        return

    def entries(tree_id: bytes | None) -> dict[str, tuple[int, bytes]]:
        if tree_id is None:
            return {}
        return {e.path.decode("utf-8", "surrogateescape"): (e.mode, e.sha) for e in repo[tree_id].items()}

    old, new = entries(a), entries(b)
    for name in sorted(set(old) | set(new)):
        (om, osha), (nm, nsha) = old.get(name, (0, None)), new.get(name, (0, None))
        if osha == nsha and om == nm:
            continue
        odir, ndir = osha is not None and stat.S_ISDIR(om), nsha is not None and stat.S_ISDIR(nm)
        if odir or ndir:  # a folder on either side: its files, against the other side's folder or nothing
            _tree_changes(repo, osha if odir else None, nsha if ndir else None, prefix + name + "/", out)
        rel = prefix + name
        ob = bytes(repo[osha].data) if osha is not None and not odir else None
        nb = bytes(repo[nsha].data) if nsha is not None and not ndir else None
        if ob != nb:
            out[rel] = (ob, nb)


@dataclass(frozen=True)
class RunRecord:
    run: str
    job: str
    time: float
    summary: str
    after: str  # commit after the run
    before: str | None  # commit before the run (the snapshot taken first)
    complete: bool = True  # False: the run was interrupted while applying ("after" is what it planned)
    message: str = ""  # the whole message of its "after" commit (``memd.core.declared.forgotten_in`` reads it)


@_damaged
def list_runs(state_dir: Path, project: str, limit: int = 50) -> list[RunRecord]:
    """Applied runs, newest first, each with its before and after snapshot. A run that was killed
    while applying has no "after" commit: its "planned" commit stands in (``complete`` False)."""
    entries = log(state_dir, project, limit=limit * 4 + 10)
    befores = {e.run: e.commit for e in entries if e.kind == "before" and e.run}
    finished = {e.run for e in entries if e.kind in ("after", "undo", "dropped") and e.run}
    out: list[RunRecord] = []
    for e in entries:
        if not e.run:
            continue
        if e.kind in ("after", "undo"):
            out.append(RunRecord(e.run, e.job, e.time, e.summary, e.commit, befores.get(e.run, e.parent),
                                 message=e.message))
        elif e.kind == "planned" and e.run not in finished:
            out.append(RunRecord(e.run, e.job, e.time, e.summary.removeprefix("planned ") + " (interrupted)",
                                 e.commit, befores.get(e.run, e.parent), complete=False))
        if len(out) >= limit:
            break
    return out


@_damaged
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
    kept_local: list[str] = field(default_factory=list)  # synced files the undo keeps here (memd.sync.held)


@_damaged
def undo_run(state_dir: Path, project: str, memory_dir: Path, run: str | None = None, *,
             dry_run: bool = False, only: str | None = None) -> UndoResult:
    """Revert one run (default: the newest) in the live folder, file by file (see the module doc).
    Holds the project lock (``memd.projlock``) from reading the history to the undo's own commit.
    ``only``: one memory file of the run (``memd undo --file``): that file comes back as it was before
    the run (or goes, when the run added it) with its index entry, and the rest of the run stays."""
    if dry_run:
        return _undo_run(state_dir, project, memory_dir, run, dry_run=True, only=only)
    from memd.projlock import project_lock

    with project_lock(state_dir, project, "undo"):
        return _undo_run(state_dir, project, memory_dir, run, dry_run=False, only=only)


def _undo_order(rel: str, data: bytes | None) -> tuple[int, str]:
    """Restored files first, then the index, then removals: the order apply writes a run in, so a kill
    anywhere never leaves MEMORY.md linking a file that is not there (yet, or any more)."""
    return (1 if rel == INDEX_NAME else (0 if data is not None else 2)), rel


def _undo_run(state_dir: Path, project: str, memory_dir: Path, run: str | None, *, dry_run: bool,
              only: str | None = None) -> UndoResult:
    if not dry_run and memory_dir.is_dir():
        sweep_temps(memory_dir)  # a killed write's leftovers (memd's own temp names only), as a rebuild does
    rec = find_run(state_dir, project, run)
    if rec.before is None:
        raise HistoryError(f"run {rec.run} has no snapshot from before it")
    before = files_at(state_dir, project, rec.before)
    after = files_at(state_dir, project, rec.after)
    res = UndoResult(rec.run)
    touched = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    if only is not None:
        if only == INDEX_NAME or only not in touched:
            files = ", ".join(k for k in touched if k != INDEX_NAME)[:300] or "none"
            raise UsageError(f"run {rec.run} did not change a memory named {only!r} (its memories: {files})")
        touched = [only]
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
    plan.sort(key=lambda item: _undo_order(*item))
    entry = _entry_index(memory_dir, before, plan) if only is not None else None
    if dry_run:
        for rel, data in plan:
            (res.removed if data is None else res.restored).append(rel)
        if entry is not None:
            res.restored.append(INDEX_NAME)
        return res
    if entry is not None:  # the memory's entry: after the file it links comes back, before the file it links goes
        plan.insert(1 if plan[0][1] is not None else 0, (INDEX_NAME, entry))
    res.snapshot = snapshot_before(state_dir, project, memory_dir, "undo", run=f"undo-{rec.run}",
                                   planned=dict(plan) or None)
    if any(data is not None for _, data in plan):
        with contextlib.suppress(OSError):  # restoring into a folder removed since
            memory_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, bytes] = {}
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
                if only is not None and rel == INDEX_NAME:
                    # the entry is put into the index as it is now (read after its signature: a write
                    # in between fails the write below, never clobbered)
                    data = _entry_index(memory_dir, before, [(p, d) for p, d in plan if p == only])
                    if data is None:
                        continue
                atomic_write(live, data, expect=expect)
                written[rel] = data
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
    done: dict[str, bytes | None] = {rel: written.get(rel, data) for rel, data in plan
                                     if rel in res.restored or rel in res.removed}
    res.undo_commit = record_after(
        state_dir, project, res.snapshot, done, "undo",
        f"undo-{rec.run}",
        f"undo {rec.run}{f' --file {only}' if only is not None else ''}: {len(res.restored)} restored, "
        f"{len(res.removed)} removed, {len(res.skipped)} skipped",
        kind="undo")
    return res


def _entry_index(memory_dir: Path, before: dict[str, bytes], plan: list[tuple[str, bytes | None]]) -> bytes | None:
    """``memd undo --file``: the live index with the memory's entry put back (the file comes back: its
    entry lines from the index before the run) or taken out (the run added the file: it goes), or None
    when the index needs no change (or there is none)."""
    if not plan:
        return None
    rel, data = plan[0]
    now = _live_bytes(memory_dir / INDEX_NAME)
    if now is None:
        return None
    text = now.decode("utf-8", "replace")
    if data is not None:
        old = before.get(INDEX_NAME)
        new = declared.with_entries_of(old.decode("utf-8", "replace"), text, rel) if old is not None else text
    else:
        new = declared.without_entries(text, rel)
    return new.encode("utf-8") if new != text else None


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
