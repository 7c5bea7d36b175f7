"""`memd forget PROJECT (--string S | --pattern RX | --secrets) [--apply]`: take something out of a
project's memory files and out of every commit of its history (``memd.forget``), and with sync on out of the
project's branch on the remote, with a record the other machines honour (``memd.sync.forget``). A dry run by
default (it fetches, to say what the remote would get)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memd.cli import Context

HELP = ("take a string, a pattern or every secret out of a project's memory files, its whole history and, "
        "with sync on, the remote and your other machines (dry run unless --apply)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from memd.cli import project_args

    project_args(p, many=False)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--string", help="the exact text to forget")
    what.add_argument("--pattern", help="a regular expression (Python syntax) whose matches are forgotten")
    what.add_argument("--secrets", action="store_true", help="every secret the secret rules find")
    what.add_argument("--finish", action="store_true",
                      help="finish what a forget that was killed started (any forget --apply of the project does too)")
    p.add_argument("--apply", action="store_true", help="do it (default: say what would change, change nothing)")


def run(args: argparse.Namespace, ctx: Context) -> int:
    import contextlib
    import time

    from memd.commands._projects import select
    from memd.forget import forget_project
    from memd.jobs.runner import job_lock
    from memd.sync.forget import What, forget_remote

    (project,) = select(args, ctx)
    if args.finish:
        finished = forget_project(project, ctx.config, ctx.state_dir, None, apply=True)
        for line in finished.resumed:
            print(f"finished a forget that was interrupted: {line}")
        if not finished.resumed:
            print("no forget of this project is unfinished")
        return 0
    what = What("literal", args.string) if args.string is not None else \
        What("pattern", args.pattern) if args.pattern is not None else What("secrets")
    find = what.matcher()
    sync_on = bool(ctx.config.sync.remote.strip())
    # the sync repository is rewritten and pruned: no sync job (the daemon's) may write it meanwhile
    with job_lock(ctx.state_dir) if (args.apply and sync_on) else contextlib.nullcontext():
        res = forget_project(project, ctx.config, ctx.state_dir, find, apply=args.apply,
                             record=what.record("", time.time()) if args.apply else None)
        remote = forget_remote(project, ctx.config, ctx.state_dir, what, apply=args.apply,
                               interactive=sys.stdin.isatty())
    for line in res.resumed:
        print(f"finished a forget that was interrupted: {line}")
    for line in res.unfinished:
        print(f"unfinished: {line} was interrupted; --apply (or --finish) finishes it first")
    verb = "taken out of" if res.applied else "would be taken out of"
    for rel, n in res.files.items():
        print(f"{n} match(es) {verb} {rel}")
    for rel, why in res.skipped:
        print(f"left {rel}: {why}")
    if res.commits:
        done = "rewritten" if res.applied else "would be rewritten"
        print(f"history: {res.commits} of {res.commits_total} commit(s) hold it; {done}")
    else:
        print(f"history: none of its {res.commits_total} commit(s) holds it")
    if res.evidence:
        print(f"sync conflict records (memd's state): {res.evidence} hold it; "
              + ("rewritten" if res.applied else "would be rewritten"))
    if remote.status != "off":
        print(f"sync remote: {remote.status}: {remote.message}" if remote.status in ("failed", "refused")
              else f"sync remote: {remote.message}")
    if not res.applied:
        if res.files or res.commits or res.evidence or remote.status == "proposed":
            print("dry run: nothing changed (add --apply)")
        else:
            print("nothing to forget: no memory file and no commit holds it")
        return 1 if remote.status == "failed" else 0
    if res.pruned or remote.pruned:
        print(f"{res.pruned + remote.pruned} old object(s) deleted (history {res.pruned}, sync repository "
              f"{remote.pruned})" if remote.pruned else f"{res.pruned} old object(s) deleted from the history")
    bad = 0
    if res.left:
        print(f"error: {res.left} object(s) of the history still hold it", flush=True)
        bad = 1
    if remote.left:
        print(f"error: {remote.left} object(s) of the sync repository still hold it (another project's branch "
              "holds it too: forget it there)", flush=True)
        bad = 1
    return 1 if bad or res.skipped or remote.status in ("failed", "refused") else 0
