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

from memd.cli import project_args
from memd.commands._checkquick import _config as _config  # the quick path's (tests/test_cli_imports.py)
from memd.commands._checkquick import from_cache
from memd.commands._checkquick import quick as quick
from memd.commands._checkreport import code_filter
from memd.commands._checkreport import report as _report

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from memd.cli import Context

HELP = "lint memory folders: budget, links, duplicates, frontmatter, relative dates, secrets"



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
