"""The daemon's worker: jobs one at a time, incremental transcript scans, automatic relief.

A component the daemon holds (``Worker``), on two threads of its own, each with its own StateStore.
The main loop hands it work (``submit``, ``scan``, ``update``); the worker reports back only through
the loop's queue, as messages the loop acts on (nothing of the worker's is read across threads):

- ``("job_started", JobRequest)`` / ``("job_done", JobRequest)``: a job began / ended (however it ended)
- ``("project_busy", name)`` / ``("after_project", name)``: the job holds / let go of a project's folder
- ``("enqueue", JobRequest)``: a follow-up job (relief that could not fit an index asks for a dream)

Messages are put before the work they announce, so the loop always learns that a project is busy
before any write of the job to it can reach the debouncer.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from queue import Empty, Queue, SimpleQueue
from typing import TYPE_CHECKING, Any

from memd import layout
from memd.clock import Clock
from memd.config import Config
from memd.errors import MemdError
from memd.state import StateError

if TYPE_CHECKING:
    from memd.daemon.child import ChildJob

Message = tuple[str, Any]
JOB_LOCK_RETRY_S = 2.0


@dataclass
class JobRequest:
    job: str  # dream | catchup | checkin | relief | sync
    projects: list[str] | None = None  # None: every project
    force: bool = False
    reason: str = "schedule"

    def key(self) -> tuple[str, tuple[str, ...] | None, bool]:
        """Two requests with one key are one piece of work (the loop queues it once)."""
        return (self.job, tuple(self.projects) if self.projects is not None else None, self.force)


def project_named(claude_dir: Path, name: str) -> layout.Project:
    """The project of a folder name under ``projects/`` (as the watcher and the messages name them)."""
    return layout.project_for_folder(claude_dir, layout.projects_root(claude_dir) / name)


class Worker:
    """``Worker(config, claude_dir, state_dir, clock, outbox, log, stop)``; ``start`` its threads, ``submit``
    jobs and ``scan`` projects, ``update`` its config after a reload, ``close`` and ``join`` at the end.

    ``stop`` is the daemon's stop event: a running job abandons between steps, no queued one starts.
    """

    def __init__(self, config: Config, claude_dir: Path, state_dir: Path, clock: Clock,
                 outbox: SimpleQueue[Message], log: Any, stop: threading.Event) -> None:
        self._settings = (config, claude_dir)  # replaced whole by update(): read once per request
        self.state_dir = state_dir
        self.clock = clock
        self.outbox = outbox
        self.log = log
        self.stop = stop
        self._jobs: Queue[JobRequest | None] = Queue()
        self._scans: Queue[str | None] = Queue()
        self._threads: dict[str, threading.Thread] = {}
        self._child: ChildJob | None = None  # the running job's child process, when it has one

    # ------------------------------------------------------------------ the main loop's side

    def start(self) -> None:
        for name, target in (("memd-worker", self._serve_jobs), ("memd-scanner", self._serve_scans)):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads[name] = t

    def submit(self, req: JobRequest) -> None:
        self._jobs.put(req)

    def scan(self, project: str) -> None:
        self._scans.put(project)

    def update(self, config: Config, claude_dir: Path) -> None:
        """A reloaded config: requests started from now on use it."""
        self._settings = (config, claude_dir)

    def close(self) -> None:
        """No more work: each thread ends after what it is doing."""
        self._jobs.put(None)
        self._scans.put(None)

    def abort(self) -> bool:
        """Kill the running job's child process now (a shutdown past its bound): the project in flight
        ends ``failed`` ("abandoned"), the runner closes its row and gives its lock back, the job thread
        ends. True when there was a child to kill."""
        child = self._child
        return child is not None and child.kill()

    def alive(self) -> bool:
        """The job thread is running (it may be idle)."""
        t = self._threads.get("memd-worker")
        return t is not None and t.is_alive()

    def join(self, timeout: float, *, jobs: bool = True) -> list[str]:
        """Wait up to ``timeout`` for each thread (the job thread only when ``jobs``); the names still alive."""
        for name, t in self._threads.items():
            if jobs or name != "memd-worker":
                t.join(timeout)
        return [name for name, t in self._threads.items() if t.is_alive()]

    def run_queued(self, state: Any) -> int:
        """Run the requests already queued, on the calling thread (the job thread does the same, one
        at a time); returns how many ran. In-process tests drive the worker through this."""
        n = 0
        while self._take(state, block=False):
            n += 1
        return n

    # ------------------------------------------------------------------ the job thread

    def _serve_jobs(self) -> None:
        from memd.state import StateStore

        with StateStore.open(self.state_dir) as state:
            while self._take(state, block=True):
                pass

    def _take(self, state: Any, *, block: bool) -> bool:
        """Run the next request; False when there is none (not blocking) or the worker must end."""
        try:
            req = self._jobs.get(block=block)
        except Empty:
            return False
        if req is None or self.stop.is_set():
            return False
        self.outbox.put(("job_started", req))
        try:
            self._run_request(req, state)
        except StateError as e:  # the run log cannot be written (busy, full, unwritable): the job stops
            self.log.error("job.not_run", job=req.job, projects=req.projects, reason=str(e))
        except Exception as e:
            self.log.exception("job.crashed", job=req.job, error=f"{type(e).__name__}: {e}")
        finally:
            self.outbox.put(("job_done", req))
        return True

    def _run_request(self, req: JobRequest, state: Any) -> None:
        from memd.jobs import JobContext, runner

        config, claude_dir = self._settings
        jc = JobContext(config=config, claude_dir=claude_dir, state_dir=self.state_dir, state=state,
                        clock=self.clock, force=req.force, stop=self.stop, log=self.log,
                        unattended=req.reason == "schedule")  # a user's trigger is run now, at full price
        with self._job_lock():
            if self.stop.is_set():
                return
            if req.job == "checkin":
                from memd.jobs.checkin import run_checkin

                runner.run_whole("checkin", jc, lambda j: str(run_checkin(j) or ""))
                return
            projects = self._select(claude_dir, req.projects)
            if req.job == "relief":
                self._relief(jc, projects)
                return

            def before(p: layout.Project) -> None:
                self.outbox.put(("project_busy", p.name))

            def after(p: layout.Project, out: Any) -> None:
                self.outbox.put(("after_project", p.name))
                if config.sync.remote and req.job != "sync" and out is not None and out.outcome == "changed":
                    self.outbox.put(("enqueue", JobRequest("sync", [p.name], reason="after_run")))  # issue 15

            if req.job == "sync":
                from memd.sync.job import run_sync

                run_sync(jc, projects, before_project=before, after_project=after)  # projects with an identity
                return
            child = self._child_for(req.job, config, claude_dir)
            try:
                runner.run_job(req.job, jc, projects, child, before_project=before, after_project=after)
            finally:
                self._child = None
                if child is not None:
                    child.close()

    def _child_for(self, job: str, config: Config, claude_dir: Path) -> ChildJob | None:
        """The work of a model job in a child process (``memd.daemon.child``), unless configured inline."""
        from memd.daemon.child import JOBS, ChildJob

        if job not in JOBS or not config.daemon.isolate_jobs:
            return None
        self._child = ChildJob(job, config, claude_dir, self.state_dir, log=self.log,
                               timeout_s=config.daemon.job_timeout_s)
        return self._child

    @contextlib.contextmanager
    def _job_lock(self) -> Iterator[None]:
        """The per-user job lock; waits (stop-aware) while a foreground `memd dream` holds it."""
        from memd.jobs.runner import job_lock

        waited = False
        while True:
            held = job_lock(self.state_dir)
            try:
                held.__enter__()
                break
            except MemdError:
                if self.stop.is_set():
                    raise
                if not waited:
                    self.log.info("job.waiting", reason="another memd job is running (a foreground command)")
                    waited = True
                self.stop.wait(JOB_LOCK_RETRY_S)
        try:
            yield
        finally:
            held.__exit__(None, None, None)

    def _select(self, claude_dir: Path, names: list[str] | None) -> list[layout.Project]:
        if names is None:
            return layout.list_projects(claude_dir)
        out = []
        for n in names:
            try:
                out.append(layout.resolve_project(n, claude_dir))
            except MemdError:
                self.log.warning("job.unknown_project", project=n)
        return out

    def _relief(self, jc: Any, projects: list[layout.Project]) -> None:
        from memd import maintenance
        from memd.core.rebuild import REPAIR

        for p in projects:
            self.outbox.put(("project_busy", p.name))
            try:
                res = maintenance.rebuild_project(p, jc.config, self.state_dir, dry_run=False, mode=REPAIR,
                                                  max_drop_share=jc.config.dream.max_delete_share, clock=jc.clock)
            except Exception as e:
                self.log.warning("relief.failed", project=p.name, error=f"{type(e).__name__}: {e}")
                continue
            finally:
                self.outbox.put(("after_project", p.name))
            if res.refused:
                # most of the index points at files that are gone: that needs a person, not a janitor
                # (and not a dream either: its guards would refuse the same drop)
                self.log.warning("relief.refused", project=p.name, reason=res.reasons[-1] if res.reasons else "")
                continue
            self.log.info("relief.rebuilt", project=p.name, written=res.written, fits=res.fits)
            if not res.fits:
                self.outbox.put(("enqueue", JobRequest("dream", [p.name], force=True, reason="auto_relief")))

    # ------------------------------------------------------------------ the scanner thread

    def _serve_scans(self) -> None:
        from memd.state import StateStore
        from memd.transcripts.scan import scan_project

        with StateStore.open(self.state_dir) as state:
            while True:
                name = self._scans.get()
                if name is None or self.stop.is_set():
                    return
                names = {name}
                with contextlib.suppress(Empty):
                    while True:
                        more = self._scans.get_nowait()
                        if more is None:
                            return
                        names.add(more)
                config, claude_dir = self._settings
                for n in sorted(names):
                    if self.stop.is_set():
                        return
                    try:
                        scan_project(project_named(claude_dir, n), state, config, now=self.clock.time())
                    except Exception as e:
                        self.log.warning("scan.failed", project=n, error=f"{type(e).__name__}: {e}")
