"""`memd sync [PROJECT ...] [--all] [--dry-run] [--list] [--forget] [--push-deletions] [--keep-local]
[--take-remote]`: sync now.

The job is ``memd.sync.job.run_sync`` (the daemon runs the same one after every applied run and every
``sync.interval_minutes``); see docs/sync.md.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from memd.cli import project_args

if TYPE_CHECKING:
    from memd.cli import Context
    from memd.layout import Project

HELP = "sync memory with your other machines through your own git remote ([sync] remote; docs/sync.md)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    project_args(p)
    p.add_argument("--dry-run", action="store_true", help="fetch and show what the merge would change; "
                   "write and send nothing")
    p.add_argument("--list", action="store_true", help="each local project, its identity and its remote branch")
    p.add_argument("--forget", action="store_true", help="forget what PROJECT last shared with the remote "
                   "(after the remote was rewritten): the next sync merges with no common base")
    p.add_argument("--push-deletions", action="store_true", help="send PROJECT's push even when it deletes or "
                   "shrinks more of the remote's memory than the guard allows (held otherwise)")
    p.add_argument("--keep-local", action="store_true", help="resolve PROJECT's held files (`memd status` lists "
                   "them: refused by the guard, or kept here by `memd undo`) with this machine's version: it is "
                   "sent over the remote's")
    p.add_argument("--take-remote", action="store_true", help="resolve the files `memd undo` kept here in PROJECT "
                   "with the remote's version: it comes back (snapshot first; `memd undo` reverts it)")


def run(args: argparse.Namespace, ctx: Context) -> int:
    from memd.commands._projects import select as select_projects  # an explicit --claude-dir must exist

    if args.list:
        return _list(select_projects(args, ctx, default_all=True), ctx)
    if args.forget:
        if not args.projects:
            from memd.errors import UsageError

            raise UsageError("--forget needs the PROJECT(s) to forget")
        return _forget(select_projects(args, ctx), ctx)
    if args.keep_local and args.take_remote:
        from memd.errors import UsageError

        raise UsageError("--keep-local and --take-remote say opposite things: name one")
    for flag, what in (("push_deletions", "whose deletions to send"), ("keep_local", "whose held files to resolve"),
                       ("take_remote", "whose undone files to take back")):
        if getattr(args, flag) and not args.projects:
            from memd.errors import UsageError

            raise UsageError(f"--{flag.replace('_', '-')} needs the PROJECT(s) {what}")
    from memd.commands._jobrun import run_foreground
    from memd.sync.job import run_sync

    named = bool(args.projects)
    return run_foreground("sync", args, ctx, force=False,
                          work=lambda jc, projects: run_sync(jc, projects, named=named, interactive=sys.stdin.isatty(),
                                                             push_deletions=args.push_deletions,
                                                             keep_local=args.keep_local,
                                                             take_remote=args.take_remote))


def _list(projects: list[Project], ctx: Context) -> int:
    from memd.state import StateStore
    from memd.sync import evidence, gitremote, held
    from memd.sync.identity import identify

    cfg = ctx.config
    print(f"remote: {cfg.sync.remote or '(none: sync is off)'}")
    repo = gitremote.open_repo(ctx.state_dir) if cfg.sync.remote else None
    rows = [("PROJECT", "IDENTITY", "BRANCH", "SHARED", "CONFLICTS", "HELD")]
    with StateStore.open(ctx.state_dir) as state:
        for p in projects:
            ident = identify(p, cfg, state)
            shared = "-"
            if repo is not None and ident.branch:
                h = gitremote.heads(repo, ident.branch)
                shared = h.shared[:12] if h.shared else "never"
            n = len(evidence.open_conflicts(ctx.state_dir, ident.project))
            rows.append((ident.project, ident.identity or f"- ({ident.source})", ident.branch or "-", shared,
                         str(n) if n else "-", held.summary(held.load(ctx.state_dir, ident.project))))
    if repo is not None:
        repo.close()
    why = held.status_lines(ctx.state_dir, [p.name for p in projects])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    sys.stdout.write(why)
    return 0


def _forget(projects: list[Project], ctx: Context) -> int:
    from memd.state import StateStore
    from memd.sync import gitremote, held
    from memd.sync.identity import identify

    repo = gitremote.open_repo(ctx.state_dir)
    try:
        with StateStore.open(ctx.state_dir) as state:
            for p in projects:
                ident = identify(p, ctx.config, state)
                if held.forget(ctx.state_dir, ident.project):
                    print(f"{ident.project}: forgot what sync held (the next sync judges it anew)")
                if ident.branch is None:
                    print(f"{ident.project}: not synced ({ident.source})")
                elif gitremote.forget(repo, ident.branch):
                    print(f"{ident.project}: forgot what was shared on {ident.branch}; the next sync merges "
                          "with no common base (every difference keeps the local file and counts as a conflict)")
                else:
                    print(f"{ident.project}: nothing shared on {ident.branch} yet")
    finally:
        repo.close()
    return 0
