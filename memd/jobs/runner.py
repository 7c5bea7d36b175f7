"""Run a job over projects: gates, the consolidate lock, events, and the run log.

The daemon and the foreground commands (``memd dream``, ``memd catchup``) both come through
``run_job``, so a run looks the same in the log and the run log wherever it started:
``job.start`` / ``job.finish`` (job, project, outcome, duration_s, counts, the four token kinds
``tokens_in``/``tokens_out``/``cache_read``/``cache_write`` and ``tokens_total``, cost) per project,
``job.skip`` with the gate that stopped a project, and one row per project run in the state store.

The per-project work comes from ``memd.jobs.dream`` / ``memd.jobs.catchup``, imported when a job
runs (they pull in the model client). Time comes from ``JobContext.clock`` only.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memd.errors import MemdError
from memd.jobs import (
    OUTCOMES,
    UNSUCCESSFUL,
    JobContext,
    Outcome,
    ProjectJob,
    ProjectOutcome,
    consolidated,
    note_consolidation,
)
from memd.jobs import gates as G

if TYPE_CHECKING:
    from memd.layout import Project

PER_PROJECT = {"dream": ("memd.jobs.dream", "dream_project"), "catchup": ("memd.jobs.catchup", "catchup_project")}
JOB_LOCK_NAME = "jobs.lock"
_COUNTED: tuple[Outcome, ...] = OUTCOMES  # job.end's order

_active_lock = threading.Lock()
_active: dict[int, str] = {}  # run-log ids of project runs in progress (closed on abandon)


def active_runs() -> list[int]:
    """Run-log rows still open in this process (a shutdown that abandons a job closes them)."""
    with _active_lock:
        return list(_active)


def load_project_job(job: str) -> ProjectJob:
    """The per-project function of a job."""
    mod_name, attr = PER_PROJECT[job]
    fn: ProjectJob = getattr(importlib.import_module(mod_name), attr)
    return fn


@dataclass
class JobResult:
    job: str
    outcomes: list[ProjectOutcome] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # project -> gate
    abandoned: bool = False
    duration_s: float = 0.0
    locked: dict[str, bool] = field(default_factory=dict)  # project not run for its lock -> it could not be written

    @property
    def not_run(self) -> bool:
        """Nothing could run because of a lock (held by another consolidation, or not writable)."""
        return not self.outcomes and bool(self.locked)

    def count(self, outcome: Outcome) -> int:
        return sum(1 for o in self.outcomes if o.outcome == outcome)

    @property
    def failed(self) -> bool:
        """A project's run did not do what was asked (refused, partial or failed): a command exits 1."""
        return any(o.outcome in UNSUCCESSFUL for o in self.outcomes)


class _Silent:
    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *a, **k: None


class JobLockError(MemdError):
    """Nothing could run: the job lock is held, or cannot be written (exit 3, "not run")."""

    exit_code = 3

    def __init__(self, message: str, *, held: bool, path: str | None = None) -> None:
        super().__init__(message, path=path)
        self.held = held


@contextlib.contextmanager
def job_lock(state_dir: Path, *, wait: bool = False) -> Iterator[None]:
    """One job at a time per user, whoever runs it (the daemon's worker or a foreground command).
    Raises JobLockError when it is held, or when it cannot be written (with the true reason)."""
    from memd.store import os_reason

    try:
        state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(state_dir / JOB_LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise JobLockError(f"not run: cannot write the job lock ({os_reason(e)})", held=False,
                           path=str(state_dir / JOB_LOCK_NAME)) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise JobLockError("not run: another memd job is running right now (the daemon's, or another "
                               "command's); try again when it has finished", held=True) from None
        yield
    finally:
        os.close(fd)


# ConsolidateLock.acquire's answers that mean "the lock", not "nothing to do" (no memory folder):
# held by someone, lost a race for it, or it cannot be written (a fault: the run did not happen).
_LOCK_HELD = ("held by", "lost the race")
_LOCK_UNWRITABLE = "cannot write the lock"


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:300]


