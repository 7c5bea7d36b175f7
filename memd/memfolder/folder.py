"""A memory folder read into values: for check and rebuild, the check cache, staging and history.

- ``read_folder``: a ``FolderSnapshot`` (``memd.core.files``) of MEMORY.md and every ``*.md`` file,
  each read with the one bounded reader; files too large, not UTF-8, unreadable or not regular are
  recorded with their problem, never raised; symlinks with their target and whether they leave the
  folder (one that leaves is never followed, except that an index behind one is read to be measured:
  its record carries the text, ``leaves_folder`` and kind ``OUTSIDE``, so it is never staged nor
  written). Each record carries its kind, so
  ``FolderSnapshot.topics`` is the topic-file set of ``memd.core.paths``.
- ``fingerprint``: the same walk, only stats: what a cached check result is keyed on.
- ``read_files`` / ``file_map``: the bytes of every memory file (the index and the topic files):
  what staging copies and what a history snapshot holds.
"""

from __future__ import annotations

import os

from memd.core import paths as P
from memd.memfolder.read import ReadResult, read_bounded
from memd.memfolder.walk import DEFAULT_MAX_BYTES, Walk, classify, inside, list_files, real_root, walk

TYPE_CHECKING = False  # neither typing nor pathlib at run time: a cached `memd check` fingerprints through here
if TYPE_CHECKING:
    from pathlib import Path

    from memd.config import BudgetConfig
    from memd.core.files import FileRecord, FolderSnapshot


def read_files(memory_dir: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES, *,
               hash: bool = True) -> dict[str, ReadResult]:
    """Every memory file of the folder, read (only those read whole: a file that changed kind since
    it was listed is left out), keyed by rel."""
    out: dict[str, ReadResult] = {}
    for f in list_files(memory_dir, max_bytes).memory_files():
        r = read_bounded(f.path, max_bytes, hash=hash)
        if r.data is not None:
            out[f.rel] = r
    return out


def file_map(memory_dir: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, bytes]:
    """rel -> bytes of every memory file: what a history snapshot holds."""
    return {rel: r.data for rel, r in read_files(memory_dir, max_bytes, hash=False).items() if r.data is not None}


def read_folder(memory_dir: Path, budget: BudgetConfig | None = None, *,
                signatures: bool = True, walked: Walk | None = None) -> FolderSnapshot:
    """Read MEMORY.md and every ``*.md`` file under memory_dir (team/ included, read-only).

    signatures=False leaves ``FileRecord.signature`` unset (no SHA-256 of every file, and
    ``hashlib`` is not imported): for readers that never write, as ``memd check``. ``walked``: the
    folder's walk when the caller just made one (the check cache's fingerprint), not made again;
    a file that changed since is read as it is now, and the fingerprint taken before differs from
    the folder's next one."""
    from memd.core.files import FileRecord, FolderSnapshot

    max_bytes = budget.max_file_bytes if budget is not None else DEFAULT_MAX_BYTES
    w = walked if walked is not None else walk(memory_dir)
    if not w.exists or w.problem:
        return FolderSnapshot(memory_dir, w.exists, w.problem)
    # the resolved root matters only to symlinks (where they land): no realpath for a folder without one
    rr = real_root(memory_dir) if any(e.is_symlink() for _, e in w.files()) else os.fspath(memory_dir)
    files = [FileRecord(rel, problem=p, kind=P.OTHER) for rel, p in w.unreadable]
    for rel, entry in w.files():
        is_link = entry.is_symlink()
        if not (is_link or entry.name.endswith(".md")):
            continue
        rec = _record(entry, rel, rr, max_bytes, signatures, is_link)
        if rec is not None:
            files.append(rec)
    files.sort(key=lambda f: f.rel)
    return FolderSnapshot(memory_dir, True, None, tuple(files), w.truncated)


def _record(entry: os.DirEntry[str], rel: str, rr: str, max_bytes: int, signatures: bool,
            is_link: bool) -> FileRecord | None:
    from memd.core.files import FileRecord

    try:
        lst = entry.stat(follow_symlinks=False)
    except OSError:
        return None
    kind, path, st = classify(entry.path, rr, max_bytes, lst, measure=P.is_index(rel))
    target = None
    leaves = False  # an index behind a link leaving the folder is read all the same: measured, never written
    if is_link:
        try:
            target = os.readlink(entry.path)
        except OSError:
            target = "?"
        leaves = kind == P.OUTSIDE or (kind != P.BROKEN and not inside(path, rr))
        folder = kind in (P.OUTSIDE, P.OTHER) and os.path.isdir(entry.path)
        if leaves and (folder or (st is None and entry.name.endswith(".md"))):
            return FileRecord(rel, None, None, None, None, target, True, kind=P.OUTSIDE)
        if not entry.name.endswith(".md"):
            return None  # a symlinked folder inside the memory folder: its files are found at their real path
        if kind == P.BROKEN:
            return FileRecord(rel, None, "broken symlink", None, None, target, False, kind=kind)
        if kind == P.OTHER:
            return FileRecord(rel, None, "not a regular file", None, None, target, leaves, kind=kind)
    r = read_bounded(path, max_bytes, hash=signatures)
    if r.data is None:
        if kind in P.MEMORY_KINDS:  # changed since it was classified
            kind = P.OTHER if r.problem == "not a regular file" else P.UNREADABLE
        size, mtime = (st.st_size, st.st_mtime) if st is not None else (None, None)
        return FileRecord(rel, None, r.problem or "unreadable", size, mtime, target, leaves, kind=kind)
    return FileRecord(rel, r.text, r.problem, len(r.data), r.mtime, target, leaves, signature=r.signature,
                      kind=kind)


def fingerprint(memory_dir: str | os.PathLike[str]) -> tuple[object, ...] | None:
    """What the folder's files are, by their metadata only (no reads); None when it cannot be told.

    Equal fingerprints mean the same files with the same size, times and inodes (symlinks by
    their target's)."""
    return fingerprint_walk(memory_dir)[0]


def fingerprint_walk(memory_dir: str | os.PathLike[str], *,
                     stamps: bool = False) -> tuple[tuple[object, ...] | None, Walk]:
    """``fingerprint`` and the walk it was made from (``stamps``: with ``Walk.stamps``), for a
    reader of the folder that follows (``read_folder(walked=...)``)."""
    w = walk(memory_dir, stamps=stamps)
    return _fingerprint(w), w


def _fingerprint(w: Walk) -> tuple[object, ...] | None:
    if not w.exists:
        return ("missing",)
    if w.problem:
        return None
    out: list[object] = [w.truncated, *w.unreadable]
    for rel, entry in w.files():
        is_link = entry.is_symlink()
        if not (is_link or entry.name.endswith(".md")):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            row: tuple[object, ...] = (rel, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)
            if is_link:
                try:
                    tst = os.stat(entry.path)
                    row += (os.readlink(entry.path), os.path.realpath(entry.path), tst.st_size,
                            tst.st_mtime_ns, tst.st_ctime_ns, tst.st_ino, tst.st_mode)
                except OSError:
                    row += ("broken",)
        except OSError:
            return None
        out.append(row)
    return tuple(out)
