"""The viewer's actions (issue 26): only those the CLI has, each a confirmation page (GET) that says what
will happen and a POST that runs the CLI's own code under the project's lock.

- undo a run: the plan is ``memd undo --dry-run``'s (``memd.commands.undo.undo``), with the diff it puts
  back; the POST is ``memd undo PROJECT RUN`` (the same function).
- retry the parked and deferred catch-up spans: the spans are the state's tries (``StateStore.span_tries``,
  held as ``memd.jobs.spantries.span_state`` judges them), each with an excerpt of its transcript
  (``memd.transcripts.scan.span_excerpt``); the POST is ``memd catchup PROJECT --retry``
  (``memd.commands.catchup.retry`` under the job lock, ``memd.commands._jobrun.run_once``): the spans
  start over and the catch-up runs now, in the request, as the CLI runs it in the foreground.
- accept what sync holds: ``memd sync --keep-local PROJECT`` or ``--take-remote PROJECT``
  (``memd.sync.job.run_sync``, as `memd status` tells the user to run it).

An outcome says what happened, in the job's own words (``changed``, ``unchanged``, ``skipped``,
``refused`` or ``failed``, with the reason), never more. Every text shown passes
``memd.core.secrets.redact``; the templates escape it.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memd.core.secrets import redact

if TYPE_CHECKING:
    from memd.cli import Context
    from memd.config import Config
    from memd.jobs.runner import JobResult
    from memd.layout import Project

Page = tuple[str, dict[str, Any]] | None
SIDES = {"keep-local": "this machine's version", "take-remote": "the remote's version"}
_MAX_DIFF_LINES = 4000
_MAX_EXCERPTS = 20  # spans whose transcript is read for an excerpt (each read is bounded too)


@dataclass
class Part:
    what: str
    outcome: str  # the job's word: changed, unchanged, skipped, refused, failed, partial
    text: str


@dataclass
class Outcome:
    title: str
    project: str
    parts: list[Part]
    lines: list[str] = field(default_factory=list)  # what the CLI prints for the same run

    @property
    def outcome(self) -> str:
        return self.parts[0].outcome


@dataclass
class UndoPlan:
    project: str
    run: str
    job: str
    when: float
    summary: str
    restore: list[str]
    remove: list[str]
    skipped: list[tuple[str, str]]
    diff: list[str]  # from the files as they are now to what the undo puts back
    more: int


@dataclass
class SpanView:
    session: str
    transcript: str  # the file's name
    start: int
    tries: int
    last_try: float
    state: str  # "parked" | "deferred" | "due" (``memd.jobs.spantries.span_state``)
    reason: str
    excerpt: str


@dataclass
class HeldChoice:
    side: str  # "keep-local" | "take-remote"
    kept: str  # which version stays
    files: list[tuple[str, str]]  # (file, why it is held)
    command: str


# ---------------------------------------------------------------------- what each action would do

def undo_plan(ctx: Context, project: Project, run: str) -> UndoPlan:
    """``memd undo PROJECT RUN --dry-run``'s plan, with the unified diff from each file as it is now to
    what the undo puts back (a file it removes: to nothing)."""
    from memd import history
    from memd.commands.undo import undo
    from memd.ui.diffs import folder_diff

    res, _ = undo(ctx, project, run, dry_run=True)
    rec = history.find_run(ctx.state_dir, project.name, res.run)
    before = history.files_at(ctx.state_dir, project.name, rec.before) if rec.before else {}
    after = history.files_at(ctx.state_dir, project.name, rec.after)
    touched = set(res.restored) | set(res.removed)
    diff = folder_diff({k: v for k, v in after.items() if k in touched},
                       {k: v for k, v in before.items() if k in touched})
    return UndoPlan(project.name, rec.run, rec.job, rec.time, redact(rec.summary),
                    [redact(r) for r in res.restored], [redact(r) for r in res.removed],
                    [(redact(rel), redact(why)) for rel, why in res.skipped],
                    [redact(d) for d in diff[:_MAX_DIFF_LINES]], max(0, len(diff) - _MAX_DIFF_LINES))


def span_views(project: Project, config: Config, state_dir: Path) -> list[SpanView]:
    """The project's catch-up spans with recorded tries (what ``--retry`` starts over), parked first,
    each with the first words of its transcript from where the tries are for (redacted)."""
    from memd.jobs.spantries import span_state
    from memd.state import StateStore
    from memd.transcripts.scan import span_excerpt
    from memd.transcripts.sessions import session_id_for

    if not (state_dir / "state.sqlite3").exists():  # the viewer never creates memd's state
        return []
    now = time.time()
    with StateStore.open(state_dir) as st:
        tries = st.span_tries(project.name)
        sessions = {t.path: t.session_id for t in st.transcripts(project.name)}
    order = {"parked": 0, "deferred": 1, "due": 2}
    rows = sorted(tries.items(), key=lambda kv: (order[span_state(kv[1], now, config)], -kv[1].last_try))
    out: list[SpanView] = []
    for i, (path, tr) in enumerate(rows):
        excerpt = f"(not read: the first {_MAX_EXCERPTS} spans show theirs)"
        if i < _MAX_EXCERPTS:
            try:
                excerpt = span_excerpt(path, tr.start, config)
            except (OSError, ValueError) as e:
                excerpt = f"(the transcript cannot be read: {e})"
        out.append(SpanView(redact(sessions.get(path) or session_id_for(path)), redact(path.name), tr.start,
                            tr.tries, tr.last_try, span_state(tr, now, config), redact(tr.reason), redact(excerpt)))
    return out


def held_choices(state_dir: Path, project: str) -> list[HeldChoice]:
    """The ways `memd status` gives to accept the files sync holds in the project: ``--keep-local``
    (held remote files, and files an undo keeps here), ``--take-remote`` (files an undo keeps here)."""
    from memd.sync import held

    h = held.load(state_dir, project)
    files = [(rel, f"from the remote, held here: {row.get('reason', 'refused')}")
             for rel, row in sorted(h.files.items())]
    undone = [(rel, f"undone here by `memd undo` ({row.get('run', '?')}), kept local")
              for rel, row in sorted(h.undone.items())]
    out: list[HeldChoice] = []
    if files or undone:
        out.append(HeldChoice("keep-local", SIDES["keep-local"], [(redact(r), redact(w)) for r, w in files + undone],
                              f"memd sync --keep-local {shlex.quote(project)}"))
    if undone:
        out.append(HeldChoice("take-remote", SIDES["take-remote"], [(redact(r), redact(w)) for r, w in undone],
                              f"memd sync --take-remote {shlex.quote(project)}"))
    return out


# ---------------------------------------------------------------------- the actions themselves

@contextmanager
def _locked(ctx: Context, project: Project, what: str) -> Iterator[None]:
    """The project's lock (``memd.projlock``) around the whole action: no other memd writes it meanwhile."""
    from memd.projlock import project_lock

    with project_lock(ctx.state_dir, project.name, f"{what} (memd ui)"):
        yield


