"""The state store: durable, versioned, and never a reason for memd to stop."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from memd import state as st
from memd.state import SCHEMA_VERSION, StateStore

SID = "0b6c1f5e-1111-4222-8333-944455556666"
SID2 = "0b6c1f5e-1111-4222-8333-944455557777"


def test_missing_file_is_created(tmp_path: Path) -> None:
    d = tmp_path / "state" / "memd"
    with StateStore.open(d) as s:
        assert s.schema_version == SCHEMA_VERSION
        assert s.set_aside is None
        assert s.transcript(Path("/x.jsonl")) is None
        assert s.project("p") == st.ProjectState("p")
    assert (d / "state.sqlite3").is_file()
    assert (d / "state.sqlite3").stat().st_mode & 0o077 == 0
    with sqlite3.connect(d / "state.sqlite3") as c:
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_reopen_keeps_data(tmp_path: Path) -> None:
    p = Path("/p/a.jsonl")
    with StateStore.open(tmp_path) as s:
        s.save_scan(p, project="proj", inode=7, size=100, offset=90, session_id=SID, records=3, bad_lines=1,
                    first_record_at=5.0, last_record_at=10.0)
        s.save_extract(p, inode=7, offset=40)
        s.mark_consolidated("proj", 1000.0)
        s.mark_catchup("proj", 1100.0)
        s.touch_session("proj", SID, 1200.0)
        rid = s.start_run("dream", "proj", 1300.0)
        s.finish_run(rid, outcome="changed", ended=1310.0, added=1, changed=2, deleted=3, tokens_in=10,
                     tokens_out=20, cache_read=30, cache_write=40, cost_usd=0.5, summary="did things")
        assert s.set_warning("proj", "budget", "near", {"lines": 170})
        s.set("dream_minute", "02:17")
    with StateStore.open(tmp_path) as s:
        t = s.transcript(p)
        assert t is not None
        assert (t.project, t.inode, t.size, t.scan_offset, t.extract_offset) == ("proj", 7, 100, 90, 40)
        assert (t.records, t.bad_lines, t.session_id, t.last_record_at) == (3, 1, SID, 10.0)
        pr = s.project("proj")
        assert (pr.last_consolidation, pr.last_catchup, pr.last_session_at) == (1000.0, 1100.0, 1200.0)
        [run] = s.runs()
        assert (run.id, run.job, run.outcome, run.added, run.changed, run.deleted) == (rid, "dream", "changed", 1, 2, 3)
        assert (run.tokens_in, run.tokens_out, run.cache_read, run.cache_write) == (10, 20, 30, 40)
        assert run.cost_usd == 0.5 and run.summary == "did things" and run.ended == 1310.0
        [w] = s.warnings()
        assert (w.project, w.kind, w.level, w.details) == ("proj", "budget", "near", {"lines": 170})
        assert s.get("dream_minute") == "02:17"
        assert s.get("nope") is None


def test_scan_never_moves_extract_offset(tmp_path: Path) -> None:
    p = Path("/p/a.jsonl")
    with StateStore.open(tmp_path) as s:
        s.save_extract(p, inode=3, offset=50)
        s.save_scan(p, project="x", inode=3, size=200, offset=200, records=4, last_record_at=9.0)
        s.save_scan(p, project="x", inode=3, size=300, offset=300, records=2, last_record_at=None,
                    memory_write_seen_at=8.0)
        t = s.transcript(p)
        assert t is not None
        assert t.extract_offset == 50 and t.scan_offset == 300 and t.records == 6
        assert t.last_record_at == 9.0  # an unknown time does not erase a known one
        assert t.memory_write_seen_at == 8.0
        s.save_scan(p, project="x", inode=3, size=300, offset=300)
        t = s.transcript(p)
        assert t is not None and t.memory_write_seen_at == 8.0
        s.reset_transcript(p)
        t = s.transcript(p)
        assert t is not None
        assert (t.scan_offset, t.extract_offset, t.records) == (0, 0, 0)
        s.forget_transcript(p)
        assert s.transcript(p) is None


def test_transcripts_listing(tmp_path: Path) -> None:
    with StateStore.open(tmp_path) as s:
        with s.batch():
            for i in range(5):
                s.save_scan(Path(f"/p/{i}.jsonl"), project="a" if i % 2 else "b", inode=i, size=1, offset=1)
        assert [t.path.name for t in s.transcripts("a")] == ["1.jsonl", "3.jsonl"]
        assert len(s.transcripts()) == 5


def test_batch_rolls_back(tmp_path: Path) -> None:
    with StateStore.open(tmp_path) as s:
        with pytest.raises(RuntimeError), s.batch():
            s.set("k", "v")
            with s.batch():
                s.set("k2", "v")
            raise RuntimeError("boom")
        assert s.get("k") is None and s.get("k2") is None


def test_sessions_touched_since_counts_uuid_sessions_once(tmp_path: Path) -> None:
    with StateStore.open(tmp_path) as s:
        s.touch_session("p", SID, 100.0)
        s.touch_session("p", SID, 200.0)
        s.touch_session("p", SID, 150.0)  # older news does not move the time back
        s.touch_session("p", SID2, 50.0)
        s.touch_session("p", "agent-abc", 300.0)  # not a UUID-named session
        s.touch_session("q", SID2, 300.0)
        assert s.sessions_touched_since("p", 120.0) == 1
        assert s.sessions_touched_since("p", 0.0) == 2
        assert s.sessions_touched_since("p", 0.0, exclude=SID) == 1
        assert s.sessions_touched_since("p", 200.0) == 0
        assert s.project("p").last_session_at == 300.0


def test_runs_filters_and_order(tmp_path: Path) -> None:
    with StateStore.open(tmp_path) as s:
        a = s.start_run("dream", "p", 10.0)
        b = s.start_run("catchup", "p", 20.0)
        c = s.start_run("dream", "q", 30.0)
        s.finish_run(a, outcome="failed", ended=11.0, error="boom")
        assert [r.id for r in s.runs()] == [c, b, a]
        assert [r.id for r in s.runs(job="dream")] == [c, a]
        assert [r.id for r in s.runs(project="p")] == [b, a]
        assert [r.id for r in s.runs(since=15.0)] == [c, b]
        assert [r.id for r in s.runs(limit=1)] == [c]
        run_b = s.run(b)
        assert run_b is not None and run_b.outcome == "running" and run_b.ended is None
        run_a = s.run(a)
        assert run_a is not None and run_a.error == "boom"


def test_warnings_crossings(tmp_path: Path) -> None:
    with StateStore.open(tmp_path) as s:
        assert s.set_warning("p", "budget", "near", {"n": 1}, when=1.0) is True
        assert s.set_warning("p", "budget", "near", {"n": 2}, when=2.0) is False
        [w] = s.warnings("p")
        assert w.details == {"n": 2} and w.since == 1.0 and w.updated == 2.0
        assert s.set_warning("p", "budget", "over", {"n": 3}, when=3.0) is True
        assert s.set_warning("q", "budget", "near", {}) is True
        assert [w.project for w in s.warnings()] == ["p", "q"]
        assert s.warnings("p")[0].level == "over"
        assert s.clear_warning("p", "budget") is True
        assert s.clear_warning("p", "budget") is False
        assert s.warnings("p") == []


@pytest.mark.parametrize("garbage", [b"this is not sqlite at all" * 100, b"SQLite format 3\x00" + b"\xff" * 4000])
def test_corrupt_file_is_set_aside_and_rebuilt(tmp_path: Path, garbage: bytes,
                                               caplog: pytest.LogCaptureFixture) -> None:
    f = tmp_path / "state.sqlite3"
    f.write_bytes(garbage)
    (tmp_path / "state.sqlite3-wal").write_bytes(b"junk")
    with caplog.at_level(logging.WARNING, logger="memd.state"), StateStore.open(tmp_path) as s:
        assert s.set_aside is not None
        assert s.set_aside.read_bytes() == garbage
        assert s.set_aside.name.startswith("state.sqlite3.corrupt-")
        assert s.schema_version == SCHEMA_VERSION
        s.set("k", "v")
    assert any("set aside" in r.getMessage() and "re-read" in r.getMessage() for r in caplog.records)
    with StateStore.open(tmp_path) as s:
        assert s.set_aside is None
        assert s.get("k") == "v"


def test_corrupt_pages_are_detected(tmp_path: Path) -> None:
    with StateStore.open(tmp_path) as s, s.batch():
        for i in range(2000):
            s.save_scan(Path(f"/p/{i:05}.jsonl"), project="p" * 50, inode=i, size=i, offset=i)
    f = tmp_path / "state.sqlite3"
    data = bytearray(f.read_bytes())
    assert len(data) > 3 * 4096
    data[2 * 4096 + 100: 3 * 4096] = b"\x07" * (4096 - 100)  # smash an inner page, keep the header
    f.write_bytes(bytes(data))
    with StateStore.open(tmp_path) as s:
        assert s.set_aside is not None
        assert s.transcripts() == []  # rebuilt: the worst case is re-reading transcripts


def test_newer_schema_is_set_aside(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "state.sqlite3") as c:
        c.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    with StateStore.open(tmp_path) as s:
        assert s.set_aside is not None and s.schema_version == SCHEMA_VERSION


def test_migration_from_version_0(tmp_path: Path) -> None:
    f = tmp_path / "state.sqlite3"
    with sqlite3.connect(f) as c:  # a version-0 file: a database with no memd schema yet
        c.execute("CREATE TABLE unrelated (x)")
        c.execute("INSERT INTO unrelated VALUES (1)")
    c.close()
    with StateStore.open(tmp_path) as s:
        assert s.set_aside is None
        assert s.schema_version == SCHEMA_VERSION
        s.save_scan(Path("/a.jsonl"), project="p", inode=1, size=2, offset=2)
    with sqlite3.connect(f) as c:
        assert c.execute("SELECT x FROM unrelated").fetchone() == (1,)
        tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    c.close()
    assert {"transcripts", "projects", "sessions", "runs", "warnings", "kv"} <= tables


def test_migrations_run_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with StateStore.open(tmp_path) as s:
        s.set("k", "v")
    extra = "ALTER TABLE kv ADD COLUMN note TEXT NOT NULL DEFAULT 'n'; CREATE TABLE extra (y)"
    monkeypatch.setattr(st, "MIGRATIONS", [*st.MIGRATIONS, extra])
    monkeypatch.setattr(st, "SCHEMA_VERSION", len(st.MIGRATIONS))
    with StateStore.open(tmp_path) as s:
        assert s.schema_version == st.SCHEMA_VERSION
        assert s.get("k") == "v"
    with sqlite3.connect(tmp_path / "state.sqlite3") as c:
        assert c.execute("SELECT note FROM kv").fetchone() == ("n",)
    c.close()


def test_two_connections_share_state(tmp_path: Path) -> None:
    a = StateStore.open(tmp_path)
    b = StateStore.open(tmp_path)
    try:
        a.set("daemon.pid", "123")
        assert b.get("daemon.pid") == "123"
    finally:
        a.close()
        b.close()


def test_unusable_state_folder_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(st.StateError):
        StateStore.open(blocker / "memd")


def test_transcripts_under_a_folder(tmp_path: Path) -> None:
    with StateStore.open(tmp_path) as s:
        for p in ("/r/a/1.jsonl", "/r/a/s/subagents/agent-1.jsonl", "/r/ab/2.jsonl", "/r/a-b/3.jsonl", "/r/b/4.jsonl"):
            s.save_scan(Path(p), project="x", inode=1, size=1, offset=1)
        assert sorted(str(p) for p in s.transcripts_under(Path("/r/a"))) == [
            "/r/a/1.jsonl", "/r/a/s/subagents/agent-1.jsonl"]


def test_conditional_saves_keep_two_scanners_from_double_counting(tmp_path: Path) -> None:
    p = Path("/p/a.jsonl")
    with StateStore.open(tmp_path) as s:
        assert s.save_scan(p, project="x", inode=1, size=100, offset=100, records=5, expect_offset=0)
        # a second scanner read the same span from 0: its save is refused
        assert not s.save_scan(p, project="x", inode=1, size=100, offset=100, records=5, expect_offset=0)
        assert s.save_scan(p, project="x", inode=1, size=150, offset=150, records=1, expect_offset=100)
        t = s.transcript(p)
        assert t is not None and (t.scan_offset, t.records) == (150, 6)
        assert not s.reset_transcript(p, expect_offset=100)
        assert s.reset_transcript(p, expect_offset=150)
        assert s.save_scan(Path("/p/new.jsonl"), project="x", inode=2, size=1, offset=1, expect_offset=0)


def test_migration_from_version_1_keeps_rows(tmp_path: Path) -> None:
    f = tmp_path / "state.sqlite3"
    c = sqlite3.connect(f, isolation_level=None)
    for stmt in st._statements(st.MIGRATIONS[0]):
        c.execute(stmt)
    c.execute("PRAGMA user_version = 1")
    c.execute("INSERT INTO transcripts (path, project, scan_offset) VALUES ('/a.jsonl', 'p', 42)")
    c.close()
    with StateStore.open(tmp_path) as s:
        assert s.schema_version == SCHEMA_VERSION >= 2
        t = s.transcript(Path("/a.jsonl"))
        assert t is not None and (t.project, t.scan_offset, t.cwd) == ("p", 42, "")
        s.save_scan(Path("/a.jsonl"), project="p", inode=1, size=50, offset=50, cwd="/home/dev/app")
        s.save_scan(Path("/a.jsonl"), project="p", inode=1, size=60, offset=60, cwd="/elsewhere")
        t = s.transcript(Path("/a.jsonl"))
        assert t is not None and t.cwd == "/home/dev/app"  # the first cwd stays
