"""A cache of `memd check` results, like ruff's: a folder whose files have not changed is not read again.

One JSON file for every memory folder, ``<state_dir>/cache/check.json`` (read once per process,
written once per `check --all`), each entry keyed on the folder's
``fingerprint`` (every file's size, times and inode), the budget, and the code of the checks
themselves (the modules' sizes and times), so a changed file, config or memd means a fresh check.
Entries written within two seconds of a file's modification are not trusted (a coarse clock could
hide a second write), and any problem with the cache just means checking again: it never fails a check.
"""

from __future__ import annotations

import json
import os
import time

from memd import __version__
from memd.config import BudgetConfig, astuple

TYPE_CHECKING = False  # os.path only, no pathlib or typing: a cached `memd check` answers through here
if TYPE_CHECKING:
    from typing import Any

    Pathish = str | os.PathLike[str]

_MODULES = ("core/lint.py", "core/links.py", "core/dates.py", "core/fastscan.py", "core/secrets.py",
            "core/secret_rules.py", "core/secret_views.py", "core/budget.py", "core/signature.py", "core/rebuild.py",
            "core/frontmatter.py", "core/index.py", "core/files.py", "core/findings.py", "core/paths.py",
            "memfolder/folder.py", "memfolder/walk.py", "memfolder/read.py", "store.py", "checkcache.py",
            "inspect.py", "config.py", "record.py")
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
            data = json.loads(f.read())
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


def _key(fp: tuple[object, ...], budget: BudgetConfig, team_pii: bool) -> str:
    # The key is the whole description, not a digest of it: no hashing to import, no collisions.
    return repr((fp, astuple(budget), team_pii))


def lookup(state_dir: Pathish, memory_dir: Pathish, budget: BudgetConfig,
           team_pii: bool) -> tuple[str | None, dict[str, Any] | None]:
    """(key, cached result) — the key is None when the folder cannot be fingerprinted."""
    from memd.memfolder.folder import fingerprint

    fp = fingerprint(memory_dir)
    if fp is None:
        return None, None
    key = _key(fp, budget, team_pii)
    entry = _cache(state_dir).folders.get(os.path.abspath(memory_dir))
    if not isinstance(entry, dict) or entry.get("key") != key or not isinstance(entry.get("result"), dict):
        return key, None
    return key, entry["result"]


def store(state_dir: Pathish, memory_dir: Pathish, key: str | None, result: dict[str, Any],
          newest_mtime: float | None) -> None:
    """Remember result under key (quietly does nothing when it cannot); written now, or at the end of
    the open ``batch()``."""
    if key is None or (newest_mtime is not None and newest_mtime > time.time() - RACY_SECONDS):
        return
    c = _cache(state_dir)
    entry = {"key": key, "result": result}
    c.folders[os.path.abspath(memory_dir)] = entry
    c.changed[os.path.abspath(memory_dir)] = entry
    if not c.depth:
        _write(c)


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
        # json.dumps, not json.dump: dump streams through the pure-Python encoder, several times slower
        data = json.dumps({"code": _code_key(), "folders": folders}, ensure_ascii=False, separators=(",", ":"))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(data)
        os.replace(tmp, c.path)  # no fsync: a lost cache entry only means checking again
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
