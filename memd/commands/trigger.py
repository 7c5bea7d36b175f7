"""`memd trigger dream|catchup|sync|reload [--project P]`: ask the running daemon to act now."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memd.cli import Context

HELP = "ask the running daemon to dream, catch up or sync now, or to reload its config"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", choices=("dream", "catchup", "sync", "reload"),
                   help="dream (SIGUSR1), catchup or sync (SIGUSR2 and a request file) or reload the config (SIGHUP)")
    p.add_argument("--project", action="append", metavar="P", default=None,
                   help="only this project (working folder, folder under projects/, or memory folder); repeatable")


def run(args: argparse.Namespace, ctx: Context) -> int:
    from memd import layout
    from memd.daemon import control
    from memd.errors import UsageError

    projects: list[str] | None = None
    if args.project:
        if args.what == "reload":
            raise UsageError("--project goes with dream, catchup or sync, not reload")
        projects = [layout.resolve_project(p, ctx.claude_dir).name for p in args.project]
    if args.what == "sync" and not ctx.config.sync.remote.strip():
        raise UsageError("sync is off: set `remote` under [sync] in the config (docs/sync.md); nothing was sent")
    pid = control.send(ctx.state_dir, args.what, projects)
    target = f" for {', '.join(projects)}" if projects else ""
    done = {"dream": "dream queued", "catchup": "catch-up queued", "sync": "sync queued",
            "reload": "config reload asked"}[args.what]
    print(f"memd (pid {pid}): {done}{target}; follow it with `memd logs -f`")
    return 0
