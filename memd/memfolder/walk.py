"""The one walk policy of a memory folder, and the kind of file found at each path.

``walk`` lists a folder depth-first, each folder's entries by name (a folder right before what it
holds). It enters ``team/`` and every plain sub-folder; it never enters a hidden folder (``.git/``)
or a symlinked one, and stops at ``MAX_ENTRIES`` entries or ``MAX_DEPTH`` levels (``truncated``), so
a pathological folder cannot stall a reader. Every entry it saw is handed back: the readers pick
what they need (memory files; check also the symlinks and hidden ``*.md`` files it reports on;
``store.sweep_temps`` memd's own temp files).

Symlinks, as Claude Code 2.1.328's recall walks them (``docs/conformance.md``), less memd's one
deviation: a link to a file inside the folder is a memory file of its own, read at its target; a
symlinked folder inside adds nothing (Claude Code walks each folder once: ``alias -> sub`` and even
``peek -> .hidden`` list nothing through the link), so it is never entered; a link leaving the folder
(file or folder, ``up -> ..`` included) is followed by Claude Code and never by memd: check reports
each (MEM008).

``classify`` tells the kind of file at a path (``memd.core.paths``: a regular file, a symlink to one
inside the folder, one leaving it, too large, unreadable, ...), and ``memd.core.paths.is_topic`` /
``is_memory_file`` judge path and kind together. ``list_files`` does both for a whole folder: the
topic-file set every part of memd shares (check, status, the daemon's count, recall, staging,
history). ``locate`` and ``confined_problem`` apply the same rules to one path.

An index (``MEMORY.md``) that is a symlink leaving the folder is loaded by Claude Code: memd
*measures* it (``classify(..., measure=True)``, used by ``read_folder`` and ``locate`` for the two
indexes only) and never writes through it (``confined_problem``: rebuild and the dream refuse).

Lean on purpose (``os``, ``stat``, ``memd.core.paths``): the hooks locate what they read here.
"""

from __future__ import annotations

import os
import stat

from memd.core import paths as P

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

MAX_ENTRIES = 20_000  # directory entries looked at in one walk
MAX_DEPTH = 12  # folder levels below the memory folder
DEFAULT_MAX_BYTES = 4_000_000  # budget.max_file_bytes when no config is at hand


class Walk:
    """What one walk saw. ``entries``: (rel, entry, is_folder) in walk order."""

    __slots__ = ("entries", "exists", "problem", "stamps", "truncated", "unreadable")

    def __init__(self, exists: bool = True, problem: str | None = None) -> None:
        self.exists = exists
        self.problem = problem  # the folder itself could not be listed
        self.truncated = False
        self.entries: list[tuple[str, os.DirEntry[str], bool]] = []
        self.unreadable: list[tuple[str, str]] = []  # (rel, problem) of sub-folders that could not be listed
        # with walk(stamps=True): (rel, st_mtime_ns, st_ctime_ns, st_ino) of each folder listed, "" the
        # root, each stat taken before the folder was listed (so a later change can only make it differ)
        self.stamps: list[tuple[str, int, int, int]] | None = None

    def files(self) -> Iterator[tuple[str, os.DirEntry[str]]]:
        """Every entry that is not a folder (symlinks to folders included)."""
        return ((rel, e) for rel, e, is_dir in self.entries if not is_dir)


def _listed(folder: str) -> list[os.DirEntry[str]]:
    with os.scandir(folder) as it:
        return sorted(it, key=lambda e: e.name)


def _stamp(rel: str, folder: str, out: list[tuple[str, int, int, int]] | None) -> None:
    if out is not None:
        try:
            st = os.stat(folder)
        except OSError:
            out.append((rel, -1, -1, -1))  # matches no stat: the fast check of memd.checkcache fails
            return
        out.append((rel, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))


def walk(root: str | os.PathLike[str], *, max_depth: int = MAX_DEPTH, stamps: bool = False) -> Walk:
    """Walk root under the policy of the module doc; never raises for the folder's sake.
    stamps=True: each folder's stat before it is listed (``Walk.stamps``)."""
    marks: list[tuple[str, int, int, int]] | None = [] if stamps else None
    try:
        _stamp("", os.fspath(root), marks)
        top = _listed(os.fspath(root))
    except FileNotFoundError:
        return Walk(exists=False)
    except NotADirectoryError:
        return Walk(problem="not a folder")
    except OSError as e:
        return Walk(problem=f"cannot list ({e.strerror})")
    w = Walk()
    w.stamps = marks
    stack: list[tuple[str, int, Iterator[os.DirEntry[str]]]] = [("", 0, iter(top))]
    seen = 0
    while stack:
        prefix, depth, it = stack[-1]
        entry = next(it, None)
        if entry is None:
            stack.pop()
            continue
        seen += 1
        if seen > MAX_ENTRIES:
            w.truncated = True
            break
        rel = prefix + entry.name
        try:
            is_dir = not entry.is_symlink() and entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        w.entries.append((rel, entry, is_dir))
        if not is_dir or entry.name.startswith("."):
            continue  # hidden folders (.git, editor folders) are not memory
        if depth + 1 > max_depth:
            w.truncated = True
            continue
        try:
            _stamp(rel, entry.path, marks)
            stack.append((rel + "/", depth + 1, iter(_listed(entry.path))))
        except OSError as e:
            w.unreadable.append((rel, f"folder unreadable ({e.strerror})"))
    return w


def real_root(root: str | os.PathLike[str]) -> str:
    try:
        return os.path.realpath(root)
    except (OSError, ValueError):
        return os.fspath(root)


