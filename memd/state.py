"""memd's durable memory of what it has seen and done: one SQLite file (stdlib sqlite3, WAL).

Holds, per transcript, its identity and one offset per consumer: what the scan has read
(indexing, activity, memory writes seen) and, separately, what the catch-up has extracted, so
scanning never makes the catch-up skip a span. Per project: last consolidation, last catch-up,
sessions touched. A run log (pruned by ``prune_runs``: ``SKIPPED_KEEP_S``, ``RUNS_KEEP_S``), samples of
each index's size (``index_samples``, pruned alike), outstanding warnings, and a small key/value table.

Rules this module keeps:
- A corrupt or unreadable-as-database file never stops memd: it is set aside (renamed with a
  timestamp, its -wal/-shm beside it) with a clear log line, and an empty store is built. The
  worst case is re-reading transcripts, never skipping them (offsets start at 0 again).
- The schema is versioned with ``PRAGMA user_version`` and grows by the ``MIGRATIONS`` list
  only; a migration is never edited once shipped.
- One connection belongs to one thread (sqlite3's ``check_same_thread`` default). The daemon
  uses its store from its main loop only; other threads (and the CLI, another process) open
  their own ``StateStore``. WAL lets readers run beside the one writer; ``busy_timeout`` makes a
  second writer (e.g. ``memd scan`` while the daemon runs) wait instead of failing.
- A writer that waited out the busy timeout (10 s) gets ``StateBusy`` (exit 3, "not run"), never
  SQLite's bare "database is locked": it names the process that holds the write lock when the system
  shows it (``/proc/locks``) and says what to do.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from memd.errors import MemdError

log = logging.getLogger("memd.state")

FILENAME = "state.sqlite3"
# The open warnings, copied beside the database after every change by the one writer of the table:
# the SessionStart hook reads this small JSON file ({project: [[kind, level, details], ...]}) and so
# imports neither sqlite3 nor any SQL of its own.
WARNINGS_FILE = "warnings.json"
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
# sqlite result codes that mean "this file is not a healthy database" (not "busy" or "locked").
_SQLITE_IOERR, _SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_CANTOPEN = 10, 11, 13, 14
_SQLITE_NOTADB = 26
_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY = 5, 6, 8
_WRITE_FAULTS = (_SQLITE_IOERR, _SQLITE_FULL, _SQLITE_CANTOPEN, _SQLITE_READONLY)
# The WAL index's write lock: byte 120 of the -shm file (SQLite's unix VFS, WAL_WRITE_LOCK), and the
# bytes of the rollback journal's RESERVED/PENDING/EXCLUSIVE locks in the database file.
_SHM_WRITE_LOCK = 120
_DB_LOCK_BYTES = range(0x40000000, 0x40000000 + 512 + 2)

# Each connection's page cache, in KiB (SQLite's default is 2,000): the cache fills with every page a
# connection has read and keeps it, so a daemon with three connections grew by up to 6 MB as its run log
# grew (bench/daemon_memory.py; docs/reliability.md "Soak"). The file is small and in the OS's cache.
CACHE_KIB = 512

# Run-log retention (issue 12, the soak): the catch-up runs every 2 hours over every project and a project
# with nothing new to read still gets a row (outcome ``skipped``): with 1,050 projects that is ~12,600
# rows a day, millions a year, that nothing reads. ``StateStore.prune_runs`` deletes, in batches:
SKIPPED_KEEP_S = 48 * 3600
"""How long a ``skipped`` row that called no model (no tokens, no cost) is kept: it changed nothing and
spent nothing, and the daily check-in has reported it by then (its window is the day since the previous
check-in: 48 h leaves a day to spare for a late check-in). A skipped row that did call the model (a
catch-up stopped by a shutdown mid-run) spent tokens: it is kept as long as any other finished row."""
RUNS_KEEP_S = 400 * 86_400
"""How long any other finished row is kept: over a year, so a year's costs and outcomes can be read
back. The newest finished row of each (project, job) pair is kept whatever its age (skipped rows that
called no model are no runs of the job), so a project's last run of each job can always be read back
(``runs(job=, project=, limit=1)``, ``last_runs``). ``running`` rows are never deleted (the daemon closes
its orphans at start)."""
PRUNE_BATCH = 5000
"""Rows deleted per transaction: each batch takes the write lock for tens of milliseconds and gives it
back, so the scanner thread or a foreground command waits that long at most, not for a whole prune."""
PRUNE_MAX_ROWS = 200_000
"""Rows one ``prune_runs`` call deletes at most: 2.1 s on the development machine from a 756,000-row
log (batches of ~50 ms), far inside the 10 s busy timeout, so a writer that keeps missing the gaps
between batches still gets the lock before it gives up, and the daemon's start (before systemd's
READY=1) is never held for long. A year's backlog (over 4 million rows, a log from before retention) is
cleared over a few weeks of check-ins; ~12,600 new rows a day are far below the cap."""
# A skipped row that called no model (rule 1 above); for a table alias prefix, format with it.
_IDLE_SKIPPED = ("{a}outcome = 'skipped' AND {a}tokens_in + {a}tokens_out + {a}cache_read + {a}cache_write = 0 "
                 "AND {a}cost_usd = 0")
_PRUNE_SKIPPED = ("DELETE FROM runs WHERE id IN (SELECT id FROM runs WHERE " + _IDLE_SKIPPED.format(a="")
                  + " AND COALESCE(ended, started) < ? LIMIT ?)")
# Older than the cutoff, not running, not an idle skip (rule 1's), and a newer such row of the same
# (project, job) exists (a NULL project, the check-in's rows, is a pair of its own: ``IS``).
_PRUNE_OLD = (
    "DELETE FROM runs WHERE id IN (SELECT r.id FROM runs r WHERE r.outcome != 'running' AND NOT ("
    + _IDLE_SKIPPED.format(a="r.") + ") AND COALESCE(r.ended, r.started) < ? AND EXISTS ("
    "SELECT 1 FROM runs n WHERE n.project IS r.project AND n.job = r.job AND n.outcome != 'running' AND NOT ("
    + _IDLE_SKIPPED.format(a="n.") + ") AND (n.started > r.started OR (n.started = r.started AND n.id > r.id))"
    ") LIMIT ?)")

# Index size samples (``record_index_sample``): at most one per project an hour while the figures stay
# the same (a new one at once when they change), kept as long as the run log's rows.
SAMPLE_EVERY_S = 3600.0
SAMPLES_KEEP_S = RUNS_KEEP_S
_PRUNE_SAMPLES = ("DELETE FROM index_samples WHERE rowid IN (SELECT s.rowid FROM index_samples s WHERE s.at < ? "
                  "AND EXISTS (SELECT 1 FROM index_samples n WHERE n.project = s.project AND n.at > s.at) LIMIT ?)")

# Each entry moves the schema from version i to i + 1. Append only.
MIGRATIONS: list[str] = [
    # 0 -> 1: the first schema.
    """
    CREATE TABLE transcripts (
        path TEXT PRIMARY KEY,
        project TEXT NOT NULL DEFAULT '',
        inode INTEGER NOT NULL DEFAULT 0,
        size INTEGER NOT NULL DEFAULT 0,
        scan_offset INTEGER NOT NULL DEFAULT 0,
        extract_offset INTEGER NOT NULL DEFAULT 0,
        extract_inode INTEGER NOT NULL DEFAULT 0,
        session_id TEXT NOT NULL DEFAULT '',
        records INTEGER NOT NULL DEFAULT 0,
        bad_lines INTEGER NOT NULL DEFAULT 0,
        first_record_at REAL,
        last_record_at REAL,
        memory_write_seen_at REAL,
        scanned_at REAL,
        extracted_at REAL
    );
    CREATE INDEX transcripts_project ON transcripts(project);
    CREATE TABLE projects (
        name TEXT PRIMARY KEY,
        last_consolidation REAL,
        last_catchup REAL,
        last_session_at REAL,
        last_scan REAL
    );
    CREATE TABLE sessions (
        project TEXT NOT NULL,
        session_id TEXT NOT NULL,
        touched_at REAL NOT NULL,
        PRIMARY KEY (project, session_id)
    );
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        job TEXT NOT NULL,
        project TEXT,
        started REAL NOT NULL,
        ended REAL,
        outcome TEXT NOT NULL DEFAULT 'running',
        added INTEGER NOT NULL DEFAULT 0,
        changed INTEGER NOT NULL DEFAULT 0,
        deleted INTEGER NOT NULL DEFAULT 0,
        tokens_in INTEGER NOT NULL DEFAULT 0,
        tokens_out INTEGER NOT NULL DEFAULT 0,
        cache_read INTEGER NOT NULL DEFAULT 0,
        cache_write INTEGER NOT NULL DEFAULT 0,
        cost_usd REAL NOT NULL DEFAULT 0,
        error TEXT,
        summary TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX runs_job_started ON runs(job, started);
    CREATE INDEX runs_project_started ON runs(project, started);
    CREATE TABLE warnings (
        project TEXT NOT NULL,
        kind TEXT NOT NULL,
        level TEXT NOT NULL,
        details TEXT NOT NULL DEFAULT '{}',
        since REAL NOT NULL,
        updated REAL NOT NULL,
        PRIMARY KEY (project, kind)
    );
    CREATE TABLE kv (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    """,
    # 1 -> 2: the first cwd a transcript's records carried (how its memory folder was decided; a
    # transcript first seen before any record with a cwd is mapped again once one arrives).
    """
    ALTER TABLE transcripts ADD COLUMN cwd TEXT NOT NULL DEFAULT ''
    """,
    # 2 -> 3: the sum of a run's four token kinds (tokens_in is the uncached input only, so a run
    # served from the cache read as "0 tokens in"); older rows get the sum of their columns.
    """
    ALTER TABLE runs ADD COLUMN tokens_total INTEGER NOT NULL DEFAULT 0;
    UPDATE runs SET tokens_total = tokens_in + tokens_out + cache_read + cache_write
    """,
    # 3 -> 4: outcomes name what happened (memd.jobs.Outcome): "ok" said nothing about whether files
    # changed, so old rows read by their counts.
    """
    UPDATE runs SET outcome = CASE
        WHEN outcome = 'ok' AND added + changed + deleted > 0 THEN 'changed'
        WHEN outcome IN ('ok', 'noop') THEN 'unchanged'
        WHEN outcome = 'rejected' THEN 'refused'
        WHEN outcome = 'review' THEN 'proposed'
        ELSE outcome END
    """,
    # 4 -> 5: a transcript's device beside its inode (its identity: st_dev, st_ino). The scan keys
    # rows on resolved paths and reads a file it reaches twice once.
    """
    ALTER TABLE transcripts ADD COLUMN dev INTEGER NOT NULL DEFAULT 0
    """,
    # 5 -> 6: the catch-up's tries of a span that failed, was refused or stopped at a cap (issue 24):
    # it was sent again in full every two hours without limit. ``start`` is the extract offset the
    # tries are for (a row for another offset is stale); ``parked``: no automatic try until a user's retry.
    """
    CREATE TABLE span_tries (
        path TEXT PRIMARY KEY,
        project TEXT NOT NULL DEFAULT '',
        start INTEGER NOT NULL DEFAULT 0,
        tries INTEGER NOT NULL DEFAULT 0,
        last_try REAL NOT NULL DEFAULT 0,
        reason TEXT NOT NULL DEFAULT '',
        parked REAL
    );
    CREATE INDEX span_tries_project ON span_tries(project)
    """,
    # 6 -> 7: a run that called a model memd has no price for: its cost is unknown, not $0 (issue 24)
    """
    ALTER TABLE runs ADD COLUMN cost_unknown INTEGER NOT NULL DEFAULT 0
    """,
    # 7 -> 8: the index's size over time (issue 26's chart): a sample each time the daemon measures a
    # project's MEMORY.md anyway, at most one an hour unless the figures changed (``record_index_sample``),
    # pruned with the run log (``prune_index_samples``). The limits are kept with the figures: a chart
    # draws each sample against the limits it was measured against.
    """
    CREATE TABLE index_samples (
        project TEXT NOT NULL,
        at REAL NOT NULL,
        lines INTEGER NOT NULL,
        chars INTEGER NOT NULL,
        max_lines INTEGER NOT NULL,
        max_chars INTEGER NOT NULL
    );
    CREATE INDEX index_samples_project_at ON index_samples(project, at)
    """,
    # 8 -> 9: the run's name in memd's history (``memd.apply.new_run_id``: the ``memd-run`` trailer of its
    # commits, the name of its kept review diff), so a run-log row finds its history record by name, not
    # by time (two runs may start in the same second); older rows have '' and are matched by time
    """
    ALTER TABLE runs ADD COLUMN history_run TEXT NOT NULL DEFAULT ''
    """,
    # 9 -> 10: a run whose model memd has no price for, with no call priced, has an unknown cost: NULL, not
    # 0.0 (sums counted it as free; issue 34). ``cost_usd`` was NOT NULL: the table is rebuilt as it was with
    # that one constraint gone (SQLite cannot drop a constraint), ids, rows and the id sequence kept (an id is
    # never given twice); its indexes again.
    """
    CREATE TABLE runs_v10 (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        job TEXT NOT NULL,
        project TEXT,
        started REAL NOT NULL,
        ended REAL,
        outcome TEXT NOT NULL DEFAULT 'running',
        added INTEGER NOT NULL DEFAULT 0,
        changed INTEGER NOT NULL DEFAULT 0,
        deleted INTEGER NOT NULL DEFAULT 0,
        tokens_in INTEGER NOT NULL DEFAULT 0,
        tokens_out INTEGER NOT NULL DEFAULT 0,
        cache_read INTEGER NOT NULL DEFAULT 0,
        cache_write INTEGER NOT NULL DEFAULT 0,
        cost_usd REAL DEFAULT 0,
        error TEXT,
        summary TEXT NOT NULL DEFAULT '',
        tokens_total INTEGER NOT NULL DEFAULT 0,
        cost_unknown INTEGER NOT NULL DEFAULT 0,
        history_run TEXT NOT NULL DEFAULT ''
    );
    INSERT INTO runs_v10 (id, job, project, started, ended, outcome, added, changed, deleted, tokens_in,
                          tokens_out, cache_read, cache_write, cost_usd, error, summary, tokens_total,
                          cost_unknown, history_run)
        SELECT id, job, project, started, ended, outcome, added, changed, deleted, tokens_in, tokens_out,
               cache_read, cache_write, CASE WHEN cost_unknown != 0 AND cost_usd = 0 THEN NULL ELSE cost_usd END,
               error, summary, tokens_total, cost_unknown, history_run FROM runs;
    DELETE FROM sqlite_sequence WHERE name = 'runs_v10';
    INSERT INTO sqlite_sequence (name, seq) SELECT 'runs_v10', seq FROM sqlite_sequence WHERE name = 'runs';
    DROP TABLE runs;
    ALTER TABLE runs_v10 RENAME TO runs;
    CREATE INDEX runs_job_started ON runs(job, started);
    CREATE INDEX runs_project_started ON runs(project, started)
    """,
    # 10 -> 11: how sessions use each memory (issue 31), read by the scan from transcripts Claude Code later
    # deletes: one row per event (an index load per session, a read, a recall, a write, a weak Bash
    # signal), keyed so that reading a transcript again never counts an event twice (``record_uses``).
    # ``file``: the topic file relative to its memory folder ('' for a load).
    """
    CREATE TABLE memory_use (
        project TEXT NOT NULL,
        kind TEXT NOT NULL,
        event TEXT NOT NULL,
        file TEXT NOT NULL DEFAULT '',
        session_id TEXT NOT NULL DEFAULT '',
        at REAL,
        PRIMARY KEY (project, kind, event, file)
    );
    CREATE INDEX memory_use_project_file ON memory_use(project, file)
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)


