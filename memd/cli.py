"""The door: argument parsing and the one place errors become user-facing messages.

Each command lives in ``memd/commands/<name>.py`` with ``HELP``, ``add_arguments(parser)`` and
``run(args, ctx) -> int``. Command modules import heavy things inside ``run`` so that building
the parser stays cheap; ``memd hook`` skips the parser altogether (it runs on every tool call).

Start-up is paid on every command, so this module imports only ``os`` and ``sys`` at run time: the
registry is lazy (only the chosen command's module is imported and only its parser built; ``memd
--help`` imports them all to list them), ``memd --version`` imports no command and not argparse,
and neither ``dataclasses`` nor ``typing`` nor ``pathlib`` is imported here (tests/test_cli_imports.py
holds the import list of each hot path).
"""

from __future__ import annotations

import os
import sys

from memd import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from pathlib import Path
    from typing import Any

    from memd.config import Config
    from memd.errors import ConfigError

# every command, by its module under memd.commands (tests/test_layers.py checks the two agree)
COMMANDS = [
    "check", "rebuild", "status", "config", "scan", "render", "run", "trigger", "dream", "catchup",
    "report", "logs", "service", "history", "undo", "forget", "uninstall", "prompts", "hook", "hooks", "recall",
    "sync", "ui",
]
_GLOBAL_WITH_VALUE = ("--claude-dir", "--config")
PROJECT_ARG_MARK = "\x00"  # memd.layout.PROJECT_ARG_MARK, spelled here so the door need not import pathlib


class Context:
    """What every command needs: the config (loaded on first use) and memd's folders."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self._config: Config | None = None

    @property
    def config(self) -> Config:
        if self._config is None:
            from memd import config

            self._config = config.load(getattr(self.args, "config", None))
        return self._config

    def load_config_tolerantly(self) -> ConfigError | None:
        """Load the config keeping a bad file's valid keys (``memd.config.load_tolerant``): later uses
        of ``config`` see that config; the file's error, if any, is returned for the command to show."""
        from memd import config

        cfg, error = config.load_tolerant(getattr(self.args, "config", None))
        self._config = cfg
        return error

    @property
    def claude_dir(self) -> Path:
        from memd import layout

        explicit = getattr(self.args, "claude_dir", None)
        return layout.claude_dir(explicit, "" if explicit else self.config.paths.claude_dir)

    @property
    def state_dir(self) -> Path:
        from memd import layout

        return layout.state_dir(self.config.paths.state_dir)


def _formatter(prog: str) -> argparse.HelpFormatter:
    """argparse's formatter, told the width: left to itself it imports shutil (with bz2 and lzma)
    only to ask for the terminal's size, and it is built on every parse, not only for help."""
    import argparse

    try:
        width = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        try:
            width = os.get_terminal_size(sys.__stdout__.fileno() if sys.__stdout__ else 1).columns
        except (OSError, ValueError, AttributeError):
            width = 80
    return argparse.HelpFormatter(prog, width=max(width, 40) - 2)


def _common() -> argparse.ArgumentParser:
    import argparse

    p = argparse.ArgumentParser(add_help=False, formatter_class=_formatter)
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
        if tok in _GLOBAL_WITH_VALUE:
            skip = True
            continue
        if tok.startswith("-"):
            continue
        return tok
    return None


