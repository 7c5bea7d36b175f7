"""The daemon's worker threads: jobs one at a time, transcript scans, automatic relief.

A mixin of ``Daemon`` (memd.daemon.server) kept apart so the main loop reads on its own. These
methods run on their own threads with their own StateStore; they talk back to the main loop only
through ``self.queue`` ("after_project", "job_done", "enqueue").
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from queue import Empty, Queue, SimpleQueue
from typing import Any

from memd import layout
from memd.config import Config
from memd.errors import MemdError


@dataclass
class JobRequest:
    job: str  # dream | catchup | checkin | relief
    projects: list[str] | None = None  # None: every project
    force: bool = False
    reason: str = "schedule"

    def key(self) -> tuple[str, tuple[str, ...] | None, bool]:
        return (self.job, tuple(self.projects) if self.projects is not None else None, self.force)


class JobWorker:
    """Worker-thread side of the daemon (attributes are the Daemon's)."""

    config: Config
    claude_dir: Path
    state_dir: Path
    stop: threading.Event
    log: Any
    clock: Callable[[], datetime]
    queue: SimpleQueue[tuple[str, Any]]
    jobs: Queue[JobRequest | None]
    scans: Queue[str | None]
    current: JobRequest | None
    busy_project: str | None

    def _project(self, name: str) -> layout.Project:
        root = layout.projects_root(self.claude_dir)
        return layout.project_for_folder(self.claude_dir, root / name)

    def _worker(self) -> None:
        from memd.state import StateStore

        with StateStore.open(self.state_dir) as state:
            while True:
                req = self.jobs.get()
                if req is None or self.stop.is_set():
                    return
                self.current = req
                try:
                    self._run_request(req, state)
                except Exception as e:
                    self.log.exception("job.crashed", job=req.job, error=f"{type(e).__name__}: {e}")
                finally:
                    self.current = None
                    self.busy_project = None
                    self.queue.put(("job_done", req.key()))

    def _run_request(self, req: JobRequest, state: Any) -> None:
        from memd.clock import SYSTEM
        from memd.jobs import JobContext, runner

        jc = JobContext(config=self.config, claude_dir=self.claude_dir, state_dir=self.state_dir, state=state,
                        clock=SYSTEM, force=req.force, stop=self.stop, log=self.log)  # merge: clock=self.clock
        with self._job_lock():
            if self.stop.is_set():
                return
            if req.job == "checkin":
                from memd.jobs.checkin import run_checkin

                runner.run_whole("checkin", jc, lambda j: str(run_checkin(j) or ""))
                return
            projects = self._select(req.projects)
            if req.job == "relief":
                self._relief(jc, projects)
                return

            def before(p: layout.Project) -> None:
                self.busy_project = p.name

            def after(p: layout.Project, out: Any) -> None:
                self.busy_project = None
                self.queue.put(("after_project", p.name))

            runner.run_job(req.job, jc, projects, before_project=before, after_project=after)

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
                self.stop.wait(2.0)
        try:
            yield
        finally:
            held.__exit__(None, None, None)

    def _select(self, names: list[str] | None) -> list[layout.Project]:
        if names is None:
            return layout.list_projects(self.claude_dir)
        out = []
        for n in names:
            try:
                out.append(layout.resolve_project(n, self.claude_dir))
            except MemdError:
                self.log.warning("job.unknown_project", project=n)
        return out

    def _relief(self, jc: Any, projects: list[layout.Project]) -> None:
        from memd import maintenance

        for p in projects:
            self.busy_project = p.name
            try:
                res = maintenance.rebuild_project(p, jc.config, self.state_dir, dry_run=False,
                                                  max_drop_share=jc.config.dream.max_delete_share)
            except Exception as e:
                self.log.warning("relief.failed", project=p.name, error=f"{type(e).__name__}: {e}")
                continue
            finally:
                self.busy_project = None
                self.queue.put(("after_project", p.name))
            fits = bool(getattr(res, "fits", False))
            if getattr(res, "refused", False):
                # most of the index points at files that are gone: that needs a person, not a janitor
                # (and not a dream either: its guards would refuse the same drop)
                self.log.warning("relief.refused", project=p.name, reason=res.reasons[-1] if res.reasons else "")
                continue
            self.log.info("relief.rebuilt", project=p.name, written=bool(getattr(res, "written", False)),
                          fits=fits)
            if not fits:
                self.queue.put(("enqueue", JobRequest("dream", [p.name], force=True, reason="auto_relief")))

    def _scanner(self) -> None:
        from memd.state import StateStore

        try:
            from memd.transcripts.scan import scan_project
        except ImportError:  # pragma: no cover - a build without the transcripts package
            return
        with StateStore.open(self.state_dir) as state:
            while True:
                name = self.scans.get()
                if name is None or self.stop.is_set():
                    return
                names = {name}
                with contextlib.suppress(Empty):
                    while True:
                        more = self.scans.get_nowait()
                        if more is None:
                            return
                        names.add(more)
                for n in sorted(names):
                    if self.stop.is_set():
                        return
                    try:
                        scan_project(self._project(n), state, self.config, now=time.time())
                    except Exception as e:
                        self.log.warning("scan.failed", project=n, error=f"{type(e).__name__}: {e}")
