"""memd rebuild: a deterministic rebuild of MEMORY.md (no model), shown as a unified diff.

Writes only MEMORY.md, after a snapshot, atomically, and only if it is unchanged since read;
with --dry-run it writes nothing. A person asking normalises (repeats merged, long entry lines
shortened, each action naming the words a cut leaves out); ``--minimal`` does only what the
unattended runs do (repair what is broken: a healthy index is left byte for byte). An entry whose
file is gone keeps the words after its link as plain text unless ``--drop-notes``. A project another
memd is writing is waited for (a bounded wait, ``memd.projlock``), then reported as such and left
unchanged; the other projects go on. Exit status: 0 when every index fits (or already did), 1 when one
cannot be fitted by safe moves or could not be written (its history could not be, or another memd kept
the project busy), 2 on usage errors.
"""

from __future__ import annotations

import sys

from memd.cli import project_args

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from memd.cli import Context
    from memd.layout import Project
    from memd.maintenance import RebuildResult

HELP = "rebuild MEMORY.md deterministically: unlink dangling, merge repeats, shorten, index orphans, fit"


def add_arguments(p: argparse.ArgumentParser) -> None:
    project_args(p)
    p.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")
    p.add_argument("--minimal", action="store_true",
                   help="only repair what is broken (dangling links, unindexed files, over budget), as the "
                        "nightly run does: no line shortened, no repeat merged within the budget")
    p.add_argument("--drop-notes", action="store_true",
                   help="drop an entry whose file is gone even when words after its link are in no other file "
                        "(each action quotes the words that go)")


def run(args: argparse.Namespace, ctx: Context) -> int:
    from memd.commands._projects import preamble, record_rebuild
    from memd.core.rebuild import NORMALISE, REPAIR
    from memd.errors import MemdError
    from memd.maintenance import RebuildResult, rebuild_project

    projects, notes = preamble(args, ctx)
    for n in notes:
        print(n)
    if projects is None:
        return 0
    status = 0
    out = sys.stdout
    for project in projects:
        if args.all and not project.memory_dir.is_dir():
            continue
        try:
            res = rebuild_project(project, ctx.config, ctx.state_dir, dry_run=args.dry_run,
                                  mode=REPAIR if args.minimal else NORMALISE, drop_notes=args.drop_notes)
        except MemdError as e:  # busy (another memd writes it), or its history cannot be written: not changed
            res = RebuildResult("", False, False, [str(e)], error=str(e))
        except Exception as e:  # one project's failure is its outcome, never the command's (the others go on)
            why = f"failed: {type(e).__name__}: {e}"
            res = RebuildResult("", False, False, [why], error=why)
        record_rebuild(ctx, project, res, dry_run=args.dry_run)  # the run log: `memd report` lists it
        out.write(format_result(project, res, dry_run=args.dry_run))
        if not res.fits or (res.changed and not res.written and not args.dry_run):
            status = 1
    return status


def format_result(project: Project, res: RebuildResult, *, dry_run: bool) -> str:
    """One project's part: a heading naming the project and its memory folder, the reasons it cannot
    fit (read before the diff, not after it), the diff (``--- a/<project>/MEMORY.md``), what was done."""
    name = project.name
    out = [f"# {name} ({project.memory_dir})\n"]
    out.extend(f"# {name}: {r}\n" for r in res.reasons)
    if res.diff:
        out.append(res.diff)
    out.extend(f"# {name}: {a}\n" for a in res.actions)
    if res.written:
        out.append(f"# {name}: MEMORY.md written (snapshot: {res.snapshot})\n")
    elif not res.changed and not res.reasons:
        out.append(f"# {name}: MEMORY.md is already in order\n")
    elif res.changed and dry_run:
        out.append(f"# {name}: dry run, nothing written\n")
    return "".join(out)
