"""One daemon per user: a pid file held with ``flock``, and a heartbeat file for ``memd status``.

The lock, not the pid written in the file, decides: a pid file left by a crashed daemon is not
locked by anyone (the kernel drops the lock with the process), so it never blocks a new start, and a
recycled pid cannot fool anyone. The heartbeat (``daemon.json``: pid, start time, last beat, the
schedule's next runs) lets status tell a live daemon from a hung one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import Any

from memd.errors import MemdError

PID_NAME = "memd.pid"
HEARTBEAT_NAME = "daemon.json"


class AlreadyRunning(MemdError):
    exit_code = 3

    def __init__(self, pid: int | None, path: Path) -> None:
        who = f"pid {pid}" if pid else "another process"
        super().__init__(
            f"memd is already running ({who}; pid file {path}). One daemon per user: stop it first "
            "(systemctl --user stop memd, or kill -TERM the pid), or talk to it with `memd trigger`.")
        self.pid = pid


def pid_path(state_dir: Path) -> Path:
    return state_dir / PID_NAME


def _read_pid(fd: int) -> int | None:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        raw = os.read(fd, 64).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(raw) if raw.isdigit() else None


class PidLock:
    """``with PidLock(state_dir):`` holds the daemon's pid file for the life of the process."""

    def __init__(self, state_dir: Path) -> None:
        self.path = pid_path(state_dir)
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as e:
            raise MemdError(f"cannot create the pid file: {e.strerror}", path=str(self.path)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pid = _read_pid(fd)
            os.close(fd)
            raise AlreadyRunning(pid, self.path) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()  # unlink while still holding the lock: no window for a stale file
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> PidLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def running_pid(state_dir: Path) -> int | None:
    """The pid of the live daemon, or None when no daemon holds the pid file."""
    path = pid_path(state_dir)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            # a shared probe: fails while the daemon holds its exclusive lock
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return _read_pid(fd) or None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def heartbeat_path(state_dir: Path) -> Path:
    return state_dir / HEARTBEAT_NAME


def write_heartbeat(state_dir: Path, data: dict[str, Any], now: float) -> None:
    """Replace daemon.json, stamped ``now`` (the daemon's clock, wall seconds); no fsync: a lost beat
    after a power cut only looks stale, as it should."""
    path = heartbeat_path(state_dir)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    payload = dict(data, heartbeat=now)
    try:
        tmp.write_text(json.dumps(payload, sort_keys=True, default=str), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


def read_heartbeat(state_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(heartbeat_path(state_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
