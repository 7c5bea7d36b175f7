"""Model jobs in a child process: the daemon stays small whatever its dreams and catch-ups did.

A model job loads the SDK (~60 MB that a Python process never gives back) and may crash, hang or
leak. The daemon's worker therefore runs each project of a dream or catch-up through ``ChildJob``,
a ``ProjectJob`` (``memd.jobs``) whose work happens in ``python -m memd.daemon.child``:

- one child per job request, started on the first project that reaches the work (the runner's
  gates, the ``.consolidate-lock`` and the run-log row stay in the daemon), fed one project at a
  time, ended when the job ends: the SDK's memory goes with it;
- a hard time limit per project (``daemon.job_timeout_s``, real time): past it the child's process
  group is killed and the run is ``failed`` with "timed out after N s"; a child that dies is a
  ``failed`` run with its exit status; the next project gets a fresh child. The runner closes the
  run row either way, so none is left ``running``;
- stopping: the daemon's stop event sends the child SIGTERM, which sets the job's stop event there
  (the same semantics as in-process: the run abandons between steps, ``skipped``, nothing applied).
  A child that does not come back before the daemon's stop bound is killed (``kill``) and the run is
  ``failed`` "abandoned: ..." as an in-process job abandoned mid-step. A child whose daemon died
  (reparented) stops itself;
- after a kill the project's staging copy and the atomic writer's temp files are swept, so the
  memory folder is as after a crash: every file before or after (``memd.apply``).

Why a fresh ``python -m`` process and not ``multiprocessing`` (spawn): the request and the outcome
are plain JSON lines on pipes (nothing pickled, nothing of the daemon's state copied), the child is
the leader of its own process group from ``exec`` on (``start_new_session``: one ``killpg`` ends it
and anything it started, e.g. an ``apiKeyHelper``), and no resource-tracker helper process or
``__main__`` re-import comes with it.

Protocol: the daemon writes one hello line (``job``, ``config`` as plain data, ``claude_dir``,
``state_dir``) then one line per project (``project``: name, dir, memory_dir; ``force``, ``dry_run``,
``wall``: the daemon's clock, so an injected clock carries over; ``unattended``: a scheduled run,
which ``model.batch = auto`` may batch); the child answers with ``log``
lines (``[level, event, fields]``, logged by the daemon: one writer of the log) and one ``outcome``
line per project (the ``ProjectOutcome`` fields). EOF on its stdin ends the child.

The daemon side imports neither the jobs' work modules nor ``anthropic``; the child side (``main``)
imports them.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from memd.errors import MemdError
from memd.jobs import JobContext, ProjectOutcome

if TYPE_CHECKING:
    from memd.config import Config
    from memd.layout import Project

MODULE = "memd.daemon.child"
JOBS = ("dream", "catchup")  # the jobs that load the model client
ABANDONED = "abandoned: memd stopped before the run finished"
ORPHAN_GRACE_S = 5.0  # a child whose daemon died stops itself, at the latest this long after noticing
_POLL_S = 0.2
# A file whose text is a ``MEMD_FAULT`` spec (memd.store.fault), read by each child when it starts: the
# faults campaign (bench/faults.py) arms and clears fault points in the daemon's jobs while it runs.
FAULT_FILE_ENV = "MEMD_FAULT_FILE"


# ----------------------------------------------------------------------------- plain data


def config_to_plain(cfg: Config) -> dict[str, dict[str, Any]]:
    """The config as ``config.from_mapping`` reads it (every key of the schema)."""
    from memd.config import schema

    out: dict[str, dict[str, Any]] = {}
    for info in schema():
        sect, name = info.path.split(".", 1)
        out.setdefault(sect, {})[name] = getattr(getattr(cfg, sect), name)
    return out


def outcome_to_plain(out: ProjectOutcome) -> dict[str, Any]:
    import dataclasses

    return dataclasses.asdict(out)


def outcome_from_plain(data: dict[str, Any]) -> ProjectOutcome:
    import dataclasses

    known = {f.name for f in dataclasses.fields(ProjectOutcome)}
    return ProjectOutcome(**{k: v for k, v in data.items() if k in known})


def _line(obj: Any) -> bytes:
    return (json.dumps(obj, default=str, ensure_ascii=False) + "\n").encode()


# ----------------------------------------------------------------------------- the daemon's side


class ChildJob:
    """``ChildJob(job, config, claude_dir, state_dir, log=..., timeout_s=...)`` is the ``work`` of
    ``runner.run_job`` for one job request; ``close()`` when the job is done; ``kill()`` (any thread)
    ends the running child at once (a shutdown past its bound)."""

    def __init__(self, job: str, config: Config, claude_dir: Path, state_dir: Path, *, log: Any,
                 timeout_s: float, command: list[str] | None = None) -> None:
        self.job = job
        self.config = config
        self.claude_dir = claude_dir
        self.state_dir = state_dir
        self.log = log
        self.timeout_s = timeout_s
        self.command = command or [sys.executable, "-I", "-m", MODULE]  # isolated, as the service starts
        self.started = 0  # children started (a fresh one after each kill or crash)
        self._proc: subprocess.Popen[bytes] | None = None
        self._buf = b""
        self._lock = threading.Lock()
        self._killed: str | None = None  # why kill() ended the child

    # -- the runner calls this for each project that passed its gates and lock

    def __call__(self, jc: JobContext, project: Project) -> ProjectOutcome:
        try:
            proc = self._ensure()
            assert proc.stdin is not None
            proc.stdin.write(_line({"project": {"name": project.name, "dir": str(project.dir),
                                                "memory_dir": str(project.memory_dir)},
                                    "force": jc.force, "dry_run": jc.dry_run, "wall": jc.clock.time(),
                                    "unattended": jc.unattended}))
            proc.stdin.flush()
        except OSError as e:
            self._end(signal.SIGKILL)
            return ProjectOutcome(project.name, "failed", error=f"could not start the job's process: {e}"[:300])
        return self._wait(jc, project, proc)

    def _wait(self, jc: JobContext, project: Project, proc: subprocess.Popen[bytes]) -> ProjectOutcome:
        deadline = time.monotonic() + self.timeout_s
        told_to_stop = False
        while True:
            if jc.stop.is_set() and not told_to_stop:
                told_to_stop = True  # the same stop as in-process: abandon between steps
                with contextlib.suppress(OSError):
                    proc.send_signal(signal.SIGTERM)
            left = deadline - time.monotonic()
            if left <= 0:
                self._end(signal.SIGKILL)
                self._sweep(project)
                self.log.warning("job.timeout", job=self.job, project=project.name, timeout_s=self.timeout_s)
                return ProjectOutcome(project.name, "failed", f"killed after {self.timeout_s:g} s (each "
                                      "memory file is as before or after the run)",
                                      error=f"timed out after {self.timeout_s:g} s")
            msg = self._read(proc, min(left, _POLL_S))
            if msg is None:
                continue
            if "eof" in msg:
                code = proc.wait()
                self._end(signal.SIGKILL)
                self._sweep(project)
                if self._killed:
                    return ProjectOutcome(project.name, "failed", error=self._killed)
                return ProjectOutcome(project.name, "failed", error=f"the job's process died ({_status(code)})")
            try:
                if "log" in msg:
                    level, event, fields = msg["log"]
                    getattr(self.log, level if level in _LEVELS else "info")(str(event), **dict(fields))
                elif "outcome" in msg:
                    return outcome_from_plain(msg["outcome"])
            except (TypeError, ValueError) as e:  # our own child's lines: a bug, not a reason to stop
                self.log.warning("job.child_message", job=self.job, error=f"{type(e).__name__}: {e}"[:300])

    def _read(self, proc: subprocess.Popen[bytes], timeout: float) -> dict[str, Any] | None:
        """The next message, ``{"eof": True}`` when the child closed its end, None when nothing came in
        time."""
        assert proc.stdout is not None
        while b"\n" not in self._buf:
            with selectors.DefaultSelector() as sel:
                sel.register(proc.stdout, selectors.EVENT_READ)
                if not sel.select(timeout):
                    return None
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            if not chunk:
                return {"eof": True}
            self._buf += chunk
        raw, _, self._buf = self._buf.partition(b"\n")
        try:
            msg = json.loads(raw)
        except ValueError:
            return None
        return msg if isinstance(msg, dict) else None

    def _ensure(self) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                return self._proc
            self._buf = b""
            self._killed = None
            self._proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=None, close_fds=True, start_new_session=True)
            self.started += 1
            proc = self._proc
        assert proc.stdin is not None
        proc.stdin.write(_line({"job": self.job, "config": config_to_plain(self.config),
                                "claude_dir": str(self.claude_dir), "state_dir": str(self.state_dir),
                                "parent": os.getpid()}))
        proc.stdin.flush()
        return proc

    def _end(self, sig: int) -> None:
        """Kill the child's process group and reap it."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        for f in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                if f is not None:
                    f.close()

    def _sweep(self, project: Project) -> None:
        """After a kill: the run's staging copy and the atomic writer's temp files (memd's own files)."""
        import shutil

        from memd.store import sweep_temps

        with contextlib.suppress(OSError):
            shutil.rmtree(self.state_dir / "staging" / project.name, ignore_errors=True)
            sweep_temps(project.memory_dir, older_than_s=0)

    def kill(self, reason: str = ABANDONED) -> bool:
        """End the running child now (any thread); the project in flight becomes ``failed`` with
        ``reason``. True when there was a child to kill."""
        with self._lock:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                return False
            self._killed = reason
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        return True

    def close(self) -> None:
        """The job is done: EOF ends the child (it finished its last project); killed if it lingers."""
        with self._lock:
            proc = self._proc
        if proc is None:
            return
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self._end(signal.SIGKILL)

    @property
    def pid(self) -> int | None:
        with self._lock:
            return self._proc.pid if self._proc is not None and self._proc.poll() is None else None


