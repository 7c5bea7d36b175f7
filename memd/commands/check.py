"""memd check: lint memory folders (budget, links, duplicates, frontmatter, dates, secrets).

Exit status: 0 when no finding is an error, 1 when one is, 2 on usage or config errors.
With --all, projects without a memory folder are skipped (and counted in the summary); a project
named explicitly that has none is reported as "no memory folder". Codes: docs/check.md.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from memd.cli import project_args

if TYPE_CHECKING:
    from memd.cli import Context
    from memd.inspect import ProjectCheck

HELP = "lint memory folders: budget, links, duplicates, frontmatter, relative dates, secrets"


def add_arguments(p: argparse.ArgumentParser) -> None:
    project_args(p)
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    p.add_argument("--no-cache", action="store_true",
                   help="check every folder afresh (by default unchanged folders reuse their last result)")


def run(args: argparse.Namespace, ctx: Context) -> int:
    from memd.commands._projects import preamble
    from memd.inspect import check_projects

    projects, notes = preamble(args, ctx)
    as_json = args.format == "json"
    note_stream = sys.stderr if as_json else sys.stdout
    for n in notes:
        print(n, file=note_stream)
    if projects is None:
        if as_json:
            print("[]")
        return 0
    report = check_projects(projects, ctx.config, cache_dir=None if args.no_cache else ctx.state_dir,
                            skip_missing=bool(args.all))
    results = report.results
    if as_json:
        import json

        sys.stdout.write(json.dumps([r.as_json() for r in results], indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(format_text(results, report.skipped))
    return 1 if report.has_errors else 0


def format_text(results: list[ProjectCheck], skipped: int = 0) -> str:
    from memd.core.findings import counts

    out: list[str] = []
    for r in results:
        if not r.exists:
            out.append(f"{r.project.name}: no memory folder ({r.project.memory_dir}): nothing to check")
            continue
        base = str(r.project.memory_dir)
        for f in r.findings:
            where = base if f.path == "." else f"{base}/{f.path}"
            out.append(f"{where}:{f.line}: {f.code} {f.severity}: {f.message}")
    c = counts(f for r in results for f in r.findings)
    checked = sum(1 for r in results if r.exists)
    summary = f"{checked} memory folder{'s' if checked != 1 else ''} checked"
    if skipped:
        summary += f" ({skipped} project{'s' if skipped != 1 else ''} without memory skipped)"
    if not any(c.values()):
        summary += ": no findings"
    else:
        summary += f": {c['error']} error(s), {c['warning']} warning(s), {c['info']} info"
    out.append(summary)
    return "\n".join(out) + "\n"
