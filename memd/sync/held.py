"""What sync holds back, per project, and why (the I/O edge; issue 21: nothing stops without a word).

One refused change never stops a whole project: a file of the remote the guards refuse (a secret, no
frontmatter, too much deleted, the user's index words dropped) is **held** and the rest flows both ways.
A held file keeps this machine's version here and the remote's version on the remote (a push carries
the remote's version of it unchanged, the index too), so nothing is lost on either side, until the user
resolves it:
``memd sync --keep-local PROJECT`` sends this machine's version, or the remote's version changes (the
hold is then judged anew). A whole project can be held too: a push the outgoing guard stops, a remote
that was rewritten or is not memd's.

Finding 6, "undo is local": the files ``memd undo`` changed in a project that sync shares are **kept
here** (``undone``): a sync neither sends them (a push carries the remote's version of each) nor takes
the remote's version into them (the remote never silently puts back what the undo reverted), until the
user says which side wins: ``memd sync --keep-local PROJECT`` sends this machine's version (the outgoing
guard still judges it), ``memd sync --take-remote PROJECT`` takes the remote's version back. A file whose
version here is the remote's again (an undo undone, the same change made on the remote) is released by
itself.

``memd status`` shows one ``sync`` line per project with what is held, why, and the command that
resolves it; ``memd sync --list`` counts them. An index over its budget is never held (issue 33: a sync
never shortens it nor refuses a merge for its size); ``budget_lines`` says so in ``memd status``, with
how to condense it.

The record is ``state_dir/sync/held.json``: per project, ``files`` (path -> reason, the held remote
version's hash, since when), ``project`` (a reason and its command, or absent) and ``undone`` (path ->
the undone run, since when, each undo's two history commits, the version shared when it was made).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memd.config import Config

ABSENT = "absent"


def version(data: bytes | None) -> str:
    """A remote version's mark: its hash, or ``ABSENT`` (the remote deleted the file)."""
    return ABSENT if data is None else hashlib.sha256(data).hexdigest()[:32]


@dataclass
class Held:
    files: dict[str, dict[str, Any]] = field(default_factory=dict)  # rel -> {reason, remote, since}
    project: dict[str, str] = field(default_factory=dict)  # {reason, command} when the whole project is held
    undone: dict[str, dict[str, Any]] = field(default_factory=dict)  # rel -> {run, since}: kept here by an undo

    @property
    def empty(self) -> bool:
        return not self.files and not self.project and not self.undone


def _path(state_dir: Path) -> Path:
    return state_dir / "sync" / "held.json"


def _load_all(state_dir: Path) -> dict[str, Any]:
    from memd.store import read_json_dict

    return read_json_dict(_path(state_dir))


def load(state_dir: Path, project: str) -> Held:
    row = _load_all(state_dir).get(project)
    if not isinstance(row, dict):
        return Held()
    files = row.get("files") if isinstance(row.get("files"), dict) else {}
    proj = row.get("project") if isinstance(row.get("project"), dict) else {}
    undone = row.get("undone") if isinstance(row.get("undone"), dict) else {}
    return Held(dict(files or {}), dict(proj or {}), dict(undone or {}))


def load_all(state_dir: Path) -> dict[str, Held]:
    return {name: load(state_dir, name) for name in sorted(_load_all(state_dir))}


