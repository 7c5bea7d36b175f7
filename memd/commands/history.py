"""`memd history [PROJECT]`: the runs memd applied to a project's memory, newest first."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memd.cli import Context

HELP = "list the runs applied to a project's memory (snapshots kept outside the memory folder)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from memd.cli import project_args

    project_args(p, many=False)
    p.add_argument("--all-commits", action="store_true", help="every snapshot, not only runs")
    p.add_argument("-n", "--limit", type=int, default=30, metavar="N", help="show at most N (default 30)")


def run(args: argparse.Namespace, ctx: Context) -> int:
    import time

    from memd import history
    from memd.commands._projects import select
    from memd.core.declared import forgotten_in

    (project,) = select(args, ctx)
    repo = history.repo_dir(ctx.state_dir, project.name)
    print(f"# {project.name} (git --git-dir={repo} log)")
    limit = max(1, args.limit)
    entries = history.log(ctx.state_dir, project.name, limit=limit if args.all_commits else limit * 4 + 10)
    damaged = next((e for e in entries if e.kind == history.DAMAGED), None)
    if args.all_commits:
        rows: list[tuple[str, float, str, list[str]]] = [
            (f"{e.commit[:10]}  ", e.time, f"{e.kind or '-':8} {e.summary}", []) for e in entries
            if e.kind != history.DAMAGED]
    else:
        rows = [(f"{r.run:36} ", r.time, r.summary, forgotten_in(r.message))
                for r in history.list_runs(ctx.state_dir, project.name, limit=limit)]
    for head, when, text, forgot in rows:
        print(f"{head}{time.strftime('%Y-%m-%d %H:%M', time.localtime(when))}  {text}")
        for line in forgot:  # what the run forgot, and why (one comes back: memd undo PROJECT RUN --file FILE)
            print(f"{'':39}- {line}")
    if not rows:
        print("no snapshots yet" if args.all_commits else "no runs yet")
    if damaged is not None:
        print(f"older history unreadable: commit {damaged.commit[:10]} is damaged (a disk error?); the runs above "
              f"read and undo; to start afresh, move {repo} aside (memd makes a new history at its next write)")
        return 1
    return 0
