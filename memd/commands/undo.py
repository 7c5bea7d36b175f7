"""`memd undo [PROJECT] [RUN]`: revert one run (default: the newest) in a project's memory folder."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memd.cli import Context
    from memd.history import UndoResult
    from memd.layout import Project

HELP = ("revert a run memd applied (default: the newest): files it changed or deleted come back, files "
        "it added go; files changed since are left alone. The folder is snapshotted first. With sync on, "
        "the undo stays on this machine until `memd sync --keep-local` or `--take-remote`. --file FILE brings "
        "back one memory the run forgot or changed, with its index entry, and leaves the rest of the run.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from memd.cli import project_args

    project_args(p, many=False)
    p.add_argument("run", nargs="?", metavar="RUN", help="run id or commit prefix from `memd history`")
    p.add_argument("--file", metavar="FILE", help="only this memory (a file the run changed, deleted or merged "
                   "away, e.g. project_freeze.md): it comes back with its index entry; the rest of the run stays")
    p.add_argument("--dry-run", action="store_true", help="show what would be restored; change nothing")


def run(args: argparse.Namespace, ctx: Context) -> int:
    from memd.commands._projects import select

    (project,) = select(args, ctx)
    only = args.file.removeprefix("./").removeprefix("/memories/") if args.file else None
    _, lines = undo(ctx, project, args.run, dry_run=args.dry_run, only=only)
    for line in lines:
        print(line)
    return 0


def undo(ctx: Context, project: Project, run: str | None, *, dry_run: bool,
         only: str | None = None) -> tuple[UndoResult, list[str]]:
    """The undo and the lines `memd undo` prints for it (`memd ui`'s confirmed undo runs this too): the
    result of ``undo_project`` (under the project's lock), put in the run log when it changed a file."""
    import time

    from memd.commands._projects import record_manual_run
    from memd.maintenance import undo_project

    started = time.time()
    res, rb = undo_project(project, ctx.config, ctx.state_dir, run, dry_run=dry_run, only=only)
    if not dry_run and (res.restored or res.removed):
        record_manual_run(ctx, "undo", project, started, "changed", changed=len(res.restored),
                          deleted=len(res.removed), summary=f"undo {res.run}" + (f" --file {only}" if only else ""),
                          error="; ".join(f"{rel}: {why}" for rel, why in res.skipped) or None,
                          history_run=f"undo-{res.run}" if res.undo_commit else "")
    out: list[str] = []
    verb = "would restore" if dry_run else "restored"
    out += [f"{verb} {rel}" for rel in res.restored]
    out += [f"{'would remove' if dry_run else 'removed'} {rel} (added by the run)" for rel in res.removed]
    out += [f"left {rel}: {why}" for rel, why in res.skipped]
    if not (res.restored or res.removed):
        out.append(f"run {res.run}: nothing to revert")
    elif not dry_run:
        what = f"{only} of {res.run} (the rest of the run stays)" if only else res.run
        out.append(f"undid {what} (snapshot before the undo: {res.snapshot[:10]})")
        if rb is not None:
            out.append("MEMORY.md rebuilt to match the files" if rb.written else
                       "MEMORY.md left as it is" + (f" ({'; '.join(rb.reasons)})" if rb.reasons else ""))
        if res.kept_local:  # issue 21: undo is local; sync neither sends it nor takes it back unasked
            from memd.sync.held import undone_line

            out.append(f"sync: {undone_line(project.name, res.kept_local)}")
    return res, out
