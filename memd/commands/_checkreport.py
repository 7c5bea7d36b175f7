"""What `memd check` prints, on its full path (``memd.commands.check``) and its quick one
(``memd.commands._checkquick``) alike: the codes selected, the text (ruff's shape), the JSON and the
statistics, and the note on memory switched off. Imports no other command module and not ``memd.cli``,
so the door's quick path reaches it without an import circle (tests/test_layers.py).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Iterable, Sequence
    from types import SimpleNamespace
    from typing import TextIO

    from memd.core.findings import Finding
    from memd.inspect import ProjectCheck

_RANK = {"error": 0, "warning": 1, "info": 2}
_COLOURS = {"error": "31", "warning": "33", "info": "36", "path": "1", "fix": "36", "dim": "2"}


def memory_off_note(why: str) -> str:
    return f"note: Claude Code's auto memory is off ({why}); existing memory folders are checked anyway"


def report(args: argparse.Namespace | SimpleNamespace, notes: list[str], checked: list[ProjectCheck] | None,
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
