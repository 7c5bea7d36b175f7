"""Snapshots: a copy of a memory folder taken before memd rewrites anything in it.

``snapshot()`` copies everything readable (team/ included: it is a backup) into
``<state_dir>/snapshots/<project>/<UTC stamp>-<reason>/``. Symlinks are kept as symlinks (never
followed), memd's own temp files are skipped. Issue 5 re-implements this on git-compatible history
behind the same signature.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

from memd.errors import MemdError
from memd.store import ensure_private_dir, is_memd_temp

MAX_COPY_BYTES = 64 * 1024 * 1024  # a "memory" file larger than this is not memory; not copied


def _stamp() -> str:
    t = time.time()
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"


def snapshot(state_dir: Path, project: str, memory_dir: Path, reason: str) -> str:
    """Copy memory_dir into a new snapshot folder and return that folder's path."""
    safe_reason = re.sub(r"[^A-Za-z0-9_.-]+", "-", reason).strip("-") or "snapshot"
    base = ensure_private_dir(state_dir / "snapshots" / project)
    dest = base / f"{_stamp()}-{safe_reason}"
    n = 1
    while dest.exists():
        n += 1
        dest = base / f"{_stamp()}-{safe_reason}-{n}"
    ensure_private_dir(dest)
    skipped: list[str] = []
    try:
        _copy_tree(memory_dir, dest, skipped)
    except OSError as e:
        raise MemdError(f"snapshot failed: {e.strerror}", path=str(dest)) from None
    if skipped:
        (dest.parent / f"{dest.name}.skipped").write_text("\n".join(skipped) + "\n", encoding="utf-8")
    # Issue 5: the same moment also goes into the project's git-compatible history
    # (memd.history; `memd history --all-commits`, `git --git-dir=<state>/history/<project> log`).
    # The folder copy stays until callers move to commit ids (tests/test_rebuild.py reads it).
    from memd import history

    try:
        history.snapshot(state_dir, project, memory_dir, f"before {reason}", kind="snapshot", job=reason)
    except (MemdError, OSError, ValueError):
        pass  # the copy above is the snapshot of record; history is the extra
    return str(dest)


def _copy_tree(src: Path, dest: Path, skipped: list[str], depth: int = 0) -> None:
    try:
        entries = sorted(os.scandir(src), key=lambda e: e.name)
    except OSError:
        skipped.append(f"{src}: folder unreadable")
        return
    for e in entries:
        if is_memd_temp(e.name):
            continue
        target = dest / e.name
        try:
            if e.is_symlink():
                os.symlink(os.readlink(e.path), target)
            elif e.is_dir(follow_symlinks=False):
                if depth < 16:
                    target.mkdir(mode=0o700)
                    _copy_tree(Path(e.path), target, skipped, depth + 1)
            elif e.is_file(follow_symlinks=False):
                if e.stat(follow_symlinks=False).st_size > MAX_COPY_BYTES:
                    skipped.append(f"{e.path}: larger than {MAX_COPY_BYTES} bytes")
                    continue
                shutil.copy2(e.path, target, follow_symlinks=False)
        except OSError as err:
            skipped.append(f"{e.path}: {err.strerror}")