@dataclass(frozen=True)
class TranscriptState:
    path: Path
    project: str  # the memory folder (project name) the transcript feeds
    inode: int
    size: int  # file size when last scanned
    scan_offset: int  # bytes the scan has consumed (always just past a newline)
    extract_offset: int  # bytes the catch-up has extracted (independent of scan_offset)
    extract_inode: int  # inode the extract offset belongs to (0: unknown)
    session_id: str
    records: int  # records seen by the scan, in all
    bad_lines: int  # unparseable lines seen by the scan, in all
    first_record_at: float | None
    last_record_at: float | None
    memory_write_seen_at: float | None  # last time the main agent was seen writing memory
    scanned_at: float | None
    extracted_at: float | None
    cwd: str = ""  # the first cwd its records carried ("" while none was seen)


class ScanRow(NamedTuple):
    """The fields the scan compares on every pass (cheap to build for thousands of files)."""

    path: str
    project: str
    inode: int
    size: int
    scan_offset: int
    session_id: str
    last_record_at: float | None
    cwd: str
    dev: int = 0


@dataclass(frozen=True)
class ProjectState:
    name: str
    last_consolidation: float | None = None
    last_catchup: float | None = None
    last_session_at: float | None = None
    last_scan: float | None = None


@dataclass(frozen=True)
class Run:
    id: int
    job: str
    project: str | None
    started: float
    ended: float | None
    outcome: str  # "running" until finished
    added: int
    changed: int
    deleted: int
    tokens_in: int  # uncached input only
    tokens_out: int
    cache_read: int
    cache_write: int
    cost_usd: float | None  # None: unknown (a model memd has no price for, and no call of the run priced)
    error: str | None
    summary: str
    tokens_total: int = 0  # input + output + cache reads + cache writes
    cost_unknown: bool = False  # a call's model had no price: cost_usd is only the priced part (None: none)
    history_run: str = ""  # the run's name in the history and reviews ('' : none, or a row older than schema 9)


