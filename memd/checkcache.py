"""A cache of `memd check` results, like ruff's: a folder whose files have not changed is not read again.

One JSON file for every memory folder, ``<state_dir>/cache/check.json`` (read once per process,
written once per `check --all`). Each entry holds a digest of the folder's ``fingerprint`` (every
file's size, times, inode and mode; 128-bit BLAKE2), the budget, and is valid only for the code of
the checks themselves (the modules' sizes and times), so a changed file, config or memd means a fresh
check. Entries written within two seconds of a file's modification are not trusted (a coarse clock
could hide a second write), and any problem with the cache just means checking again: it never fails
a check.

The quick check. A repeated ``check --all`` of an unchanged tree need not list every folder: an entry
also holds the stamp (mtime, ctime, inode) of each folder the walk listed, each taken before it was
listed. A folder whose stamp is unchanged holds the same names (adding, removing or renaming an
entry changes its folder's mtime and ctime), so the quick check stats the folders and the files the
fingerprint names, and nothing else; any difference sends it to the full fingerprint. Files are
always stat'ed: an edit in place changes only the file's own times, never its folder's. Not offered
for a folder with symlinks (their targets change without the folder), one cut short or with an
unreadable sub-folder, or one whose stamp is within two seconds of the entry's writing (the same
coarse clock).
"""

from __future__ import annotations

import os
import time

from memd import __version__
from memd.core import jsonfast
from memd.core.budget import Limits as BudgetConfig  # the [budget] section's type (memd.config names it so)
from memd.record import astuple

TYPE_CHECKING = False  # os.path only, no pathlib or typing: a cached `memd check` answers through here
if TYPE_CHECKING:
    from typing import Any

    Pathish = str | os.PathLike[str]
    from memd.memfolder.walk import Walk

    Key = tuple[str, str, list[str] | None, Walk]  # budget, fingerprint, quick check, walk: opaque

_MODULES = ("core/lint.py", "core/links.py", "core/dates.py", "core/fastscan.py", "core/secrets.py",
            "core/secret_rules.py", "core/secret_views.py", "core/budget.py", "core/signature.py", "core/rebuild.py",
            "core/frontmatter.py", "core/index.py", "core/files.py", "core/findings.py", "core/paths.py",
            "memfolder/folder.py", "memfolder/walk.py", "memfolder/read.py", "store.py", "checkcache.py",
            "inspect.py", "config.py", "record.py", "core/guard.py", "core/conflict.py")
RACY_SECONDS = 2.0
_CODE_KEY: str | None = None


def _code_key() -> str:
    global _CODE_KEY
    if _CODE_KEY is None:
        base = os.path.dirname(os.path.realpath(__file__))
        parts: list[object] = [__version__]
        for m in _MODULES:
            try:
                st = os.stat(os.path.join(base, m))
                parts.append((m, st.st_size, st.st_mtime_ns))
            except OSError:
                parts.append((m, None))
        _CODE_KEY = repr(parts)
    return _CODE_KEY


CACHE_NAME = "check.json"


class _Cache:
    """The cache file of one state folder, as this process sees it."""

    def __init__(self, state_dir: Pathish) -> None:
        self.path = os.path.join(state_dir, "cache", CACHE_NAME)
        self.folders = _read(self.path)
        self.changed: dict[str, dict[str, Any]] = {}
        self.depth = 0  # nesting of batch(): write at the end of the outermost one


_OPEN: dict[str, _Cache] = {}


