"""`memd uninstall [--purge] [--dry-run]`: remove memd from this machine in one step.

The service (``memd service uninstall``), then memd's hooks from Claude Code's settings.json (``memd hooks
uninstall``: the file's own bytes come back when nothing else changed), then a list of what is left of
memd: its state folder (the history holds copies of every memory memd ever snapshotted, secrets included if
one ever reached memory), its logs, caches and backups, its config. ``--purge`` removes those two folders
too, after saying what the history holds. Claude Code's own folder and its memory are never touched.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memd.cli import Context

HELP = ("remove memd: the service, the hooks, then (--purge) its state and config, after listing them; "
        "Claude Code's memory is never touched")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--purge", action="store_true",
                   help="also delete memd's state folder (history, logs, caches, backups) and its config folder")
    p.add_argument("--dry-run", action="store_true", help="say what would be removed; remove nothing")


def _size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def _human(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def run(args: argparse.Namespace, ctx: Context) -> int:
    import shutil

    from memd import config as config_mod
    from memd import settings_merge as sm
    from memd.commands import service

    status = 0
    svc = argparse.Namespace(**vars(args))
    svc.action, svc.manager, svc.sandbox = "uninstall", None, "auto"
    print("== the service")
    try:
        status |= service.run(svc, ctx)
    except Exception as e:  # a unit that is not memd's, a folder it cannot write: said, the rest goes on
        print(f"service not removed: {e}")
        status = 1
    print("== the hooks in Claude Code's settings.json")
    path = sm.settings_path(ctx.claude_dir)
    loaded = sm.load(path)
    rows = sm.installed(loaded.data)
    if not rows:
        print(f"no memd hooks in {path}")
    elif args.dry_run:
        print(f"would remove {len(rows)} memd hook(s) from {path}")
    else:
        change = sm.uninstall(path, ctx.state_dir)
        print(f"removed {len(change.before)} memd hook(s) from {change.path}")
    state = ctx.state_dir
    cfg_file = Path(getattr(args, "config", None) or config_mod.default_path())
    cfg_dir = cfg_file.parent
    print("== what is left of memd")
    left = []
    if state.is_dir():
        for entry in sorted(state.iterdir()):
            left.append(entry)
            what = {"history": "copies of your memory, one git history per project (secrets included, if one ever "
                               "reached memory: `memd forget` takes them out)",
                    "backups": "copies of settings.json from before each memd edit",
                    "logs": "logs", "cache": "caches", "reviews": "proposed changes kept for review"}.get(
                        entry.name, "")
            print(f"  {entry}  {_human(_size(entry)) if entry.is_dir() else _human(entry.stat().st_size)}"
                  + (f"  ({what})" if what else ""))
        history = state / "history"
        if history.is_dir():
            projects = [p.name for p in history.iterdir() if p.is_dir()]
            print(f"  the history holds {len(projects)} project(s)")
    if cfg_dir.is_dir() and cfg_dir.name == "memd":
        left.append(cfg_dir)
        print(f"  {cfg_dir}  (memd's config folder)")
    if not left:
        print("  nothing")
        return status
    if not args.purge:
        print("kept; `memd uninstall --purge` deletes them (or delete them by hand)")
        return status
    for p in [state, cfg_dir] if cfg_dir.name == "memd" else [state]:
        if not p.exists():
            continue
        if args.dry_run:
            print(f"would delete {p}")
            continue
        shutil.rmtree(p, ignore_errors=True)
        print(f"deleted {p}")
    return status
