"""`memd check NAME...` answered from the check cache before argparse is imported: the quick path's one
owner. The door (``memd.cli.main``) calls :func:`quick` first; the full path (``memd.commands.check``)
asks :func:`from_cache` too. Imports neither ``memd.cli`` nor the command module, so the door's call
makes no import circle (tests/test_layers.py), and keeps to ``os`` at the top: each import here is paid
by the most common repeated command (tests/test_cli_imports.py holds its list).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from types import SimpleNamespace
    from typing import Any

    from memd.inspect import ProjectCheck


def looks_like_folder(tok: str) -> bool:
    """"-home-dev-app", "-tmp": shaped like a folder name under projects/ (they start with "-")."""
    return (len(tok) > 2 and tok[0] == "-" and tok[1] != "-"
            and all(c.isascii() and (c.isalnum() or c == "-") for c in tok[1:]))


def quick(argv: Sequence[str]) -> int | None:
    """``memd [--claude-dir DIR] [--config FILE] check [--] NAME... [--format text|json]`` answered from the
    check cache (``from_cache``) before argparse is imported: the most common repeated check costs
    little more than starting Python. None for any other command line and on a cache miss: the
    full path parses it. A token that looks like an option is a NAME only where a project folder
    of that name exists (``from_cache`` checks), as on the full path."""
    from types import SimpleNamespace

    glob: dict[str, str | None] = {"claude_dir": None, "config": None}
    names: list[str] = []
    fmt = "text"
    command = False
    it = iter(argv)
    for tok in it:
        opt, eq, value = tok.partition("=")
        if opt in ("--claude-dir", "--config", "--format") and (command or opt != "--format"):
            val = value if eq else next(it, None)
            if val is None:
                return None
            if opt == "--format":
                if val not in ("text", "json"):
                    return None
                fmt = val
            else:
                glob[opt[2:].replace("-", "_")] = val
        elif not command:
            if tok != "check":
                return None
            command = True
        elif tok == "--":  # the rest are names, as argparse reads them (`memd check -- -home-u-app`)
            names.extend(it)
            break
        elif tok.startswith("-") and not looks_like_folder(tok):
            return None
        else:
            names.append(tok)
    if not names:
        return None
    args = SimpleNamespace(projects=names, all=False, no_cache=False, format=fmt, select=[], ignore=[],
                           statistics=False, **glob)
    cached = from_cache(args)
    if cached is None:
        return None
    from memd.commands._checkreport import code_filter, report

    return report(args, cached[1], cached[0], 0, code_filter([], []))


def _config(path: str | None) -> Any:
    """The config the quick path reads: without a config file (no --config, the default path absent)
    its defaults without importing the schema, as the hooks do (``memd.hooks.defaults``; the budget is
    ``memd.core.budget.Limits()``, held equal to the schema's by tests/test_cli_imports.py); else the file,
    loaded as every command loads it (a flat file without tomllib, only its own sections judged: issue 35),
    so a bad one fails here with the full path's words."""
    if path is None:
        base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
        if not os.path.lexists(os.path.join(base, "memd", "config.toml")):
            from types import SimpleNamespace

            from memd.core.budget import Limits
            from memd.hooks.defaults import VALUES

            return SimpleNamespace(budget=Limits(), paths=SimpleNamespace(**VALUES["paths"]),
                                   hooks=SimpleNamespace(team_pii=VALUES["hooks"]["team_pii"]))
    from memd import config

    return config.load(path)


class _Named:
    """Where a project is, as the output needs it (``memd.layout.Project`` without pathlib)."""

    __slots__ = ("dir", "memory_dir", "name")

    def __init__(self, name: str, folder: str, memory_dir: str) -> None:
        self.name, self.dir, self.memory_dir = name, folder, memory_dir


def from_cache(args: argparse.Namespace | SimpleNamespace) -> tuple[list[ProjectCheck], list[str]] | None:
    """The checks of projects named by their folder under projects/, when the check cache holds every
    one (each folder unchanged since): the full path's answer without memd.layout and pathlib (its
    start-up is most of a cached check). None whenever only the full path can tell: a working
    folder or path, a name that is not a folder, a cache miss. tests/test_check_output.py holds
    the two to the same output."""
    names = args.projects
    if any(n in (".", "..") or "/" in n or os.sep in n or n.startswith("~") for n in names):
        return None
    from memd import ccsettings, checkcache
    from memd.hooks.log import default_state_dir  # memd's state folder with os.path, as the hooks find it
    from memd.inspect import ProjectCheck

    cfg = _config(getattr(args, "config", None))  # a bad config fails here as on the full path
    claude = ccsettings.claude_folder(getattr(args, "claude_dir", None), cfg.paths.claude_dir)
    if os.path.normpath(claude) != claude:
        return None  # shown as pathlib would show it ("./x/" as "x"): the full path's business
    state = os.path.expanduser(cfg.paths.state_dir) if cfg.paths.state_dir else default_state_dir()
    settings = ccsettings.merged(claude)
    out = []
    for name in names:
        folder = os.path.join(claude, "projects", name)
        if not os.path.isdir(folder):
            return None
        mem = ccsettings.project_memory_dir(claude, name, settings)
        hit = checkcache.lookup(state, mem, cfg.budget, cfg.hooks.team_pii)[1]
        if hit is None:
            return None
        try:
            out.append(ProjectCheck.from_cache(_Named(name, folder, mem), cfg.budget, hit))  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError):
            return None
    why = ccsettings.memory_off(claude, settings)
    if not why:
        return out, []
    from memd.commands._checkreport import memory_off_note

    return out, [memory_off_note(why)]
