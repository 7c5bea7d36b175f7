"""Benchmark sync's identity decision (issue 21 #1): per memory folder, among every folder of ``projects/``.

Every sync (the daemon's interval, ``memd sync``, ``memd sync --list``) decides each folder's identity.
Before issue 21 #1 that was one folder at a time (its sessions' cwd -> git root -> origin URL); now it is
decided among all folders at once (``memd.sync.identity.identify_all``): which folder's memory each
folder's sessions use (a worktree's, a subfolder's), the main checkout found through them, and one
writer per identity. This measures both in the same run over N folders (80% plain repositories, 10%
linked worktrees of them, 10% monorepo subfolders), a transcript per folder read from its head (no
state: the slowest path), and prints the ratio new / old. In-process: what the daemon pays each
interval (the interpreter's start, the same for both, is left out).

    .venv/bin/python bench/bench_sync_identity.py [--projects 300,1000] [--runs 5] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_check import write_doc  # noqa: E402

from memd import layout  # noqa: E402
from memd.config import Config, SyncConfig  # noqa: E402
from memd.sync.identity import _base, identify_all  # noqa: E402
from memd.transcripts.sessions import project_cwds  # noqa: E402


def _session(claude: Path, cwd: Path) -> None:
    folder = claude / "projects" / layout.sanitize(os.path.realpath(cwd))
    folder.mkdir(parents=True, exist_ok=True)
    rec = {"type": "user", "cwd": os.path.realpath(cwd), "sessionId": str(uuid.uuid4()), "message": {"content": "hi"}}
    (folder / f"{uuid.uuid4()}.jsonl").write_text(json.dumps(rec) + "\n")


def build(base: Path, n: int) -> Path:
    """A Claude folder with n project folders (see the module doc); returns it."""
    claude = base / ".claude"
    mains: list[Path] = []
    for i in range(n):
        kind = i % 10
        if kind < 8 or not mains:
            src = base / "src" / f"repo{i}"
            (src / ".git").mkdir(parents=True)
            (src / ".git" / "config").write_text(f'[remote "origin"]\n\turl = git@github.com:me/repo{i}.git\n')
            mains.append(src)
            _session(claude, src)
            mem = claude / "projects" / layout.sanitize(str(src)) / "memory"
            mem.mkdir(parents=True, exist_ok=True)
            (mem / "MEMORY.md").write_text("- [a](a.md) — a\n")
        elif kind == 8:  # a linked worktree of an earlier repository (git's own layout of the two)
            main = mains[i % len(mains)]
            wt = base / "wt" / f"wt{i}"
            admin = main / ".git" / "worktrees" / f"wt{i}"
            admin.mkdir(parents=True)
            (admin / "commondir").write_text("../..\n")
            wt.mkdir(parents=True)
            (wt / ".git").write_text(f"gitdir: {admin}\n")
            _session(claude, wt)
        else:  # a monorepo subfolder
            sub = mains[i % len(mains)] / "packages" / f"p{i}"
            sub.mkdir(parents=True)
            _session(claude, sub)
    return claude


def _interleaved(a: Callable[[], None], b: Callable[[], None], runs: int) -> tuple[float, float]:
    """Median ms of a and of b, timed in turns (a load that comes and goes weighs on both alike)."""
    ta: list[float] = []
    tb: list[float] = []
    for _ in range(runs):
        for f, out in ((a, ta), (b, tb)):
            t = time.perf_counter()
            f()
            out.append(time.perf_counter() - t)
    return statistics.median(ta) * 1000, statistics.median(tb) * 1000


def measure(n: int, runs: int) -> dict[str, float]:
    cfg = Config(sync=SyncConfig(remote="file:///nowhere"))
    with tempfile.TemporaryDirectory() as d:
        claude = build(Path(d), n)
        projects = layout.list_projects(claude)

        def old() -> None:  # one folder at a time, as identify() was before issue 21 #1
            for p in projects:
                _base(p, cfg, project_cwds(p, None))

        def new() -> None:
            identify_all(projects, cfg, None, everyone=projects)

        idents = identify_all(projects, cfg, None, everyone=projects)
        syncing = sum(1 for i in idents.values() if i.syncs)
        old()  # both with warm caches (the file system's, the imports')
        old_ms, new_ms = _interleaved(old, new, runs)
    return {"folders": len(projects), "syncing": syncing, "old_ms": old_ms, "new_ms": new_ms,
            "ratio": new_ms / old_ms}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--projects", default="300,1000")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    rows = [measure(int(n), args.runs) for n in args.projects.split(",")]
    print(json.dumps(rows, indent=2))
    if args.no_write:
        return 0
    load = os.getloadavg()[0]
    lines = ["## Sync identity", "",
             f"Command: `.venv/bin/python bench/bench_sync_identity.py --projects {args.projects} "
             f"--runs {args.runs}` (median, the two rules timed in turns; in-process, no state: every "
             f"folder's newest transcript read from its head). Run on {time.strftime('%Y-%m-%d')}, Python "
             f"{platform.python_version()}, {os.cpu_count()} cores (shared with other work: load average "
             f"{load:.0f}). The identity of every folder under `projects/`, decided per memory folder among "
             "all of them (issue 21 #1: worktrees, subfolders, one writer per identity) against the old "
             "rule (each folder alone), measured in the same run; 80% plain repositories, 10% linked "
             "worktrees, 10% monorepo subfolders.", "",
             "| folders | synced (memory folders) | old rule | per memory folder | ratio |",
             "| --- | --- | --- | --- | --- |"]
    lines += [f"| {r['folders']:,.0f} | {r['syncing']:,.0f} | {r['old_ms']:.0f} ms | {r['new_ms']:.0f} ms | "
              f"{r['ratio']:.2f}x |" for r in rows]
    write_doc("\n".join(lines) + "\n", head="## Sync identity")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