def _read(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            # surrogateescape: a folder name that is not valid UTF-8 is kept as its bytes (see _write)
            # read with json's C scanner alone: ``json`` compiles its patterns at import, a tenth of a
            # cached `memd check` (jsonfast gives json.loads's values and errors)
            data = jsonfast.loads(f.read().decode("utf-8", "surrogateescape"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("code") != _code_key() or not isinstance(data.get("folders"), dict):
        return {}
    folders: dict[str, Any] = data["folders"]
    return folders


def _cache(state_dir: Pathish) -> _Cache:
    k = os.fspath(state_dir)
    c = _OPEN.get(k)
    if c is None:
        c = _OPEN[k] = _Cache(state_dir)
    return c


_CFG: tuple[BudgetConfig, bool, str] | None = None


def _cfg(budget: BudgetConfig, team_pii: bool) -> str:
    global _CFG
    last = _CFG  # `check --all` asks once per folder with the same (frozen) budget
    if last is not None and last[0] is budget and last[1] == team_pii:
        return last[2]
    cfg = repr((astuple(budget), team_pii))
    _CFG = (budget, team_pii, cfg)
    return cfg


def _quick(fp: tuple[object, ...], stamps: list[tuple[str, int, int, int]]) -> list[str] | None:
    """What an entry keeps for the quick check, or None when it is not offered (see the module doc):
    the folders' rels and stamps, the files' rels and stats, as four strings (a string is read from
    JSON far faster than as many numbers, and compared whole)."""
    if not stamps or not fp or fp[0] is not False:
        return None  # ("missing",), or the walk was cut short
    rows = [r for r in fp[1:] if isinstance(r, tuple) and len(r) == 6]
    if len(rows) != len(fp) - 1:
        return None  # an unreadable sub-folder (rel, problem) or a symlink (its target's stat)
    recent = (time.time() - RACY_SECONDS) * 1e9
    if any(m < 0 or m > recent for _, m, _, _ in stamps):
        return None
    return ["\0".join(d[0] for d in stamps), "|".join(f"{m},{c},{i}" for _, m, c, i in stamps),
            "\0".join(str(r[0]) for r in rows), "|".join(f"{r[1]},{r[2]},{r[3]},{r[4]},{r[5]}" for r in rows)]


def _unchanged(memory_dir: Pathish, quick: list[str]) -> bool:
    """The quick check: every folder stamp and every file's stat as the entry has them (an entry
    read from the file may hold anything: a wrong shape is a miss)."""
    try:
        dirs, dir_stamps, files, file_stats = quick
        root = os.fspath(memory_dir)
        base = root if root.endswith(os.sep) else root + os.sep  # joined by hand: os.path.join is most of
        stat, lstat = os.stat, os.lstat  # the cost of a check that finds nothing changed
        now: list[str] = []
        for rel in dirs.split("\0"):
            st = stat(base + rel if rel else root)
            now.append(f"{st.st_mtime_ns},{st.st_ctime_ns},{st.st_ino}")
        if "|".join(now) != dir_stamps:
            return False
        now = []
        for rel in files.split("\0") if files else ():
            st = lstat(base + rel)
            now.append(f"{st.st_size},{st.st_mtime_ns},{st.st_ctime_ns},{st.st_ino},{st.st_mode}")
        return bool("|".join(now) == file_stats)
    except (OSError, ValueError, TypeError, AttributeError):
        return False


def _where(memory_dir: Pathish) -> str:
    where = os.fspath(memory_dir)
    if not where.startswith(os.sep) or where.endswith(os.sep) or "/." in where or "//" in where:
        where = os.path.abspath(where)
    return where


def _entry(c: _Cache, where: str, cfg: str) -> dict[str, Any] | None:
    entry = c.folders.get(where)
    if not isinstance(entry, dict) or entry.get("cfg") != cfg or not isinstance(entry.get("result"), dict):
        return None
    return entry


def _quick_result(entry: dict[str, Any] | None, memory_dir: Pathish) -> dict[str, Any] | None:
    if entry is not None and entry.get("quick") and _unchanged(memory_dir, entry["quick"]):
        result: dict[str, Any] = entry["result"]
        return result
    return None


def quick_hit(state_dir: Pathish, memory_dir: Pathish, budget: BudgetConfig, team_pii: bool) -> dict[str, Any] | None:
    """The cached result when the quick check alone says the folder is unchanged (see the module doc),
    else None: then ``lookup`` decides."""
    return _quick_result(_entry(_cache(state_dir), _where(memory_dir), _cfg(budget, team_pii)), memory_dir)


def _digest(fp: tuple[object, ...]) -> str:
    """The fingerprint as a 128-bit BLAKE2 digest (its repr is a third of the cache file, read whole by every
    repeated `check --all`). ``_blake2`` is the interpreter's own module: no OpenSSL to load."""
    data = repr(fp).encode("utf-8", "surrogateescape")
    try:
        from _blake2 import blake2b
    except ImportError:  # an interpreter built without it
        from hashlib import blake2b
    return blake2b(data, digest_size=16).hexdigest()


def lookup(state_dir: Pathish, memory_dir: Pathish, budget: BudgetConfig,
           team_pii: bool) -> tuple[Key | None, dict[str, Any] | None]:
    """(key, cached result) — the key is None when the folder cannot be fingerprinted, and when the
    quick check answered (nothing is stored on a hit)."""
    cfg = _cfg(budget, team_pii)
    c = _cache(state_dir)
    where = _where(memory_dir)
    entry = _entry(c, where, cfg)
    hit = _quick_result(entry, memory_dir)
    if hit is not None:
        return None, hit
    from memd.memfolder.folder import fingerprint_walk  # not on a quick hit

    fp, w = fingerprint_walk(memory_dir, stamps=True)
    if fp is None:
        return None, None
    full = _digest(fp)
    key = (cfg, full, _quick(fp, w.stamps or []), w)
    if entry is None or entry.get("fp") != full:
        return key, None
    if key[2] != entry.get("quick"):
        # the same files, but a folder changed (a file of another kind came or went): new stamps, so
        # the next run's quick check can answer again
        fresh = {**entry, "quick": key[2]}
        c.folders[where] = c.changed[where] = fresh
        if not c.depth:
            _write(c)
    return key, entry["result"]


def walk_of(key: Key | None) -> Walk | None:
    """The walk a key's fingerprint was made from: the folder's listing for the check that follows."""
    return key[3] if key is not None else None


def store(state_dir: Pathish, memory_dir: Pathish, key: Key | None, result: dict[str, Any],
          newest_mtime: float | None) -> None:
    """Remember result under key (quietly does nothing when it cannot); written now, or at the end of
    the open ``batch()``."""
    if key is None or (newest_mtime is not None and newest_mtime > time.time() - RACY_SECONDS):
        return
    cfg, full, quick, _ = key
    c = _cache(state_dir)
    entry = {"cfg": cfg, "fp": full, "quick": quick, "result": result}
    where = _where(memory_dir)
    c.folders[where] = c.changed[where] = entry
    if not c.depth:
        _write(c)


def take_changed(state_dir: Pathish) -> dict[str, Any]:
    """The entries stored or renewed since the last call, taken out of the pending write (a forked
    worker of `check --all` sends them to its parent, which writes them with its own)."""
    c = _cache(state_dir)
    changed, c.changed = c.changed, {}
    return changed


def add_changed(state_dir: Pathish, entries: dict[str, Any]) -> None:
    """Entries a worker stored, kept as if stored here (written at the end of the open ``batch()``)."""
    c = _cache(state_dir)
    c.folders.update(entries)
    c.changed.update(entries)
    if not c.depth and c.changed:
        _write(c)


def result_of(state_dir: Pathish, memory_dir: Pathish) -> dict[str, Any] | None:
    """The cached result of a folder as this process holds it (no check of its files: the caller
    knows it is current)."""
    entry = _cache(state_dir).folders.get(_where(memory_dir))
    result = entry.get("result") if isinstance(entry, dict) else None
    return result if isinstance(result, dict) else None


class batch:  # a context manager: ``with checkcache.batch(state_dir):``
    """Write the results of many checks once, when the block ends (also on an error: what was
    checked stays checked)."""

    def __init__(self, state_dir: Pathish) -> None:
        self.cache = _cache(state_dir)

    def __enter__(self) -> None:
        self.cache.depth += 1

    def __exit__(self, *exc: object) -> None:
        c = self.cache
        c.depth -= 1
        if not c.depth and c.changed:
            _write(c, prune=True)


def _write(c: _Cache, *, prune: bool = False) -> None:
    folders = _read(c.path)  # with what another process wrote since this one read it
    folders.update(c.changed)
    if prune:  # the end of a batch (check --all) drops the folders that are gone
        for folder in [f for f in folders if f not in c.changed and not os.path.isdir(f)]:
            folders.pop(folder)
    c.changed = {}
    c.folders = folders
    folder = os.path.dirname(c.path)
    tmp = os.path.join(folder, f".{os.path.basename(c.path)}.{os.getpid()}.tmp")
    try:
        os.makedirs(os.path.dirname(folder), mode=0o700, exist_ok=True)
        if not os.path.isdir(folder):
            os.mkdir(folder, mode=0o700)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        import json  # only to write: a cached check reads (jsonfast) and never writes

        # json.dumps, not json.dump: dump streams through the pure-Python encoder, several times slower
        data = json.dumps({"code": _code_key(), "folders": folders}, ensure_ascii=False, separators=(",", ":"))
        # a folder name that is not valid UTF-8 (lone surrogates in Python) is written as its own
        # bytes: strict UTF-8 failed the write, and with it `memd status` for every project
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(data)
        os.replace(tmp, c.path)  # no fsync: a lost cache entry only means checking again
    except (OSError, ValueError):  # never fails a check: the cache is only a shortcut
        try:
            os.unlink(tmp)
        except OSError:
            pass
