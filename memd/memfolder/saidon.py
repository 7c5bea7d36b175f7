"""When the words of a memory file were said, where memd knows it: the days of the sessions a catch-up
wrote the file from (issue 34).

A relative date ("yesterday") in a file a catch-up wrote means a day of the session it was said in, not
the day the file was written: a catch-up may read a session days later (a first run reads a month of
transcripts). `memd check`'s MEM040 hint proposed the file's date; with this record it proposes the
session's. The record lives in memd's state folder (``said-on.json``: per project, per file, the file's
size and mtime as the catch-up left it and the sessions' days); it holds for a file only while that
file is as the catch-up left it (any later write, Claude Code's or the user's, changes its mtime).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FILENAME = "said-on.json"
MAX_FILES = 2000  # per project: the newest entries are kept


def _load(state_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((state_dir / FILENAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def record(state_dir: Path, project: str, memory_dir: Path, rels: Iterable[str], days: Iterable[str]) -> None:
    """The files ``rels`` were just written by a catch-up from sessions of ``days`` (local dates)."""
    from memd.store import atomic_write

    days = sorted(set(days))
    rels = list(rels)
    if not days or not rels:
        return
    data = _load(state_dir)
    entry = data.get(project)
    entry = dict(entry) if isinstance(entry, dict) else {}
    for rel in rels:
        try:
            st = (memory_dir / rel).stat()
        except OSError:
            entry.pop(rel, None)
            continue
        entry.pop(rel, None)  # re-added last: the newest are kept
        entry[rel] = {"size": st.st_size, "mtime": st.st_mtime, "days": days}
    data[project] = dict(list(entry.items())[-MAX_FILES:])
    state_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(state_dir / FILENAME, json.dumps(data, ensure_ascii=False, sort_keys=True), mode=0o600)


def days_for(state_dir: Path, project: str, files: Iterable[Any]) -> dict[str, tuple[str, ...]]:
    """The sessions' days of each of ``files`` (``FileRecord``s) still as the catch-up left it."""
    if not os.path.exists(state_dir / FILENAME):  # the common case: one stat
        return {}
    entry = _load(state_dir).get(project)
    if not isinstance(entry, dict):
        return {}
    out: dict[str, tuple[str, ...]] = {}
    for rec in files:
        e = entry.get(rec.rel)
        if (isinstance(e, dict) and e.get("size") == rec.size and e.get("mtime") == rec.mtime
                and isinstance(e.get("days"), list)):
            out[rec.rel] = tuple(str(d) for d in e["days"])
    return out