def _failure(e: BaseException) -> Part:
    from memd.jobs.runner import JobLockError
    from memd.projlock import ProjectBusyError

    if isinstance(e, ProjectBusyError | JobLockError):
        return Part("not run", "refused", redact(str(e)))
    return Part("not run", "failed", redact(str(e) or type(e).__name__))


def do_undo(ctx: Context, project: Project, run: str) -> Outcome:
    from memd.commands.undo import undo
    from memd.errors import MemdError

    title = f"Undo {run}"
    try:
        with _locked(ctx, project, "undo"):
            res, lines = undo(ctx, project, run, dry_run=False)
    except (MemdError, OSError) as e:
        return Outcome(title, project.name, [_failure(e)])
    lines = [redact(ln) for ln in lines]
    left = "; ".join(f"{rel}: {why}" for rel, why in res.skipped)
    if res.restored or res.removed:
        part = Part(f"undo {res.run}", "changed", f"{len(res.restored)} restored, {len(res.removed)} removed"
                    + (f"; left {left}" if left else ""))
    elif res.skipped:
        part = Part(f"undo {res.run}", "refused", f"nothing reverted: {left}")
    else:
        part = Part(f"undo {res.run}", "unchanged", "nothing to revert: the files are as they were before the run")
    return Outcome(title, project.name, [Part(part.what, part.outcome, redact(part.text))], lines)


def _job_part(what: str, result: JobResult, project: str) -> Part:
    for out in result.outcomes:
        if out.project == project:
            text = out.error or out.message or ""
            changes = f"+{out.added} ~{out.changed} -{out.deleted}"
            return Part(what, out.outcome, redact(f"({changes}) {text}".strip()))
    if project in result.skipped:
        return Part(what, "skipped", redact(f"not run ({result.skipped[project]})"))
    return Part(what, "skipped", "not run")


def _run(ctx: Context, project: Project, job: str, work: Callable[[Any, list[Any]], Any]) -> JobResult:
    """The job as its command runs it (the job lock first, as the daemon takes it), the project's lock
    held around the work."""
    from memd import logs
    from memd.commands._jobrun import run_once

    cfg = ctx.config  # events go to memd's JSON log, as the command's do (not to the viewer's terminal)
    logs.setup(ctx.state_dir, level=cfg.logging.level, console=False, max_bytes=cfg.logging.max_bytes,
               backups=cfg.logging.backups)

    def locked(jc: Any, projects: list[Any]) -> Any:
        with _locked(ctx, project, job):
            return work(jc, projects)

    return run_once(job, ctx, [project], force=False, dry_run=False, work=locked)