def _global(argv: Sequence[str], name: str) -> str | None:
    """The value of a global option (``--claude-dir X`` or ``--claude-dir=X``) before argparse runs."""
    for i, tok in enumerate(argv):
        if tok == name and i + 1 < len(argv):
            return argv[i + 1]
        if tok.startswith(name + "="):
            return tok[len(name) + 1:]
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``only`` (a command), just that command's subparser and module: each command
    pays for its own start-up only. Without it (help, a typo) every command is listed."""
    import argparse
    import importlib

    common = _common()
    parser = argparse.ArgumentParser(
        prog="memd", parents=[common], formatter_class=_formatter,
        description="Keeps Claude Code's auto memory healthy: budgets, catch-up, nightly dreams, all reversible.")
    parser.add_argument("--version", action="version", version=f"memd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    names = [only] if only in COMMANDS else COMMANDS
    for name in names:
        mod: Any = importlib.import_module(f"memd.commands.{name}")
        p = sub.add_parser(name, parents=[common], help=mod.HELP, description=mod.HELP, formatter_class=_formatter)
        mod.add_arguments(p)
        p.set_defaults(_module=mod)
    return parser


def protect_folder_names(argv: Sequence[str], known: set[str],
                         is_project: Callable[[str], bool] | None = None) -> list[str]:
    """Mark arguments like "-home-dev-app" or "-tmp" (folder names under projects/ start with "-")
    so argparse does not take them for options. A token that names an existing project folder
    (``is_project``) is always a project, even "-home" (else "-h" with "ome") or "-nope" ("-n" with
    "ope"); any other token is left alone when it is a known option, or a known short option with
    its value attached ("-n50")."""
    from memd.commands._checkquick import looks_like_folder

    out: list[str] = []
    rest = False
    for tok in argv:
        if rest or tok == "--":
            rest = True
            out.append(tok)
            continue
        folder_like = looks_like_folder(tok) and tok not in known
        if folder_like and tok[:2] in known and "-" not in tok[2:]:
            folder_like = is_project is not None and is_project(tok)
        out.append(PROJECT_ARG_MARK + tok if folder_like else tok)
    return out


def _project_folder_test(argv: Sequence[str]) -> Callable[[str], bool]:
    """Whether a name is a folder under the projects root of the Claude folder this command line
    uses (``--claude-dir``, else the config's, else $CLAUDE_CONFIG_DIR or ~/.claude). Asked only about
    tokens that could be options, so the config is loaded only then."""
    roots: list[str] = []

    def is_project(name: str) -> bool:
        if not roots:
            claude = _global(argv, "--claude-dir")
            if not claude:
                try:
                    from memd import config

                    claude = config.load(_global(argv, "--config")).paths.claude_dir
                except Exception:  # a bad config is reported by the command itself
                    claude = ""
            claude = claude or os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join("~", ".claude")
            roots.append(os.path.join(os.path.expanduser(claude), "projects"))
        return os.path.isdir(os.path.join(roots[0], name))

    return is_project


def _unmark(args: argparse.Namespace) -> None:
    """Take the marks off again once argparse is done (every string argument, not only PROJECT)."""
    for name, value in vars(args).items():
        if isinstance(value, str):
            setattr(args, name, value.removeprefix(PROJECT_ARG_MARK))
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            setattr(args, name, [v.removeprefix(PROJECT_ARG_MARK) for v in value])


def _known_options(parser: argparse.ArgumentParser) -> set[str]:
    import argparse

    known: set[str] = set()
    stack = [parser]
    while stack:
        p = stack.pop()
        for action in p._actions:
            known.update(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                stack.extend(action.choices.values())
    return known


def _tolerant_output() -> None:
    """A folder name that is not valid UTF-8 (lone surrogates in Python) is printed escaped, not
    fatal: with a strict UTF-8 stdout one such name failed `memd status` for every project."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a closed or unusual stream: leave it
                pass


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["hook"]:
        # the fast path: no parser, no heavy imports (a hook runs on every tool call)
        from memd.hooks.entry import main as hook

        return hook(args_list[1:])
    _tolerant_output()
    invoked = _invoked(args_list)
    if invoked is None and "--version" in args_list and not {"-h", "--help"} & set(args_list):
        print(f"memd {__version__}")  # what argparse's version action prints, without argparse
        return 0
    if invoked == "check":
        # `memd check NAME...` answered from the check cache, before argparse is even imported;
        # None: anything else, or a cache miss, takes the full path below
        from memd.commands._checkquick import quick

        answer = _guarded("check", lambda: quick(args_list))
        if answer is not None:
            return answer
    parser = build_parser(invoked)
    args = parser.parse_args(protect_folder_names(args_list, _known_options(parser), _project_folder_test(args_list)))
    _unmark(args)
    mod = getattr(args, "_module", None)
    if mod is None:
        parser.print_help()
        return 2
    ctx = Context(args)
    return _guarded(args.command, lambda: int(mod.run(args, ctx))) or 0


def _guarded(command: str, work: Callable[[], int | None]) -> int | None:
    """The one boundary where errors become messages (and exit codes), not tracebacks."""
    from memd.errors import MemdError

    try:
        return work()
    except MemdError as e:
        print(f"memd {command}: {e}", file=sys.stderr)
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
        print(f"memd {command}: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    except Exception as e:  # anything left becomes a message, not a traceback
        if os.environ.get("MEMD_DEBUG"):
            raise
        print(f"memd {command}: unexpected error: {type(e).__name__}: {e} "
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