@dataclass(frozen=True)
class IndexSample:
    """MEMORY.md's size as the daemon measured it (the loaded view's lines and characters) and the
    limits it was measured against."""

    project: str
    at: float
    lines: int
    chars: int
    max_lines: int
    max_chars: int


@dataclass(frozen=True)
class SpanTry:
    """The catch-up's tries of one transcript's span from ``start`` (its extract offset then)."""

    path: Path
    project: str
    start: int
    tries: int
    last_try: float
    reason: str
    parked: float | None = None  # when it was parked (no automatic try until ``retry_spans``)


@dataclass(frozen=True)
class Warning:  # shadows the builtin category on purpose: import it as state.Warning
    project: str
    kind: str
    level: str
    details: dict[str, Any] = field(default_factory=dict)
    since: float = 0.0  # first raised at this level
    updated: float = 0.0


class StateError(MemdError):
    """The state folder cannot be used at all (e.g. not writable)."""


class StateBusy(StateError):
    """Another connection held the state file's write lock for longer than the busy timeout: nothing
    was written (exit 3, "not run"; docs/daemon.md "Outcomes and exit codes")."""

    exit_code = 3

    def __init__(self, message: str, *, holders: list[int], path: str | None = None) -> None:
        super().__init__(message, path=path)
        self.holders = holders


def _is_busy(e: sqlite3.Error) -> bool:
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in (_SQLITE_BUSY, _SQLITE_LOCKED)
    msg = str(e).lower()
    return "database is locked" in msg or "database is busy" in msg or "database table is locked" in msg


def lock_holders(path: Path) -> list[int]:
    """The pids that hold a write lock on the state file (its WAL index's write lock, or the rollback
    journal's locks), as the kernel lists them in ``/proc/locks``; [] where that cannot be seen."""
    files: dict[tuple[int, int, int], bool] = {}  # (major, minor, inode) -> is the -shm file
    for p, shm in ((path, False), (Path(str(path) + "-shm"), True)):
        with contextlib.suppress(OSError):
            st = os.stat(p)
            files[(os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)] = shm
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    out: list[int] = []
    for line in lines:
        parts = line.split()
        # "1: POSIX  ADVISORY  WRITE 1234 08:01:5678 120 120"; a waiter's line has "->" after the number
        if len(parts) < 8 or parts[1] == "->" or parts[1] != "POSIX" or parts[3] != "WRITE":
            continue
        try:
            pid = int(parts[4])
            major, minor, ino = parts[5].split(":")
            key = (int(major, 16), int(minor, 16), int(ino))
            start = int(parts[6])
        except ValueError:
            continue
        is_shm = files.get(key)
        if is_shm is None or pid <= 0 or pid in out:
            continue
        if (is_shm and start == _SHM_WRITE_LOCK) or (not is_shm and start in _DB_LOCK_BYTES):
            out.append(pid)
    return out


def _describe(pid: int) -> str:
    if pid == os.getpid():
        return f"another thread of this memd (pid {pid})"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        argv = []
    memd = [i for i, a in enumerate(argv[:4]) if (a == "memd" and i and argv[i - 1] == "-m") or
            (i == 0 and Path(a).name == "memd") or a == "memd.daemon.child"]
    if memd:
        rest = argv[memd[0] + 1:]
        what = ("a memd job's process" if argv[memd[0]] == "memd.daemon.child" else "memd run" if "run" in rest
                else "memd " + next((a for a in rest if a in _COMMANDS), "command"))
        return f"{what} (pid {pid})"
    cmd = " ".join(" ".join(Path(a).name if i == 0 else a for i, a in enumerate(argv[:3])).split())
    cmd = cmd if len(cmd) <= 60 else cmd[:59] + "…"
    return f"another process (pid {pid}: {cmd})" if cmd else f"another process (pid {pid})"


_COMMANDS = ("dream", "catchup", "scan", "sync", "status", "rebuild", "undo", "report", "check")


