"""Issue 12: a state file whose write lock another process holds past the busy timeout is a worded error
("the state database is busy: <who> has held its write lock for more than N s ...", exit 3, "not run"),
never SQLite's bare "database is locked". The lock is held by a real second connection in another
process, in a write transaction."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memd import state as st
from memd.state import StateBusy, StateStore
from tests.test_daemon_commands import memd

HOLD = """
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN IMMEDIATE")
c.execute("INSERT OR REPLACE INTO kv (key, value) VALUES ('holder', 'x')")
print("held", flush=True)
sys.stdin.read()  # until the test closes our stdin
c.execute("ROLLBACK")
"""


class Holder:
    def __init__(self, db: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", HOLD, str(db)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "held"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def release(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(30)


@pytest.fixture
def hold() -> Iterator[list[Holder]]:
    made: list[Holder] = []
    yield made
    for h in made:
        h.release()


def test_a_write_past_the_busy_timeout_names_the_holder(tmp_path: Path, hold: list[Holder]) -> None:
    store = StateStore.open(tmp_path, timeout=0.5)
    hold.append(h := Holder(tmp_path / st.FILENAME))
    try:
        with pytest.raises(StateBusy) as info:
            store.set("k", "v")
        e = info.value
        assert e.exit_code == 3 and "database is locked" in str(e)
        assert str(e).startswith(f"{tmp_path / st.FILENAME}: the state database is busy: ")
        if Path("/proc/locks").exists():
            assert e.holders == [h.pid] and f"(pid {h.pid}" in str(e)
        assert "has held its write lock for more than 0.5 s" in str(e) and "try again" in str(e)
        with pytest.raises(StateBusy), store.batch():  # a batch's BEGIN IMMEDIATE too
            store.set("k", "v")
        assert store.runs() == []  # reads go on beside the writer (WAL)
        h.release()
        store.set("k", "v")  # the lock gone, the same store writes again
        assert store.get("k") == "v"
    finally:
        store.close()


def test_lock_holders_sees_only_writers(tmp_path: Path, hold: list[Holder]) -> None:
    if not Path("/proc/locks").exists():
        pytest.skip("no /proc/locks")
    with StateStore.open(tmp_path) as store:
        store.set("a", "b")
        assert st.lock_holders(store.path) == []  # a connection that only reads holds no write lock
        hold.append(h := Holder(store.path))
        assert st.lock_holders(store.path) == [h.pid]
        assert os.getpid() not in st.lock_holders(store.path)


@pytest.mark.slow
def test_a_dream_on_a_busy_state_file_is_not_run_exit_3(claude_home: Path, hold: list[Holder],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    mem = claude_home / "projects" / "-home-u-app" / "memory"
    mem.mkdir(parents=True)
    (mem / "a.md").write_text("---\nname: A\ndescription: a\ntype: user\n---\nA.\n")
    (mem / "MEMORY.md").write_text("- [A](a.md) — a\n")
    state_dir = Path(os.environ["XDG_STATE_HOME"]) / "memd"
    StateStore.open(state_dir).close()
    hold.append(h := Holder(state_dir / st.FILENAME))
    code, out, err = memd(capsys, "dream", "-home-u-app", "--force")  # waits out the 10 s busy timeout
    assert code == 3, (out, err)
    assert "the state database is busy" in err and "more than 10 s" in err, err
    assert "unexpected error" not in err and "OperationalError" not in err
    if Path("/proc/locks").exists():
        assert f"pid {h.pid}" in err
    assert not (mem / ".consolidate-lock").exists()  # Claude Code's lock given back, not left held
    h.release()
    code, out, err = memd(capsys, "dream", "-home-u-app", "--force")
    assert code == 0, (out, err)
    with StateStore.open(state_dir) as store:
        assert [r.outcome for r in store.runs(job="dream")] == ["unchanged"]


# --------------------------------------------------------------------------- the page cache (soak's RSS)


def _sqlite_memory() -> object:
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("sqlite3")
    if not name:
        pytest.skip("no shared libsqlite3 to ask for its memory")
    lib = ctypes.CDLL(name)
    lib.sqlite3_memory_used.restype = ctypes.c_int64
    return lib.sqlite3_memory_used


def test_a_connections_page_cache_stays_bounded_as_the_run_log_grows(tmp_path: Path) -> None:
    """The daemon keeps three connections open for days: each caches every page it reads, up to its
    cache_size. Reading a 6 MB run log grows SQLite's memory by about st.CACHE_KIB, not by SQLite's
    default 2 MB (the soak's +2.7 MB of RSS over 25 minutes)."""
    used = _sqlite_memory()
    with StateStore.open(tmp_path) as store:
        store._exec("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000) "
                    "INSERT INTO runs (job, project, started, ended, outcome, summary) "
                    "SELECT 'catchup', '-p-' || (i % 1000), i, i, 'unchanged', printf('%.200c', 'x') FROM n")
    base = used()  # type: ignore[operator]
    with StateStore.open(tmp_path) as store:  # its integrity check reads every page once
        assert store._exec("PRAGMA cache_size").fetchone()[0] == -st.CACHE_KIB
        for _ in range(3):  # every page of the run log read, three times over
            store._exec("SELECT count(*), sum(length(summary)) FROM runs").fetchone()
            store._exec("SELECT * FROM runs ORDER BY started DESC").fetchall()
        grown = used() - base  # type: ignore[operator]
    assert (tmp_path / st.FILENAME).stat().st_size > 4 << 20
    assert grown < 1 << 20, f"SQLite's memory grew by {grown / 1024:.0f} KiB"
