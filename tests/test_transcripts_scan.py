"""The scan consumer: offsets saved exactly, sessions touched, memory writes seen; and spans."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memd import layout
from memd.config import Config
from memd.state import StateStore
from memd.transcripts.scan import find_session, read_span, scan_project
from memd.transcripts.sessions import MemoryPaths, memory_project_for
from tests.plugins.transcripts import TranscriptWriter, assistant, tool_use, user

CFG = Config()
SID = "11111111-2222-4333-8444-555555555555"


def _project(claude: Path, name: str) -> layout.Project:
    return layout.project_for_folder(claude, claude / "projects" / name)


def test_scan_real_data_then_nothing_new(claude_data: Path, tmp_path: Path) -> None:
    store = StateStore.open(tmp_path / "state")
    now = time.time()
    projects = layout.list_projects(claude_data)
    first = [scan_project(p, store, CFG, now=now) for p in projects]
    sessions = [s for r in first for s in r.sessions]
    listed = sum(len(layout.session_files(p.dir)) + len(layout.subagent_files(p.dir)) for p in projects)
    assert len(sessions) == listed >= 20
    for s in sessions:
        data = s.path.read_bytes()
        assert s.offset == data.rfind(b"\n") + 1 == s.new_bytes
        t = store.transcript(s.path)
        assert t is not None and t.scan_offset == s.offset and t.extract_offset == 0
        assert t.size == len(data) and t.inode == s.path.stat().st_ino
    edge = next(s for s in sessions if s.path.name == "edge_cases.jsonl")
    assert edge.bad_lines == 3
    assert not edge.main or edge.session_id == "edge_cases"
    # UUID sessions were touched at their last record's time
    alex = next(r for r in first if r.project.name == "-Users-alex-workspace-cli")
    assert store.sessions_touched_since("-Users-alex-workspace-cli", 0) == 2
    assert store.project("-Users-alex-workspace-cli").last_session_at == max(
        s.last_record_at or 0 for s in alex.sessions)
    # subagents feed their parent session; counted once
    fum = "-home-USER-projects-spotter-worktrees-spotter-fum"
    assert store.sessions_touched_since(fum, 0) == 1
    second = [scan_project(p, store, CFG, now=now) for p in projects]
    assert sum(r.new_bytes + r.records for r in second) == 0
    store.close()


def test_append_half_a_line_record_arrives_exactly_once(claude_home: Path, transcript: TranscriptWriter,
                                                         tmp_path: Path) -> None:
    p = transcript.session(claude_home, "/nowhere/app", [user("one")], SID)
    proj = _project(claude_home, p.parent.name)
    rec = json.dumps(user("two")).encode() + b"\n"
    with open(p, "ab") as f:
        f.write(rec[:30])
    with StateStore.open(tmp_path) as store:
        r1 = scan_project(proj, store, CFG, now=time.time())
        assert r1.records == 1
        with open(p, "ab") as f:
            f.write(rec[30:])
        r2 = scan_project(proj, store, CFG, now=time.time())
        assert r2.records == 1 and r2.sessions[0].offset == p.stat().st_size
        r3 = scan_project(proj, store, CFG, now=time.time())
        assert r3.records == 0
        t = store.transcript(p)
        assert t is not None and t.records == 2 and t.extract_offset == 0


def test_dry_run_saves_nothing(claude_home: Path, transcript: TranscriptWriter, tmp_path: Path) -> None:
    p = transcript.session(claude_home, "/nowhere/app", [user("one")], SID)
    with StateStore.open(tmp_path) as store:
        r = scan_project(_project(claude_home, p.parent.name), store, CFG, now=time.time(), dry_run=True)
        assert r.records == 1
        assert store.transcript(p) is None and store.sessions_touched_since(p.parent.name, 0) == 0


def test_replaced_file_starts_over_and_resets_extract(claude_home: Path, transcript: TranscriptWriter,
                                                      tmp_path: Path) -> None:
    p = transcript.session(claude_home, "/nowhere/app", [user("a"), user("b"), user("c")], SID)
    proj = _project(claude_home, p.parent.name)
    with StateStore.open(tmp_path) as store:
        scan_project(proj, store, CFG, now=time.time())
        store.save_extract(p, inode=p.stat().st_ino, offset=p.stat().st_size)
        p.write_bytes(json.dumps(user("new")).encode() + b"\n")  # truncated and rewritten
        r = scan_project(proj, store, CFG, now=time.time())
        assert r.sessions[0].replaced and r.records == 1
        t = store.transcript(p)
        assert t is not None and (t.scan_offset, t.extract_offset, t.records) == (p.stat().st_size, 0, 1)


def test_deleted_transcripts_are_forgotten(claude_home: Path, transcript: TranscriptWriter, tmp_path: Path) -> None:
    p = transcript.session(claude_home, "/nowhere/app", [user("a")], SID)
    proj = _project(claude_home, p.parent.name)
    with StateStore.open(tmp_path) as store:
        scan_project(proj, store, CFG, now=time.time())
        p.unlink()
        r = scan_project(proj, store, CFG, now=time.time())
        assert r.forgotten == [p] and store.transcript(p) is None
        assert store.sessions_touched_since(p.parent.name, 0) == 1  # the session still counts


def test_active_sessions(claude_home: Path, transcript: TranscriptWriter, tmp_path: Path) -> None:
    p = transcript.session(claude_home, "/nowhere/app", [user("a")], SID)
    q = transcript.session(claude_home, "/nowhere/app", [user("b")])
    os.utime(q, (time.time() - 3600, time.time() - 3600))
    with StateStore.open(tmp_path) as store:
        r = scan_project(_project(claude_home, p.parent.name), store, CFG, now=time.time())
    assert [s.path for s in r.active] == [p]


def _git_repo(root: Path) -> Path:
    repo = root / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "sub" / "deep").mkdir(parents=True)
    return repo


def test_session_maps_to_git_root_memory(claude_home: Path, transcript: TranscriptWriter, tmp_path: Path) -> None:
    repo = _git_repo(tmp_path)
    cwd = str(repo / "sub" / "deep")
    root = claude_home / "projects"
    assert memory_project_for(cwd, "own", root) == layout.sanitize(str(repo.resolve()))
    assert memory_project_for("/not/on/this/machine", "own", root) == "own"
    assert memory_project_for(None, "own", root) == "own"
    assert memory_project_for("relative/path", "own", root) == "own"
    # a session started in a subfolder feeds the repository's memory, and writes there count
    mem = root / layout.sanitize(str(repo.resolve())) / "memory"
    w = assistant(tool_use("Write", {"file_path": str(mem / "user_x.md"), "content": "..."}), cwd=cwd,
                  ts="2026-03-05T11:00:00Z")
    p = transcript.session(claude_home, cwd, [user("remember this", cwd=cwd), w], SID)
    with StateStore.open(tmp_path / "state") as store:
        r = scan_project(_project(claude_home, p.parent.name), store, CFG, now=time.time())
        s = r.sessions[0]
        assert s.feeds == mem.parent.name != p.parent.name
        assert s.memory_write_at == 1772708400.0
        t = store.transcript(p)
        assert t is not None and t.project == mem.parent.name and t.memory_write_seen_at == 1772708400.0
        assert store.sessions_touched_since(mem.parent.name, 0) == 1


def test_memory_paths() -> None:
    mp = MemoryPaths(Path("/home/u/.claude/projects/-home-u-app/memory"), "-home-u-app")
    assert mp.contains("/home/u/.claude/projects/-home-u-app/memory/user_role.md")
    assert mp.contains("/home/u/.claude/projects/-home-u-app/memory/sub/../MEMORY.md")
    assert mp.contains("/Users/other/.claude/projects/-home-u-app/memory/x.md")  # another HOME
    assert not mp.contains("/home/u/.claude/projects/-home-u-app/memory-notes.md")
    assert not mp.contains("/home/u/.claude/projects/-home-u-app/memory/../x.md")
    assert not mp.contains("/home/u/app/memory/x.md")


def test_read_span_wrote_memory_and_sidechains(claude_home: Path, transcript: TranscriptWriter) -> None:
    mem = claude_home / "projects" / "-nowhere-app" / "memory"
    side = assistant(tool_use("Edit", {"file_path": str(mem / "a.md")}), isSidechain=True)
    p = transcript.session(claude_home, "/nowhere/app", [user("hi"), side, assistant("ok")], SID)
    span = read_span(p, 0, CFG, memory_dir=mem, project_name="-nowhere-app")
    assert not span.wrote_memory  # a subagent's write is not the main agent's
    assert len(span.records) == 2 and span.end_offset == p.stat().st_size and span.session_id == SID
    transcript.append(p, [assistant(tool_use("MultiEdit", {"file_path": str(mem / "MEMORY.md"), "edits": []}))])
    span2 = read_span(p, span.end_offset, CFG, memory_dir=mem, project_name="-nowhere-app",
                      inode=p.stat().st_ino)
    assert span2.wrote_memory and span2.start_offset == span.end_offset and len(span2.records) == 1
    other = read_span(p, 0, CFG, memory_dir=mem, project_name="-nowhere-app", inode=p.stat().st_ino + 1)
    assert other.replaced and other.start_offset == 0


def test_find_session(claude_data: Path) -> None:
    sid = "8463c716-a2ea-4c14-9efa-87158ebd9f20"
    found = find_session(claude_data, sid)
    assert found is not None and found.name == f"{sid}.jsonl"
    agent = find_session(claude_data, "agent-a7be2f0")
    assert agent is not None and agent.parent.name == "subagents"
    assert find_session(claude_data, str(found)) == found
    assert find_session(claude_data, "00000000-0000-4000-8000-000000000000") is None


# ---------------------------------------------------------------------- the commands


def _memd(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memd", *args], capture_output=True, text=True, env=env,
                          timeout=60)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    e = dict(os.environ)
    e["XDG_STATE_HOME"] = str(tmp_path / "xdg-state")
    e["XDG_CONFIG_HOME"] = str(tmp_path / "xdg-config")
    e.pop("CLAUDE_CONFIG_DIR", None)
    return e


def test_memd_scan_json_and_text(claude_data: Path, env: dict[str, str]) -> None:
    r = _memd("scan", "--claude-dir", str(claude_data), "--all", "--format", "json", env=env)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert isinstance(data, list) and len(data) == len(layout.list_projects(claude_data))
    for proj in data:
        assert set(proj) == {"project", "memory_dir", "sessions"}
        for s in proj["sessions"]:
            assert set(s) == {"path", "records", "bad_lines", "offset", "size", "active"}
            assert s["offset"] == Path(s["path"]).read_bytes().rfind(b"\n") + 1
    assert "Traceback" not in r.stderr
    r2 = _memd("scan", "--claude-dir", str(claude_data), "-Users-alex-workspace-cli", env=env)
    assert r2.returncode == 0, r2.stderr
    assert "-Users-alex-workspace-cli: 2 session(s)" in r2.stdout and "0 record(s)" in r2.stdout


def test_memd_scan_dry_run_then_real(claude_data: Path, env: dict[str, str]) -> None:
    args = ("scan", "--claude-dir", str(claude_data), "-path-to-Demo", "--format", "json")
    for _ in range(2):
        r = _memd(*args, "--dry-run", env=env)
        assert r.returncode == 0, r.stderr
        assert sum(s["records"] for s in json.loads(r.stdout)[0]["sessions"]) == 438 + 29 + 53
    assert _memd(*args, env=env).returncode == 0
    r = _memd(*args, env=env)
    assert sum(s["records"] for s in json.loads(r.stdout)[0]["sessions"]) == 0


def test_memd_render(claude_data: Path, env: dict[str, str]) -> None:
    sid = "1b3e6441-62e3-4b41-8a0c-9d252f531f7a"
    r = _memd("render", "--claude-dir", str(claude_data), sid, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("[2026-") and "USER:" in r.stdout and "ASSISTANT:" in r.stdout
    assert "bytes 0-6622 of 7602" in r.stderr
    r2 = _memd("render", "--claude-dir", str(claude_data), sid, "--from", "99999999", env=env)
    assert r2.returncode == 2 and "past the end" in r2.stderr and "Traceback" not in r2.stderr
    mid = _memd("render", "--claude-dir", str(claude_data), sid, "--from", "10", env=env)
    assert mid.returncode == 0, mid.stderr
    first_nl = (claude_data / "projects" / "-Users-alex-workspace-cli" / f"{sid}.jsonl").read_bytes().index(b"\n")
    assert f"bytes {first_nl + 1}-6622 of 7602" in mid.stderr and "bad line" not in mid.stderr
    r3 = _memd("render", "--claude-dir", str(claude_data), "nope", env=env)
    assert r3.returncode == 2 and "no such session" in r3.stderr


def test_two_scanners_of_one_file_count_its_lines_once(claude_home: Path, transcript: TranscriptWriter,
                                                         tmp_path: Path) -> None:
    from memd.transcripts.scan import _Scanner

    p = transcript.session(claude_home, "/nowhere/app", [user("a"), user("b")], SID)
    proj = _project(claude_home, p.parent.name)
    a, b = StateStore.open(tmp_path), StateStore.open(tmp_path)  # e.g. the daemon's scanner and a catch-up
    try:
        s1, s2 = _Scanner(proj, a, CFG, time.time()), _Scanner(proj, b, CFG, time.time())
        assert s1.one(str(p), None) is not None and s2.one(str(p), None) is not None
        s1.save([], mark=True)
        s2.save([], mark=True)
        t = a.transcript(p)
        assert t is not None and t.records == 2 and t.scan_offset == p.stat().st_size
    finally:
        a.close()
        b.close()


def test_scan_file(claude_home: Path, transcript: TranscriptWriter, tmp_path: Path) -> None:
    from memd.transcripts.scan import scan_file

    p = transcript.session(claude_home, "/nowhere/app", [user("a")], SID)
    proj = _project(claude_home, p.parent.name)
    with StateStore.open(tmp_path) as store:
        s = scan_file(proj, p, store, CFG, now=time.time())
        assert s is not None and s.records == 1
        transcript.append(p, [user("b")])
        s = scan_file(proj, p, store, CFG, now=time.time())
        assert s is not None and s.records == 1 and s.offset == p.stat().st_size
        p.unlink()
        assert scan_file(proj, p, store, CFG, now=time.time()) is None
        assert store.transcript(p) is None


def test_scan_sees_main_agent_memory_writes_only(claude_home: Path, transcript: TranscriptWriter,
                                                 tmp_path: Path) -> None:
    mem = claude_home / "projects" / "-nowhere-app" / "memory"
    side = assistant(tool_use("Write", {"file_path": str(mem / "a.md"), "content": "x"}), isSidechain=True,
                     ts="2026-03-05T12:00:00Z")
    other = assistant(tool_use("Write", {"file_path": "/nowhere/app/notes.md", "content": "x"}),
                      ts="2026-03-05T12:01:00Z")
    p = transcript.session(claude_home, "/nowhere/app", [user("hi"), side, other], SID)
    proj = _project(claude_home, p.parent.name)
    with StateStore.open(tmp_path) as store:
        assert scan_project(proj, store, CFG, now=time.time()).sessions[0].memory_write_at is None
        mine = assistant(tool_use("Edit", {"file_path": str(mem / "MEMORY.md")}), ts="2026-03-05T12:02:00Z")
        transcript.append(p, [mine])
        s = scan_project(proj, store, CFG, now=time.time()).sessions[0]
        assert s.memory_write_at == 1772712120.0
        t = store.transcript(p)
        assert t is not None and t.memory_write_seen_at == 1772712120.0


def test_corrupt_state_means_reading_again_never_skipping(claude_home: Path, transcript: TranscriptWriter,
                                                          tmp_path: Path) -> None:
    p = transcript.session(claude_home, "/nowhere/app", [user("a"), user("b")], SID)
    proj = _project(claude_home, p.parent.name)
    with StateStore.open(tmp_path) as store:
        assert scan_project(proj, store, CFG, now=time.time()).records == 2
    (tmp_path / "state.sqlite3").write_bytes(b"\x00garbage" * 512)
    transcript.append(p, [user("c")])
    with StateStore.open(tmp_path) as store:
        assert store.set_aside is not None
        assert scan_project(proj, store, CFG, now=time.time()).records == 3


def test_memory_folder_is_decided_once_a_cwd_arrives(claude_home: Path, transcript: TranscriptWriter,
                                                     tmp_path: Path) -> None:
    repo = _git_repo(tmp_path)
    cwd = str(repo / "sub")
    snapshot = {"type": "file-history-snapshot", "messageId": "m", "snapshot": {}, "isSnapshotUpdate": False}
    p = transcript.session(claude_home, cwd, [snapshot], SID)
    proj = _project(claude_home, p.parent.name)
    with StateStore.open(tmp_path / "state") as store:
        first = scan_project(proj, store, CFG, now=time.time()).sessions[0]
        assert first.feeds == p.parent.name  # no cwd yet: the session's own folder
        transcript.append(p, [user("hello", cwd=cwd)])
        second = scan_project(proj, store, CFG, now=time.time()).sessions[0]
        assert second.feeds == layout.sanitize(str(repo.resolve())) != p.parent.name
        t = store.transcript(p)
        assert t is not None and t.cwd == cwd and t.project == second.feeds
        transcript.append(p, [user("moved", cwd="/nowhere/else")])
        assert scan_project(proj, store, CFG, now=time.time()).sessions[0].feeds == second.feeds


# --------------------------------------------------------------------------- one tree, two names (issue 14)


def _one_session_tree(tmp_path: Path) -> Path:
    claude = tmp_path / "real" / ".claude"
    folder = claude / "projects" / "-home-u-app"
    folder.mkdir(parents=True)
    line = json.dumps({"type": "user", "uuid": "u1", "sessionId": "s", "timestamp": "2026-01-01T00:00:00Z",
                       "cwd": "/home/u/app", "message": {"role": "user", "content": "hi"}})
    (folder / "0b0e8f4e-6a47-4a5c-9f51-3d2f0e1c2a11.jsonl").write_text(line + "\n")
    return claude


def test_a_relative_or_symlinked_claude_dir_is_the_same_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memd.config import Config
    from memd.state import StateStore
    from memd.transcripts.scan import scan_all

    claude = _one_session_tree(tmp_path)
    (tmp_path / "link").symlink_to(claude)
    monkeypatch.chdir(tmp_path)
    with StateStore.open(tmp_path / "state") as st:
        first = scan_all(claude, st, Config(), now=0.0)
        assert sum(s.new_bytes for p in first for s in p.sessions) > 0
        for other in (Path("real/.claude"), tmp_path / "link", Path("link")):
            again = scan_all(other, st, Config(), now=0.0)
            assert sum(s.new_bytes for p in again for s in p.sessions) == 0, other  # read once
        rows = st.transcripts()
        assert len(rows) == 1 and rows[0].path == claude.resolve() / "projects" / "-home-u-app" / \
            "0b0e8f4e-6a47-4a5c-9f51-3d2f0e1c2a11.jsonl"


def test_rows_kept_under_a_typed_name_move_with_their_offsets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memd.config import Config
    from memd.state import StateStore
    from memd.transcripts.scan import scan_all

    claude = _one_session_tree(tmp_path)
    (tmp_path / "link").symlink_to(claude)
    name = "0b0e8f4e-6a47-4a5c-9f51-3d2f0e1c2a11.jsonl"
    typed = tmp_path / "link" / "projects" / "-home-u-app" / name
    with StateStore.open(tmp_path / "state") as st:  # what an earlier memd saved under the link's name
        size = typed.stat().st_size
        st.save_scan(typed, project="-home-u-app", inode=typed.stat().st_ino, size=size, offset=size, records=1)
        st.save_extract(typed, inode=typed.stat().st_ino, offset=size)
        again = scan_all(tmp_path / "link", st, Config(), now=0.0)
        assert sum(s.new_bytes for p in again for s in p.sessions) == 0  # not read again
        (row,) = st.transcripts()
        assert row.path == claude.resolve() / "projects" / "-home-u-app" / name
        assert (row.scan_offset, row.extract_offset, row.records) == (size, size, 1)  # the catch-up's too


def test_a_hard_linked_transcript_is_read_once(tmp_path: Path) -> None:
    from memd.config import Config
    from memd.state import StateStore
    from memd.transcripts.scan import scan_all

    claude = _one_session_tree(tmp_path)
    folder = claude / "projects" / "-home-u-app"
    first = folder / "0b0e8f4e-6a47-4a5c-9f51-3d2f0e1c2a11.jsonl"
    os.link(first, folder / "1b0e8f4e-6a47-4a5c-9f51-3d2f0e1c2a11.jsonl")
    with StateStore.open(tmp_path / "state") as st:
        (proj,) = scan_all(claude, st, Config(), now=0.0)
        assert len(proj.sessions) == 1 and len(st.transcripts()) == 1