def busy_error(e: sqlite3.Error, path: Path, waited_s: float) -> StateBusy:
    """SQLite's "database is locked", in words: who holds the write lock, for how long, what to do."""
    holders = lock_holders(path)
    who = ", ".join(_describe(p) for p in holders) if holders else "another memd or program"
    return StateBusy(
        f"the state database is busy: {who} has held its write lock for more than {waited_s:g} s, so "
        "nothing was written (SQLite: " + str(e) + "); try again when it has finished, or stop it if it "
        "is stuck (the daemon: `systemctl --user restart memd`, or `kill -TERM <pid>`)",
        holders=holders, path=str(path))


def _is_corruption(e: sqlite3.DatabaseError) -> bool:
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    msg = str(e).lower()
    return "not a database" in msg or "malformed" in msg


def _true_reason(e: sqlite3.DatabaseError, path: Path) -> str:
    """SQLite says "disk I/O error" for any failed write: name what the system refused (a full disk, a
    read-only file system, the process's file-size limit, a folder where the file should be) when that
    can be seen."""
    msg = str(e)
    if path.is_dir():
        return f"it is a folder, not a file (SQLite: {msg})"
    if (getattr(e, "sqlite_errorcode", 0) or 0) & 0xFF not in (_SQLITE_IOERR, _SQLITE_FULL, _SQLITE_CANTOPEN):
        return msg
    with contextlib.suppress(OSError):
        vfs = os.statvfs(path.parent)
        if vfs.f_bavail * vfs.f_frsize < 1 << 20:
            return f"no space left on device (SQLite: {msg})"
        if vfs.f_flag & os.ST_RDONLY:
            return f"read-only file system (SQLite: {msg})"
    import resource

    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if soft != resource.RLIM_INFINITY:
        return f"file too large for this process's file-size limit (ulimit -f: {soft:,} bytes; SQLite: {msg})"
    return msg


