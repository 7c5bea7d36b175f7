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

    (project,) = select(args, ctx)
    repo = history.repo_dir(ctx.state_dir, project.name)
    print(f"# {project.name} (git --git-dir={repo} log)")
    limit = max(1, args.limit)
    if args.all_commits:
        rows = [(f"{e.commit[:10]}  ", e.time, f"{e.kind or '-':8} {e.summary}")
                for e in history.log(ctx.state_dir, project.name, limit=limit)]
    else:
        rows = [(f"{r.run:36} ", r.time, r.summary)
                for r in history.list_runs(ctx.state_dir, project.name, limit=limit)]
    for head, when, text in rows:
        print(f"{head}{time.strftime('%Y-%m-%d %H:%M', time.localtime(when))}  {text}")
    if not rows:
        print("no snapshots yet" if args.all_commits else "no runs yet")
    return 0
