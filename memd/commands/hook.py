"""memd hook: the entry point Claude Code runs for hook events (reads JSON on stdin).

``memd hook`` never reaches argparse: memd.cli hands it to memd.hooks.entry before building the
parser, because it runs on every tool call. This module exists so that ``memd --help`` lists it.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memd.cli import Context

HELP = "answer one Claude Code hook event (JSON on stdin; run by Claude Code, see `memd hooks`)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = ("Run by Claude Code. Prints nothing and exits 0 when it has nothing to say or anything "
                "goes wrong; errors go to memd's log. Install with `memd hooks install`.")


def run(args: argparse.Namespace, ctx: Context) -> int:
    from memd.hooks import entry

    argv: list[str] = []
    if getattr(args, "config", None):
        argv += ["--config", str(args.config)]
    if getattr(args, "claude_dir", None):
        argv += ["--claude-dir", str(args.claude_dir)]
    return entry.main(argv)
