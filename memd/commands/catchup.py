"""`memd catchup [PROJECT] [--dry-run]`: extract what sessions missed, once, now, without the daemon."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memd.cli import Context

HELP = "run the catch-up once, now, in the foreground (every project unless PROJECT is given)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from memd.cli import project_args

    project_args(p, many=False)
    p.add_argument("--dry-run", action="store_true", help="show what would be extracted; change nothing")


def run(args: argparse.Namespace, ctx: Context) -> int:
    from memd.commands._jobrun import run_foreground

    return run_foreground("catchup", args, ctx, force=False)