def run_project(job: str, jc: JobContext, project: Project, work: ProjectJob,
                skips: dict[str, str] | None = None, locked: dict[str, bool] | None = None) -> ProjectOutcome | None:
    """One project: gates (dream), the lock (dream), the work, the events and the run-log row.
    Returns None when a gate skipped the project (``skips`` then gets "gate: reason"; ``locked`` gets
    the project when the lock stopped it, True when the lock could not be written)."""
    log = jc.log or _Silent()
    lock: G.ConsolidateLock | None = None
    if job == "dream" and not jc.dry_run:  # a dream killed while it held Claude Code's lock: give it back first
        for path in G.recover_abandoned(jc.state_dir, project.memory_dir):
            log.warning("dream.lock_given_back", project=project.name, path=path,
                        reason="the dream that held it was killed")
    # every job (dream, catch-up, sync): a project whose memory Claude Code switched off is left alone
    gate = G.memory_off(jc, project)
    if gate.passed and job == "dream":
        gate = G.check_dream(jc, project)
    if not gate.passed:
        log.info("job.skip", job=job, project=project.name, gate=gate.gate, reason=gate.reason)
        if skips is not None:
            skips[project.name] = f"{gate.gate}: {gate.reason}"
        return None
    if job == "dream" and jc.config.dream.honour_lock and not jc.dry_run:
        lock = G.ConsolidateLock(project.memory_dir, jc.config.dream.lock_stale_minutes, jc.clock, jc.state_dir)
        ok, why = lock.acquire()
        if not ok:
            log.info("job.skip", job=job, project=project.name, gate="lock", reason=why)
            if skips is not None:
                skips[project.name] = f"lock: {why}"
            if locked is not None and why.startswith((*_LOCK_HELD, _LOCK_UNWRITABLE)):
                locked[project.name] = why.startswith(_LOCK_UNWRITABLE)
            return None
    started = jc.clock.time()
    t0 = jc.clock.monotonic()
    # a dry run changes nothing: it is in the JSON log (dry_run=true) but not in the run log, where it
    # would count as a run that "changed nothing" and show in the check-in as if it had run
    record = jc.state is not None and not jc.dry_run
    try:
        run_id = jc.state.start_run(job, project.name, started) if record else None
    except BaseException:  # the run log cannot be written (a busy or broken state file): not run
        if lock is not None:
            lock.release(success=False)
        raise
    if run_id is not None:
        with _active_lock:
            _active[run_id] = project.name
    log.info("job.start", job=job, project=project.name, force=jc.force, dry_run=jc.dry_run)
    out = ProjectOutcome(project.name, "failed", error="interrupted")
    try:
        out = work(jc, project)
    except Exception as e:  # one project's failure never stops the others
        out = ProjectOutcome(project.name, "failed", error=_error_text(e))
    finally:
        if lock is not None:
            # a consolidation leaves the lock's mtime at this run (Claude Code's "last consolidation");
            # anything else rolls it back: the same rule as memd's own record below
            lock.release(success=consolidated(job, jc, out))
    duration = jc.clock.monotonic() - t0
    ended = jc.clock.time()
    billing = out.details.get("billing")  # the claude-plan backend: who paid (memd.llm.plan)
    summary = f"{out.message[:480]} [{billing}]" if isinstance(billing, str) and billing else out.message[:500]
    if jc.state is not None and run_id is not None:
        jc.state.finish_run(run_id, outcome=out.outcome, ended=ended, added=out.added, changed=out.changed,
                            deleted=out.deleted, tokens_in=out.tokens_in, tokens_out=out.tokens_out,
                            cache_read=out.cache_read, cache_write=out.cache_write, cost_usd=out.cost_usd,
                            cost_unknown=out.cost_unknown, error=out.error, summary=summary,
                            history_run=out.run_id or "")
        note_consolidation(jc, job, out)
        if job == "dream" and out.outcome not in ("skipped", "failed"):
            G.note_blocks(jc, project)  # the blocks it had before it, now seen (issue 21's blocks, gates)
    if run_id is not None:
        with _active_lock:
            _active.pop(run_id, None)
    out.run_id = out.run_id or (str(run_id) if run_id is not None else None)
    level = "warning" if out.outcome == "failed" else "info"
    getattr(log, level)("job.finish", job=job, project=project.name, outcome=out.outcome,
                        duration_s=round(duration, 3), added=out.added, changed=out.changed,
                        deleted=out.deleted, tokens_in=out.tokens_in, tokens_out=out.tokens_out,
                        cache_read=out.cache_read, cache_write=out.cache_write, tokens_total=out.tokens_total,
                        cost_usd=None if out.cost_unknown else round(out.cost_usd, 6),
                        **({"cost_unknown": True, "cost_usd_priced": round(out.cost_usd, 6)} if out.cost_unknown
                           else {}), **({"billing": billing} if billing else {}), message=out.message, error=out.error)
    return out