def inside(real: str, root_real: str) -> bool:
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)


def classify(path: str, root_real: str, max_bytes: int | None = DEFAULT_MAX_BYTES,
             lst: os.stat_result | None = None, *, measure: bool = False) -> tuple[str, str, os.stat_result | None]:
    """(kind, the path to read it at, the stat of what would be read) for the file at path.

    A symlink is resolved only to see where it lands: inside the folder, its target is what is read.
    measure=True (an index only): a link leaving the folder is resolved too and, when its target is
    a regular file memd may read, answered (OUTSIDE, target, stat) for reading, never for writing.
    max_bytes None: no size cap (readers of a head, which never load a long file whole)."""
    try:
        st = lst if lst is not None else os.lstat(path)
    except (OSError, ValueError):
        return P.BROKEN, path, None
    kind, read = P.FILE, path
    if stat.S_ISLNK(st.st_mode):
        try:
            real = os.path.realpath(path)
        except (OSError, ValueError):
            return P.BROKEN, path, None
        kind = P.LINK if inside(real, root_real) else P.OUTSIDE
        if kind == P.OUTSIDE and not measure:
            return P.OUTSIDE, path, None
        try:
            st = os.stat(real)
        except OSError:
            return P.BROKEN, path, None
        read = real
    if not stat.S_ISREG(st.st_mode):
        return P.OTHER, read, st
    if max_bytes is not None and st.st_size > max_bytes:
        return P.LARGE, read, st
    if not os.access(read, os.R_OK):
        return P.UNREADABLE, read, st
    return kind, read, st


class MemFile:
    """A file named like memory, classified: rel, kind, where to read it, its size and mtime."""

    __slots__ = ("kind", "mtime", "path", "rel", "size")

    def __init__(self, rel: str, kind: str, path: str, st: os.stat_result | None) -> None:
        self.rel = rel
        self.kind = kind
        self.path = path
        self.size = st.st_size if st is not None else None
        self.mtime = st.st_mtime if st is not None else None

    def __repr__(self) -> str:
        return f"MemFile({self.rel!r}, {self.kind!r})"


class Listing:
    """The memory-named files of a folder (``*.md``, not hidden), each classified."""

    __slots__ = ("files", "root", "walk")

    def __init__(self, root: str, w: Walk, files: list[MemFile]) -> None:
        self.root = root
        self.walk = w
        self.files = files

    def memory_files(self) -> list[MemFile]:
        return [f for f in self.files if P.is_memory_file(f.rel, f.kind)]

    def topics(self) -> list[MemFile]:
        return [f for f in self.files if P.is_topic(f.rel, f.kind)]


def list_files(root: str | os.PathLike[str], max_bytes: int | None = DEFAULT_MAX_BYTES) -> Listing:
    """Walk root and classify every file named like memory (see the module doc)."""
    top = os.fspath(root)
    w = walk(top)
    rr = real_root(top)
    files: list[MemFile] = []
    for rel, e in w.files():
        if not P.is_memory_file(rel):  # the path rule; the kind is told next
            continue
        try:
            lst = e.stat(follow_symlinks=False)
        except OSError:
            continue
        kind, read, st = classify(e.path, rr, max_bytes, lst)
        files.append(MemFile(rel, kind, read, st))
    return Listing(top, w, files)


def count_topics(root: str | os.PathLike[str], max_bytes: int | None = DEFAULT_MAX_BYTES) -> int:
    return len(list_files(root, max_bytes).topics())


def confined_problem(root: str | os.PathLike[str], rel: str) -> str | None:
    """Why ``root/rel`` may not be written, deleted or created (None: it may).

    Every component from root down to the file is checked with lstat: none may be a symlink, and
    all but the last must be folders; and the resolved path must stay inside the resolved root.
    Components that do not exist yet are fine (they would be created as plain folders). root
    itself may be a symlink (a user's choice of where the memory folder lives)."""
    parts = rel.split("/")
    if not rel or any(p in ("", ".", "..") or "\x00" in p for p in parts):
        return f"{rel[:100]!r} is not a plain relative path"
    cur = os.fspath(root)
    for i, part in enumerate(parts):
        cur = os.path.join(cur, part)
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            break
        except OSError as e:
            return f"{'/'.join(parts[:i + 1])} cannot be checked ({e.strerror})"
        if stat.S_ISLNK(st.st_mode):
            return f"{'/'.join(parts[:i + 1])} is a symlink"
        if i < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
            return f"{'/'.join(parts[:i + 1])} is not a folder"
    if not inside(os.path.realpath(os.path.join(root, rel)), real_root(root)):
        return f"{rel[:100]} resolves outside the memory folder"
    return None


def locate(root: str | os.PathLike[str], rel: str, max_bytes: int | None = DEFAULT_MAX_BYTES) -> str | None:
    """Where to read the memory file root/rel under the walk's rules, or None when memd must not read
    it (not a memory file by the rule, behind a symlinked folder, a symlink leaving the folder, too
    large, ...). An index that is a symlink leaving the folder is answered (measured, never written:
    see the module doc). Checked at the moment of asking: readers call it right before they read."""
    head, _, _ = rel.rpartition("/")
    if not P.is_memory_file(rel) or (head and confined_problem(root, head) is not None):
        return None
    index = P.is_index(rel)
    kind, read, _ = classify(os.path.join(root, rel), real_root(root), max_bytes, measure=index)
    return read if P.is_memory_file(rel, kind) or (index and kind == P.OUTSIDE) else None
