"""The daemon's main loop: wiring only (watch -> debounce -> act; alarm -> decide -> queue a job).

Threads and who owns what:
- main thread: this loop. Signal handlers only put the signal on ``self.queue`` (a
  ``queue.SimpleQueue``, safe inside a handler); the loop waits on that queue with a timeout and
  dispatches ``handle_<SIGNAL>``. It owns a StateStore (warnings, schedule state), measures indexes
  (cheap), pings systemd's watchdog and writes the heartbeat.
- watchdog observer threads: only classify and enqueue (memd.daemon.watch).
- APScheduler's thread: only puts ("alarm", job) on the queue; the loop decides (memd.daemon.schedule).
- the worker thread: runs one job at a time (its own StateStore); jobs never block the loop.
- the scanner thread: incremental transcript scans (its own StateStore).

Stopping is two-staged: the first SIGTERM/SIGINT sets ``stop`` (the running job abandons cleanly
between steps; no new job starts) and waits up to ``daemon.stop_timeout_s``; a second signal stops
at once. Either way held ``.consolidate-lock`` files are given back and open run-log rows closed.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

from apscheduler.triggers.base import BaseTrigger

from memd import __version__, layout, store
from memd.config import Config
from memd.daemon import control, notify, pidfile
from memd.daemon import schedule as S
from memd.daemon.budget import BudgetMonitor, signature
from memd.daemon.debounce import Debouncer
from memd.daemon.watch import Watcher, Work
from memd.daemon.worker import JobRequest, JobWorker
from memd.errors import ConfigError, MemdError

HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
HEARTBEAT_S = 30.0
ROOT_POLL_S = 2.0
RELIEF_CHECK_S = 10.0  # only while a relief waits for a project to go idle


@dataclass
class _Stopping:
    deadline: float
    signal: str
    forced: bool = False


@dataclass
class Daemon(JobWorker):
    config: Config
    load_config: Callable[[], Config]  # re-reads the config file (SIGHUP)
    claude_dir_for: Callable[[Config], Path]
    state_dir: Path
    tz: tzinfo | None = None
    console: bool | None = None
    clock: Callable[[], datetime] = field(default=lambda: datetime.now().astimezone())

    def __post_init__(self) -> None:
        self.queue: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self.jobs: queue.Queue[JobRequest | None] = queue.Queue()
        self.scans: queue.Queue[str | None] = queue.Queue()
        self.stop = threading.Event()
        self.claude_dir = self.claude_dir_for(self.config)
        self.log: Any = None
        self.state: Any = None
        self.watcher: Watcher | None = None
        self.scheduler: Any = None
        self.debounce: Debouncer[Work] = Debouncer(self.config.daemon.debounce_quiet_s,
                                                   self.config.daemon.debounce_max_s)
        self.rules: dict[str, S.Rule] = {}
        self.picked: dict[str, int] = {}
        self.last_slot: dict[str, datetime] = {}
        self.sigs: dict[str, tuple[int, int, int]] = {}
        self.relief: dict[str, float] = {}
        self.pending: list[tuple[Any, ...]] = []  # job keys queued or running
        self.busy_project: str | None = None
        self.deferred: set[str] = set()
        self.current: JobRequest | None = None
        self.started = time.time()
        self.stopping: _Stopping | None = None
        self._old_handlers: dict[int, Any] = {}
        self._threads: list[threading.Thread] = []
        self._wall_mono = (time.time(), time.monotonic())
        self._next_beat = 0.0
        self._next_reconcile = 0.0
        self._next_ping = 0.0
        self._next_root_poll = 0.0
        self._next_relief = 0.0
        self._ping_s = notify.watchdog_interval()

    # ------------------------------------------------------------------ lifecycle

    def run(self) -> int:
        """Hold the pid file, run until stopped; the exit code (0 for a graceful stop)."""
        lock = pidfile.PidLock(self.state_dir)
        lock.acquire()  # AlreadyRunning: a clear message, before anything else happens
        # From here `memd trigger` can find us: record signals at once (SIGUSR1's default would kill)
        self._install_signals()
        try:
            from memd import logs

            logs.setup(self.state_dir, level=self.config.logging.level, console=self.console)
            self.log = logs.get_logger("memd.daemon")
            return self._run()
        finally:
            self._restore_signals()
            lock.release()

    def _run(self) -> int:
        import warnings

        from memd.state import StateStore

        # watchdog warns when a folder and its subfolder are created in one breath; nothing is lost
        warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"watchdog\..*")
        if self.tz is None:
            import tzlocal

            self.tz = tzlocal.get_localzone()
        self.state = StateStore.open(self.state_dir)
        code = 0
        try:
            self.log.info("daemon.start", pid=os.getpid(), version=__version__, claude_dir=str(self.claude_dir),
                          state_dir=str(self.state_dir), timezone=str(self.tz))
            self._close_orphan_runs()
            self._setup_schedule()
            self._start_threads()
            self._start_scheduler()
            self._ensure_watching(initial=True)
            for name in self._reconcile():
                self.scans.put(name)  # sessions written while memd was stopped count for the gates
            self._beat()
            notify.notify("READY=1\nSTATUS=watching " + str(layout.projects_root(self.claude_dir)))
            self.log.info("daemon.ready", watching=self.watcher is not None and self.watcher.alive(),
                          dream_at=S.hhmm(self.picked["dream"]), checkin_at=S.hhmm(self.picked["checkin"]))
            self._say_model_off()
            code = self._loop()
        finally:
            self._shutdown()
        return code

    def _loop(self) -> int:
        while True:
            timeout = self._timeout()
            try:
                item: tuple[str, Any] | None = self.queue.get(timeout=timeout)
            except queue.Empty:
                item = None
            while item is not None:
                self._dispatch(item)
                try:
                    item = self.queue.get_nowait()
                except queue.Empty:
                    item = None
            if self.stopping is not None:
                if self.stopping.forced:
                    return 1
                if not self._worker_busy():
                    return 0
                if time.monotonic() >= self.stopping.deadline:
                    self.log.warning("daemon.stop.abandoned", job=self.current.job if self.current else None,
                                     project=self.busy_project, timeout_s=self.config.daemon.stop_timeout_s)
                    return 0
                continue
            self._tick()

    def _timeout(self) -> float:
        now = time.monotonic()
        if self.stopping is not None:
            return 0.1
        deadlines = [self._next_beat, self._next_reconcile]
        if self._ping_s:
            deadlines.append(self._next_ping)
        if self.watcher is None or not self.watcher.alive():
            deadlines.append(self._next_root_poll)
        if self.relief:
            deadlines.append(self._next_relief)
        d = self.debounce.next_deadline()
        if d is not None:
            deadlines.append(d)
        return max(0.01, min(deadlines) - now)

    def _dispatch(self, item: tuple[str, Any]) -> None:
        kind, value = item
        try:
            if kind == "signal":
                name = signal.Signals(value).name
                getattr(self, f"handle_{name}")()
            elif kind == "alarm":
                self._check_schedule()
            elif kind == "after_project":
                self._after_project(value)
            elif kind == "job_done":
                self._job_done(value)
            elif kind == "enqueue":
                self._enqueue(value)
            # "wake": nothing to do but recompute the timeout
        except Exception as e:  # the loop must survive anything a handler does
            self.log.exception("daemon.error", where=kind, error=f"{type(e).__name__}: {e}")

    def _tick(self) -> None:
        now = time.monotonic()
        wall = time.time()
        w0, m0 = self._wall_mono
        if S.clock_jumped(wall - w0, now - m0):
            self.log.info("daemon.clock_jump", wall_s=round(wall - w0), monotonic_s=round(now - m0))
        self._wall_mono = (wall, now)
        for work in self.debounce.pop_due(now):
            self._handle_work(work)
        if (self.watcher is None or not self.watcher.alive()) and now >= self._next_root_poll:
            self._next_root_poll = now + ROOT_POLL_S
            self._ensure_watching()
        if now >= self._next_reconcile:
            self._reconcile()
        if self.relief and now >= self._next_relief:
            self._next_relief = now + RELIEF_CHECK_S
            self._check_relief()
        self._check_schedule()
        if self._ping_s and now >= self._next_ping:
            self._next_ping = now + self._ping_s
            notify.notify("WATCHDOG=1")
        if now >= self._next_beat:
            self._beat()

    def _shutdown(self) -> None:
        self.stop.set()
        notify.notify("STOPPING=1")
        if self.scheduler is not None:
            with contextlib.suppress(Exception):
                self.scheduler.shutdown(wait=False)
        if self.watcher is not None:
            self.watcher.stop()
        self.jobs.put(None)
        self.scans.put(None)
        busy = self._worker_busy()
        for t in self._threads:
            if t.name == "memd-scanner" or not busy:
                t.join(2.0)
        abandoned = [t for t in self._threads if t.is_alive()]
        if abandoned:
            from memd.jobs import gates, runner

            n = gates.release_all_held()
            for rid in runner.active_runs():
                with contextlib.suppress(Exception):
                    self.state.finish_run(rid, outcome="failed", ended=time.time(),
                                          error="abandoned: memd stopped before the run finished")
            self.log.warning("daemon.stop.cleanup", locks_released=n, threads=[t.name for t in abandoned])
        pidfile.write_heartbeat(self.state_dir, {"pid": os.getpid(), "started": self.started,
                                                 "stopped": time.time(), "state": "stopped"})
        self.log.info("daemon.stop", forced=bool(self.stopping and self.stopping.forced),
                      uptime_s=round(time.time() - self.started))
        with contextlib.suppress(Exception):
            self.state.close()

    # ------------------------------------------------------------------ signals

    def _install_signals(self) -> None:
        q = self.queue

        def record(signum: int, frame: Any) -> None:
            q.put_nowait(("signal", signum))

        for sig in HANDLED:
            self._old_handlers[sig] = signal.signal(sig, record)

    def _restore_signals(self) -> None:
        for sig, old in self._old_handlers.items():
            with contextlib.suppress(Exception):
                signal.signal(sig, old)

    def handle_SIGTERM(self) -> None:
        self._begin_stop("SIGTERM")

    def handle_SIGINT(self) -> None:
        self._begin_stop("SIGINT")

    def _begin_stop(self, name: str) -> None:
        if self.stopping is not None:
            self.stopping.forced = True
            self.log.warning("daemon.stop.forced", signal=name)
            return
        self.stopping = _Stopping(time.monotonic() + self.config.daemon.stop_timeout_s, name)
        self.stop.set()  # the running job abandons between steps; queued ones never start
        notify.notify("STOPPING=1")
        self.log.info("daemon.stopping", signal=name, running=self.current.job if self.current else None,
                      timeout_s=self.config.daemon.stop_timeout_s)

    def handle_SIGUSR1(self) -> None:
        req = control.take_requests(self.state_dir, "dream")
        self._enqueue(JobRequest("dream", None if req.all_projects else req.projects, force=True, reason="signal"))

    def handle_SIGUSR2(self) -> None:
        req = control.take_requests(self.state_dir, "catchup")
        self._enqueue(JobRequest("catchup", None if req.all_projects else req.projects, reason="signal"))

    def handle_SIGHUP(self) -> None:
        try:
            new = self.load_config()
        except ConfigError as e:
            self.log.error("config.reload.failed", problems=e.problems, path=e.path, kept="previous config")
            return
        except MemdError as e:
            self.log.error("config.reload.failed", problems=[str(e)], kept="previous config")
            return
        changed = _diff(self.config, new)
        old = self.config
        if new.paths.state_dir != old.paths.state_dir:
            self.log.warning("config.reload.restart_needed", key="paths.state_dir")
        self.config = new
        from memd import logs

        if new.logging.level != old.logging.level:
            logs.setup(self.state_dir, level=new.logging.level, console=self.console)
        self.debounce.quiet_s = new.daemon.debounce_quiet_s
        self.debounce.max_wait_s = max(new.daemon.debounce_max_s, new.daemon.debounce_quiet_s)
        self._setup_schedule()
        if self.scheduler is not None:
            self._schedule_alarms()
        new_claude = self.claude_dir_for(new)
        if new_claude != self.claude_dir:
            self.claude_dir = new_claude
            if self.watcher is not None:
                self.watcher.stop()
                self.watcher = None
            self._ensure_watching()
        self.log.info("config.reloaded", changed=changed)
        self._say_model_off()

    def _say_model_off(self) -> None:
        """Say once (at start, and after a reload that changes it) that model work is off."""
        from memd.llm.client import model_off_reason

        reason = model_off_reason(self.config)
        if reason != getattr(self, "_model_off_said", None):
            self._model_off_said = reason
            if reason:
                self.log.warning("model.off", reason=reason)
            else:
                self.log.info("model.on")

    # ------------------------------------------------------------------ watching

    def _sink(self, work: Work) -> None:
        # runs on watchdog's thread: enqueue only
        if work[0] == "root":
            self.queue.put(("wake", None))
            return
        if self.debounce.add(work):
            self.queue.put(("wake", None))

    def _ensure_watching(self, initial: bool = False) -> None:
        root = layout.projects_root(self.claude_dir)
        if self.watcher is not None and self.watcher.alive():
            return
        was = self.watcher is not None
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None
            self.log.warning("watch.lost", root=str(root))
        w = Watcher(root, self._sink)
        if w.start():
            self.watcher = w
            self.log.info("watch.start", root=str(root))
            if was or not initial:
                self._reconcile()  # whatever happened while we were not watching
        elif initial or was:
            self.log.info("watch.waiting", root=str(root), reason="projects root does not exist yet")

    def _handle_work(self, work: Work) -> None:
        kind, name = work
        if kind == "transcript":
            self.scans.put(name)
            return
        if kind in ("memory", "project"):
            if kind == "project":
                self.scans.put(name)  # transcripts written right after their folder
            if name == self.busy_project:
                self.deferred.add(name)  # our own writes: measured when the job is done with it
                return
            self._check_budget(self._project(name))

    def _check_budget(self, project: layout.Project) -> None:
        self.sigs[project.name] = signature(project)
        res = BudgetMonitor(self.config, self.state, self.log).check(project)
        if res.warned and res.level == "over" and self.config.daemon.auto_relief:
            self.relief.setdefault(project.name, time.monotonic())
            self._next_relief = min(self._next_relief, time.monotonic())  # check it at once

    def _reconcile(self) -> list[str]:
        """Catch what the watcher dropped: a stat per project, a measure only where something changed.
        Returns the projects' names."""
        self._next_reconcile = time.monotonic() + self.config.daemon.reconcile_interval_s
        t0 = time.monotonic()
        checked = 0
        projects = layout.list_projects(self.claude_dir)
        seen = {p.name for p in projects}
        for project in projects:
            sig = signature(project)
            if self.sigs.get(project.name) != sig and project.name != self.busy_project:
                checked += 1
                try:
                    # temp files a crashed writer of ours left behind (the first pass after start
                    # visits every project; later ones only those that changed)
                    swept = store.sweep_temps(project.memory_dir)
                    if swept:
                        self.log.info("watch.swept_temps", project=project.name, files=len(swept))
                    self._check_budget(project)  # as listed: no second read of settings.json
                except Exception as e:
                    self.log.warning("budget.check_failed", project=project.name, error=type(e).__name__)
        for gone in set(self.sigs) - seen:
            self.sigs.pop(gone, None)
        self.log.debug("watch.reconcile", projects=len(seen), checked=checked,
                       duration_s=round(time.monotonic() - t0, 3))
        return [p.name for p in projects]

    def _check_relief(self) -> None:
        from memd.jobs.gates import has_active_session

        for name in list(self.relief):
            project = self._project(name)
            if has_active_session(project, time.time(), self.config.transcripts.active_minutes):
                continue
            del self.relief[name]
            self._enqueue(JobRequest("relief", [name], reason="auto_relief"))

    # ------------------------------------------------------------------ schedule

    def _setup_schedule(self) -> None:
        assert self.tz is not None
        now = self.clock().astimezone(self.tz)
        sch = self.config.schedule
        for job, window in (("dream", sch.dream_window), ("checkin", sch.checkin_window)):
            minute, store = S.pick_minute(window, self.state.get(f"schedule.{job}.pick"))
            if store is not None:
                self.state.set(f"schedule.{job}.pick", store)
                self.log.info("schedule.picked", job=job, at=S.hhmm(minute), window=window)
            self.picked[job] = minute
            self.rules[job] = S.Daily(minute, self.tz)
        self.rules["catchup"] = S.Cron(sch.catchup_cron, self.tz)
        for job in S.JOBS:
            stamp = S.parse_stamp(self.state.get(f"schedule.{job}.last_slot"))
            if stamp is None:
                stamp = now
                self.state.set(f"schedule.{job}.last_slot", stamp.isoformat())
            self.last_slot[job] = stamp

    def next_runs(self) -> dict[str, str]:
        out = {}
        now = self.clock()
        for job, rule in self.rules.items():
            slot = S.due_slot(rule, self.last_slot[job], now)
            out[job] = (slot or rule.next_after(max(self.last_slot[job], now))).isoformat()
        return out

    def _start_scheduler(self) -> None:
        from apscheduler.schedulers.background import BackgroundScheduler

        self.scheduler = BackgroundScheduler(
            timezone=self.tz, daemon=True,
            # decisions are ours (persisted slots): APScheduler only wakes the loop, however late
            job_defaults={"misfire_grace_time": None, "coalesce": True, "max_instances": 1})
        self._schedule_alarms()
        self.scheduler.start()

    def _schedule_alarms(self) -> None:
        for job, rule in self.rules.items():
            self.scheduler.add_job(self._alarm, _RuleTrigger(rule), args=[job], id=job, replace_existing=True)

    def _alarm(self, job: str) -> None:
        self.queue.put(("alarm", job))  # APScheduler's thread: record only

    def _check_schedule(self) -> None:
        if self.stopping is not None:
            return
        now = self.clock()
        for job, rule in self.rules.items():
            slot = S.due_slot(rule, self.last_slot[job], now)
            if slot is None:
                continue
            self.last_slot[job] = slot
            self.state.set(f"schedule.{job}.last_slot", slot.isoformat())
            late = (now - slot).total_seconds()
            if job == "dream":
                assert self.tz is not None
                last_night = self.state.get("schedule.dream.last_night")
                if not S.nightly_allowed(slot, self.tz, last_night):
                    self.log.info("schedule.skip", job=job, slot=slot.isoformat(), reason="ran this night already")
                    continue
                # Stored when the run is queued, not when it completes: a crash mid-dream must not
                # make a restart dream a second time that night ("never twice" beats "surely once").
                self.state.set("schedule.dream.last_night", S.night_of(slot, self.tz))
            self.log.info("schedule.due", job=job, slot=slot.isoformat(), late_s=round(late),
                          caught_up=late > 120)
            self._enqueue(JobRequest(job, None, reason="schedule"))

    # ------------------------------------------------------------------ jobs

    def _enqueue(self, req: JobRequest) -> None:
        if self.stopping is not None:
            self.log.info("job.refused", job=req.job, reason="stopping")
            return
        key = req.key()
        if key in self.pending:
            self.log.info("job.already_queued", job=req.job, reason=req.reason)
            return
        self.pending.append(key)
        self.log.info("job.queued", job=req.job, projects=req.projects, force=req.force, reason=req.reason)
        self.jobs.put(req)

    def _worker_busy(self) -> bool:
        worker = next((t for t in self._threads if t.name == "memd-worker"), None)
        return worker is not None and worker.is_alive() and self.current is not None

    def _start_threads(self) -> None:
        for name, target in (("memd-worker", self._worker), ("memd-scanner", self._scanner)):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def _job_done(self, key: tuple[Any, ...]) -> None:
        with contextlib.suppress(ValueError):
            self.pending.remove(key)

    def _after_project(self, name: str) -> None:
        # the job may have written the folder (its own writes were not measured meanwhile)
        self.deferred.discard(name)
        with contextlib.suppress(Exception):
            self._check_budget(self._project(name))

    def _close_orphan_runs(self) -> None:
        """Rows left 'running' by a daemon that died mid-job (none can be live: we hold the job lock)."""
        from memd.jobs.runner import job_lock

        try:
            with job_lock(self.state_dir):
                for r in self.state.runs(limit=200):
                    if r.outcome == "running":
                        self.state.finish_run(r.id, outcome="failed", ended=time.time(),
                                              error="abandoned: memd stopped before the run finished")
        except MemdError:
            pass  # a foreground job is running: its rows are live

    # ------------------------------------------------------------------ heartbeat

    def _beat(self) -> None:
        self._next_beat = time.monotonic() + HEARTBEAT_S
        pidfile.write_heartbeat(self.state_dir, {
            "pid": os.getpid(), "state": "stopping" if self.stopping else "running", "started": self.started,
            "version": __version__, "claude_dir": str(self.claude_dir),
            "watching": self.watcher is not None and self.watcher.alive(),
            "picked": {k: S.hhmm(v) for k, v in self.picked.items()},
            "next": self.next_runs(), "running_job": self.current.job if self.current else None,
            "timezone": str(self.tz)})


class _RuleTrigger(BaseTrigger):  # type: ignore[misc]
    """An APScheduler trigger over our pure rules (so APScheduler wakes us exactly on our slots)."""

    def __init__(self, rule: S.Rule) -> None:
        self.rule = rule

    def get_next_fire_time(self, previous_fire_time: datetime | None, now: datetime) -> datetime:
        after = previous_fire_time if previous_fire_time is not None else now - timedelta(microseconds=1)
        return self.rule.next_after(after)


def _diff(old: Config, new: Config) -> list[str]:
    from memd.config import schema

    out = []
    for info in schema():
        sect, name = info.path.split(".", 1)
        if getattr(getattr(old, sect), name) != getattr(getattr(new, sect), name):
            out.append(info.path)
    return out
