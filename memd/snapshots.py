"""Snapshots: the state of a memory folder taken before memd rewrites anything in it.

A snapshot is a commit in the project's git-compatible history (``memd.history``: a bare repository
at ``<state_dir>/history/<project>/``, outside the memory folder, readable with
``git --git-dir=... log``), holding every ``*.md`` file of the folder, team/ included. Symlinks are
never followed and memd's own temp files are skipped.
"""

from __future__ import annotations

import re
from pathlib import Path


def _job(reason: str) -> str:
    """The reason as a name safe in a history commit's job field."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", reason).strip("-") or "snapshot"


def snapshot(state_dir: Path, project: str, memory_dir: Path, reason: str, *, run: str = "") -> str:
    """Commit memory_dir's current state to the project's history; returns the commit id.

    With ``run``, the commit is the "before" half of that run, so ``memd undo`` can revert it once
    its "after" commit (``record_after``) is written.
    """
    from memd import history

    job = _job(reason)
    return history.snapshot(state_dir, project, memory_dir, f"before {job}" + (f" {run}" if run else ""),
                            kind="before" if run else "snapshot", run=run, job=job)


def record_after(state_dir: Path, project: str, memory_dir: Path, reason: str, run: str, summary: str) -> str:
    """Commit the folder as a run left it (the "after" half): the run then shows in ``memd history``."""
    from memd import history

    job = _job(reason)
    return history.snapshot(state_dir, project, memory_dir, summary, kind="after", run=run, job=job)
