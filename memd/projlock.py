"""One writer per project: the lock every writer of a project's memory folder and history takes.

``project_lock(state_dir, project, what)`` is an ``fcntl.flock`` on ``state_dir/locks/<safe name>.lock``
(never anything inside a memory folder). Two memd processes that would write one project (the daemon's
rebuild, a ``memd rebuild --all``, an undo, a dream's apply window, a sync) wait for each other: the
second polls for a bounded time (``WAIT_S``) and then raises ``ProjectBusyError``, worded with who holds
the lock (its pid, what it does, for how long; the holder writes that into the file once it has it).

Why flock: the kernel drops it when its holder dies, however it dies (SIGKILL included), so a lock
is never left behind by a crash; and because every writer of a project's history holds it, whoever
holds it knows that no other memd writes that history: a dulwich ``*.lock`` file found then is a dead
writer's leftover (``memd.history`` recovers them on that ground).

Within one process the lock is reentrant (``undo_project`` rebuilds the index under the undo's lock,
``history.commit_files`` takes it inside ``apply``'s window) through a per-project ``threading.RLock``:
threads of one process exclude each other like processes do, and a nested call in the holding thread
only counts. The fd is opened ``O_CLOEXEC`` (an exec'ed child never inherits the lock); a forked child
forgets the parent's locks (``os.register_at_fork``), so it neither thinks it holds them nor keeps the
parent's flock alive by closing late.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from memd.errors import MemdError

LOCKS_DIR = "locks"
WAIT_S = 60.0  # how long a second writer waits for a project before giving up (a rebuild takes < 1 s)
POLL_S = 0.05


class ProjectBusyError(MemdError):
    """Another memd process (or thread) is writing the project: nothing was changed."""

    def __init__(self, message: str, *, project: str, holder: str = "", path: str | None = None) -> None:
        super().__init__(message, path=path)
        self.project = project
        self.holder = holder


def lock_path(state_dir: Path, project: str) -> Path:
    """``state_dir/locks/<readable prefix>-<hash>.lock``: a project name may hold any character (a
    slash, undecodable bytes as surrogate escapes) and be hundreds long; the file name is short and plain."""
    raw = project.encode("utf-8", "surrogateescape")
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", project.encode("ascii", "replace").decode("ascii"))[:40].strip(".-")
    return state_dir / LOCKS_DIR / f"{readable or 'project'}-{hashlib.sha256(raw).hexdigest()[:16]}.lock"


@dataclass
class _Held:
    rlock: threading.RLock = field(default_factory=threading.RLock)
    depth: int = 0
    fd: int = -1
    what: str = ""
    since: float = 0.0
    done: set[str] = field(default_factory=set)  # work done once per hold (``first_in_hold``)


_registry_lock = threading.Lock()
_held: dict[str, _Held] = {}


def _forget_after_fork() -> None:
    global _registry_lock
    _registry_lock = threading.Lock()
    for h in _held.values():
        if h.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(h.fd)  # the parent's flock is the parent's: this copy of the fd only goes
    _held.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def _entry(key: str) -> _Held:
    with _registry_lock:
        return _held.setdefault(key, _Held())


def holder_of(path: Path) -> str:
    """What the holder wrote into the lock file ("pid what started-at"), read back; "" when unknown."""
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def _busy(project: str, path: Path, holder: str) -> ProjectBusyError:
    who = "another memd"
    parts = holder.split(" ", 2)
    if len(parts) == 3 and parts[0].isdigit():
        try:
            age = f", for {max(0, round(time.time() - float(parts[2])))} s"
        except ValueError:
            age = ""
        who = f"another memd (pid {parts[0]}, {parts[1]}{age})"
    return ProjectBusyError(f"project {project} is being written by {who}; not changed, try again",
                            project=project, holder=holder, path=None)


@contextlib.contextmanager
def project_lock(state_dir: Path, project: str, what: str, *, timeout_s: float | None = None) -> Iterator[None]:
    """Hold the project's write lock for the block (see the module doc). ``what`` names the writer
    (``rebuild``, ``undo``, ``dream``...) for the message a waiter gets. Waits at most ``timeout_s``
    (default ``WAIT_S``), then raises ProjectBusyError; an OSError (the state folder cannot be
    written) becomes a MemdError with its true reason: nothing is written without the lock."""
    from memd.store import os_reason

    wait = WAIT_S if timeout_s is None else timeout_s
    path = lock_path(state_dir, project)
    key = str(path)
    h = _entry(key)
    deadline = time.monotonic() + wait
    if not h.rlock.acquire(timeout=max(wait, 0.0)):  # another thread of this process holds it
        raise _busy(project, path, f"{os.getpid()} {h.what or 'write'} {h.since}")
    try:
        if h.depth == 0:
            try:
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError as e:
                raise MemdError(f"cannot take the project's write lock: {os_reason(e)}", path=key) from None
            try:
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() >= deadline:
                            raise _busy(project, path, holder_of(path)) from None
                        time.sleep(POLL_S)
                now = time.time()
                with contextlib.suppress(OSError):  # who writes, for a waiter's message (best effort)
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, f"{os.getpid()} {_word(what)} {now:.3f}\n".encode(), 0)
            except BaseException:
                os.close(fd)
                raise
            h.fd, h.what, h.since = fd, what, now
        h.depth += 1
        try:
            yield
        finally:
            h.depth -= 1
            if h.depth == 0:
                h.done.clear()
                fd, h.fd = h.fd, -1
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
                os.close(fd)  # releases the flock
    finally:
        h.rlock.release()


def first_in_hold(state_dir: Path, project: str, task: str) -> bool:
    """True the first time ``task`` is asked for while this process holds the project's lock (held
    again later: True again). What only a dead holder can have left behind (dulwich's lock files) is
    looked for once per hold, not before every write inside it."""
    h = _entry(str(lock_path(state_dir, project)))
    if h.depth == 0 or task in h.done:
        return h.depth == 0
    h.done.add(task)
    return True


def _word(what: str) -> str:
    return re.sub(r"\s+", "-", what.strip()) or "write"