def save(state_dir: Path, project: str, held: Held) -> None:
    """Write one project's row. The file holds every project's, and a sync of one project and an undo of
    another (each under its own project's lock) may write it at once: the read-modify-write is done
    under a lock of the file's own, so neither loses the other's row."""
    import fcntl

    from memd.store import ensure_private_dir

    ensure_private_dir(_path(state_dir).parent)
    fd = os.open(_path(state_dir).with_name("held.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _save_locked(state_dir, project, held)
    finally:
        os.close(fd)


def _save_locked(state_dir: Path, project: str, held: Held) -> None:
    from memd.store import atomic_write

    data = _load_all(state_dir)
    if held.empty:
        if project not in data:
            return
        data.pop(project)
    else:
        data[project] = {"files": held.files, "project": held.project}
        if held.undone:
            data[project]["undone"] = held.undone
    atomic_write(_path(state_dir), json.dumps(data, indent=1, sort_keys=True) + "\n", mode=0o600)


WRITER = "writer"  # a project hold's kind: another memory folder of this machine syncs the identity


def hold_project(state_dir: Path, project: str, reason: str, command: str, *, kind: str = "") -> None:
    h = load(state_dir, project)
    new = {"reason": reason, "command": command, **({"kind": kind} if kind else {})}
    if h.project != new:
        h.project = new
        save(state_dir, project, h)


def release_project(state_dir: Path, project: str, *, kind: str | None = None) -> None:
    """Forget the project's hold (only one of ``kind`` when given)."""
    h = load(state_dir, project)
    if h.project and (kind is None or h.project.get("kind") == kind):
        h.project = {}
        save(state_dir, project, h)


def release_writers(state_dir: Path, projects: list[str]) -> None:
    """Forget the second-writer holds of ``projects`` (no longer second: resolved, excluded)."""
    data = _load_all(state_dir)
    gone = [n for n in projects if isinstance(data.get(n), dict) and isinstance(data[n].get("project"), dict)
            and data[n]["project"].get("kind") == WRITER]
    for n in gone:
        h = load(state_dir, n)
        h.project = {}
        save(state_dir, n, h)


def forget(state_dir: Path, project: str) -> bool:
    """Forget what sync held (``memd sync --forget``); the files an undo keeps here stay kept (forgetting
    them would send the undo, or take back what it reverted, without the user saying which)."""
    h = load(state_dir, project)
    save(state_dir, project, Held(undone=h.undone))
    return bool(h.files or h.project)


def keep_undone(state_dir: Path, project: str, files: list[str], run: str, now: float, *, before: str,
                after: str) -> None:
    """Files ``memd undo`` changed in a synced project: kept here until the user says which side wins.
    ``before`` and ``after`` are the undo's history commits (the folder it reverted, what it wrote); a
    file undone again lists each undo in turn (``undos``): ``--take-remote`` takes them back out, newest
    first."""
    if not files:
        return
    h = load(state_dir, project)
    for rel in files:
        row = h.undone.setdefault(rel, {"run": run, "since": now, "undos": []})
        row["undos"] = [*row.get("undos", []), {"run": run, "before": before, "after": after}]
    save(state_dir, project, h)


def undone_line(project: str, rels: list[str] | dict[str, Any]) -> str:
    """The words for files an undo keeps here (``memd status``, ``memd undo``, the sync's outcome)."""
    names = sorted(rels)
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return (f"{len(names)} file(s) undone here kept local, neither sent nor taken from the remote ({shown}); "
            f"resolve: `memd sync --keep-local {shlex.quote(project)}` sends this machine's version, "
            f"`memd sync --take-remote {shlex.quote(project)}` takes the remote's back")


def summary(h: Held) -> str:
    """A short count for ``memd sync --list``."""
    bits = []
    if h.files:
        bits.append(f"{len(h.files)} file(s)")
    if h.project:
        bits.append("project")
    if h.undone:
        bits.append(f"{len(h.undone)} undone")
    return ", ".join(bits) or "-"


def status_lines(state_dir: Path, projects: list[str] | None = None) -> str:
    """``memd status``'s lines: one per project that sync holds something of ("" when none)."""
    out = []
    for name, h in load_all(state_dir).items():
        if h.empty or (projects is not None and name not in projects):
            continue
        if h.project:
            out.append(f"sync: {name}: {h.project.get('reason', 'held')}; resolve: {h.project.get('command', '')}")
        if h.files:
            shown = "; ".join(f"{rel}: {row.get('reason', 'refused')}" for rel, row in sorted(h.files.items())[:3])
            more = f" and {len(h.files) - 3} more" if len(h.files) > 3 else ""
            out.append(f"sync: {name}: {len(h.files)} file(s) from the remote held here ({shown}{more}); the rest "
                       f"flows both ways; resolve: `memd sync --keep-local {shlex.quote(name)}` sends this machine's "
                       f"version, or fix it on the machine that wrote it")
        if h.undone:
            out.append(f"sync: {name}: {undone_line(name, h.undone)}")
    return "".join(line + "\n" for line in out)


def budget_lines(state_dir: Path, indexes: Mapping[str, Path], config: Config) -> str:
    """``memd status``'s line for each synced project (``indexes``: name -> memory folder) whose MEMORY.md
    is over its budget (issue 33 finding 2). A sync never shortens an index nor refuses a merge for its
    size: two machines' edits whose union passes the budget are merged, every line kept, and the index
    stays over until it is condensed; the line says so, and how ("" when none is over)."""
    from memd.core.index import measure
    from memd.sync.gitremote import seen

    synced = seen(state_dir)
    b = config.budget
    out = []
    for name, folder in sorted(indexes.items()):
        if name not in synced:
            continue
        try:
            text = (folder / "MEMORY.md").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        m = measure(text, b.max_lines, b.max_chars, b.warn_ratio)
        if m.level != "over":
            continue
        out.append(f"sync: {name}: MEMORY.md is over its budget ({m.lines}/{b.max_lines} lines, "
                   f"{m.chars:,}/{b.max_chars:,} characters): sync keeps every line the machines sharing it "
                   f"wrote and never shortens it, so nothing is held, but sessions load only what fits; "
                   f"resolve: condense it (`memd dream {shlex.quote(name)}`, or by hand on any machine), the "
                   "next sync carries it to the others")
    return "".join(line + "\n" for line in out)
