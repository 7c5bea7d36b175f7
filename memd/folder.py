"""Reading a memory folder into a ``FolderSnapshot`` (the I/O edge of check and rebuild).

Every ``*.md`` file is read with a bound (``store.read_bounded``); files that are too large,
not UTF-8, unreadable or not regular are recorded with their problem, never raised. Symlinks are
recorded with their target and whether they leave the folder; one that leaves is never followed.
The walk itself is bounded (entries and depth) so a pathological folder cannot stall a check.
``fingerprint`` walks the same way but only stats: what a cached check result is keyed on.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memd.config import BudgetConfig
    from memd.core.files import FileRecord, FolderSnapshot

__all__ = ["FileRecord", "FolderSnapshot", "fingerprint", "read_folder"]


def __getattr__(name: str) -> object:
    # FileRecord and FolderSnapshot are re-exported lazily: fingerprint(), the cached path of
    # `memd check`, needs neither (their dataclasses cost a few ms to create at import)
    if name in ("FileRecord", "FolderSnapshot"):
        from memd.core import files

        return getattr(files, name)
    raise AttributeError(name)

MAX_ENTRIES = 20_000  # directory entries looked at in one folder walk
MAX_DEPTH = 12


class _Walk:
    __slots__ = ("exists", "files", "problem", "truncated", "unreadable")

    def __init__(self, exists: bool = True, problem: str | None = None) -> None:
        self.exists = exists
        self.problem = problem
        self.truncated = False
        self.files: list[tuple[str, os.DirEntry[str]]] = []  # *.md files and symlinks
        self.unreadable: list[tuple[str, str]] = []  # (rel, problem) of sub-folders


def _walk(memory_dir: Path) -> _Walk:
    w = _Walk()
    try:
        top = os.scandir(memory_dir)
    except FileNotFoundError:
        return _Walk(exists=False)
    except NotADirectoryError:
        return _Walk(problem="not a folder")
    except OSError as e:
        return _Walk(problem=f"cannot list ({e.strerror})")
    seen = 0
    stack: list[tuple[str, int, os._ScandirIterator[str]]] = [("", 0, top)]
    while stack:
        prefix, depth, it = stack.pop()
        with it:
            for entry in it:
                seen += 1
                if seen > MAX_ENTRIES:
                    w.truncated = True
                    break
                rel = prefix + entry.name
                try:
                    is_link = entry.is_symlink()
                    is_dir = not is_link and entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
                if is_dir:
                    if entry.name.startswith("."):
                        continue  # .git, editor folders: not memory
                    if depth + 1 > MAX_DEPTH:
                        w.truncated = True
                        continue
                    try:
                        stack.append((rel + "/", depth + 1, os.scandir(entry.path)))
                    except OSError as e:
                        w.unreadable.append((rel, f"folder unreadable ({e.strerror})"))
                elif is_link or entry.name.endswith(".md"):
                    w.files.append((rel, entry))
        if w.truncated:
            for _, _, rest in stack:
                rest.close()
            break
    w.files.sort(key=lambda x: x[0])
    return w


def read_folder(memory_dir: Path, budget: BudgetConfig | None = None, *,
                signatures: bool = True) -> FolderSnapshot:
    """Read MEMORY.md and every topic file under memory_dir (team/ included, read-only).

    signatures=False leaves ``FileRecord.signature`` unset (no SHA-256 of every file, and
    ``hashlib`` is not imported): for readers that never write, as ``memd check``."""
    from memd.core.files import FileRecord, FolderSnapshot

    if budget is None:
        from memd.config import BudgetConfig

        budget = BudgetConfig()
    max_bytes = budget.max_file_bytes
    w = _walk(memory_dir)
    if not w.exists or w.problem:
        return FolderSnapshot(memory_dir, w.exists, w.problem)
    try:
        real_root = os.path.realpath(memory_dir)
    except OSError:
        real_root = os.fspath(memory_dir)
    files = [FileRecord(rel, problem=p) for rel, p in w.unreadable]
    for rel, entry in w.files:
        if entry.is_symlink():
            rec = _symlink(entry, rel, real_root, max_bytes, signatures)
            if rec is not None:
                files.append(rec)
        else:
            files.append(_read(entry.path, rel, max_bytes, entry, signatures=signatures))
    files.sort(key=lambda f: f.rel)
    return FolderSnapshot(memory_dir, True, None, tuple(files), w.truncated)


def fingerprint(memory_dir: Path) -> tuple[object, ...] | None:
    """What the folder's files are, by their metadata only (no reads); None when it cannot be told.

    Equal fingerprints mean the same files with the same size, times and inodes (symlinks by
    their target's)."""
    w = _walk(memory_dir)
    if not w.exists:
        return ("missing",)
    if w.problem:
        return None
    out: list[object] = [w.truncated, *w.unreadable]
    for rel, entry in w.files:
        try:
            st = entry.stat(follow_symlinks=False)
            row: tuple[object, ...] = (rel, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            if entry.is_symlink():
                try:
                    tst = os.stat(entry.path)
                    row += (os.readlink(entry.path), os.path.realpath(entry.path), tst.st_size,
                            tst.st_mtime_ns, tst.st_ctime_ns, tst.st_ino)
                except OSError:
                    row += ("broken",)
        except OSError:
            return None
        out.append(row)
    return tuple(out)


def _read(path: str, rel: str, max_bytes: int, entry: os.DirEntry[str] | None,
          symlink: str | None = None, *, signatures: bool = True) -> FileRecord:
    from memd.core.files import FileRecord
    from memd.store import read_bounded  # hashlib only when signatures are wanted

    r = read_bounded(Path(path), max_bytes, hash=signatures)
    if r.signature is not None:
        return FileRecord(rel, r.text, r.problem, r.signature.size, r.signature.mtime_ns / 1e9,
                          symlink, signature=r.signature)
    try:
        st: os.stat_result | None = entry.stat(follow_symlinks=False) if entry is not None else os.stat(path)
    except OSError:
        st = None
    if r.data is not None and st is not None:  # read without a hash (check never writes back)
        return FileRecord(rel, r.text, r.problem, len(r.data), st.st_mtime_ns / 1e9, symlink)
    size, mtime = (st.st_size, st.st_mtime) if st is not None else (None, None)
    return FileRecord(rel, None, r.problem or "unreadable", size, mtime, symlink)


def _symlink(entry: os.DirEntry[str], rel: str, real_root: str, max_bytes: int,
             signatures: bool = True) -> FileRecord | None:
    from memd.core.files import FileRecord

    try:
        target = os.readlink(entry.path)
    except OSError:
        target = "?"
    try:
        real = os.path.realpath(entry.path)
    except OSError:
        real = ""
    inside = real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)
    points_to_dir = os.path.isdir(real) if real else False
    if not entry.name.endswith(".md") and not (points_to_dir and not inside):
        return None  # a symlinked folder inside the memory folder: its files are already walked
    if not inside:
        return FileRecord(rel, None, None, None, None, target, True)
    if not os.path.exists(real):
        return FileRecord(rel, None, "broken symlink", None, None, target, False)
    if points_to_dir:
        return FileRecord(rel, None, "not a regular file", None, None, target, False)
    return _read(real, rel, max_bytes, None, symlink=target, signatures=signatures)
