"""`memd sync [PROJECT ...] [--all] [--dry-run] [--list] [--forget] [--push-deletions] [--keep-local]
[--take-remote] [--writer]`: sync now.

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
    from memd.sync.identity import Identity

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
    p.add_argument("--writer", action="store_true", help="make PROJECT the one memory folder on this machine that "
                   "syncs its identity (two clones of one repository: the others are held)")


def run(args: argparse.Namespace, ctx: Context) -> int:
    from memd.commands._projects import select as select_projects  # an explicit --claude-dir must exist

    if args.list:
        return _list(select_projects(args, ctx, default_all=True), ctx)
    if args.forget:
        if not args.projects and not args.all:
            from memd.errors import UsageError

            raise UsageError("--forget needs the PROJECT(s) to forget, or --all (every project sync holds "
                             "something of)")
        if args.all:
            return _forget_held(ctx)
        return _forget(select_projects(args, ctx), ctx)
    if args.writer:
        if len(args.projects) != 1:
            from memd.errors import UsageError

            raise UsageError("--writer needs the one PROJECT to make its identity's writer on this machine")
        return _writer(select_projects(args, ctx)[0], ctx)
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

    cfg = ctx.config
    print(f"remote: {cfg.sync.remote or '(none: sync is off)'}")
    repo = gitremote.open_repo(ctx.state_dir) if cfg.sync.remote else None
    rows = [("PROJECT", "IDENTITY", "BRANCH", "SHARED", "CONFLICTS", "HELD")]
    with StateStore.open(ctx.state_dir) as state:
        idents = _identities(projects, ctx, state)
        for p in projects:
            ident = idents[p.name]
            shared = "-"
            if repo is not None and ident.branch:
                h = gitremote.heads(repo, ident.branch)
                shared = h.shared[:12] if h.shared else "never"
            n = len(evidence.open_conflicts(ctx.state_dir, ident.project))
            hold = held.summary(held.load(ctx.state_dir, ident.project))
            if ident.held and "project" not in hold:
                hold = "project" if hold == "-" else f"{hold}, project"
            rows.append((ident.project, ident.identity or f"- ({ident.source})", ident.branch or "-", shared,
                         str(n) if n else "-", hold))
    if repo is not None:
        repo.close()
    why = held.status_lines(ctx.state_dir, [p.name for p in projects])
    said = {line.split(": ", 2)[1] for line in why.splitlines() if line.count(": ") >= 2}
    why += "".join(f"sync: {i.project}: {i.why_held}; resolve: {i.resolve}\n" for i in idents.values()
                   if i.held and i.project not in said)  # before any sync recorded it
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    sys.stdout.write(why)
    return 0


def _forget(projects: list[Project], ctx: Context) -> int:
    from memd.state import StateStore
    from memd.sync import gitremote, held

    repo = gitremote.open_repo(ctx.state_dir)
    try:
        with StateStore.open(ctx.state_dir) as state:
            idents = _identities(projects, ctx, state)
            for p in projects:
                ident = idents[p.name]
                if held.forget(ctx.state_dir, ident.project):
                    print(f"{ident.project}: forgot what sync held (the next sync judges it anew)")
                if ident.held:  # what the branch shared is the writer's: never forgotten for this folder
                    print(f"{ident.project}: {ident.why_held}; the next sync holds it again; resolve: {ident.resolve}")
                elif ident.branch is None:
                    print(f"{ident.project}: not synced ({ident.source})")
                elif gitremote.forget(repo, ident.branch):
                    print(f"{ident.project}: forgot what was shared on {ident.branch}; the next sync merges "
                          "with no common base (every difference keeps the local file and counts as a conflict)")
                else:
                    print(f"{ident.project}: nothing shared on {ident.branch} yet")
    finally:
        repo.close()
    return 0


def _identities(projects: list[Project], ctx: Context, state: object) -> dict[str, Identity]:
    from memd.sync import gitremote
    from memd.sync.identity import identify_all, load_writers

    return identify_all(projects, ctx.config, state, seen=gitremote.seen(ctx.state_dir),
                        writers=load_writers(ctx.state_dir))


def _forget_held(ctx: Context) -> int:
    """``--forget --all``: ``--forget`` for every project sync holds something of (the held files,
    a held push, a rewritten remote, a second writer), those whose folder is gone included. Projects
    with nothing held keep what they shared."""
    from memd import layout
    from memd.sync import held

    rows = held.load_all(ctx.state_dir)
    names = [n for n, h in rows.items() if not h.empty]
    if not names:
        print("sync holds nothing: nothing to forget")
        return 0
    root = layout.projects_root(ctx.claude_dir)
    here = [layout.project_for_folder(ctx.claude_dir, root / n) for n in names if (root / n).is_dir()]
    gone = [n for n in names if not (root / n).is_dir()]
    if here:
        _forget(here, ctx)
    for n in gone:
        held.forget(ctx.state_dir, n)
        print(f"{n}: forgot what sync held (the folder is no longer under {root})")
    print(f"forgot what sync held of {len(names)} project(s)")
    return 0


def _writer(project: Project, ctx: Context) -> int:
    from memd.state import StateStore
    from memd.sync import held
    from memd.sync.identity import choose_writer

    with StateStore.open(ctx.state_dir) as state:
        ident = _identities([project], ctx, state)[project.name]
    if ident.identity is None or ident.home is not None:
        from memd.errors import UsageError

        why = ident.why_held or ident.source
        raise UsageError(f"{project.name} cannot sync: {why}")
    choose_writer(ctx.state_dir, ident.identity, project.name)
    held.release_project(ctx.state_dir, project.name, kind=held.WRITER)
    print(f"{project.name}: syncs {ident.identity} on this machine from now on; any other memory folder of "
          f"{ident.identity} here is held (`memd status` names it) at the next sync")
    return 0
