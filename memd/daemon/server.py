"""The daemon's main loop: wiring only (watch -> debounce -> act; alarm -> decide -> queue a job).

Threads and who owns what:
- main thread: this loop. Signal handlers only put the signal on ``self.queue`` (a
  ``queue.SimpleQueue``, safe inside a handler); the loop waits on that queue with a timeout and
  dispatches ``handle_<SIGNAL>``. It owns a StateStore (warnings, schedule state), measures indexes
  (cheap), pings systemd's watchdog and writes the heartbeat.
- watchdog observer threads: only classify and enqueue (memd.daemon.watch).
- APScheduler's thread: only puts ("alarm", job) on the queue; the loop decides (memd.daemon.schedule).
- the worker (memd.daemon.worker.Worker, a component the daemon holds): a job thread (one job at a
  time) and a scanner thread (incremental transcript scans), each with its own StateStore. Jobs never
  block the loop; the worker reports back only through ``self.queue`` (job started/done, project
  busy/released, follow-up jobs), so every field here is the main thread's alone.

Decisions are pure functions (memd.daemon.policy, memd.daemon.schedule); time comes from one injected
``Clock`` (memd.clock), passed on to the worker and the jobs, so the loop's methods run in-process
under a ``ManualClock`` in tests.

Model jobs (dream, catch-up) do their work in a child process (memd.daemon.child), one per job,
with a hard time limit per project: the daemon never loads the SDK, and a crash, hang or leak ends
with the child.

Stopping is two-staged: the first SIGTERM/SIGINT sets ``stop`` (the running job abandons cleanly
between steps, in its child too; no new job starts) and waits up to ``daemon.stop_timeout_s``; a
second signal stops at once. Either way a child still running is killed, held ``.consolidate-lock``
files are given back and open run-log rows closed.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

from apscheduler.triggers.base import BaseTrigger

from memd import __version__, layout, store
from memd.clock import SYSTEM, Clock
from memd.config import Config
from memd.daemon import control, notify, pidfile, viewer
from memd.daemon import policy as P
from memd.daemon import schedule as S
from memd.daemon.budget import BudgetMonitor, signature
from memd.daemon.debounce import Debouncer
from memd.daemon.watch import Watcher, Work
from memd.daemon.worker import JobRequest, Worker, project_named
from memd.errors import ConfigError, MemdError

HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
HEARTBEAT_S = 30.0
ROOT_POLL_S = 2.0
RELIEF_CHECK_S = 10.0  # only while a relief waits for a project to go idle
RULES_INTERVAL_S = 1800.0  # the hooks' `if` rules checked against moved memory folders at most this often


@dataclass
class _Stopping:
    deadline: float
    signal: str
    forced: bool = False


@dataclass
class Daemon:
    config: Config
    load_config: Callable[[], Config]  # re-reads the config file (SIGHUP)
    claude_dir_for: Callable[[Config], Path]
    state_dir: Path
    tz: tzinfo | None = None
    console: bool | None = None
    clock: Clock = SYSTEM
    log: Any = None  # set by run() (memd.logs); in-process tests pass their own
    # `memd run`'s memd.ui.service.serve, called only with [ui] serve = true (memd.daemon.viewer.Slot)
    serve_viewer: Callable[..., Any] | None = None

    def __post_init__(self) -> None:
        self.queue: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self.stop = threading.Event()
        self.claude_dir = self.claude_dir_for(self.config)
        self.state: Any = None
        self.worker: Worker  # made by open()
        self.watcher: Watcher | None = None
        self.scheduler: Any = None
        self.debounce: Debouncer[Work] = Debouncer(self.config.daemon.debounce_quiet_s,
                                                   self.config.daemon.debounce_max_s, self.clock.monotonic)
        self.rules: dict[str, S.Rule] = {}
        self.picked: dict[str, int] = {}
        self.last_slot: dict[str, datetime] = {}
        self.sigs: dict[str, tuple[int, int, int]] = {}
        self.relief: dict[str, float] = {}
        self.pending: list[tuple[Any, ...]] = []  # job keys queued and not started yet
        self.running: JobRequest | None = None  # the worker's job, as its messages tell
        self.busy_project: str | None = None  # the folder the running job holds, as its messages tell
        self.deferred: set[str] = set()
        self.started = self.clock.time()
        self.stopping: _Stopping | None = None
        self.left_running: list[str] = []  # the worker's threads still busy when run() ended
        self.viewer: viewer.Slot | None = None  # made by _start_viewer()
        self._old_handlers: dict[int, Any] = {}
        self._wall_mono = (self.clock.time(), self.clock.monotonic())
        self._next_beat = 0.0
        self._next_reconcile = 0.0
        self._next_rules = 0.0  # the hooks' `if` rules checked against projects' moved memory folders
        self._next_ping = 0.0
        self._next_root_poll = 0.0
        self._next_relief = 0.0
        self._next_sync = 0.0  # issue 15: the first sync right after start, then every sync.interval_minutes
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

            logs.setup(self.state_dir, level=self.config.logging.level, console=self.console,
                       max_bytes=self.config.logging.max_bytes, backups=self.config.logging.backups)
            self.log = logs.get_logger("memd.daemon")
            return self._run()
        finally:
            # the pid file first: `memd trigger` stops finding us before our handlers go (a signal that
            # lands after that, a late second SIGTERM, finds no pid file left behind)
            lock.release()
            self._restore_signals()

    def _give_back_abandoned_locks(self) -> None:
        """Claude Code's ``.consolidate-lock`` that a killed dream (this daemon's last life, or a command's)
        still holds: given back as a failed run does, before anything reads it (``jobs.gates``)."""
        from memd.jobs import gates

        try:
            for path in gates.recover_abandoned(self.state_dir):
                self.log.warning("dream.lock_given_back", path=path, reason="the dream that held it was killed")
        except OSError as e:
            self.log.warning("dream.lock_give_back_failed", error=str(e))

    @property
    def exit_now(self) -> bool:
        """After run(): a forced stop, or a job abandoned mid-step whose thread still runs. The process
        should exit without waiting for that thread (or a library's atexit hooks)."""
        return self.stopping is not None and (self.stopping.forced or "memd-worker" in self.left_running)

    @property
    def job_running(self) -> bool:
        """A job is running (its start reported, its end not yet) on a live worker thread."""
        return self.running is not None and self.worker.alive()

    def open(self) -> None:
        """Open the state store and make the worker (not started): with ``setup_schedule()`` after it,
        everything the loop's methods need, without threads, signals or the pid file (in-process tests)."""
        from memd.state import StateStore

        if self.tz is None:
            import tzlocal

            self.tz = tzlocal.get_localzone()
        self.state = StateStore.open(self.state_dir)
        self.worker = Worker(self.config, self.claude_dir, self.state_dir, self.clock, self.queue, self.log,
                             self.stop)

    def _run(self) -> int:
        import warnings

        # watchdog warns when a folder and its subfolder are created in one breath; nothing is lost
        warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"watchdog\..*")
        self.open()
        code = 0
        try:
            self.log.info("daemon.start", pid=os.getpid(), version=__version__, claude_dir=str(self.claude_dir),
                          state_dir=str(self.state_dir), timezone=str(self.tz))
            self._close_orphan_runs()
            self._give_back_abandoned_locks()
            self._prune_runs()
            self.setup_schedule()
            self.worker.start()
            self._start_scheduler()
            self._ensure_watching(initial=True)
            for name in self._reconcile():
                self.worker.scan(name)  # sessions written while memd was stopped count for the gates
            self._beat()
            notify.notify("READY=1\nSTATUS=watching " + str(layout.projects_root(self.claude_dir)))
            self.log.info("daemon.ready", watching=self.watcher is not None and self.watcher.alive(),
                          dream_at=S.hhmm(self.picked["dream"]), checkin_at=S.hhmm(self.picked["checkin"]))
            self._say_model_off()
            self._start_viewer()
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
            if item is not None:
                self.dispatch(item)
            self.drain()
            if self.stopping is not None:
                if self.stopping.forced:
                    return 1
                if not self.job_running:
                    return 0
                if self.clock.monotonic() >= self.stopping.deadline:
                    self.log.warning("daemon.stop.abandoned", job=self.running.job if self.running else None,
                                     project=self.busy_project, timeout_s=self.config.daemon.stop_timeout_s)
                    return 0
                continue
            try:
                self.tick()
            except Exception as e:  # a fault (the state file busy, full, unwritable) must not end the daemon
                self.log.exception("daemon.error", where="tick", error=f"{type(e).__name__}: {e}")

    def drain(self) -> int:
        """Act on everything queued (signals, alarms, the worker's messages); how many items."""
        n = 0
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                return n
            self.dispatch(item)
            n += 1

    def _timeout(self) -> float:
        now = self.clock.monotonic()
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

    def dispatch(self, item: tuple[str, Any]) -> None:
        """Act on one queued item: a signal, an alarm, or a message of the worker."""
        kind, value = item
        try:
            if kind == "signal":
                name = signal.Signals(value).name
                getattr(self, f"handle_{name}")()
            elif kind == "alarm":
                self.check_schedule()
            elif kind == "job_started":
                self.running = value
                with contextlib.suppress(ValueError):  # running now: the same request may queue again
                    self.pending.remove(value.key())
            elif kind == "project_busy":
                self.busy_project = value
            elif kind == "after_project":
                self._after_project(value)
            elif kind == "job_done":
                self._job_done(value)
            elif kind == "enqueue":
                self.enqueue(value)
            # "wake": nothing to do but recompute the timeout
        except Exception as e:  # the loop must survive anything a handler does
            self.log.exception("daemon.error", where=kind, error=f"{type(e).__name__}: {e}")

    def tick(self) -> None:
        """The loop's periodic work: due paths, the watch, reconcile, relief, the schedule, pings, heartbeat."""
        now = self.clock.monotonic()
        wall = self.clock.time()
        w0, m0 = self._wall_mono
        if S.clock_jumped(wall - w0, now - m0):
            self.log.info("daemon.clock_jump", wall_s=round(wall - w0), monotonic_s=round(now - m0))
        self._wall_mono = (wall, now)
        self.handle_due(now)
        if (self.watcher is None or not self.watcher.alive()) and now >= self._next_root_poll:
            self._next_root_poll = now + ROOT_POLL_S
            self._ensure_watching()
        if now >= self._next_reconcile:
            self._reconcile()
        if self.relief and now >= self._next_relief:
            self._next_relief = now + RELIEF_CHECK_S
            self._check_relief()
        if self.config.sync.remote and now >= self._next_sync:
            self._next_sync = now + self.config.sync.interval_minutes * 60
            self.enqueue(JobRequest("sync", None, reason="interval"))
        self.check_schedule()
        if self._ping_s and now >= self._next_ping:
            self._next_ping = now + self._ping_s
            notify.notify("WATCHDOG=1")
        if now >= self._next_beat:
            self._beat()

    def _shutdown(self) -> None:
        self.stop.set()
        notify.notify("STOPPING=1")
        if self.viewer is not None:
            self.viewer.stop()
        if self.scheduler is not None:
            with contextlib.suppress(Exception):
                self.scheduler.shutdown(wait=False)
        if self.watcher is not None:
            self.watcher.stop()
        self.drain()  # the worker's last messages: is a job still running?
        self.worker.close()
        # a model job's child still running past the stop bound is killed: its run ends "abandoned"
        # through the runner (row closed, lock given back) and the job thread ends with it
        aborted = self.worker.abort()
        self.left_running = self.worker.join(5.0 if aborted else 2.0, jobs=aborted or not self.job_running)
        if self.left_running:
            from memd.jobs import gates, runner

            n = gates.release_all_held()
            for rid in runner.active_runs():
                with contextlib.suppress(Exception):
                    self.state.finish_run(rid, outcome="failed", ended=self.clock.time(),
                                          error="abandoned: memd stopped before the run finished")
            self.log.warning("daemon.stop.cleanup", locks_released=n, threads=self.left_running)
        wall = self.clock.time()
        pidfile.write_heartbeat(self.state_dir, {"pid": os.getpid(), "started": self.started,
                                                 "stopped": wall, "state": "stopped"}, wall)
        self.log.info("daemon.stop", forced=bool(self.stopping and self.stopping.forced),
                      uptime_s=round(wall - self.started))
        self.close()

    def close(self) -> None:
        """Close the state store opened by open()."""
        with contextlib.suppress(Exception):
            self.state.close()

    def _start_viewer(self) -> None:
        """Serve the viewer when ``[ui] serve`` is on (memd.daemon.viewer.Slot: never fatal)."""
        if self.viewer is None:
            self.viewer = viewer.Slot(self.serve_viewer, self.state_dir, self.log)
        self.viewer.start(self.config, lambda: self.config, lambda: self.claude_dir)
        self._beat()

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
        self.stopping = _Stopping(self.clock.monotonic() + self.config.daemon.stop_timeout_s, name)
        self.stop.set()  # the running job abandons between steps; queued ones never start
        notify.notify("STOPPING=1")
        self.log.info("daemon.stopping", signal=name, running=self.running.job if self.running else None,
                      timeout_s=self.config.daemon.stop_timeout_s)

    def handle_SIGUSR1(self) -> None:
        req = control.take_requests(self.state_dir, "dream")
        self.enqueue(JobRequest("dream", None if req.all_projects else req.projects, force=True, reason="signal"))

    def handle_SIGUSR2(self) -> None:
        sync = control.take_requests(self.state_dir, "sync")  # `memd trigger sync` always leaves a request
        if sync.found:
            self.enqueue(JobRequest("sync", None if sync.all_projects else sync.projects, reason="signal"))
        req = control.take_requests(self.state_dir, "catchup")
        if req.found or not sync.found:
            self.enqueue(JobRequest("catchup", None if req.all_projects else req.projects, reason="signal"))

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

        if new.logging != old.logging:
            logs.setup(self.state_dir, level=new.logging.level, console=self.console,
                       max_bytes=new.logging.max_bytes, backups=new.logging.backups)
        self.debounce.quiet_s = new.daemon.debounce_quiet_s
        self.debounce.max_wait_s = max(new.daemon.debounce_max_s, new.daemon.debounce_quiet_s)
        self.setup_schedule()
        if self.scheduler is not None:
            self._schedule_alarms()
        new_claude = self.claude_dir_for(new)
        if new_claude != self.claude_dir:
            self.claude_dir = new_claude
            if self.watcher is not None:
                self.watcher.stop()
                self.watcher = None
            self._ensure_watching()
        self.worker.update(new, self.claude_dir)
        if new.ui != old.ui and self.viewer is not None:  # a new port, or serving turned on or off
            self.viewer.stop()
            self._start_viewer()
        self.log.info("config.reloaded", changed=changed)
        self._say_model_off()

    def _say_model_off(self) -> None:
        """Say once (at start, and after a reload that changes it) that model work is off, and which
        configured models have no price (their runs' cost is unknown, never $0)."""
        from memd.llm.client import jobs_off_reason, unpriced_models

        reason = jobs_off_reason(self.config)
        if reason != getattr(self, "_model_off_said", None):
            self._model_off_said = reason
            if reason:
                self.log.warning("model.off", reason=reason)
            else:
                self.log.info("model.on")
        unpriced = unpriced_models(self.config)
        if unpriced != getattr(self, "_unpriced_said", []):
            self._unpriced_said = unpriced
            for m in unpriced:
                self.log.warning("model.unpriced", model=m,
                                 reason="model.prices has no price for it: its runs' cost is unknown")

    # ------------------------------------------------------------------ watching

    def sink(self, work: Work) -> None:
        """The watcher's callback (runs on watchdog's thread): enqueue only."""
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
        w = Watcher(root, self.sink)
        if w.start():
            self.watcher = w
            self.log.info("watch.start", root=str(root))
            if was or not initial:
                self._reconcile()  # whatever happened while we were not watching
        elif initial or was:
            self.log.info("watch.waiting", root=str(root), reason="projects root does not exist yet")

    def handle_due(self, now: float | None = None) -> None:
        """Handle the paths whose debounce is over (at monotonic ``now``, default the clock's)."""
        for work in self.debounce.pop_due(self.clock.monotonic() if now is None else now):
            self._handle_work(work)

    def _handle_work(self, work: Work) -> None:
        kind, name = work
        if kind == "transcript":
            self.worker.scan(name)
            return
        if kind in ("memory", "project"):
            if kind == "project":
                self.worker.scan(name)  # transcripts written right after their folder
            if name == self.busy_project:
                self.deferred.add(name)  # our own writes: measured when the job is done with it
                return
            self._check_budget(project_named(self.claude_dir, name))

    def _check_budget(self, project: layout.Project) -> None:
        self.sigs[project.name] = signature(project)
        res = BudgetMonitor(self.config, self.state, self.log, self.clock).check(project)
        if res.relief:
            now = self.clock.monotonic()
            self.relief.setdefault(project.name, now)
            self._next_relief = min(self._next_relief, now)  # check it at once

    def _reconcile(self) -> list[str]:
        """Catch what the watcher dropped: a stat per project, a measure only where something changed.
        Returns the projects' names."""
        t0 = self.clock.monotonic()
        self._next_reconcile = t0 + self.config.daemon.reconcile_interval_s
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
        if t0 >= self._next_rules:
            self._refresh_hook_rules(t0)
        self.log.debug("watch.reconcile", projects=len(seen), checked=checked,
                       duration_s=round(self.clock.monotonic() - t0, 3))
        return [p.name for p in projects]

    def _refresh_hook_rules(self, now: float) -> None:
        """A project that moved its memory with its own settings after `memd hooks install` is guarded
        from the next reconcile on (``settings_merge.refresh_rules``; at most every 30 minutes)."""
        from memd import settings_merge

        self._next_rules = now + RULES_INTERVAL_S
        try:
            change = settings_merge.refresh_rules(self.claude_dir, self.state_dir)
        except Exception as e:  # a settings.json memd cannot read or write: said, never fatal
            self.log.warning("hooks.rules_refresh_failed", error=f"{type(e).__name__}: {e}"[:300])
            return
        if change is not None and change.changed:
            self.log.info("hooks.rules_updated", settings=str(change.path), backup=str(change.backup or ""),
                          rules=len([r for r in change.after if r.rule]))

    def _check_relief(self) -> None:
        from memd.jobs.gates import has_active_session

        for name in list(self.relief):
            project = project_named(self.claude_dir, name)
            if has_active_session(project, self.clock.time(), self.config.transcripts.active_minutes):
                continue  # never under a writing session: wait for it to go idle
            del self.relief[name]
            self.enqueue(JobRequest("relief", [name], reason="auto_relief"))

    # ------------------------------------------------------------------ schedule

    def setup_schedule(self) -> None:
        """The rules from the config and the persisted picks and slots (a first start begins from now)."""
        assert self.tz is not None
        now = self.clock.now().astimezone(self.tz)
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
        now = self.clock.now()
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

    def check_schedule(self) -> None:
        """Queue what is due now (policy.decide_slot), recording each handled slot and nightly night."""
        if self.stopping is not None:
            return
        assert self.tz is not None
        now = self.clock.now()
        for job, rule in self.rules.items():
            last_night = self.state.get(f"schedule.{job}.last_night") if job in P.NIGHTLY else None
            due = P.decide_slot(job, rule, self.last_slot[job], now, self.tz, last_night)
            if due is None:
                continue
            self.last_slot[job] = due.slot
            self.state.set(f"schedule.{job}.last_slot", due.slot.isoformat())
            if not due.run:
                self.log.info("schedule.skip", job=job, slot=due.slot.isoformat(), reason=due.skip_reason)
                continue
            if due.night is not None:
                self.state.set(f"schedule.{job}.last_night", due.night)  # before queueing: see policy.Due
            self.log.info("schedule.due", job=job, slot=due.slot.isoformat(), late_s=round(due.late_s),
                          caught_up=due.caught_up)
            self.enqueue(JobRequest(job, None, reason="schedule"))

    # ------------------------------------------------------------------ jobs

    def enqueue(self, req: JobRequest) -> None:
        """Hand a job to the worker, unless the same job (``JobRequest.key``) is already queued and not
        started. A request for a job that is running queues one more run after it: what it asks for
        (a trigger after new sessions, say) may come after the running one looked."""
        if self.stopping is not None:
            self.log.info("job.refused", job=req.job, reason="stopping")
            return
        key = req.key()
        if key in self.pending:
            self.log.info("job.already_queued", job=req.job, reason=req.reason)
            return
        self.pending.append(key)
        self.log.info("job.queued", job=req.job, projects=req.projects, force=req.force, reason=req.reason)
        self.worker.submit(req)

    def _job_done(self, req: JobRequest) -> None:
        self.running = None
        self.busy_project = None

    def _after_project(self, name: str) -> None:
        # the job may have written the folder (its own writes were not measured meanwhile)
        if self.busy_project == name:
            self.busy_project = None
        self.deferred.discard(name)
        with contextlib.suppress(Exception):
            self._check_budget(project_named(self.claude_dir, name))

    def _close_orphan_runs(self) -> None:
        """Rows left 'running' by a daemon that died mid-job (none can be live: we hold the job lock)."""
        from memd.jobs.runner import job_lock

        try:
            with job_lock(self.state_dir):
                for r in self.state.running():
                    self.state.finish_run(r.id, outcome="failed", ended=self.clock.time(),
                                          error="abandoned: memd stopped before the run finished")
        except MemdError:
            pass  # a foreground job is running: its rows are live

    def _prune_runs(self) -> None:
        """The run log's retention at start (memd.state.prune_runs; the check-in prunes daily), after the
        orphans are closed; a failure is logged (``state.prune_failed``) and the daemon goes on."""
        from memd.jobs.checkin import prune_run_log

        prune_run_log(self.state, self.clock.time(), self.log)

    # ------------------------------------------------------------------ heartbeat

    def _beat(self) -> None:
        self._next_beat = self.clock.monotonic() + HEARTBEAT_S
        pidfile.write_heartbeat(self.state_dir, {
            "pid": os.getpid(), "state": "stopping" if self.stopping else "running", "started": self.started,
            "version": __version__, "claude_dir": str(self.claude_dir),
            "watching": self.watcher is not None and self.watcher.alive(),
            "picked": {k: S.hhmm(v) for k, v in self.picked.items()},
            "next": self.next_runs(), "running_job": self.running.job if self.running else None,
            "timezone": str(self.tz),
            **({"viewer": self.viewer.state} if self.viewer is not None and self.viewer.state else {})},
            self.clock.time())


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
