"""Talking to a running daemon: a signal, plus an optional request file naming projects.

``memd trigger dream --project P`` writes ``state_dir/requests/<stamp>-dream.json`` and sends SIGUSR1;
the daemon, on the signal, takes every request file of that job. A signal that arrives without a
request file (``kill -USR1``, ``launchctl kill``, ``systemctl reload``) means "all projects".
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from memd.errors import MemdError

# sync shares SIGUSR2 with the catch-up: `memd trigger sync` always writes a request file naming it
SIGNALS = {"dream": signal.SIGUSR1, "catchup": signal.SIGUSR2, "sync": signal.SIGUSR2, "reload": signal.SIGHUP,
           "stop": signal.SIGTERM}
_MAX_REQUEST_BYTES = 64 * 1024


def requests_dir(state_dir: Path) -> Path:
    return state_dir / "requests"


def write_request(state_dir: Path, job: str, projects: list[str] | None) -> Path:
    folder = requests_dir(state_dir)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = f"{time.time_ns()}-{os.getpid()}-{job}.json"
    tmp = folder / f".{name}.tmp"
    tmp.write_text(json.dumps({"job": job, "projects": projects}), encoding="utf-8")
    os.replace(tmp, folder / name)
    return folder / name


@dataclass
class Request:
    job: str
    all_projects: bool
    projects: list[str]
    found: bool = True  # a request file was there (False: a bare signal)


def take_requests(state_dir: Path, job: str) -> Request:
    """Every pending request of ``job`` (files removed); none at all means every project."""
    folder = requests_dir(state_dir)
    names: list[str] = []
    any_all = False
    found = False
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        entries = []
    for e in entries:
        if not e.name.endswith(f"-{job}.json") or e.name.startswith("."):
            continue
        try:
            with open(e.path, "rb") as f:
                data = json.loads(f.read(_MAX_REQUEST_BYTES))
        except (OSError, ValueError):
            data = None
        with contextlib.suppress(OSError):
            os.unlink(e.path)
        if not isinstance(data, dict):
            continue
        found = True
        projects = data.get("projects")
        if projects is None:
            any_all = True
        elif isinstance(projects, list):
            names.extend(str(p) for p in projects if isinstance(p, str))
    if not found or any_all:
        return Request(job, True, [], found=found)
    return Request(job, False, sorted(set(names)))


def send(state_dir: Path, what: str, projects: list[str] | None = None) -> int:
    """Signal the running daemon (writing a request file first); returns its pid."""
    from memd.daemon.pidfile import running_pid

    pid = running_pid(state_dir)
    if pid is None:
        raise MemdError(f"memd is not running (no live daemon holds {state_dir / 'memd.pid'}); "
                        "start it with `memd run` or `memd service install`")
    if what in ("dream", "catchup", "sync"):
        write_request(state_dir, what, projects)
    try:
        os.kill(pid, SIGNALS[what])
    except ProcessLookupError:
        raise MemdError(f"memd (pid {pid}) has just exited") from None
    except PermissionError:
        raise MemdError(f"not allowed to signal pid {pid}") from None
    return pid
