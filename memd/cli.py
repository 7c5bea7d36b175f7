"""The door: argument parsing and the one place errors become user-facing messages.

Each command lives in ``memd/commands/<name>.py`` with ``HELP``, ``add_arguments(parser)`` and
``run(args, ctx) -> int``. Command modules import heavy things inside ``run`` so that building
the parser stays cheap; ``memd hook`` skips the parser altogether (it runs on every tool call).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memd import __version__
from memd.errors import MemdError
from memd.layout import PROJECT_ARG_MARK

if TYPE_CHECKING:
    from memd.config import Config

# every command, by its module under memd.commands (tests/test_layers.py checks the two agree)
COMMANDS = [
    "check", "rebuild", "status", "config", "scan", "render", "run", "trigger", "dream", "catchup",
    "report", "logs", "service", "history", "undo", "prompts", "hook", "hooks", "recall",
    "sync",
]


@dataclass
class Context:
    """What every command needs: the config (loaded on first use) and memd's folders."""

    args: argparse.Namespace
    _config: Config | None = field(default=None, init=False)

    @property
    def config(self) -> Config:
        if self._config is None:
            from memd import config

            self._config = config.load(getattr(self.args, "config", None))
        return self._config

    @property
    def claude_dir(self) -> Path:
        from memd import layout

        explicit = getattr(self.args, "claude_dir", None)
        return layout.claude_dir(explicit, "" if explicit else self.config.paths.claude_dir)

    @property
    def state_dir(self) -> Path:
        from memd import layout

        return layout.state_dir(self.config.paths.state_dir)


def _common() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--claude-dir", metavar="DIR", default=argparse.SUPPRESS,
                   help="Claude Code's folder (default: $CLAUDE_CONFIG_DIR or ~/.claude)")
    p.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS,
                   help="config file (default: ~/.config/memd/config.toml)")
    return p


def _invoked(argv: Sequence[str]) -> str | None:
    """The command named on the command line, skipping global options and their values."""
    skip = False
    for tok in argv:
        if skip:
            skip = False
            continue
        if tok in ("--claude-dir", "--config"):
            skip = True
            continue
        if tok.startswith("-"):
            continue
        return tok
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``only``, just that command's subparser (start-up cost is paid per command)."""
    common = _common()
    parser = argparse.ArgumentParser(
        prog="memd", parents=[common],
        description="Keeps Claude Code's auto memory healthy: budgets, catch-up, nightly dreams, all reversible.")
    parser.add_argument("--version", action="version", version=f"memd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    names = [only] if only in COMMANDS else COMMANDS
    for name in names:
        mod: Any = importlib.import_module(f"memd.commands.{name}")
        p = sub.add_parser(name, parents=[common], help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_module=mod)
    return parser


_LOOKS_LIKE_FOLDER = re.compile(r"^-[A-Za-z0-9][A-Za-z0-9\-]+$")


def protect_folder_names(argv: Sequence[str], known: set[str]) -> list[str]:
    """Mark arguments like "-home-dev-app" or "-tmp" (folder names under projects/ start with "-")
    so argparse does not take them for options. A token is left alone when it is a known option, or
    a known short option with its value attached ("-n50")."""
    out: list[str] = []
    rest = False
    for tok in argv:
        if rest or tok == "--":
            rest = True
            out.append(tok)
            continue
        folder_like = bool(_LOOKS_LIKE_FOLDER.match(tok)) and tok not in known
        if folder_like and tok[:2] in known and "-" not in tok[2:]:
            folder_like = False
        out.append(PROJECT_ARG_MARK + tok if folder_like else tok)
    return out


def _unmark(args: argparse.Namespace) -> None:
    """Take the marks off again once argparse is done (every string argument, not only PROJECT)."""
    for name, value in vars(args).items():
        if isinstance(value, str):
            setattr(args, name, value.removeprefix(PROJECT_ARG_MARK))
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            setattr(args, name, [v.removeprefix(PROJECT_ARG_MARK) for v in value])


def _known_options(parser: argparse.ArgumentParser) -> set[str]:
    known: set[str] = set()
    stack = [parser]
    while stack:
        p = stack.pop()
        for action in p._actions:
            known.update(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                stack.extend(action.choices.values())
    return known


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["hook"]:
        # the fast path: no parser, no heavy imports (a hook runs on every tool call)
        from memd.hooks.entry import main as hook

        return hook(args_list[1:])
    invoked = _invoked(args_list)
    parser = build_parser(invoked)
    args = parser.parse_args(protect_folder_names(args_list, _known_options(parser)))
    _unmark(args)
    mod = getattr(args, "_module", None)
    if mod is None:
        parser.print_help()
        return 2
    ctx = Context(args)
    try:
        return int(mod.run(args, ctx))
    except MemdError as e:
        print(f"memd {args.command}: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # e.g. `memd logs | head`: not an error worth a traceback
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        except OSError:
            pass
        return 0
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        print(f"memd {args.command}: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    except Exception as e:  # the one boundary where anything left becomes a message, not a traceback
        if os.environ.get("MEMD_DEBUG"):
            raise
        print(f"memd {args.command}: unexpected error: {type(e).__name__}: {e} "
              "(set MEMD_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1


def project_args(p: argparse.ArgumentParser, *, many: bool = True) -> None:
    """Add PROJECT arguments (and --all) the same way on every command that takes them."""
    if many:
        p.add_argument("projects", nargs="*", metavar="PROJECT",
                       help="working folder ('.'), folder under projects/, or memory folder")
        p.add_argument("--all", action="store_true", help="every project under the Claude folder")
    else:
        p.add_argument("project", nargs="?", metavar="PROJECT",
                       help="working folder ('.'), folder under projects/, or memory folder")


def select_projects(args: argparse.Namespace, ctx: Context, *, default_all: bool = False) -> list[Any]:
    """The projects a command acts on: named ones, --all, or the current folder's project."""
    from memd import layout
    from memd.errors import UsageError

    claude = ctx.claude_dir
    names: list[str] = list(getattr(args, "projects", None) or [])
    single = getattr(args, "project", None)
    if single:
        names.append(single)
    if getattr(args, "all", False) or (default_all and not names):
        if names:
            raise UsageError("give PROJECT arguments or --all, not both")
        return layout.list_projects(claude)
    if not names:
        names = ["."]
    return [layout.resolve_project(n, claude) for n in names]
