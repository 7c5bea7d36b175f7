"""Fixtures for the daemon: ``run_daemon`` starts the REAL ``memd run`` process and reads its JSON log,
and ``no_thread_leaks`` fails a test that leaves threads behind (in-process watcher tests).

    def test_x(run_daemon):
        d = run_daemon()                      # temp HOME, temp Claude folder, short debounce
        d.wait_for("daemon.ready")
        d.write_memory("-p", "MEMORY.md", text)
        ev = d.wait_for("budget.warning", project="-p")
        assert d.stop() == 0                  # SIGTERM, then the exit code

Waits poll the log with generous timeouts (a loaded 2-core machine): nothing asserts on time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from signal import SIGTERM
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 60.0

FAST_CONFIG = """\
[daemon]
debounce_quiet_s = 0.2
debounce_max_s = 1.0
reconcile_interval_s = 5
stop_timeout_s = 10
"""


def over_budget_index(lines: int = 260, title: str = "entry") -> str:
    return "".join(f"- [{title} {i}]({title}_{i}.md) — hook number {i}\n" for i in range(lines))


class Recorder:
    """A stand-in logger for in-process tests: ``rec.info("event", k=v)`` is kept as (level, event, kw)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    def __getattr__(self, level: str):  # type: ignore[no-untyped-def]
        def log(event: str, **kw: Any) -> None:
            self.events.append((level, event, kw))
        return log

    def named(self, name: str) -> list[dict[str, Any]]:
        return [kw for _, ev, kw in self.events if ev == name]


@dataclass
class DaemonProc:
    base: Path
    env: dict[str, str]
    home: Path
    claude: Path
    state_dir: Path
    config_path: Path
    proc: subprocess.Popen[bytes] | None = None
    stderr_path: Path | None = None
    extra: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def log_path(self) -> Path:
        return self.state_dir / "memd.log"

    def start(self, *args: str) -> DaemonProc:
        self.stderr_path = self.base / f"stderr-{time.time_ns()}.txt"
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "memd", "run", "--console", "no", *args],
                                         env=self.env, cwd=self.home, stdout=subprocess.DEVNULL, stderr=err)
        return self

    def memd(self, *args: str, timeout: float = WAIT_S) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "memd", *args], env=self.env, cwd=self.home,
                              capture_output=True, text=True, timeout=timeout)

    def events(self, name: str | None = None, **match: Any) -> list[dict[str, Any]]:
        try:
            raw = self.log_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        out = []
        for line in raw.splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if name is not None and ev.get("event") != name:
                continue
            if all(ev.get(k) == v for k, v in match.items()):
                out.append(ev)
        return out

    def wait_for(self, name: str, timeout: float = WAIT_S, count: int = 1, **match: Any) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            evs = self.events(name, **match)
            if len(evs) >= count:
                return evs[count - 1]
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"memd exited ({self.proc.returncode}) before {name} {match}: "
                                     f"{self.stderr()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {name} {match} within {timeout}s; log:\n" +
                                     "\n".join(json.dumps(e) for e in self.events()[-30:]))
            time.sleep(0.05)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path else ""

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait_exit(self, timeout: float = WAIT_S) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self, sig: int = SIGTERM, timeout: float = WAIT_S) -> int:
        """Signal memd to stop and wait for it: its exit code (0 for a graceful stop)."""
        self.signal(sig)
        return self.wait_exit(timeout)

    def project(self, name: str) -> Path:
        mem = self.claude / "projects" / name / "memory"
        mem.mkdir(parents=True, exist_ok=True)
        return mem

    def write_memory(self, project: str, rel: str, text: str) -> Path:
        path = self.project(project) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        # whole or not at all, as an editor's save: a truncate-then-write let a loaded machine's watcher
        # read the index empty in between (a real "ok" then "over" again: a second warning)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        return path

    def write_config(self, text: str) -> None:
        self.config_path.parent.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(text, encoding="utf-8")

    def kill(self) -> None:
        for p in [self.proc, *self.extra]:
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(10)


@pytest.fixture
def run_daemon(tmp_path: Path) -> Iterator[Callable[..., DaemonProc]]:
    made: list[DaemonProc] = []

    def make(config: str = FAST_CONFIG, *, start: bool = True, claude: Path | None = None,
             create_root: bool = True) -> DaemonProc:
        base = tmp_path / f"d{len(made)}"
        home = base / "home"
        home.mkdir(parents=True)
        claude_dir = claude or (base / "claude")
        if create_root:
            (claude_dir / "projects").mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("ANTHROPIC_", "CLAUDE_", "XDG_", "NOTIFY_SOCKET", "WATCHDOG_", "JOURNAL_"))}
        env.update(HOME=str(home), XDG_STATE_HOME=str(home / ".local" / "state"),
                   XDG_CONFIG_HOME=str(home / ".config"), CLAUDE_CONFIG_DIR=str(claude_dir),
                   PYTHONPATH=str(ROOT), TZ="UTC")
        d = DaemonProc(base, env, home, claude_dir, home / ".local" / "state" / "memd",
                       home / ".config" / "memd" / "config.toml")
        d.write_config(config)
        made.append(d)
        if start:
            d.start()
        return d

    yield make
    for d in made:
        d.kill()


@pytest.fixture(autouse=True)
def _reset_memd_logging() -> Iterator[None]:
    """A test that configured memd's logging (logs.setup) leaves no handler on a deleted tmp file."""
    yield
    from memd import logs

    logs.reset()


@pytest.fixture
def no_thread_leaks() -> Iterator[None]:
    """Fail the test when it leaves threads running (watchdog's own conftest does the same)."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 10
    while True:
        extra = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not extra:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"threads leaked: {[t.name for t in extra]}")
        time.sleep(0.05)

