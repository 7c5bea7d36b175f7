"""memd check: lint memory folders (budget, links, duplicates, frontmatter, dates, secrets).

Exit status: 0 when no finding (after --select/--ignore) is an error, 1 when one is, 2 on usage or
config errors. With --all, projects without a memory folder are skipped (and counted in the
summary); a project named explicitly that has none is reported as "no memory folder".

Text output reads like ruff's: ``path:line:col: CODE [*] severity: message``, paths relative to the
current folder when they lie under it, errors first (then warnings, then info) so a hundred long-line
warnings never bury an error, ``[*]`` on findings `memd rebuild` fixes (``Finding.fixable``), colour on a
terminal (``NO_COLOR`` turns it off, ``FORCE_COLOR`` on). Codes: docs/check.md.
"""

from __future__ import annotations

import os
import sys

from memd.cli import project_args

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Iterable, Sequence
    from types import SimpleNamespace
    from typing import Any, TextIO

    from memd.cli import Context
    from memd.core.findings import Finding
    from memd.inspect import ProjectCheck

HELP = "lint memory folders: budget, links, duplicates, frontmatter, relative dates, secrets"

_RANK = {"error": 0, "warning": 1, "info": 2}
_COLOURS = {"error": "31", "warning": "33", "info": "36", "path": "1", "fix": "36", "dim": "2"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    project_args(p)
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    p.add_argument("--select", action="append", metavar="CODES", default=[],
                   help="report only these codes or prefixes, comma-separated (MEM005,MEM01; ALL)")
    p.add_argument("--ignore", action="append", metavar="CODES", default=[],
                   help="leave out these codes or prefixes (the longer prefix wins over --select)")
    p.add_argument("--statistics", action="store_true", help="count findings per code instead of listing them")
    p.add_argument("--no-cache", action="store_true",
                   help="check every folder afresh (by default unchanged folders reuse their last result)")
    p.add_argument("--jobs", "-j", type=_jobs, metavar="N", default=None,
                   help="processes checking many folders at once (default: one per CPU; 1: none)")


def _jobs(text: str) -> int:
    import argparse

    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of processes, 1 or more, not {text!r}")
    return n


def run(args: argparse.Namespace, ctx: Context) -> int:
    keep = code_filter(args.select, args.ignore)  # a bad selector is a usage error before any work
    cached = None if args.all or args.no_cache or not args.projects else from_cache(args)
    if cached is not None:
        return _report(args, cached[1], cached[0], 0, keep)
    from memd.commands._projects import preamble
    from memd.inspect import check_projects, parallel_jobs

    projects, notes = preamble(args, ctx)
    if projects is None:
        return _report(args, notes, None, 0, keep)
    cache_dir = None if args.no_cache else ctx.state_dir
    jobs = parallel_jobs(args.jobs, len(projects))
    if args.all and len(projects) > 1:
        from memd.commands._progress import progress

        with progress(len(projects), "checking", threaded=jobs == 1) as step:
            report = check_projects(projects, ctx.config, cache_dir=cache_dir, skip_missing=True, step=step,
                                    jobs=jobs, state_dir=ctx.state_dir)
    else:
        report = check_projects(projects, ctx.config, cache_dir=cache_dir, skip_missing=bool(args.all), jobs=jobs,
                                state_dir=ctx.state_dir)
    return _report(args, notes, report.results, report.skipped, keep)


def _report(args: argparse.Namespace | SimpleNamespace, notes: list[str], checked: list[ProjectCheck] | None,
            skipped: int, keep: Callable[[str], bool]) -> int:
    as_json = args.format == "json"
    for n in notes:
        print(n, file=sys.stderr if as_json else sys.stdout)
    if checked is None:
        if as_json:
            print("[]")
        return 0
    results = [(r, [f for f in r.findings if keep(f.code)]) for r in checked]
    if as_json:
        import json

        docs = [{**r.as_json(), "findings": [f.to_json() for f in kept]} for r, kept in results]
        sys.stdout.write(json.dumps(docs, indent=2, ensure_ascii=False) + "\n")
    elif args.statistics:
        sys.stdout.write(format_statistics(results, colour=use_colour(sys.stdout)))
    else:
        sys.stdout.write(format_text(results, skipped, colour=use_colour(sys.stdout)))
    return 1 if any(f.severity == "error" for _, kept in results for f in kept) else 0


def quick(argv: Sequence[str]) -> int | None:
    """``memd [--claude-dir DIR] [--config FILE] check [--] NAME... [--format text|json]`` answered from the
    check cache (``from_cache``) before argparse is imported: the most common repeated check costs
    little more than starting Python. None for any other command line and on a cache miss: the
    full path parses it. A token that looks like an option is a NAME only where a project folder
    of that name exists (``from_cache`` checks), as on the full path."""
    from types import SimpleNamespace

    from memd.cli import looks_like_folder

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
    return _report(args, cached[1], cached[0], 0, code_filter([], []))


def _config(path: str | None) -> Any:
    """The config the quick path reads: without a config file (no --config, the default path absent)
    its defaults without importing the schema, as the hooks do (``memd.hooks.defaults``; the budget is
    ``memd.core.budget.Limits()``, held equal to the schema's by tests/test_cli_imports.py); else the file."""
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
    from memd.commands._projects import memory_off_note

    return out, [memory_off_note(why)]


# --------------------------------------------------------------------------- selecting codes


def _selectors(values: Sequence[str], option: str) -> list[str]:
    from memd.core.findings import CODES
    from memd.errors import UsageError

    out = []
    for value in values:
        for raw in value.split(","):
            sel = raw.strip().upper()
            if not sel:
                continue
            if sel != "ALL" and not any(code.startswith(sel) for code in CODES):
                raise UsageError(f"{option} {raw.strip()}: no code starts with it (codes: docs/check.md)")
            out.append("" if sel == "ALL" else sel)
    return out


def code_filter(select: Sequence[str], ignore: Sequence[str]) -> Callable[[str], bool]:
    """Whether a code is reported, as ruff decides: codes match selectors by prefix ("MEM0" takes
    MEM001..MEM090, "ALL" every code); the longest matching selector decides, --ignore winning a tie;
    without --select every code is selected."""
    sel = _selectors(select, "--select") or [""]
    ign = _selectors(ignore, "--ignore")

    def keep(code: str) -> bool:
        best_sel = max((len(s) for s in sel if code.startswith(s)), default=-1)
        best_ign = max((len(s) for s in ign if code.startswith(s)), default=-1)
        return best_sel >= 0 and best_sel > best_ign

    return keep


# --------------------------------------------------------------------------- text output


def use_colour(stream: TextIO) -> bool:
    """Colour on a terminal; ``NO_COLOR`` (any value but empty) turns it off, ``FORCE_COLOR`` on."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):
        return False


def _paint(text: str, what: str, colour: bool) -> str:
    return f"\x1b[{_COLOURS[what]}m{text}\x1b[0m" if colour else text


def display_path(path: str, cwd: str | None = None) -> str:
    """A path as ruff shows it: relative to the current folder when it lies under it, else absolute."""
    here = os.getcwd() if cwd is None else cwd
    full = os.path.abspath(path)
    if full == here:
        return "."
    if full.startswith(here.rstrip(os.sep) + os.sep):
        return os.path.relpath(full, here)
    return full


def format_finding(r: ProjectCheck, f: Finding, *, colour: bool = False, cwd: str | None = None,
                   shown: str | None = None) -> str:
    """One finding's line; ``shown``: the memory folder as ``display_path`` shows it (computed once)."""
    base = display_path(str(r.project.memory_dir), cwd) if shown is None else shown
    where = base if f.path == "." else f.path if base == "." else os.path.join(base, f.path)
    fix = _paint("[*]", "fix", colour) + " " if f.fixable else ""
    sev = f.severity
    return (f"{_paint(where, 'path', colour)}:{f.line}:{f.col}: {_paint(f.code, sev, colour)} {fix}"
            f"{_paint(sev, sev, colour)}: {f.message}")


def _ordered(results: Iterable[tuple[ProjectCheck, list[Finding]]]) -> list[tuple[ProjectCheck, Finding]]:
    """Errors first, then warnings, then info; within each, projects and files in their order."""
    rows = [(r, f) for r, kept in results for f in kept]
    return sorted(rows, key=lambda rf: _RANK.get(rf[1].severity, 3))  # stable: the lint's order is kept


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def format_text(results: list[tuple[ProjectCheck, list[Finding]]], skipped: int = 0, *, colour: bool = False,
                cwd: str | None = None) -> str:
    from memd.core.findings import counts

    out: list[str] = []
    for r, _ in results:
        if not r.exists:
            out.append(f"{r.project.name}: no memory folder ({display_path(str(r.project.memory_dir), cwd)}): "
                       "nothing to check")
    rows = _ordered(results)
    shown = {id(r): display_path(str(r.project.memory_dir), cwd) for r, _ in results}
    out.extend(format_finding(r, f, colour=colour, cwd=cwd, shown=shown[id(r)]) for r, f in rows)
    out.append(_summary(results, skipped, counts(f for _, f in rows)))
    fixable = sum(1 for _, f in rows if f.fixable)
    if fixable:
        out.append(f"{_paint('[*]', 'fix', colour)} {fixable} fixable with `memd rebuild`")
    return "\n".join(out) + "\n"


def _summary(results: list[tuple[ProjectCheck, list[Finding]]], skipped: int, c: dict[str, int]) -> str:
    checked = sum(1 for r, _ in results if r.exists)
    summary = f"{checked} memory folder{'s' if checked != 1 else ''} checked"
    if skipped:
        summary += f" ({skipped} project{'s' if skipped != 1 else ''} without memory skipped)"
    if not any(c.values()):
        return summary + ": no findings"
    return summary + f": {_plural(c['error'], 'error')}, {_plural(c['warning'], 'warning')}, {c['info']} info"


def format_statistics(results: list[tuple[ProjectCheck, list[Finding]]], *, colour: bool = False) -> str:
    """One row per code, most frequent first, as ``ruff --statistics``: count, code, [*] when fixable, name."""
    from collections import Counter

    from memd.core.findings import CODES

    seen = Counter(f.code for _, kept in results for f in kept)
    fixable = {f.code for _, kept in results for f in kept if f.fixable}
    width = max((len(str(n)) for n in seen.values()), default=1)
    out = []
    for code, n in sorted(seen.items(), key=lambda kv: (-kv[1], kv[0])):
        sev = CODES[code].severity if code in CODES else "info"
        mark = "[*]" if code in fixable else "[ ]"
        name = CODES[code].name if code in CODES else ""
        out.append(f"{n:>{width}}\t{_paint(code, sev, colour)}\t{mark} {name}")
    if not out:
        out.append("no findings")
    return "\n".join(out) + "\n"
