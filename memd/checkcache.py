"""A cache of `memd check` results, like ruff's: a folder whose files have not changed is not read again.

One small JSON file per memory folder under ``<state_dir>/cache/check/``, keyed on the folder's
``fingerprint`` (every file's size, times and inode), the budget, and the code of the checks
themselves (the modules' sizes and times), so a changed file, config or memd means a fresh check.
Entries written within two seconds of a file's modification are not trusted (a coarse clock could
hide a second write), and any problem with the cache just means checking again: it never fails a check.
"""

from __future__ import annotations

import json
import os
import re
import time

from memd import __version__
from memd.config import BudgetConfig, astuple

TYPE_CHECKING = False  # os.path only, no pathlib or typing: a cached `memd check` answers through here
if TYPE_CHECKING:
    from typing import Any

    Pathish = str | os.PathLike[str]

_MODULES = ("core/lint.py", "core/links.py", "core/dates.py", "core/fastscan.py", "core/secrets.py",
            "core/secret_rules.py", "core/budget.py", "core/signature.py", "core/rebuild.py",
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


def _path(state_dir: Pathish, memory_dir: Pathish) -> str:
    # A readable name; two folders whose names collide here only evict each other (the key inside
    # holds the full path), they never share a result.
    name = re.sub(r"[^A-Za-z0-9]", "-", os.path.abspath(memory_dir))[-150:]
    return os.path.join(state_dir, "cache", "check", f"{name}.json")


def _key(memory_dir: Pathish, fp: tuple[object, ...], budget: BudgetConfig, team_pii: bool) -> str:
    # The key is the whole description, not a digest of it: no hashing to import, no collisions.
    return repr((_code_key(), os.path.abspath(memory_dir), fp, astuple(budget), team_pii))


def lookup(state_dir: Pathish, memory_dir: Pathish, budget: BudgetConfig,
           team_pii: bool) -> tuple[str | None, dict[str, Any] | None]:
    """(key, cached result) — the key is None when the folder cannot be fingerprinted."""
    from memd.memfolder.folder import fingerprint

    fp = fingerprint(memory_dir)
    if fp is None:
        return None, None
    key = _key(memory_dir, fp, budget, team_pii)
    try:
        with open(_path(state_dir, memory_dir), "rb") as f:
            data = json.loads(f.read())
    except (OSError, ValueError):
        return key, None
    if not isinstance(data, dict) or data.get("key") != key or not isinstance(data.get("result"), dict):
        return key, None
    return key, data["result"]


def store(state_dir: Pathish, memory_dir: Pathish, key: str | None, result: dict[str, Any],
          newest_mtime: float | None) -> None:
    """Remember result under key (quietly does nothing when it cannot)."""
    if key is None or (newest_mtime is not None and newest_mtime > time.time() - RACY_SECONDS):
        return
    path = _path(state_dir, memory_dir)
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    try:
        os.makedirs(state_dir, mode=0o700, exist_ok=True)
        for d in (os.path.join(state_dir, "cache"), folder):
            if not os.path.isdir(d):
                os.mkdir(d, mode=0o700)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"key": key, "result": result}, f, ensure_ascii=False)
        os.replace(tmp, path)  # no fsync: a lost cache entry only means checking again
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
