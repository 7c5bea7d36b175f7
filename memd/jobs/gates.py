"""Dream gates, cheapest first, and Claude Code's ``.consolidate-lock``.

The order is Claude Code's own (facts.md 6): a memory folder to work on; hours since the last
consolidation; sessions touched since (UUID-named only); no active session; the lock. ``force``
(SIGUSR1, ``memd dream --force``) waives the two cheap ones, never the active-session gate or the lock.

The lock (``memory/.consolidate-lock``) is used exactly as Claude Code uses it: its mtime is the
time of the last consolidation, its body the holder's PID; it is stale after 60 minutes or when
the holder is dead. Taking it writes our PID (the mtime becomes "now"); a failed run rolls the
mtime back so the failure does not count as a consolidation. It is the one file memd writes in a
memory folder.

A holder that is killed (SIGKILL, a power cut) cannot roll anything back: the lock would keep the dead
process's PID and the mtime of a consolidation that never happened (Claude Code's "hours since the
last consolidation" gate, and memd's, would then wait a day for nothing). So before it writes the lock,
the taker notes in memd's state (``state_dir/consolidate/<hash>.json``, never in the memory folder)
what the lock was before and who takes it; a release drops the note. The next dream of the project,
and the daemon's start, find a note whose taker is dead and whose PID the lock still holds, and give
the lock back as a failed run does (``recover_abandoned``).
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memd.clock import SYSTEM, Clock
from memd.store import pid_alive

if TYPE_CHECKING:
    from memd.jobs import JobContext
    from memd.layout import Project

LOCK_NAME = ".consolidate-lock"


@dataclass(frozen=True)
class GateResult:
    passed: bool
    gate: str | None = None  # the gate that failed
    reason: str = ""


PASS = GateResult(True)


# ----------------------------------------------------------------------------- the lock


@dataclass(frozen=True)
class LockState:
    exists: bool
    pid: int | None
    mtime: float | None


def read_lock(memory_dir: Path) -> LockState:
    path = memory_dir / LOCK_NAME
    try:
        st = os.stat(path)
        raw = path.read_bytes()[:64].decode("ascii", "replace").strip()
    except OSError:
        return LockState(False, None, None)
    pid = int(raw) if raw.isdigit() else None
    # a number no process can have (os.kill would overflow on it) names no live holder
    return LockState(True, pid if pid is not None and pid < 2**31 else None, st.st_mtime)


_held_lock = threading.Lock()
_held: dict[Path, ConsolidateLock] = {}  # locks this process holds now (released on shutdown)


def lock_is_free(lock: LockState, now: float, stale_minutes: float, path: Path | None = None) -> tuple[bool, str]:
    if not lock.exists:
        return True, "no lock"
    if lock.mtime is not None and now - lock.mtime >= stale_minutes * 60:
        return True, f"stale (older than {stale_minutes:g} minutes)"
    if lock.pid is None or not pid_alive(lock.pid):
        return True, "holder is gone"
    if lock.pid == os.getpid():
        with _held_lock:
            if path is not None and path not in _held:
                return True, "left by an earlier run of this process"
        return False, "held by this process"
    return False, f"held by pid {lock.pid}"


class ConsolidateLock:
    """Take and give back ``.consolidate-lock`` the way Claude Code does."""

    def __init__(self, memory_dir: Path, stale_minutes: float = 60.0, clock: Clock = SYSTEM,
                 state_dir: Path | None = None) -> None:
        self.memory_dir = memory_dir
        self.clock = clock
        self.note = _note_path(state_dir, memory_dir) if state_dir is not None else None
        self.path = memory_dir / LOCK_NAME
        self.stale_minutes = stale_minutes
        self._before: LockState | None = None
        self.held = False

    def acquire(self, now: float | None = None) -> tuple[bool, str]:
        t = self.clock.time() if now is None else now
        before = read_lock(self.memory_dir)
        free, why = lock_is_free(before, t, self.stale_minutes, self.path)
        if not free:
            return False, why
        if not self.memory_dir.is_dir():
            return False, "no memory folder"
        mine = f"{os.getpid()}".encode()
        if self.note is not None:  # what to give back if this process is killed while it holds the lock
            try:
                _write_note(self.note, self.path, before)
            except OSError as e:  # the lock is not taken without its note: a kill could not give it back
                self._drop_note()
                return False, f"cannot write the lock's note in memd's state folder ({e.strerror})"
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            try:
                os.write(fd, mine)
            finally:
                os.close(fd)
            # Two takers racing both write; the one whose PID is read back holds it.
            if self.path.read_bytes().strip() != mine:
                self._drop_note()
                return False, "lost the race for the lock"
        except OSError as e:
            self._drop_note()
            return False, f"cannot write the lock ({e.strerror})"
        self._before = before
        self.held = True
        with _held_lock:
            _held[self.path] = self
        return True, why

    def release(self, *, success: bool) -> None:
        """Success: leave the lock with its new mtime (the time of this consolidation).
        Failure: roll the mtime back (or remove a lock that did not exist before)."""
        if not self.held:
            return
        self.held = False
        with _held_lock:
            _held.pop(self.path, None)
        if not success:
            _give_back(self.path, self._before)
        self._drop_note()

    def _drop_note(self) -> None:
        if self.note is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.note)


def _give_back(path: Path, before: LockState | None) -> None:
    """The lock as it was before a run that did not consolidate (removed when there was none)."""
    with contextlib.suppress(OSError):
        if before is None or not before.exists or before.mtime is None:
            path.unlink()
        else:
            path.write_bytes(f"{before.pid}".encode() if before.pid else b"")
            os.utime(path, (before.mtime, before.mtime))


NOTES_DIR = "consolidate"


def _note_path(state_dir: Path, memory_dir: Path) -> Path:
    import hashlib

    key = hashlib.sha256(os.fsencode(os.path.abspath(memory_dir))).hexdigest()[:24]
    return state_dir / NOTES_DIR / f"{key}.json"


def _write_note(note: Path, lock: Path, before: LockState) -> None:
    import json

    from memd.store import atomic_write

    note.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write(note, json.dumps({"lock": os.fsdecode(lock), "taker": os.getpid(), "before": {
        "exists": before.exists, "pid": before.pid, "mtime": before.mtime}}) + "\n", mode=0o600)


def recover_abandoned(state_dir: Path, memory_dir: Path | None = None) -> list[str]:
    """Give back, as a failed run does, every ``.consolidate-lock`` a killed memd process still holds (its
    note says what the lock was before; see the module doc); only ``memory_dir``'s when given. A lock
    someone took since (another PID in it) is left alone; the note goes either way. Returns the locks
    given back."""
    import json

    notes = [_note_path(state_dir, memory_dir)] if memory_dir is not None else \
        sorted((state_dir / NOTES_DIR).glob("*.json")) if (state_dir / NOTES_DIR).is_dir() else []
    out: list[str] = []
    for note in notes:
        try:
            data = json.loads(note.read_text(encoding="utf-8"))
            taker, lock, b = int(data["taker"]), Path(data["lock"]), data["before"]
            before = LockState(bool(b["exists"]), b["pid"] if isinstance(b["pid"], int) else None,
                               float(b["mtime"]) if b["mtime"] is not None else None)
        except FileNotFoundError:
            continue
        except (OSError, ValueError, KeyError, TypeError):
            with contextlib.suppress(OSError):
                os.unlink(note)  # not one memd wrote whole: nothing to give back from it
            continue
        if taker == os.getpid():
            with _held_lock:
                if lock in _held:
                    continue  # held by this process now
        elif pid_alive(taker):
            continue  # a live memd holds it
        if read_lock(lock.parent).pid == taker:
            _give_back(lock, before)
            out.append(str(lock))
        with contextlib.suppress(OSError):
            os.unlink(note)
    return out


def release_all_held() -> int:
    """On shutdown with a job abandoned mid-run: give back every lock as a failed run would."""
    with _held_lock:
        held = list(_held.values())
    for lk in held:
        lk.release(success=False)
    return len(held)


# ----------------------------------------------------------------------------- gates


def last_consolidation(jc: JobContext, project: Project, lock: LockState) -> float | None:
    """The later of memd's record and the lock's mtime (Claude Code's own consolidations count too)."""
    ours = jc.state.project(project.name).last_consolidation if jc.state is not None else None
    times = [t for t in (ours, lock.mtime) if t is not None]
    return max(times) if times else None


def has_active_session(project: Project, now: float, minutes: float) -> bool:
    from memd.layout import session_files, subagent_files

    cutoff = now - minutes * 60
    for path in (*session_files(project.dir), *subagent_files(project.dir)):
        try:
            if os.stat(path).st_mtime > cutoff:
                return True
        except OSError:
            continue
    return False


def memory_off(jc: JobContext, project: Project) -> GateResult:
    """A project whose memory Claude Code has switched off (the environment, or any settings scope of
    the repository its sessions ran in) is not dreamed, caught up or synced: Claude Code neither loads
    nor writes that memory, and memd would be tending a folder nobody reads."""
    from memd.layout import memory_off_for
    from memd.transcripts.sessions import project_cwds

    known = jc.memo.get("cwds", {}).get(project.name)
    why = memory_off_for(jc.claude_dir, known if known is not None else project_cwds(project, jc.state))
    return GateResult(False, "memory_off", f"Claude Code's auto memory is off here ({why})") if why else PASS


BLOCKS_KEY = "dream.blocks_seen."  # + project: the digest of the conflict blocks the last dream left open


def open_blocks(memory_dir: Path) -> tuple[int, str]:
    """Sync's conflict blocks in the folder's memory files (``memd.core.conflict``; team/ is never
    synced into): how many, and a digest of which file holds each and what it holds ("" when none). A
    file without the marker's opening text is not decoded."""
    import hashlib

    from memd.core import conflict
    from memd.core.paths import is_team
    from memd.memfolder.read import decode, read_bounded
    from memd.memfolder.walk import DEFAULT_MAX_BYTES, list_files

    digest = hashlib.sha256()
    n = 0
    for f in sorted(list_files(memory_dir).memory_files(), key=lambda f: f.rel):
        if is_team(f.rel):
            continue
        r = read_bounded(f.path, DEFAULT_MAX_BYTES, hash=False)
        if r.data is None or conflict.BEGIN.encode() not in r.data:
            continue
        lines = decode(r).split("\n")
        for b in conflict.blocks("\n".join(lines)):
            n += 1
            digest.update(f"{f.rel}\0{b.machine}\0{b.date}\0".encode())
            digest.update("\n".join(lines[b.line - 1:b.end or len(lines)]).encode("utf-8", "surrogatepass") + b"\0")
    return n, digest.hexdigest() if n else ""


def note_blocks(jc: JobContext, project: Project) -> None:
    """After a dream that ran (whatever it decided): the blocks still open are recorded as seen, so
    blocks a dream left open do not make the project due night after night (``check_dream``)."""
    if jc.state is None or jc.dry_run or not project.memory_dir.is_dir():
        return
    n, digest = open_blocks(project.memory_dir)
    if n:
        jc.state.set(BLOCKS_KEY + project.name, digest)
    else:
        jc.state.delete(BLOCKS_KEY + project.name)


def check_dream(jc: JobContext, project: Project, *, now: float | None = None) -> GateResult:
    """Every gate but the lock (taken separately, just before the work), cheapest first. Sync conflict
    blocks no dream has had before it (``open_blocks``, ``note_blocks``) make a project due whatever
    its hours and sessions since the last consolidation: the other machine's words wait in the file,
    marked, until a dream (or the user) decides; blocks a dream left open wait for the usual gates."""
    cfg = jc.config.dream
    t = jc.clock.time() if now is None else now
    if not project.memory_dir.is_dir():
        return GateResult(False, "memory_folder", "no memory folder yet")
    lock = read_lock(project.memory_dir)  # read once: its mtime and its holder
    last = last_consolidation(jc, project, lock)
    due: GateResult = PASS
    if not jc.force:
        refused: GateResult | None = None
        if last is not None and cfg.min_hours > 0 and (t - last) < cfg.min_hours * 3600:
            refused = GateResult(False, "min_hours",
                                 f"{(t - last) / 3600:.1f} h since the last consolidation (< {cfg.min_hours:g})")
        elif cfg.min_sessions > 0:
            touched = jc.state.sessions_touched_since(project.name, last or 0.0) if jc.state is not None else 0
            if touched < cfg.min_sessions:
                refused = GateResult(False, "min_sessions",
                                     f"{touched} sessions touched since the last consolidation "
                                     f"(< {cfg.min_sessions})")
        if refused is not None:
            n, digest = open_blocks(project.memory_dir)
            seen = jc.state.get(BLOCKS_KEY + project.name) if jc.state is not None else None
            if n and digest != seen:
                due = GateResult(True, "conflict_blocks", f"{n} sync conflict block(s) no dream has had yet "
                                                          f"(else: {refused.reason})")
            else:
                # a memory whose stated date has passed, shown to no dream yet: due once (issue 31)
                from memd.jobs.evidence import due_dates

                dates = due_dates(jc.state, project.name, project.memory_dir, jc.config, t)
                if not dates:
                    return refused
                due = GateResult(True, "passed_dates", f"a date stated in memory has passed ({'; '.join(dates[:3])})"
                                                       f" and no dream has seen it yet (else: {refused.reason})")
    if cfg.require_idle and has_active_session(project, t, jc.config.transcripts.active_minutes):
        return GateResult(False, "active_session", "a session is active")
    if cfg.honour_lock:
        free, why = lock_is_free(lock, t, cfg.lock_stale_minutes, project.memory_dir / LOCK_NAME)
        if not free:
            return GateResult(False, "lock", why)
    return due
