"""`memd forget PROJECT (--string S | --pattern RX | --secrets) [--apply]`: take something out of a
project's memory files and out of every commit of its history (``memd.forget``). A dry run by default."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memd.cli import Context

HELP = ("take a string, a pattern or every secret out of a project's memory files and its whole history "
        "(dry run unless --apply)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from memd.cli import project_args

    project_args(p, many=False)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--string", help="the exact text to forget")
    what.add_argument("--pattern", help="a regular expression (Python syntax) whose matches are forgotten")
    what.add_argument("--secrets", action="store_true", help="every secret the secret rules find")
    p.add_argument("--apply", action="store_true", help="do it (default: say what would change, change nothing)")


def run(args: argparse.Namespace, ctx: Context) -> int:
    from memd.commands._projects import select
    from memd.forget import forget_project, matcher

    find = matcher(string=args.string, pattern=args.pattern, secrets=args.secrets)
    (project,) = select(args, ctx)
    res = forget_project(project, ctx.config, ctx.state_dir, find, apply=args.apply)
    verb = "taken out of" if res.applied else "would be taken out of"
    for rel, n in res.files.items():
        print(f"{n} match(es) {verb} {rel}")
    for rel, why in res.skipped:
        print(f"left {rel}: {why}")
    if res.commits:
        what = "rewritten" if res.applied else "would be rewritten"
        print(f"history: {res.commits} of {res.commits_total} commit(s) hold it; {what}")
    else:
        print(f"history: none of its {res.commits_total} commit(s) holds it")
    if not res.applied:
        if res.files or res.commits:
            print("dry run: nothing changed (add --apply)")
        else:
            print("nothing to forget: no memory file and no commit holds it")
        return 0
    if res.pruned:
        print(f"{res.pruned} old object(s) deleted from the history")
    if ctx.config.sync.remote.strip():
        print("sync is on: the remote still holds what this machine sent before, and `memd forget` does not reach "
              "it yet (nor other machines): delete this project's branch on the remote by hand, then run "
              f"`memd sync --forget {project.name}` and sync again")
    if res.left:
        print(f"error: {res.left} object(s) of the history still hold it", flush=True)
        return 1
    return 1 if res.skipped else 0
