"""`memd prompts [NAME]`: show the instructions memd gives the model (package files, read-only)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memd.cli import Context

HELP = "show the prompts memd sends to the model (catchup, dream, recall)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", metavar="NAME", help="catchup, dream or recall (default: list them)")


def run(args: argparse.Namespace, ctx: Context) -> int:
    from memd.llm import prompts

    if args.name is None:
        for name in prompts.names():
            first = prompts.load(name).splitlines()[0].lstrip("# ").strip()
            print(f"{name:8} {first}")
        return 0
    print(prompts.render(args.name, ctx.config), end="")  # with the configured budgets, as sent
    return 0