class _Corrupt(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


# A folder name that is not valid UTF-8 reaches Python as a str with lone surrogates (U+DC80-U+DCFF,
# os.fsdecode's surrogateescape), which SQLite cannot take: one such project failed the scan of all.
# Those code points are stored as the private-use U+10FC80-U+10FCFF instead and turned back on
# reading: reversible, prefix-preserving (the range scans over paths hold), and a no-op for every
# name that is valid UTF-8, so no stored row changes.
_TO_DB = {0xDC80 + i: 0x10FC80 + i for i in range(128)}
_FROM_DB = {v: k for k, v in _TO_DB.items()}


def _to_db(v: Any) -> Any:
    if isinstance(v, str) and not v.isascii():
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            return v.translate(_TO_DB)
    return v


def _params_to_db(params: tuple[Any, ...] | dict[str, Any]) -> tuple[Any, ...] | dict[str, Any]:
    if isinstance(params, dict):
        return {k: _to_db(v) for k, v in params.items()}
    return tuple(_to_db(v) for v in params)


def _text_from_db(b: bytes) -> str:
    text = b.decode("utf-8", "replace")
    if b"\xf4\x8f\xb2" in b or b"\xf4\x8f\xb3" in b:  # U+10FC80-U+10FCFF in UTF-8
        return text.translate(_FROM_DB)
    return text


class StateStore:
    """The state file. Open with ``StateStore.open(state_dir)``; use from one thread."""

    def __init__(self, conn: sqlite3.Connection, path: Path, busy_timeout_s: float = 10.0) -> None:
        self._conn = conn
        self.path = path
        self.busy_timeout_s = busy_timeout_s  # how long a write waits for another writer's lock
        self._depth = 0  # nesting of batch()
        self.set_aside: Path | None = None  # where a corrupt file was moved on open, if it was
        self._warnings_dirty = False  # the warnings table changed in the open transaction

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(cls, state_dir: Path, *, timeout: float = 10.0) -> StateStore:
        """Open (creating, migrating, or rebuilding a corrupt file) ``state_dir/state.sqlite3``."""
        try:
            state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as e:
            raise StateError(f"cannot create the state folder: {e.strerror}", path=str(state_dir)) from None
        path = state_dir / FILENAME
        moved: Path | None = None
        for attempt in (1, 2):
            try:
                conn = cls._connect(path, timeout)
            except sqlite3.DatabaseError as e:
                if isinstance(e, sqlite3.OperationalError) and _is_busy(e):
                    raise busy_error(e, path, timeout) from None
                if attempt == 2 or not _is_corruption(e):
                    raise StateError(f"cannot open the state file: {_true_reason(e, path)}", path=str(path)) from None
                moved = _set_aside(path, str(e))
                continue
            except _Corrupt as e:
                if attempt == 2:
                    raise StateError(f"cannot rebuild the state file: {e.why}", path=str(path)) from None
                moved = _set_aside(path, e.why)
                continue
            store = cls(conn, path, timeout)
            store.set_aside = moved
            if moved is not None or not (state_dir / WARNINGS_FILE).exists():
                store.export_warnings()
            return store
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _connect(path: Path, timeout: float) -> sqlite3.Connection:
        conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)
        try:
            conn.row_factory = sqlite3.Row
            conn.text_factory = _text_from_db
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")  # before the integrity check reads every page
            # The first real read: a file that is not a database fails here.
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise _Corrupt(f"schema version {version} is newer than this memd knows ({SCHEMA_VERSION})")
            if version > 0:
                row = conn.execute("PRAGMA quick_check").fetchone()
                if row is None or row[0] != "ok":
                    raise _Corrupt(f"integrity check failed: {row[0] if row else 'no answer'}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                log.warning("state file not in WAL mode (%s): %s", mode, path)
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            _migrate(conn, version)
            try:
                os.chmod(path, 0o600)
            except OSError:
                pass
        except BaseException:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Group many writes into one transaction (one fsync): ``with store.batch(): ...``."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._exec("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield
        except BaseException:
            self._depth = 0
            self._conn.execute("ROLLBACK")
            raise
        self._depth = 0
        try:
            self._exec("COMMIT")
        except StateBusy:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
            raise
        if self._warnings_dirty:
            self.export_warnings()

    def _exec(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> sqlite3.Cursor:
        """Every statement goes through here: a lock held past the busy timeout becomes ``StateBusy``."""
        params = _params_to_db(params)
        try:
            return self._conn.execute(sql, params)
        except sqlite3.OperationalError as e:
            if _is_busy(e):
                raise busy_error(e, self.path, self.busy_timeout_s) from None
            if (getattr(e, "sqlite_errorcode", 0) or 0) & 0xFF in _WRITE_FAULTS:
                raise StateError(f"cannot write the state file: {_true_reason(e, self.path)}",
                                 path=str(self.path)) from None
            raise

    # ------------------------------------------------------------------ transcripts

    def transcript(self, path: Path) -> TranscriptState | None:
        row = self._exec("SELECT * FROM transcripts WHERE path = ?", (str(path),)).fetchone()
        return _transcript(row) if row is not None else None

    def transcripts(self, project: str | None = None) -> list[TranscriptState]:
        """Every known transcript (of one memory project), by path."""
        if project is None:
            rows = self._exec("SELECT * FROM transcripts ORDER BY path").fetchall()
        else:
            rows = self._exec("SELECT * FROM transcripts WHERE project = ? ORDER BY path",
                              (project,)).fetchall()
        return [_transcript(r) for r in rows]

    def transcripts_under(self, folder: Path) -> dict[Path, TranscriptState]:
        """Known transcripts inside ``folder`` (a projects/<name> folder), keyed by path."""
        lo = str(folder).rstrip("/") + "/"
        hi = lo[:-1] + "0"  # '0' sorts right after '/': a range scan over the primary key
        rows = self._exec("SELECT * FROM transcripts WHERE path >= ? AND path < ?", (lo, hi)).fetchall()
        return {Path(r["path"]): _transcript(r) for r in rows}

    def scan_rows(self, folder: Path) -> dict[str, ScanRow]:
        """What the scan needs of the known transcripts inside ``folder``, keyed by path string."""
        lo = str(folder).rstrip("/") + "/"
        rows = self._exec(
            "SELECT path, project, inode, size, scan_offset, session_id, last_record_at, cwd, dev FROM transcripts "
            "WHERE path >= ? AND path < ?", (lo, lo[:-1] + "0")).fetchall()
        return {r[0]: ScanRow(*r) for r in rows}

    def save_scan(self, path: Path, *, project: str, inode: int, size: int, offset: int,
                  session_id: str = "", records: int = 0, bad_lines: int = 0,
                  first_record_at: float | None = None, last_record_at: float | None = None,
                  memory_write_seen_at: float | None = None, when: float | None = None,
                  expect_offset: int | None = None, cwd: str = "", dev: int = 0) -> bool:
        """Record a scan pass: ``records``/``bad_lines`` are this pass's counts (added to the totals);
        record times only move forward; the extract offset is left alone.

        ``expect_offset`` (the scan offset the pass started from) makes the save conditional: when
        another scanner saved meanwhile, nothing is written and False is returned, so two scanners
        of one file never count its lines twice.
        """
        now = time.time() if when is None else when
        cur = self._exec(
            """
            INSERT INTO transcripts (path, project, inode, size, scan_offset, session_id, records,
                                     bad_lines, first_record_at, last_record_at, memory_write_seen_at,
                                     scanned_at, cwd, dev)
            VALUES (:path, :project, :inode, :size, :offset, :session_id, :records, :bad_lines,
                    :first, :last, :mem, :now, :cwd, :dev)
            ON CONFLICT(path) DO UPDATE SET
                project = excluded.project,
                inode = excluded.inode,
                dev = excluded.dev,
                size = excluded.size,
                scan_offset = excluded.scan_offset,
                session_id = CASE WHEN excluded.session_id != '' THEN excluded.session_id
                                  ELSE transcripts.session_id END,
                records = transcripts.records + excluded.records,
                bad_lines = transcripts.bad_lines + excluded.bad_lines,
                first_record_at = COALESCE(transcripts.first_record_at, excluded.first_record_at),
                last_record_at = COALESCE(MAX(transcripts.last_record_at, excluded.last_record_at),
                                          transcripts.last_record_at, excluded.last_record_at),
                memory_write_seen_at = COALESCE(
                    MAX(transcripts.memory_write_seen_at, excluded.memory_write_seen_at),
                    transcripts.memory_write_seen_at, excluded.memory_write_seen_at),
                scanned_at = excluded.scanned_at,
                cwd = CASE WHEN transcripts.cwd = '' THEN excluded.cwd ELSE transcripts.cwd END
            WHERE :expect IS NULL OR transcripts.scan_offset = :expect
            """,
            {"path": str(path), "project": project, "inode": inode, "size": size, "offset": offset,
             "session_id": session_id, "records": records, "bad_lines": bad_lines,
             "first": first_record_at, "last": last_record_at, "mem": memory_write_seen_at, "now": now,
             "expect": expect_offset, "cwd": cwd, "dev": dev})
        return cur.rowcount > 0

    def save_extract(self, path: Path, *, inode: int, offset: int, when: float | None = None) -> None:
        """Record what the catch-up has extracted (only the catch-up calls this)."""
        now = time.time() if when is None else when
        self._exec(
            """
            INSERT INTO transcripts (path, inode, extract_offset, extract_inode, extracted_at)
            VALUES (?, ?, ?, ?, ?)
            ON CONFLICT(path) DO UPDATE SET
                extract_offset = excluded.extract_offset,
                extract_inode = excluded.extract_inode,
                extracted_at = excluded.extracted_at
            """,
            (str(path), inode, offset, inode, now))
        self._exec("DELETE FROM span_tries WHERE path = ?", (str(path),))  # the span is done: its tries too

    # ------------------------------------------------------------------ catch-up tries

    def span_tries(self, project: str) -> dict[Path, SpanTry]:
        """The tries of the project's spans that failed, were refused or stopped at a cap, by path."""
        rows = self._exec("SELECT * FROM span_tries WHERE project = ?", (project,)).fetchall()
        return {Path(r["path"]): SpanTry(Path(r["path"]), r["project"], r["start"], r["tries"], r["last_try"],
                                         r["reason"], r["parked"]) for r in rows}

    def note_try(self, path: Path, *, project: str, start: int, reason: str, when: float,
                 park_after: int) -> SpanTry:
        """One more try of the span from ``start`` (a row for another start begins again at 1); parked
        once it reaches ``park_after`` tries."""
        with self.batch():
            row = self._exec("SELECT start, tries FROM span_tries WHERE path = ?", (str(path),)).fetchone()
            tries = (row[1] if row is not None and row[0] == start else 0) + 1
            parked = when if tries >= park_after else None
            self._exec("INSERT OR REPLACE INTO span_tries (path, project, start, tries, last_try, reason, parked) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?)", (str(path), project, start, tries, when, reason[:500], parked))
        return SpanTry(path, project, start, tries, when, reason[:500], parked)

    def retry_spans(self, project: str) -> int:
        """A user's retry: the project's tries start over (parked spans are tried at the next run)."""
        return self._exec("DELETE FROM span_tries WHERE project = ?", (project,)).rowcount

    def move_transcript(self, old: Path, new: Path) -> None:
        """Key a transcript's row on another name of the same file (its resolved path), offsets and
        all; a row already under ``new`` wins."""
        with self.batch():
            self._exec("UPDATE OR IGNORE transcripts SET path = ? WHERE path = ?", (str(new), str(old)))
            self._exec("DELETE FROM transcripts WHERE path = ?", (str(old),))

    def reset_transcript(self, path: Path, *, expect_offset: int | None = None) -> bool:
        """A replaced or truncated file: both offsets and the scan's counts start over. With
        ``expect_offset``, only when the scan offset is still that one (no other scanner got there first)."""
        cur = self._exec(
            """
            UPDATE transcripts SET scan_offset = 0, extract_offset = 0, extract_inode = 0, size = 0,
                                   records = 0, bad_lines = 0, first_record_at = NULL, cwd = ''
            WHERE path = ? AND (? IS NULL OR scan_offset = ?)
            """,
            (str(path), expect_offset, expect_offset))
        return cur.rowcount > 0

    def forget_transcript(self, path: Path) -> None:
        """A transcript that no longer exists (Claude Code cleans them up after 30 days)."""
        self._exec("DELETE FROM transcripts WHERE path = ?", (str(path),))
        self._exec("DELETE FROM span_tries WHERE path = ?", (str(path),))

    # ------------------------------------------------------------------ projects

    def project(self, name: str) -> ProjectState:
        row = self._exec("SELECT * FROM projects WHERE name = ?", (name,)).fetchone()
        if row is None:
            return ProjectState(name)
        return ProjectState(name, row["last_consolidation"], row["last_catchup"], row["last_session_at"],
                            row["last_scan"])

    def _project_set(self, name: str, column: str, when: float, *, only_forward: bool = False) -> None:
        assert column in ("last_consolidation", "last_catchup", "last_session_at", "last_scan")
        value = (f"COALESCE(MAX(projects.{column}, excluded.{column}), excluded.{column})"
                 if only_forward else f"excluded.{column}")
        self._exec(f"INSERT INTO projects (name, {column}) VALUES (?, ?) "
                   f"ON CONFLICT(name) DO UPDATE SET {column} = {value}", (name, when))

    def mark_consolidated(self, name: str, when: float) -> None:
        self._project_set(name, "last_consolidation", when)

    def mark_catchup(self, name: str, when: float) -> None:
        self._project_set(name, "last_catchup", when)

    def mark_scanned(self, name: str, when: float) -> None:
        self._project_set(name, "last_scan", when)

    def touch_session(self, name: str, session_id: str, when: float) -> None:
        """A session of project ``name`` had a record at ``when`` (times only move forward)."""
        self._exec(
            """
            INSERT INTO sessions (project, session_id, touched_at) VALUES (?, ?, ?)
            ON CONFLICT(project, session_id) DO UPDATE SET
                touched_at = MAX(sessions.touched_at, excluded.touched_at)
            """,
            (name, session_id, when))
        self._project_set(name, "last_session_at", when, only_forward=True)

    def sessions_touched_since(self, name: str, since: float, *, exclude: str | None = None) -> int:
        """Sessions (UUID-named only, as Claude Code counts them) touched after ``since``."""
        rows = self._exec("SELECT session_id FROM sessions WHERE project = ? AND touched_at > ?",
                          (name, since)).fetchall()
        return sum(1 for r in rows if _UUID.match(r[0]) and r[0] != exclude)

    def projects(self) -> list[ProjectState]:
        rows = self._exec("SELECT name FROM projects ORDER BY name").fetchall()
        return [self.project(r[0]) for r in rows]

    # ------------------------------------------------------------------ memory use (issue 31)

    def record_uses(self, project: str, session_id: str, events: list[tuple[str, str, str, float | None]]) -> int:
        """Record memory uses (kind, event key, file, time) of one session; an event already recorded is
        ignored (a transcript read again counts nothing twice). An index load is keyed on the session:
        one per session. The number of new events."""
        n = 0
        with self.batch():
            for kind, key, file, at in events:
                ev = session_id if kind == "load" else key
                cur = self._exec("INSERT OR IGNORE INTO memory_use (project, kind, event, file, session_id, at) "
                                 "VALUES (?, ?, ?, ?, ?, ?)", (project, kind, ev, file, session_id, at))
                n += cur.rowcount
        return n

    def prune_memory_use(self, now: float, *, max_rows: int = PRUNE_MAX_ROWS) -> int:
        """Memory-use events older than the run log keeps its rows (``RUNS_KEEP_S``, over a year): a memory
        unused that long is unused whatever came before. In batches, like ``prune_runs``."""
        n = 0
        while n < max_rows:
            cur = self._exec("DELETE FROM memory_use WHERE rowid IN (SELECT rowid FROM memory_use WHERE at < ? "
                             "LIMIT ?)", (now - RUNS_KEEP_S, min(PRUNE_BATCH, max_rows - n)))
            n += cur.rowcount
            if cur.rowcount < PRUNE_BATCH:
                break
        return n

    def index_loads(self, project: str) -> list[float]:
        """When each session that loaded the project's index first did (newest first)."""
        rows = self._exec("SELECT at FROM memory_use WHERE project = ? AND kind = 'load' ORDER BY at DESC",
                          (project,)).fetchall()
        return [float(r[0] or 0.0) for r in rows]

    def memory_uses(self, project: str) -> dict[str, dict[str, Any]]:
        """Per topic file of the project: ``reads``, ``recalls``, ``writes``, ``weak`` (counts) and
        ``last_seen`` (the newest read, recall or write)."""
        rows = self._exec("SELECT file, kind, COUNT(*), MAX(at) FROM memory_use WHERE project = ? AND kind != 'load' "
                          "GROUP BY file, kind", (project,)).fetchall()
        out: dict[str, dict[str, Any]] = {}
        names = {"read": "reads", "recall": "recalls", "write": "writes", "weak": "weak"}
        for file, kind, count, at in rows:
            d = out.setdefault(file, {"reads": 0, "recalls": 0, "writes": 0, "weak": 0, "last_seen": None})
            if kind in names:
                d[names[kind]] = int(count)
            if kind != "weak" and at is not None:
                d["last_seen"] = max(float(at), d["last_seen"] or 0.0)
        return out

    # ------------------------------------------------------------------ run log

    def start_run(self, job: str, project: str | None, started: float) -> int:
        cur = self._exec("INSERT INTO runs (job, project, started) VALUES (?, ?, ?)", (job, project, started))
        rid = cur.lastrowid
        assert rid is not None
        return int(rid)

    def finish_run(self, run_id: int, *, outcome: str, ended: float, added: int = 0, changed: int = 0,
                   deleted: int = 0, tokens_in: int = 0, tokens_out: int = 0, cache_read: int = 0,
                   cache_write: int = 0, cost_usd: float = 0.0, error: str | None = None,
                   summary: str = "", cost_unknown: bool = False, history_run: str = "") -> None:
        """Close a run row. The token counts are stored as sane integers (``_count``: a bad number is
        0, never an error) with their sum; a cost that is not a finite non-negative number is 0. A run
        whose cost is unknown (``cost_unknown``) with nothing priced is stored as NULL: unknown, not free.
        ``history_run``: the run's name in memd's history (its commits' ``memd-run``, its review's file)."""
        tin, tout, cr, cw = (_count(v) for v in (tokens_in, tokens_out, cache_read, cache_write))
        cost = float(cost_usd) if isinstance(cost_usd, (int, float)) and math.isfinite(cost_usd) else 0.0
        stored: float | None = None if cost_unknown and cost <= 0 else max(0.0, cost)
        self._exec(
            """
            UPDATE runs SET outcome = ?, ended = ?, added = ?, changed = ?, deleted = ?, tokens_in = ?,
                            tokens_out = ?, cache_read = ?, cache_write = ?, tokens_total = ?, cost_usd = ?,
                            error = ?, summary = ?, cost_unknown = ?, history_run = ?
            WHERE id = ?
            """,
            (outcome, ended, added, changed, deleted, tin, tout, cr, cw, tin + tout + cr + cw,
             stored, error, summary, int(bool(cost_unknown)), history_run or "", run_id))

    def runs(self, *, job: str | None = None, project: str | None = None, since: float | None = None,
             limit: int = 100, before_id: int | None = None) -> list[Run]:
        """Runs, newest first; ``before_id``: only those older than that row (by start, then id: a page
        of a timeline after the one that ended with it; none when that row is gone)."""
        where: list[str] = []
        params: list[Any] = []
        if before_id is not None:
            where.append("(started, id) < (SELECT started, id FROM runs WHERE id = ?)")
            params.append(before_id)
        if job is not None:
            where.append("job = ?")
            params.append(job)
        if project is not None:
            where.append("project = ?")
            params.append(project)
        if since is not None:
            where.append("started >= ?")
            params.append(since)
        sql = "SELECT * FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY started DESC, id DESC LIMIT ?"
        params.append(limit)
        return [_run(r) for r in self._exec(sql, tuple(params)).fetchall()]

    def run_totals(self, *, since: float, exclude_job: str) -> dict[str, Any]:
        """What the check-in sums over the runs since ``since`` (all but ``exclude_job``'s), counted by
        SQLite: a day of catch-ups over many projects is tens of thousands of rows, which the daemon must
        not load as objects to add them up (each check-in raised its resident memory by megabytes)."""
        where = "started >= ? AND job != ?"
        args = (since, exclude_job)
        sums = self._exec(
            "SELECT COUNT(*), COALESCE(SUM(added + changed + deleted), 0), COALESCE(SUM(tokens_in), 0), "
            "COALESCE(SUM(tokens_out), 0), COALESCE(SUM(cache_read), 0), COALESCE(SUM(cache_write), 0), "
            f"COALESCE(SUM(cost_usd), 0.0), COALESCE(SUM(cost_unknown), 0) FROM runs WHERE {where}",
            args).fetchone()
        outcomes = {r[0]: int(r[1]) for r in self._exec(
            f"SELECT outcome, COUNT(*) FROM runs WHERE {where} GROUP BY outcome", args).fetchall()}
        projects = [r[0] for r in self._exec(
            f"SELECT DISTINCT project FROM runs WHERE {where} AND project IS NOT NULL", args).fetchall()]
        return {"runs": int(sums[0]), "changes": int(sums[1]), "tokens_in": int(sums[2]), "tokens_out": int(sums[3]),
                "cache_read": int(sums[4]), "cache_write": int(sums[5]), "cost_usd": float(sums[6]),
                "cost_unknown_runs": int(sums[7]), "outcomes": outcomes, "projects": projects}

    def last_outcomes(self, project: str, jobs: tuple[str, ...], limit: int) -> list[str]:
        """The outcomes of ``project``'s newest ``limit`` runs of ``jobs`` that ran (not ``running``, not
        ``skipped``: a catch-up with nothing to read is no run of the job), newest first."""
        return [r.outcome for r in self.last_runs(project, jobs, limit)]

    def last_runs(self, project: str, jobs: tuple[str, ...], limit: int, *, model_only: bool = False) -> list[Run]:
        """``project``'s newest ``limit`` runs of ``jobs`` that ran (as ``last_outcomes``), newest first,
        filtered by SQLite: an idle project's skipped catch-ups (twelve a day) never push them out of the
        window. ``model_only``: only the runs that called the model, by the rule of
        the idle streak (``memd.jobs.modelrun.note_idle``): it used tokens, or it failed (a failure always
        breaks a streak; rows keep no "model called" flag, and old rows must read alike)."""
        marks = ", ".join("?" for _ in jobs)
        model = (" AND (outcome = 'failed' OR tokens_in + tokens_out + cache_read + cache_write > 0)"
                 if model_only else "")
        rows = self._exec(f"SELECT * FROM runs WHERE project = ? AND job IN ({marks}) AND outcome NOT IN "
                          f"('running', 'skipped'){model} ORDER BY started DESC, id DESC LIMIT ?",
                          (project, *jobs, limit)).fetchall()
        return [_run(r) for r in rows]

    def prune_runs(self, now: float, *, batch: int = PRUNE_BATCH, max_rows: int = PRUNE_MAX_ROWS) -> int:
        """Delete the run-log rows the retention rules let go (``SKIPPED_KEEP_S``, ``RUNS_KEEP_S``), at
        most ``batch`` per transaction and ``max_rows`` in all (the rest waits for the next call); the
        number of rows deleted. Call it outside ``batch()`` (inside one, the deletes join the open
        transaction). A busy or unwritable state file raises as any write does (``StateBusy``,
        ``StateError``); the batches committed before stay deleted."""
        deleted = 0
        for sql, cutoff in ((_PRUNE_SKIPPED, now - SKIPPED_KEEP_S), (_PRUNE_OLD, now - RUNS_KEEP_S)):
            while deleted < max_rows:
                size = min(batch, max_rows - deleted)
                with self.batch():
                    n = max(0, self._exec(sql, (cutoff, size)).rowcount)
                deleted += n
                if n < size:
                    break
        return deleted

    def running(self) -> list[Run]:
        """Every row still ``running``, oldest first (the daemon closes those a dead daemon left: all of
        them, not those among the newest rows, which an idle catch-up's rows push out of any window)."""
        return [_run(r) for r in self._exec("SELECT * FROM runs WHERE outcome = 'running' ORDER BY started, id")]

    def first_runs(self, *, since: float, exclude_job: str, limit: int) -> list[Run]:
        """The oldest ``limit`` runs since ``since`` (all but ``exclude_job``'s), oldest first."""
        rows = self._exec("SELECT * FROM runs WHERE started >= ? AND job != ? ORDER BY started ASC, id ASC LIMIT ?",
                          (since, exclude_job, limit)).fetchall()
        return [_run(r) for r in rows]

    def named_runs(self, project: str, names: list[str]) -> set[str]:
        """Which of ``names`` (runs' names in memd's history) a run-log row of ``project`` carries
        (``Run.history_run``), whatever page of a timeline that row is on."""
        found: set[str] = set()
        for i in range(0, len(names), 500):
            chunk = names[i:i + 500]
            marks = ", ".join("?" for _ in chunk)
            found.update(r[0] for r in self._exec(
                f"SELECT history_run FROM runs WHERE project = ? AND history_run IN ({marks})", (project, *chunk)))
        return found

    def run(self, run_id: int) -> Run | None:
        row = self._exec("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return _run(row) if row is not None else None

    # ------------------------------------------------------------------ index size samples

    def record_index_sample(self, project: str, at: float, *, lines: int, chars: int, max_lines: int,
                            max_chars: int) -> bool:
        """Keep one sample of the project's index size, unless its newest sample is less than
        ``SAMPLE_EVERY_S`` old with the same figures (the daemon measures on every memory write: a
        session's tenth write of a topic file does not move the index). True when one was kept."""
        figures = (_count(lines), _count(chars), _count(max_lines), _count(max_chars))
        last = self._exec("SELECT at, lines, chars, max_lines, max_chars FROM index_samples WHERE project = ? "
                          "ORDER BY at DESC LIMIT 1", (project,)).fetchone()
        if last is not None and at - float(last[0]) < SAMPLE_EVERY_S and tuple(last[1:]) == figures:
            return False
        self._exec("INSERT INTO index_samples (project, at, lines, chars, max_lines, max_chars) "
                   "VALUES (?, ?, ?, ?, ?, ?)", (project, at, *figures))
        return True

    def index_samples(self, project: str, *, since: float | None = None, limit: int = 10_000) -> list[IndexSample]:
        """The project's samples, oldest first (the newest ``limit`` of those since ``since``)."""
        rows = self._exec("SELECT * FROM (SELECT * FROM index_samples WHERE project = ? AND at >= ? "
                          "ORDER BY at DESC LIMIT ?) ORDER BY at",
                          (project, -math.inf if since is None else since, limit)).fetchall()
        return [IndexSample(r["project"], r["at"], r["lines"], r["chars"], r["max_lines"], r["max_chars"])
                for r in rows]

    def prune_index_samples(self, now: float, *, batch: int = PRUNE_BATCH, max_rows: int = PRUNE_MAX_ROWS) -> int:
        """Delete the samples older than ``SAMPLES_KEEP_S`` (the run log's ``RUNS_KEEP_S``), keeping each
        project's newest whatever its age (the size it had when memd last looked), in batches as
        ``prune_runs`` does; the number deleted."""
        deleted = 0
        while deleted < max_rows:
            size = min(batch, max_rows - deleted)
            with self.batch():
                n = max(0, self._exec(_PRUNE_SAMPLES, (now - SAMPLES_KEEP_S, size)).rowcount)
            deleted += n
            if n < size:
                break
        return deleted

    # ------------------------------------------------------------------ warnings

    def set_warning(self, project: str, kind: str, level: str, details: dict[str, Any],
                    when: float | None = None) -> bool:
        """Open or update a warning; True when this is a new crossing (new, or its level changed)."""
        now = time.time() if when is None else when
        blob = json.dumps(details, sort_keys=True, default=str)
        with self.batch():
            row = self._exec("SELECT level, details FROM warnings WHERE project = ? AND kind = ?",
                             (project, kind)).fetchone()
            if row is None or row[0] != level:
                self._exec(
                    "INSERT OR REPLACE INTO warnings (project, kind, level, details, since, updated) "
                    "VALUES (?, ?, ?, ?, ?, ?)", (project, kind, level, blob, now, now))
                self._warnings_dirty = True
                return True
            self._warnings_dirty |= row[1] != blob
            self._exec("UPDATE warnings SET details = ?, updated = ? WHERE project = ? AND kind = ?",
                       (blob, now, project, kind))
            return False

    def clear_warning(self, project: str, kind: str) -> bool:
        """Close a warning; True when one was open."""
        with self.batch():
            cur = self._exec("DELETE FROM warnings WHERE project = ? AND kind = ?", (project, kind))
            self._warnings_dirty |= cur.rowcount > 0
        return cur.rowcount > 0

    def export_warnings(self) -> None:
        """Write ``WARNINGS_FILE`` from the table (atomically; a failure is logged, never raised)."""
        self._warnings_dirty = False
        out: dict[str, list[list[Any]]] = {}
        for w in self.warnings():
            out.setdefault(w.project, []).append([w.kind, w.level, w.details])
        target = self.path.parent / WARNINGS_FILE
        tmp = target.with_name(f".{WARNINGS_FILE}.{os.getpid()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(out, f, ensure_ascii=False, sort_keys=True, default=str)
            os.replace(tmp, target)
        except OSError as e:
            log.warning("cannot write %s: %s", target, e)
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    def warnings(self, project: str | None = None) -> list[Warning]:
        if project is None:
            rows = self._exec("SELECT * FROM warnings ORDER BY project, kind").fetchall()
        else:
            rows = self._exec("SELECT * FROM warnings WHERE project = ? ORDER BY kind", (project,)).fetchall()
        out: list[Warning] = []
        for r in rows:
            try:
                details = json.loads(r["details"])
            except ValueError:
                details = {}
            out.append(Warning(r["project"], r["kind"], r["level"],
                               details if isinstance(details, dict) else {}, r["since"], r["updated"]))
        return out

    # ------------------------------------------------------------------ key/value

    def get(self, key: str) -> str | None:
        row = self._exec("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set(self, key: str, value: str) -> None:
        self._exec("INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = "
                   "excluded.value", (key, value))

    def delete(self, key: str) -> None:
        self._exec("DELETE FROM kv WHERE key = ?", (key,))

    def items(self, prefix: str) -> dict[str, str]:
        """Every key/value whose key starts with ``prefix`` (a literal prefix, not a pattern)."""
        rows = self._exec("SELECT key, value FROM kv WHERE substr(key, 1, ?) = ? ORDER BY key",
                          (len(prefix), prefix)).fetchall()
        return {str(r[0]): str(r[1]) for r in rows}


# ---------------------------------------------------------------------- helpers


def _migrate(conn: sqlite3.Connection, version: int) -> None:
    if version == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Re-read under the write lock: another process may have migrated meanwhile.
        current = int(conn.execute("PRAGMA user_version").fetchone()[0])
        for i in range(current, SCHEMA_VERSION):
            for stmt in _statements(MIGRATIONS[i]):
                conn.execute(stmt)
            conn.execute(f"PRAGMA user_version = {i + 1}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    if version != SCHEMA_VERSION and version:
        log.info("state schema migrated from version %d to %d", version, SCHEMA_VERSION)


def _statements(script: str) -> list[str]:
    # executescript() would commit our transaction; split on ';' instead (no ';' inside literals).
    return [s.strip() for s in script.split(";") if s.strip()]


def _set_aside(path: Path, why: str) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    for suffix in ("", "-wal", "-shm"):
        src = Path(str(path) + suffix)
        try:
            os.replace(src, Path(str(target) + suffix))
        except FileNotFoundError:
            pass
        except OSError as e:
            raise StateError(f"cannot set the corrupt state file aside: {e.strerror}", path=str(src)) from None
    log.warning("state file %s is unusable (%s): set aside as %s and rebuilt; transcripts will be "
                "re-read from the start", path, why, target)
    return target


def _transcript(r: sqlite3.Row) -> TranscriptState:
    return TranscriptState(
        path=Path(r["path"]), project=r["project"], inode=r["inode"], size=r["size"],
        scan_offset=r["scan_offset"], extract_offset=r["extract_offset"], extract_inode=r["extract_inode"],
        session_id=r["session_id"], records=r["records"], bad_lines=r["bad_lines"],
        first_record_at=r["first_record_at"], last_record_at=r["last_record_at"],
        memory_write_seen_at=r["memory_write_seen_at"], scanned_at=r["scanned_at"],
        extracted_at=r["extracted_at"], cwd=r["cwd"])


_MAX_COUNT = 2**53  # far past any real count; keeps a sum inside SQLite's 64-bit INTEGER


def _count(v: object) -> int:
    """A token count for the run log: a bad value (negative, not finite, absurd) is stored as 0."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return 0
    if isinstance(v, float) and not math.isfinite(v):
        return 0
    return int(v) if 0 <= v <= _MAX_COUNT else 0


def _run(r: sqlite3.Row) -> Run:
    return Run(id=r["id"], job=r["job"], project=r["project"], started=r["started"], ended=r["ended"],
               outcome=r["outcome"], added=r["added"], changed=r["changed"], deleted=r["deleted"],
               tokens_in=r["tokens_in"], tokens_out=r["tokens_out"], cache_read=r["cache_read"],
               cache_write=r["cache_write"], cost_usd=r["cost_usd"], error=r["error"], summary=r["summary"],
               tokens_total=r["tokens_total"], cost_unknown=bool(r["cost_unknown"]), history_run=r["history_run"])
