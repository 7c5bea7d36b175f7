"""`memd catchup [PROJECT] [--dry-run] [--retry]`: extract what sessions missed, once, now, without the
daemon. ``--retry`` first lets the project's parked and deferred spans be tried again (their tries
start over: ``memd.jobs.catchup.due_sessions``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memd.cli import Context

HELP = "run the catch-up once, now, in the foreground (every project unless PROJECT is given)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from memd.cli import project_args

    project_args(p, many=False)
    p.add_argument("--dry-run", action="store_true", help="show what would be extracted; change nothing")
    p.add_argument("--retry", action="store_true",
                   help="try the spans parked after failed, refused or partial runs again, now")


def run(args: argparse.Namespace, ctx: Context) -> int:
    from memd.commands._jobrun import run_foreground

    if not args.retry:
        return run_foreground("catchup", args, ctx, force=False)
    return run_foreground("catchup", args, ctx, force=False, work=retry)


def retry(jc: Any, projects: list[Any]) -> Any:
    """``--retry``'s work (`memd ui`'s confirmed retry runs it too): the projects' parked and deferred
    spans start over (``StateStore.retry_spans``, the parked warning cleared), then the catch-up runs."""
    from memd.jobs.catchup import PARKED_WARNING
    from memd.jobs.runner import run_job

    if not jc.dry_run:
        for p in projects:
            if jc.state.retry_spans(p.name):
                jc.state.clear_warning(p.name, PARKED_WARNING)
    return run_job("catchup", jc, projects)