def do_retry(ctx: Context, project: Project) -> Outcome:
    """``memd catchup PROJECT --retry``: the spans start over, then the catch-up runs now."""
    from memd.commands.catchup import retry
    from memd.errors import MemdError

    marked: list[int] = []

    def work(jc: Any, projects: list[Any]) -> Any:
        marked.append(len(jc.state.span_tries(project.name)))  # what retry_spans is about to start over
        return retry(jc, projects)

    title = "Retry the parked catch-up spans"
    try:
        result = _run(ctx, project, "catchup", work)
    except (MemdError, OSError) as e:
        return Outcome(title, project.name, [_failure(e)])
    n = marked[0] if marked else 0
    spans = Part("spans", "changed" if n else "unchanged",
                 f"{n} span(s) start over: tried at this catch-up and later ones" if n
                 else "no span had tries to start over")
    return Outcome(title, project.name, [spans, _job_part("catch-up now", result, project.name)])


def do_held(ctx: Context, project: Project, side: str) -> Outcome:
    """``memd sync PROJECT --keep-local`` or ``--take-remote``."""
    from memd.errors import MemdError
    from memd.sync import held
    from memd.sync.job import run_sync

    def work(jc: Any, projects: list[Any]) -> Any:
        return run_sync(jc, projects, named=True, interactive=False, keep_local=side == "keep-local",
                        take_remote=side == "take-remote")

    title = f"Sync {project.name} keeping {SIDES[side]}"
    try:
        result = _run(ctx, project, "sync", work)
    except (MemdError, OSError) as e:
        return Outcome(title, project.name, [_failure(e)])
    still = [redact(ln.removeprefix(f"sync: {project.name}: "))
             for ln in held.status_lines(ctx.state_dir, [project.name]).splitlines()]
    return Outcome(title, project.name, [_job_part(f"memd sync --{side}", result, project.name)],
                   [f"still held: {ln}" for ln in still] or ["sync holds nothing more here"])


# ---------------------------------------------------------------------- the pages (GET) and posts (POST)

def _find(ctx: Context, name: str) -> Project | None:
    from memd import layout

    return next((p for p in layout.list_projects(ctx.claude_dir) if p.name == name), None)


def confirm_pages(ctx: Context) -> dict[str, Callable[[list[str]], Page]]:
    """``/undo/<project>/<run>``, ``/retry/<project>``, ``/held/<project>/<side>``: what will happen."""

    def undo_page(rest: list[str]) -> Page:
        p = _find(ctx, rest[0]) if len(rest) == 2 else None
        if p is None:
            return None
        return "confirm_undo.html", {"plan": undo_plan(ctx, p, rest[1])}

    def retry_page(rest: list[str]) -> Page:
        p = _find(ctx, rest[0]) if len(rest) == 1 else None
        if p is None:
            return None
        return "confirm_retry.html", {"project": p.name, "spans": span_views(p, ctx.config, ctx.state_dir)}

    def held_page(rest: list[str]) -> Page:
        p = _find(ctx, rest[0]) if len(rest) == 2 and rest[1] in SIDES else None
        if p is None:
            return None
        choice = next((c for c in held_choices(ctx.state_dir, p.name) if c.side == rest[1]), None)
        return "confirm_held.html", {"project": p.name, "side": rest[1], "choice": choice}

    return {"undo": undo_page, "retry": retry_page, "held": held_page}


def posts(ctx: Context) -> dict[str, Callable[[list[str]], Page]]:
    """The POSTs behind the confirmations (the server has checked the token, the origin and the CSRF token)."""

    def undo_post(rest: list[str]) -> Page:
        p = _find(ctx, rest[0]) if len(rest) == 2 else None
        return None if p is None else ("outcome.html", {"done": do_undo(ctx, p, rest[1])})

    def retry_post(rest: list[str]) -> Page:
        p = _find(ctx, rest[0]) if len(rest) == 1 else None
        return None if p is None else ("outcome.html", {"done": do_retry(ctx, p)})

    def held_post(rest: list[str]) -> Page:
        p = _find(ctx, rest[0]) if len(rest) == 2 and rest[1] in SIDES else None
        return None if p is None else ("outcome.html", {"done": do_held(ctx, p, rest[1])})

    return {"undo": undo_post, "retry": retry_post, "held": held_post}


def project_extras(ctx: Context, project: Project) -> dict[str, Any]:
    """What the project page shows of the actions: the spans a retry would start over and the ways to
    accept what sync holds (each links to its confirmation)."""
    return {"spans": span_views(project, ctx.config, ctx.state_dir),
            "held_choices": held_choices(ctx.state_dir, project.name)}