def run_whole(job: str, jc: JobContext, fn: Callable[[JobContext], str]) -> str:
    """A job that is not per project (the check-in): the same events and one run-log row.
    ``fn`` returns a short summary for the row; an exception is a failed run."""
    log = jc.log or _Silent()
    t0 = jc.clock.monotonic()
    run_id = jc.state.start_run(job, None, jc.clock.time()) if jc.state is not None and not jc.dry_run else None
    log.info("job.start", job=job, project=None, dry_run=jc.dry_run)
    # a whole-run job (the check-in) writes its report in memd's own folder: memory is unchanged
    outcome, summary, error = "unchanged", "", None
    try:
        summary = fn(jc)
    except Exception as e:
        outcome, error = "failed", _error_text(e)
    if run_id is not None:
        jc.state.finish_run(run_id, outcome=outcome, ended=jc.clock.time(), error=error, summary=summary[:500])
    getattr(log, "warning" if error else "info")(
        "job.finish", job=job, project=None, outcome=outcome, duration_s=round(jc.clock.monotonic() - t0, 3),
        error=error)
    return outcome


def run_job(job: str, jc: JobContext, projects: list[Project], work: ProjectJob | None = None,
            *, before_project: Callable[[Project], Any] | None = None,
            after_project: Callable[[Project, ProjectOutcome | None], Any] | None = None) -> JobResult:
    """Run ``job`` over ``projects`` in order; stops between projects when ``jc.stop`` is set."""
    log = jc.log or _Silent()
    fn = work or load_project_job(job)
    result = JobResult(job)
    t0 = jc.clock.monotonic()
    log.info("job.begin", job=job, projects=len(projects), force=jc.force, dry_run=jc.dry_run)
    for project in projects:
        if jc.stop.is_set():
            result.abandoned = True
            log.warning("job.abandoned", job=job, remaining=len(projects) - len(result.outcomes)
                        - len(result.skipped))
            break
        if before_project is not None:
            before_project(project)
        out = run_project(job, jc, project, fn, result.skipped, result.locked)
        if out is None:
            result.skipped.setdefault(project.name, "gate")
        else:
            result.outcomes.append(out)
        if after_project is not None:
            after_project(project, out)
    result.duration_s = jc.clock.monotonic() - t0
    counts = {o: result.count(o) for o in _COUNTED}
    if jc.state is not None and not jc.dry_run:
        # the job as a whole, for `memd status` (the run log has one row per project)
        jc.state.set(f"job.{job}.last", json.dumps({
            "ended": jc.clock.time(), "duration_s": round(result.duration_s, 3), "projects": len(projects),
            "ran": len(result.outcomes), "gated": len(result.skipped), "abandoned": result.abandoned,
            "force": jc.force, "counts": {k: v for k, v in counts.items() if v}}))
    log.info("job.end", job=job, duration_s=round(result.duration_s, 3), ran=len(result.outcomes),
             gated=len(result.skipped), abandoned=result.abandoned, **{k: v for k, v in counts.items() if v})
    return result