_LEVELS = frozenset(("debug", "info", "warning", "error", "exception", "critical"))


def _status(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


# ----------------------------------------------------------------------------- the child's side


class OffsetClock:
    """The daemon's clock as of the hand-off, moving in real time (so an injected clock carries over)."""

    __slots__ = ("_offset",)

    def __init__(self, wall: float) -> None:
        self._offset = wall - time.time()

    def time(self) -> float:
        return time.time() + self._offset

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.time()).astimezone()


class PipeLog:
    """A logger whose events go to the daemon, which logs them (one writer of the log file)."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self._lock = threading.Lock()

    def _emit(self, level: str, event: str, fields: dict[str, Any]) -> None:
        with self._lock, contextlib.suppress(OSError, ValueError):
            self._out.write(_line({"log": [level, event, fields]}))
            self._out.flush()

    def debug(self, event: str, **kw: Any) -> None:
        self._emit("debug", event, kw)

    def info(self, event: str, **kw: Any) -> None:
        self._emit("info", event, kw)

    def warning(self, event: str, **kw: Any) -> None:
        self._emit("warning", event, kw)

    def error(self, event: str, **kw: Any) -> None:
        self._emit("error", event, kw)

    def exception(self, event: str, **kw: Any) -> None:
        import traceback

        self._emit("error", event, {**kw, "traceback": traceback.format_exc()[-4000:]})


def _watch_parent(parent: int, stop: threading.Event) -> None:
    """The daemon died (this child was reparented): stop now, and exit if the run does not."""
    while os.getppid() == parent:
        time.sleep(1.0)
    stop.set()
    time.sleep(ORPHAN_GRACE_S)
    os._exit(3)


def serve(hello: dict[str, Any], lines: Any, out: IO[bytes], stop: threading.Event,
          work: Callable[[JobContext, Project], ProjectOutcome] | None = None) -> int:
    """The child's loop: one project per line of ``lines`` until EOF; the outcome of each to ``out``."""
    from memd import config as config_mod
    from memd.jobs import runner
    from memd.layout import Project
    from memd.state import StateStore

    cfg = config_mod.from_mapping(hello["config"])
    fn = work or runner.load_project_job(hello["job"])
    log = PipeLog(out)
    state_dir = Path(hello["state_dir"])
    try:
        opened = StateStore.open(state_dir)
    except MemdError as e:  # a state file that cannot be opened fails each project with its true reason
        for raw in lines:
            name = json.loads(raw)["project"]["name"]
            out.write(_line({"outcome": outcome_to_plain(ProjectOutcome(name, "failed", error=str(e)[:300]))}))
            out.flush()
        return 1
    with opened as state:
        for raw in lines:
            req = json.loads(raw)
            p = req["project"]
            project = Project(p["name"], Path(p["dir"]), Path(p["memory_dir"]))
            jc = JobContext(config=cfg, claude_dir=Path(hello["claude_dir"]), state_dir=state_dir, state=state,
                            clock=OffsetClock(req["wall"]), force=req["force"], dry_run=req["dry_run"],
                            stop=stop, log=log, unattended=bool(req.get("unattended")))
            try:
                res = fn(jc, project)
            except Exception as e:  # as the runner does in-process: one project's failure is its own
                res = ProjectOutcome(project.name, "failed", error=f"{type(e).__name__}: {e}"[:300])
            out.write(_line({"outcome": outcome_to_plain(res)}))
            out.flush()
    return 0


def main() -> int:
    # the protocol owns the original stdout; anything a library prints goes to stderr
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the daemon decides; a terminal's Ctrl-C is its
    first = sys.stdin.buffer.readline()
    if not first:
        return 0
    hello = json.loads(first)
    armed = os.environ.get(FAULT_FILE_ENV)
    if armed:  # the faults campaign arms the next job's fault points without restarting the daemon
        from memd import store

        with contextlib.suppress(OSError):
            store.set_faults(Path(armed).read_text(encoding="utf-8").strip())
    parent = int(hello.get("parent") or os.getppid())
    threading.Thread(target=_watch_parent, args=(parent, stop), name="memd-orphan-watch", daemon=True).start()
    return serve(hello, sys.stdin.buffer, out, stop)


if __name__ == "__main__":
    raise SystemExit(main())
