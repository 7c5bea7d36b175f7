"""Shared by `memd dream`, `memd catchup` and `memd sync`: run one job once in the foreground, no daemon needed."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memd.cli import Context
    from memd.jobs.runner import JobResult


def run_foreground(job: str, args: argparse.Namespace, ctx: Context, *, force: bool,
                   work: Callable[[Any, list[Any]], Any] | None = None) -> int:
    """``work(jc, projects) -> JobResult`` runs the job (default: ``runner.run_job``)."""
    import sys

    from memd import logs
    from memd.commands._projects import select

    projects = select(args, ctx, default_all=True)  # an explicit --claude-dir must exist
    cfg = ctx.config
    # events go to the same JSON log as the daemon's (the run is part of the record), and to the
    # terminal when there is one
    logs.setup(ctx.state_dir, level=cfg.logging.level, max_bytes=cfg.logging.max_bytes,
               backups=cfg.logging.backups, light=job == "sync")  # a sync is short: no structlog (issue 33)
    result = run_once(job, ctx, projects, force=force, dry_run=args.dry_run, work=work, bar=True)
    off = None
    if job in ("dream", "catchup"):  # a sync never reaches the model (nor imports its client)
        from memd.llm.client import jobs_off_reason

        off = jobs_off_reason(cfg)
        if off is None and cfg.model.backend == "claude-plan" and any(o.model_off for o in result.outcomes):
            off = _month_spent(ctx)  # the month's cap (model.monthly_budget_usd) stopped model work
    if off:
        print(off[0].upper() + off[1:] + ".")  # said once, not once per project
    for out in result.outcomes:
        changes = f"+{out.added} ~{out.changed} -{out.deleted}"
        # model work being off was said once above: each project says only what it did
        # the sentence (a sync's failure says what happened and what the server said), and the error's kind
        # when it adds something; a crash has only its error text
        note = out.detail if off and out.model_off else out.message
        if out.error and out.error not in note:
            note = f"{note} [{out.error}]" if note else out.error
        print(f"{out.project}: {out.outcome} ({changes}){': ' + note if note else ''}")
        diff = out.details.get("diff")
        if args.dry_run and isinstance(diff, str) and diff:
            sys.stdout.write(diff if diff.endswith("\n") else diff + "\n")
    for name, why in result.skipped.items():
        print(f"{name}: not run ({why})")
    if not projects:
        print("no projects", file=sys.stderr)
    return exit_code(result)


def _month_spent(ctx: Context) -> str | None:
    import time

    from memd.llm import plan
    from memd.state import StateStore

    with StateStore.open(ctx.state_dir) as state:
        return plan.budget_reason(ctx.config, state, time.time())


def run_once(job: str, ctx: Context, projects: list[Any], *, force: bool, dry_run: bool,
             work: Callable[[Any, list[Any]], Any] | None = None, bar: bool = False) -> JobResult:
    """The job over ``projects`` under the job lock (``JobLockError`` when another job runs), with a
    JobContext on memd's state: what the commands run, and `memd ui`'s confirmed actions."""
    from memd import logs
    from memd.jobs import JobContext
    from memd.jobs.runner import job_lock, run_job
    from memd.state import StateStore

    log = logs.get_logger(f"memd.{job}")
    with job_lock(ctx.state_dir), StateStore.open(ctx.state_dir) as state:
        jc = JobContext(config=ctx.config, claude_dir=ctx.claude_dir, state_dir=ctx.state_dir, state=state,
                        force=force, dry_run=dry_run, log=log)
        if not bar:
            return run_job(job, jc, projects) if work is None else work(jc, projects)
        from memd.commands._progress import progress  # a bar on a terminal only

        with progress(len(projects), job) as step:
            if work is None:
                return run_job(job, jc, projects, before_project=lambda p: step(p.name))
            return work(jc, projects)  # type: ignore[no-any-return]


def exit_code(result: JobResult) -> int:
    """0 done; 1 a project refused, failed or partial, or its lock could not be written while others
    ran; 3 not run: nothing could run because of a lock (held, or not writable). docs/daemon.md."""
    if result.failed:
        return 1
    if result.not_run:
        return 3
    return 1 if any(result.locked.values()) else 0
