"""Conflicts a sync kept for the next dream, and for ``memd status`` (the I/O edge).

A true conflict keeps the local file; the other machine's version is stored here, in memd's state
folder (``state_dir/sync/conflicts/<project>.json``, never in a memory folder), with the base both
started from. Each conflict is recorded once per memory folder: the same file with the same two versions
is never recorded twice, whichever sync meets it again. Another machine that held the same text and met
the same other version records it too (the same id, in its own state): each machine is told of a
disagreement it holds in its own file.

The dream's hand-off (issue 15), two calls:
- ``for_dream(state_dir, project) -> (text, ids)``: the open conflicts as a block of evidence for the
  dream's prompt ("two machines disagree about ...", both versions, bounded), and their ids;
- ``settle(state_dir, project, ids)``: after a dream was applied, those conflicts are handed over.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from memd.core import secrets
from memd.store import atomic_write, ensure_private_dir

MAX_KEPT = 200  # conflicts kept per project (the oldest settled ones go first)
MAX_EVIDENCE_CHARS = 24_000  # the dream's block of evidence, both versions of every open conflict
_SIDE_CHARS = 4_000  # each version in that block


@dataclass(frozen=True)
class Conflict:
    id: str
    project: str
    file: str
    local: str  # the version kept in the folder
    remote: str  # the other machine's version (not applied)
    base: str | None  # what both started from (None: both added the file)
    machine: str  # the other machine
    remote_commit: str
    at: float
    settled: bool = False


def conflict_id(file: str, local: bytes, remote: bytes) -> str:
    h = hashlib.sha256()
    for part in (file.encode(), b"\0", local, b"\0", remote):
        h.update(part)
    return h.hexdigest()[:16]


def _path(state_dir: Path, project: str) -> Path:
    return state_dir / "sync" / "conflicts" / f"{project}.json"


def load(state_dir: Path, project: str) -> list[Conflict]:
    try:
        raw = json.loads(_path(state_dir, project).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    out: list[Conflict] = []
    for row in raw if isinstance(raw, list) else []:
        try:
            out.append(Conflict(**row))
        except TypeError:
            continue
    return out


def _save(state_dir: Path, project: str, rows: list[Conflict]) -> None:
    ensure_private_dir(state_dir / "sync" / "conflicts")
    if len(rows) > MAX_KEPT:
        settled = [r for r in rows if r.settled]
        drop = {r.id for r in settled[:len(rows) - MAX_KEPT]}
        rows = [r for r in rows if r.id not in drop]
    atomic_write(_path(state_dir, project), json.dumps([asdict(r) for r in rows], indent=1) + "\n", mode=0o600)


def record(state_dir: Path, project: str, new: list[Conflict]) -> list[Conflict]:
    """Keep the conflicts not recorded before; returns those (each surfaces exactly once)."""
    rows = load(state_dir, project)
    known = {r.id for r in rows}
    fresh: list[Conflict] = []
    for c in new:
        if c.id not in known:
            known.add(c.id)
            fresh.append(c)
    if fresh:
        _save(state_dir, project, rows + fresh)
    return fresh


def scrub(state_dir: Path, project: str, clean: Callable[[str], tuple[str, int]], *, apply: bool) -> int:
    """The recorded conflicts whose versions hold what ``clean`` takes out (``memd forget``): counted, and
    with ``apply`` rewritten in place (both versions and the base; the id stays, so a conflict is still
    recorded once). Returns how many records held it."""
    import dataclasses

    rows = load(state_dir, project)
    out: list[Conflict] = []
    n = 0
    for r in rows:
        local, a = clean(r.local)
        remote, b = clean(r.remote)
        base, c = clean(r.base) if r.base is not None else (None, 0)
        if a or b or c:
            n += 1
            r = dataclasses.replace(r, local=local, remote=remote, base=base)
        out.append(r)
    if n and apply:
        _save(state_dir, project, out)
    return n


def open_conflicts(state_dir: Path, project: str) -> list[Conflict]:
    return [c for c in load(state_dir, project) if not c.settled]


def for_dream(state_dir: Path, project: str) -> tuple[str, list[str]]:
    """The open conflicts as evidence for the dream's prompt, and their ids ("" and [] when none).
    Both versions are redacted (a secret never reaches the model through this block)."""
    rows = open_conflicts(state_dir, project)
    if not rows:
        return "", []
    parts = ["Two of the user's machines disagree about these memory files. The version in the folder is "
             "this machine's; the other machine's version was not applied. Reconcile each: keep what is "
             "still true from both, in the file, and drop what one side corrected.\n"]
    ids: list[str] = []
    used = len(parts[0])
    for c in rows:
        block = (f"\n<conflict file={json.dumps(c.file)} other_machine={json.dumps(c.machine)}>\n"
                 f"<this_machine>\n{_cut(c.local)}\n</this_machine>\n"
                 f"<other_machine>\n{_cut(c.remote)}\n</other_machine>\n</conflict>\n")
        if used + len(block) > MAX_EVIDENCE_CHARS and ids:
            break
        parts.append(block)
        ids.append(c.id)
        used += len(block)
    return "".join(parts), ids


def _cut(text: str) -> str:
    text = secrets.redact(text)
    return text if len(text) <= _SIDE_CHARS else text[:_SIDE_CHARS] + "\n... (cut)"


def settle(state_dir: Path, project: str, ids: list[str]) -> int:
    """Mark conflicts as handed to a dream that was applied; returns how many."""
    rows = load(state_dir, project)
    want = set(ids)
    n = sum(1 for r in rows if r.id in want and not r.settled)
    if n:
        _save(state_dir, project, [Conflict(**{**asdict(r), "settled": True}) if r.id in want else r for r in rows])
    return n


def status_line(state_dir: Path, projects: list[str] | None = None) -> str:
    """``memd status``'s sync line: open conflicts by project ("" when there are none)."""
    folder = state_dir / "sync" / "conflicts"
    try:
        names = sorted(p.stem for p in folder.glob("*.json"))
    except OSError:
        return ""
    counts = {n: len(open_conflicts(state_dir, n)) for n in names if projects is None or n in projects}
    open_ = {n: k for n, k in counts.items() if k}
    if not open_:
        return ""
    listed = ", ".join(f"{n} ({k})" for n, k in open_.items())
    return (f"sync: {sum(open_.values())} conflict(s) between machines kept for the next dream: {listed}\n")


def as_json(c: Conflict) -> dict[str, Any]:
    return {"id": c.id, "file": c.file, "machine": c.machine, "at": c.at, "settled": c.settled}
