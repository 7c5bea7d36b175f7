"""`memd dream [PROJECT] [--force] [--dry-run]`: consolidate memory once, now, without the daemon."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memd.cli import Context

HELP = "run the nightly consolidation once, now, in the foreground (every project unless PROJECT is given)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from memd.cli import project_args

    project_args(p, many=False)
    p.add_argument("--force", action="store_true",
                   help="waive the hours and sessions gates (never the lock or an active session)")
    p.add_argument("--dry-run", action="store_true", help="show what would change; change nothing")


def run(args: argparse.Namespace, ctx: Context) -> int:
    from memd.commands._jobrun import run_foreground

    return run_foreground("dream", args, ctx, force=args.force)
