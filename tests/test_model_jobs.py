"""Catch-up and dream through the real SDK against the local stub: guards, apply, failures, undo."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memd import history
from memd.config import CatchupConfig, Config, DreamConfig, ModelConfig, replace
from memd.jobs import JobContext, ProjectOutcome
from memd.jobs.catchup import catchup_project
from memd.jobs.dream import dream_project
from memd.layout import Project
from memd.llm import client as llm
from memd.state import StateStore
from tests.plugins.stub_api import Reply, StubAPI

REAL_SESSION = "-home-marco-projects-spotter/55604662-cf2a-4331-851a-ec234028f8ca.jsonl"
SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
OLD = time.time() - 86400 * 3


def topic(name: str, desc: str, body: str, type_: str = "feedback") -> str:
    return f"---\nname: {name}\ndescription: {desc}\ntype: {type_}\n---\n{body}\n"


class Env:
    def __init__(self, root: Path, stub: StubAPI, claude: Path) -> None:
        self.stub = stub
        self.claude = claude
        self.state_dir = root / "state"
        self.state = StateStore.open(self.state_dir)
        self.config = Config(
            model=replace(ModelConfig(), base_url=stub.base_url, max_retries=1, timeout_s=1.0),
            catchup=replace(CatchupConfig(), max_tool_turns=5),
            dream=replace(DreamConfig(), max_tool_turns=6))

    def project(self, name: str) -> Project:
        d = self.claude / "projects" / name
        d.mkdir(parents=True, exist_ok=True)
        return Project(name, d, d / "memory")

    def jc(self, **kw: Any) -> JobContext:
        return JobContext(config=kw.pop("config", self.config), claude_dir=self.claude,
                          state_dir=self.state_dir, state=self.state, **kw)

    def memory(self, project: Project, files: dict[str, str]) -> None:
        project.memory_dir.mkdir(parents=True, exist_ok=True)
        for rel, text in files.items():
            p = project.memory_dir / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
            os.utime(p, (OLD, OLD))


class Log:
    """A stand-in for the structlog logger that keeps the warnings."""

    def __init__(self) -> None:
        self.warnings: list[tuple[str, dict[str, Any]]] = []

    def warning(self, event: str, **kw: Any) -> None:
        self.warnings.append((event, kw))

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: None


def tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def env(tmp_path: Path, stub_api: StubAPI, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    e = Env(tmp_path, stub_api, tmp_path / "claude")
    try:
        yield e
    finally:
        e.state.close()


def dup_folder(env: Env) -> Project:
    p = env.project("-home-dev-app")
    env.memory(p, {
        "MEMORY.md": "# Memory\n\n- [Tabs](feedback_tabs.md) — indent with tabs\n"
                     "- [Tabs again](feedback_tabs_2.md) — tabs, not spaces\n"
                     "- [Role](user_role.md) — backend engineer\n- [Deploy](project_deploy.md) — deploy on Fridays\n",
        "feedback_tabs.md": topic("Tabs", "indent with tabs", "Use tabs."),
        "feedback_tabs_2.md": topic("Tabs again", "tabs, not spaces", "Tabs, never spaces. **Why:** the linter."),
        "user_role.md": topic("Role", "backend engineer", "The user is a backend engineer.", "user"),
        "project_deploy.md": topic("Deploy", "deploy on Fridays", "Deploys happen on Fridays.", "project"),
        "team/MEMORY.md": "- [T](t.md) — team\n",
        "team/t.md": topic("T", "team", "team fact", "project"),
    })
    return p


# --------------------------------------------------------------------------- catch-up


def real_session_project(env: Env, claude_data: Path) -> tuple[Project, Path]:
    p = env.project("-home-dev-spotter")
    src = claude_data / "projects" / REAL_SESSION
    dst = p.dir / src.name
    shutil.copy(src, dst)
    os.utime(dst, (OLD, OLD))
    env.memory(p, {"MEMORY.md": "- [Phoenix](project_phoenix.md) — the app is a Phoenix server\n",
                   "project_phoenix.md": topic("Phoenix", "the app is a Phoenix server",
                                               "Spotter is a Phoenix app.", "project")})
    return p, dst


def test_catchup_creates_and_updates_from_a_real_transcript(env: Env, claude_data: Path) -> None:
    p, session = real_session_project(env, claude_data)
    s = env.stub
    s.script(
        s.message(s.memory("create", path="/memories/feedback_ask_before_running.md", file_text=topic(
            "Ask before running the server", "user rejects unasked mix phx.server runs",
            "Do not start `mix phx.server` unasked.\n**Why:** the user interrupted it (2026-02-10).")),
            s.memory("str_replace", path="/memories/project_phoenix.md", old_str="Spotter is a Phoenix app.",
                     new_str="Spotter is a Phoenix app; `mix phx.server` failed to start on 2026-02-10.")),
        s.message(s.text("saved one feedback memory, updated one")),
    )
    out = catchup_project(env.jc(), p)
    assert out.outcome == "changed", out
    assert (out.added, out.changed, out.deleted) == (1, 2, 0)  # the index counted
    mem = tree(p.memory_dir)
    assert "Do not start `mix phx.server` unasked." in mem["feedback_ask_before_running.md"]
    assert "failed to start on 2026-02-10" in mem["project_phoenix.md"]
    assert "(feedback_ask_before_running.md)" in mem["MEMORY.md"]  # the rebuild indexed it
    # what the model was given
    first = s.requests[0].body
    system = "".join(b["text"] for b in first["system"])
    assert "/memories/project_phoenix.md [project]" in system  # the manifest, up front
    # a small folder's instructions and manifest are under Haiku's minimum cacheable length: no system
    # breakpoint (it would be neither written nor read); the span's message carries the moving one
    assert not any("cache_control" in b for b in first["system"])
    assert first["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert first["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    assert "context-management-2025-06-27" in s.requests[0].headers["anthropic-beta"]
    user = first["messages"][0]["content"][0]["text"]
    assert "mix phx.server doesnt seem to start" in user and "[2026-02-10 Tue" in user
    assert first["model"] == env.config.model.extract_model
    # usage and offsets
    assert out.tokens_in + out.cache_write > 0 and out.cache_read > 0  # the second call read the cache
    assert out.cost_usd > 0 and out.details["model_calls"] == 2
    t = env.state.transcript(session)
    assert t is not None and t.extract_offset == t.scan_offset == session.stat().st_size
    assert env.state.project(p.name).last_catchup is not None
    assert [r.job for r in history.list_runs(env.state_dir, p.name)] == ["catchup"]
    # a second run has nothing to read: no model call
    n = len(s.requests)
    assert catchup_project(env.jc(), p).outcome == "skipped"  # nothing new to read
    assert len(s.requests) == n


def _fake_session(path: Path, lines: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    os.utime(path, (OLD, OLD))


def _user(text: str, ts: str = "2026-03-05T10:00:00Z") -> dict[str, Any]:
    return {"type": "user", "uuid": "u1", "sessionId": "s", "timestamp": ts,
            "message": {"role": "user", "content": text}}


def test_catchup_skips_a_span_where_the_session_wrote_memory(env: Env) -> None:
    p = env.project("-home-dev-w")
    env.memory(p, {"MEMORY.md": ""})
    sess = p.dir / "11111111-2222-3333-4444-555555555555.jsonl"
    _fake_session(sess, [_user("remember that I like tabs"), {
        "type": "assistant", "uuid": "a1", "sessionId": "s", "timestamp": "2026-03-05T10:00:01Z",
        "message": {"id": "m1", "role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Write",
                    "input": {"file_path": str(p.memory_dir / "user_tabs.md"), "content": "x"}}]}}])
    out = catchup_project(env.jc(), p)
    assert out.outcome == "unchanged" and env.stub.requests == []
    t = env.state.transcript(sess)
    assert t is not None and t.extract_offset == sess.stat().st_size


def test_catchup_with_nothing_to_read_is_skipped_not_an_idle_run(env: Env) -> None:
    """No finished session with unread records: the run had nothing to do (skipped), so the check-in
    does not count it among the runs that "call the model and change nothing" (the soak saw 1,032)."""
    from memd.jobs import runner
    from memd.jobs.checkin import idle_projects

    p = env.project("-home-dev-quiet")
    env.memory(p, {"MEMORY.md": ""})
    for _ in range(4):
        res = runner.run_job("catchup", env.jc(force=True), [p], catchup_project)
        assert [(o.outcome, o.message) for o in res.outcomes] == [
            ("skipped", "no finished session has unread records")]
    assert env.stub.requests == [] and idle_projects(env.state, [p.name]) == []


def test_catchup_without_a_key_says_model_work_is_off(env: Env, monkeypatch: pytest.MonkeyPatch,
                                                       claude_data: Path) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    p, session = real_session_project(env, claude_data)
    before = tree(p.memory_dir)
    out = catchup_project(env.jc(), p)
    assert out.outcome == "skipped" and "model work is off" in out.message
    assert env.stub.requests == [] and tree(p.memory_dir) == before
    t = env.state.transcript(session)
    assert t is not None and t.scan_offset > 0 and t.extract_offset == 0  # scanned, not extracted


FAILURES: dict[str, Callable[[StubAPI], list[Reply]]] = {
    "429": lambda s: [s.error(429, retry_after=0), s.error(429, retry_after=0)],
    "529": lambda s: [s.error(529, retry_after=0), s.error(529, retry_after=0)],
    "500": lambda s: [s.error(500), s.error(500)],
    "timeout": lambda s: [Reply(body=s.message(s.text("late")), delay=4)] * 2,
    "malformed": lambda s: [Reply(raw=b'{"type": "message", "content": [{"type": "tool_use"')],
    "retry-after-too-long": lambda s: [s.error(429, retry_after=7200)],
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_api_failure_leaves_state_unchanged(env: Env, claude_data: Path, failure: str) -> None:
    p, session = real_session_project(env, claude_data)
    s = env.stub
    # the first call works (the model edits staging), then the API fails: nothing may be applied
    s.enqueue(s.message(s.memory("create", path="/memories/user_x.md", file_text=topic("X", "x", "x", "user"))))
    s.script(*FAILURES[failure](s))
    before = tree(p.memory_dir)
    out = catchup_project(env.jc(), p)
    assert out.outcome == "failed" and out.error, out
    assert tree(p.memory_dir) == before
    t = env.state.transcript(session)
    assert t is not None and t.extract_offset == 0
    assert env.state.project(p.name).last_catchup is None
    assert history.list_runs(env.state_dir, p.name) == []
    assert not list((env.state_dir / "staging").rglob("*.md"))


def test_dream_api_failure_leaves_consolidation_unchanged(env: Env) -> None:
    p = dup_folder(env)
    s = env.stub
    s.script(s.message(s.memory("delete", path="/memories/feedback_tabs_2.md", reason="dup")),
             s.error(500), s.error(500))
    before = tree(p.memory_dir)
    out = dream_project(env.jc(), p)
    assert out.outcome == "failed" and "HTTP 500" in (out.error or "")
    assert tree(p.memory_dir) == before
    assert env.state.project(p.name).last_consolidation is None


# --------------------------------------------------------------------------- dream


def test_dream_merges_duplicates_and_rebuilds_the_index(env: Env) -> None:
    p = dup_folder(env)
    s = env.stub
    s.script(
        s.message(s.memory("view", path="/memories/feedback_tabs_2.md")),
        s.message(s.memory("str_replace", path="/memories/feedback_tabs.md", old_str="Use tabs.",
                           new_str="Use tabs, never spaces.\n**Why:** the linter rejects spaces."),
                  s.memory("delete", path="/memories/feedback_tabs_2.md", reason="dup")),
        s.message(s.text("Merged the two tab memories into feedback_tabs.md.")),
    )
    out = dream_project(env.jc(), p)
    assert out.outcome == "changed", out
    assert (out.added, out.changed, out.deleted) == (0, 2, 1)  # the index counted
    mem = tree(p.memory_dir)
    assert "feedback_tabs_2.md" not in mem
    assert "never spaces" in mem["feedback_tabs.md"]
    assert "feedback_tabs_2.md" not in mem["MEMORY.md"] and "(feedback_tabs.md)" in mem["MEMORY.md"]
    assert mem["team/t.md"] == topic("T", "team", "team fact", "project")
    assert env.state.project(p.name).last_consolidation is not None
    body = s.requests[0].body
    assert body["model"] == env.config.model.dream_model
    assert {t["name"] for t in body["tools"]} == {"memory", "search_transcripts", "resolve_conflict", "forget_memory"}
    system = "".join(b["text"] for b in body["system"])
    assert "Orient" in system and "/memories/feedback_tabs_2.md [feedback]" in system
    assert "- [Tabs again](feedback_tabs_2.md)" in system  # the index, handed in
    # the second call carries the tool result and a moving cache breakpoint
    second = s.requests[1].body["messages"]
    assert second[-1]["content"][0]["type"] == "tool_result"
    assert second[-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "Tabs, never spaces" in second[-1]["content"][0]["content"]
    runs = history.list_runs(env.state_dir, p.name)
    assert runs[0].job == "dream" and "+0 ~2 -1 (index updated)" in runs[0].summary


def test_dream_does_not_call_the_model_when_nothing_changed(env: Env) -> None:
    p = dup_folder(env)
    env.state.mark_consolidated(p.name, time.time())
    out = dream_project(env.jc(), p)
    assert out.outcome == "unchanged" and "not called" in out.message and env.stub.requests == []


def test_dream_without_a_key_rebuilds_only(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    p = dup_folder(env)
    (p.memory_dir / "feedback_tabs_2.md").unlink()  # a dangling link for the rebuild to drop
    out = dream_project(env.jc(), p)
    assert "model work is off" in out.message and "index rebuilt" in out.message and env.stub.requests == []
    assert out.outcome == "changed" and out.model_off  # not a consolidation: gates and the lock stay where they were
    assert "feedback_tabs_2.md" not in (p.memory_dir / "MEMORY.md").read_text()
    assert env.state.project(p.name).last_consolidation is None


HOSTILE = {
    "outside": {"command": "create", "path": "/memories/../evil.md", "file_text": "x"},
    "absolute": {"command": "create", "path": "/etc/evil.md", "file_text": "x"},
    "team": {"command": "str_replace", "path": "/memories/team/t.md", "old_str": "team fact", "new_str": "pwned"},
    "non-md": {"command": "create", "path": "/memories/run.sh", "file_text": "rm -rf ~"},
    "secret": {"command": "create", "path": "/memories/reference_keys.md",
               "file_text": topic("Keys", "keys", f"token: {SECRET}", "reference")},
}


@pytest.mark.parametrize("attack", sorted(HOSTILE))
def test_hostile_model_is_refused_and_nothing_is_lost(env: Env, attack: str) -> None:
    p = dup_folder(env)
    s = env.stub
    s.script(s.message(s.tool_use("memory", HOSTILE[attack])), s.message(s.text("done")))
    before = tree(p.memory_dir)
    out = dream_project(env.jc(), p)
    assert out.outcome == "unchanged", out
    assert tree(p.memory_dir) == before
    assert not (p.dir / "evil.md").exists() and not Path("/etc/evil.md").exists()
    result = s.requests[1].body["messages"][-1]["content"][0]
    assert result["is_error"] is True and SECRET not in result["content"]
    assert out.details["refused"] == 1


def test_deleting_everything_is_rejected_whole(env: Env) -> None:
    p = dup_folder(env)
    s = env.stub
    topics = ["feedback_tabs.md", "feedback_tabs_2.md", "user_role.md", "project_deploy.md"]
    s.script(s.message(*[s.memory("delete", path=f"/memories/{t}", reason="dup") for t in topics]),
             s.message(s.memory("create", path="/memories/project_new.md",
                                file_text=topic("New", "new", "new", "project"))),
             s.message(s.text("cleaned up")))
    log = Log()
    logged = log.warnings
    before = tree(p.memory_dir)
    out = dream_project(env.jc(log=log), p)
    assert out.outcome == "refused" and "deletes every memory" in out.message
    assert tree(p.memory_dir) == before
    assert logged and logged[0][0] == "dream.rejected" and logged[0][1]["reasons"]
    assert env.state.project(p.name).last_consolidation is None
    assert history.list_runs(env.state_dir, p.name) == []


def test_deleting_more_than_the_share_is_rejected(env: Env) -> None:
    p = dup_folder(env)
    s = env.stub
    s.script(s.message(s.memory("delete", path="/memories/user_role.md", reason="dup"),
                       s.memory("delete", path="/memories/project_deploy.md", reason="dup")), s.message(s.text("ok")))
    before = tree(p.memory_dir)
    out = dream_project(env.jc(), p)
    assert out.outcome == "refused" and "deletes 2 of 4" in out.message
    assert tree(p.memory_dir) == before


def test_broken_frontmatter_is_rejected(env: Env) -> None:
    p = dup_folder(env)
    s = env.stub
    s.script(s.message(s.memory("create", path="/memories/user_x.md", file_text="no frontmatter at all\n")),
             s.message(s.text("ok")))
    before = tree(p.memory_dir)
    out = dream_project(env.jc(), p)
    assert out.outcome == "refused" and "user_x.md: has no frontmatter" in out.message
    assert tree(p.memory_dir) == before


def test_a_concurrent_write_by_claude_code_is_not_clobbered(env: Env) -> None:
    p = dup_folder(env)
    s = env.stub
    theirs = topic("Role", "backend engineer", "The user is a staff engineer (said today).", "user")

    def claude_code_writes() -> None:
        (p.memory_dir / "user_role.md").write_text(theirs)

    s.script(
        s.message(s.memory("str_replace", path="/memories/user_role.md", old_str="backend engineer.",
                           new_str="backend engineer who likes Go."),
                  s.memory("str_replace", path="/memories/project_deploy.md", old_str="Fridays.",
                           new_str="Fridays (since 2026-03-01)."),
                  s.memory("delete", path="/memories/feedback_tabs_2.md", reason="dup")),
        Reply(body=s.message(s.text("done")), before=claude_code_writes),
    )
    out = dream_project(env.jc(), p)
    assert out.outcome == "changed", out
    mem = tree(p.memory_dir)
    assert mem["user_role.md"] == theirs  # theirs kept
    assert "since 2026-03-01" in mem["project_deploy.md"]  # the rest applied
    assert "feedback_tabs_2.md" in mem  # a deletion is skipped once part of the run was dropped
    dropped = dict(out.details["dropped"])
    assert "user_role.md" in dropped and "feedback_tabs_2.md" in dropped


def test_review_mode_keeps_the_diff_and_applies_nothing(env: Env) -> None:
    p = dup_folder(env)
    s = env.stub
    s.script(s.message(s.memory("str_replace", path="/memories/user_role.md", old_str="a backend",
                                new_str="a platform")), s.message(s.text("ok")))
    cfg = replace(env.config, dream=replace(env.config.dream, apply="review"))
    before = tree(p.memory_dir)
    out = dream_project(env.jc(config=cfg), p)
    assert out.outcome == "proposed" and out.changed == 1
    assert tree(p.memory_dir) == before
    assert env.state.project(p.name).last_consolidation is None  # nothing applied: not a consolidation
    diff = Path(out.details["review"]).read_text()
    assert "-The user is a backend engineer." in diff and "+The user is a platform engineer." in diff


def test_undo_restores_a_run(env: Env) -> None:
    p = dup_folder(env)
    s = env.stub
    before = tree(p.memory_dir)
    s.script(s.message(s.memory("create", path="/memories/user_lang.md",
                                file_text=topic("Lang", "speaks French", "The user speaks French.", "user")),
                       s.memory("delete", path="/memories/feedback_tabs_2.md", reason="dup"),
                       s.memory("str_replace", path="/memories/user_role.md", old_str="a backend",
                                new_str="a frontend")),
             s.message(s.text("ok")))
    out = dream_project(env.jc(), p)
    assert out.outcome == "changed" and tree(p.memory_dir) != before
    res = history.undo_run(env.state_dir, p.name, p.memory_dir)
    assert res.run == out.run_id
    assert tree(p.memory_dir) == before
    assert res.removed == ["user_lang.md"] and not res.skipped
    # the undo is itself in the history, and can be undone by restoring the snapshot it took (before the
    # undo's "after" commit: what it planned to write, recorded before it wrote, then its snapshot)
    log = history.log(env.state_dir, p.name)
    assert log[0].kind == "undo" and log[1].kind == "planned" and log[2].summary.startswith("before undo")


def outcome_json(o: ProjectOutcome) -> dict[str, Any]:
    return dataclasses.asdict(o)


CRASH_SCRIPT = r"""
import sys
from pathlib import Path
from memd.config import Config, ModelConfig, replace
from memd.jobs import JobContext
from memd.jobs.dream import dream_project
from memd.layout import Project
from memd.state import StateStore

base_url, claude, state_dir, name = sys.argv[1:]
cfg = Config(model=replace(ModelConfig(), base_url=base_url, max_retries=0))
d = Path(claude) / "projects" / name
state = StateStore.open(Path(state_dir))
jc = JobContext(config=cfg, claude_dir=Path(claude), state_dir=Path(state_dir), state=state)
print(dream_project(jc, Project(name, d, d / "memory")))
"""


@pytest.mark.slow
@pytest.mark.parametrize("point", ["apply.after-snapshot", "apply.mid"])
def test_a_crash_leaves_each_file_before_or_after(env: Env, point: str) -> None:
    import subprocess
    import sys

    p = dup_folder(env)
    s = env.stub
    new_role = topic("Role", "backend engineer", "The user is a backend engineer who likes Go.", "user")
    s.script(s.message(s.memory("create", path="/memories/user_lang.md",
                                file_text=topic("Lang", "speaks French", "The user speaks French.", "user")),
                       s.memory("str_replace", path="/memories/user_role.md", old_str="engineer.",
                                new_str="engineer who likes Go."),
                       s.memory("delete", path="/memories/feedback_tabs_2.md", reason="dup")),
             s.message(s.text("done")))
    before = tree(p.memory_dir)
    env.state.close()
    proc = subprocess.run(
        [sys.executable, "-c", CRASH_SCRIPT, s.base_url, str(env.claude), str(env.state_dir), p.name],
        env={**os.environ, "MEMD_FAULT": point, "ANTHROPIC_API_KEY": "test"},
        capture_output=True, text=True, timeout=60)
    env.state = StateStore.open(env.state_dir)
    assert proc.returncode == -9, proc.stderr[-2000:]
    after = tree(p.memory_dir)
    assert not [n for n in after if ".memd-" in n]  # no temp file left in the memory folder
    wanted = {"user_lang.md": topic("Lang", "speaks French", "The user speaks French.", "user"),
              "user_role.md": new_role}
    for rel in set(before) | set(after):
        assert after.get(rel) in (before.get(rel), wanted.get(rel, before.get(rel))), rel
        if rel == "feedback_tabs_2.md":
            assert rel in after  # deletions come after every write
    if point == "apply.after-snapshot":
        assert after == before
    else:
        assert after != before  # one file landed before the kill
    # the interrupted run is in the history and can be undone file by file
    runs = history.list_runs(env.state_dir, p.name)
    assert runs and not runs[0].complete
    history.undo_run(env.state_dir, p.name, p.memory_dir)
    assert tree(p.memory_dir) == before
    # and the next dream starts clean (the crashed staging copy is dropped)
    s.script(s.message(s.text("nothing to do")))
    assert dream_project(env.jc(force=True), p).outcome == "unchanged"
    assert len(list((env.state_dir / "staging" / p.name).iterdir())) == 0


def test_runs_that_keep_changing_nothing_raise_a_warning(env: Env) -> None:
    p = dup_folder(env)
    s = env.stub
    for i in range(3):
        s.enqueue(s.message(s.text(f"all fine {SECRET}")))
        rid = env.state.start_run("dream", p.name, time.time())
        out = dream_project(env.jc(force=True), p)
        assert out.outcome == "unchanged" and SECRET not in out.message
        env.state.finish_run(rid, outcome=out.outcome, ended=time.time(), summary=out.message,
                             tokens_in=out.tokens_in, tokens_out=out.tokens_out)  # as the runner records it
        assert bool(env.state.warnings(p.name)) == (i == 2)
    w = env.state.warnings(p.name)[0]
    assert w.kind == "model_runs_change_nothing" and w.details["runs"] == 3
    s.script(s.message(s.memory("str_replace", path="/memories/user_role.md", old_str="a backend",
                                new_str="a platform")), s.message(s.text("fixed")))
    assert dream_project(env.jc(force=True), p).outcome == "changed"
    assert env.state.warnings(p.name) == []


def test_first_memory_of_a_project_creates_folder_and_index(env: Env) -> None:
    p = env.project("-home-dev-new")
    sess = p.dir / "11111111-2222-3333-4444-666666666666.jsonl"
    _fake_session(sess, [_user("From now on, answer in French. I'm a data engineer.", "2026-03-05T10:00:00Z")])
    s = env.stub
    s.script(s.message(s.memory("create", path="/memories/user_language.md", file_text=topic(
        "Language", "answer in French", "Answer in French (asked on 2026-03-05).", "user"))),
        s.message(s.text("saved")))
    out = catchup_project(env.jc(), p)
    assert out.outcome == "changed" and out.added == 2 and "(index written)" in out.message  # the index counted
    assert "(user_language.md)" in (p.memory_dir / "MEMORY.md").read_text()
    assert "(no memory files yet)" in s.requests[0].body["system"][-1]["text"]


def test_rejected_or_reviewed_catchup_keeps_offsets(env: Env) -> None:
    p = env.project("-home-dev-rej")
    env.memory(p, {"MEMORY.md": ""})
    sess = p.dir / "11111111-2222-3333-4444-777777777777.jsonl"
    _fake_session(sess, [_user("remember my token")])
    s = env.stub
    s.script(s.message(s.memory("create", path="/memories/user_x.md", file_text="no frontmatter\n")),
             s.message(s.text("saved")))
    assert catchup_project(env.jc(), p).outcome == "refused"
    t = env.state.transcript(sess)
    assert t is not None and t.extract_offset == 0
    s.script(s.message(s.memory("create", path="/memories/user_x.md", file_text=topic("X", "x", "x", "user"))),
             s.message(s.text("saved")))
    out = catchup_project(env.jc(dry_run=True), p)
    assert out.outcome == "proposed" and "+user_x.md" not in out.details["diff"] and "+x" in out.details["diff"]
    t = env.state.transcript(sess)
    assert t is not None and t.extract_offset == 0 and not (p.memory_dir / "user_x.md").exists()


def test_shutdown_while_the_model_works_changes_nothing(env: Env, claude_data: Path) -> None:
    p, session = real_session_project(env, claude_data)
    s = env.stub
    jc = env.jc()
    s.script(Reply(body=s.message(s.memory("create", path="/memories/user_x.md",
                                            file_text=topic("X", "x", "x", "user"))), before=jc.stop.set))
    before = tree(p.memory_dir)
    out = catchup_project(jc, p)
    assert out.outcome == "skipped" and "shutdown" in out.message
    assert tree(p.memory_dir) == before and len(s.requests) == 1
    t = env.state.transcript(session)
    assert t is not None and t.extract_offset == 0


def test_dream_orientation_names_files_written_since_the_last_dream(env: Env) -> None:
    """``dream.scope = "all"``: the old dream (names only; tests/test_dream_changed.py has the default)."""
    p = dup_folder(env)
    env.state.mark_consolidated(p.name, OLD + 10)
    (p.memory_dir / "user_role.md").write_text(topic("Role", "staff engineer", "Now a staff engineer.", "user"))
    env.stub.script(env.stub.message(env.stub.text("nothing to merge")))
    cfg = replace(env.config, dream=replace(env.config.dream, scope="all"))
    out = dream_project(env.jc(config=cfg), p)
    assert out.outcome == "unchanged" and "user_role.md changed" in out.details["why"]
    system = env.stub.requests[0].body["system"][-1]["text"]
    section = system.split("written since the last dream", 1)[1].split("##", 1)[0]
    assert "/memories/user_role.md" in section and "feedback_tabs.md" not in section


def test_a_dream_that_only_edits_the_index_is_applied(env: Env) -> None:
    p = dup_folder(env)
    s = env.stub
    s.script(s.message(s.memory("str_replace", path="/memories/MEMORY.md",
                                old_str="— tabs, not spaces", new_str="— tabs only")),
             s.message(s.text("shortened an index line")))
    out = dream_project(env.jc(), p)
    assert out.outcome == "changed" and "(index updated)" in out.message, out
    assert "- [Tabs again](feedback_tabs_2.md) — tabs only\n" in (p.memory_dir / "MEMORY.md").read_text()
    assert (p.memory_dir / "feedback_tabs_2.md").exists()


def test_one_greedy_turn_cannot_inflate_the_conversation(env: Env) -> None:
    p = env.project("-home-dev-big")
    env.memory(p, {"MEMORY.md": "", **{f"reference_{i:02d}.md": topic(f"R{i}", f"r{i}", "x" * 9000, "reference")
                                       for i in range(20)}})
    s = env.stub
    s.script(s.message(*[s.memory("view", path=f"/memories/reference_{i:02d}.md") for i in range(20)]),
             s.message(s.text("done")))
    assert dream_project(env.jc(), p).outcome == "unchanged"
    results = s.requests[1].body["messages"][-1]["content"]
    assert len(results) == 20
    assert sum(len(r["content"]) for r in results) < 80_000
    assert results[-1]["is_error"] and "fewer files" in results[-1]["content"]


def test_through_the_runner_the_run_log_gets_tokens_and_cost(env: Env) -> None:
    from memd.jobs.runner import run_job

    p = dup_folder(env)
    s = env.stub
    s.script(s.message(s.memory("delete", path="/memories/feedback_tabs_2.md", reason="dup")),
             s.message(s.text("merged")))
    result = run_job("dream", env.jc(force=True), [p])
    (out,) = result.outcomes
    assert out.outcome == "changed" and out.deleted == 1
    (row,) = env.state.runs(job="dream", project=p.name)
    assert row.outcome == "changed" and row.deleted == 1 and row.cost_usd > 0
    assert row.tokens_in + row.cache_write > 0 and row.cache_read > 0
    assert history.list_runs(env.state_dir, p.name)[0].run == out.run_id


# --------------------------------------------------------------------------- issue 11: what is sent


# Obviously fake values the secret rules still match (built by parts so no scanner takes them for real).
DB_PASSWORD = "Xk3vQ9zLmP2wFAKE"
DB_URL = f"postgres://app:{DB_PASSWORD}@db.internal:5432/app"
PAY_KEY = "sk_" + "live_" + "FAKEfake0000FAKEfake0000"
CLOUD_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "FAKEKEY000"
FILE_SECRET = "ghp_" + "FAKEfake0000FAKEfake0000FAKEfake0000"


def _assistant(content: list[dict[str, Any]], ts: str, uid: str = "a1") -> dict[str, Any]:
    return {"type": "assistant", "uuid": uid, "sessionId": "s", "timestamp": ts,
            "message": {"id": f"m-{uid}", "role": "assistant", "content": content}}


def _result(tool_id: str, text: str, ts: str, *, error: bool = False) -> dict[str, Any]:
    return {"type": "user", "uuid": f"r-{tool_id}", "sessionId": "s", "timestamp": ts,
            "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": tool_id, "content": text, "is_error": error}]}}


def _bodies(env: Env) -> list[str]:
    return [json.dumps(r.body) for r in env.stub.requests if r.path.startswith("/v1/messages")]


def test_secrets_in_transcripts_and_files_are_redacted_before_sending(env: Env) -> None:
    p = env.project("-home-dev-sec")
    env.memory(p, {"MEMORY.md": "- [Ops](project_ops.md) — ops notes\n",
                   "project_ops.md": topic("Ops", "ops notes", f"CI token: {FILE_SECRET}", "project")})
    sess = p.dir / "11111111-2222-3333-4444-666666666666.jsonl"
    _fake_session(sess, [
        _user(f"the staging database is {DB_URL}, remember we use Postgres 16"),
        _assistant([{"type": "text", "text": f"Noted. Payments use {PAY_KEY} in staging."},
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "cat ~/.aws/credentials"}}],
                   "2026-03-05T10:00:01Z"),
        _result("t1", f"[default]\naws_secret_access_key = {CLOUD_SECRET}\n", "2026-03-05T10:00:02Z"),
    ])
    s = env.stub
    s.script(s.message(s.memory("view", path="/memories/project_ops.md")),
             s.message(s.memory("create", path="/memories/project_db.md", file_text=topic(
                 "Database", "staging runs Postgres 16", "Staging runs Postgres 16.", "project"))),
             s.message(s.text("saved the database version")))
    out = catchup_project(env.jc(), p)
    assert out.outcome == "changed", out
    bodies = _bodies(env)
    assert len(bodies) == 3
    for body in bodies:
        for secret in (DB_PASSWORD, PAY_KEY, CLOUD_SECRET, FILE_SECRET):
            assert secret not in body
    first = bodies[0]
    assert "[REDACTED:password in URL]" in first and "[REDACTED:Stripe key]" in first
    assert "[REDACTED:AWS secret key]" in first and "Postgres 16" in first
    assert "[REDACTED:GitHub token]" in bodies[1]  # the memory file the model viewed
    assert out.details["redactions"] == 4


def test_memd_render_shows_the_redactions(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    from memd.cli import main

    p = env.project("-home-dev-sec")
    sess = p.dir / "11111111-2222-3333-4444-777777777777.jsonl"
    _fake_session(sess, [_user(f"the staging database is {DB_URL}")])
    assert main(["--claude-dir", str(env.claude), "render", str(sess)]) == 0
    got = capsys.readouterr()
    assert DB_PASSWORD not in got.out and "[REDACTED:password in URL]" in got.out
    assert "1 secret(s) redacted" in got.err
    # and without the turns up to the session's own memory write, as the catch-up sends it
    _session_with_own_write(p, sess)
    assert main(["--claude-dir", str(env.claude), "render", str(sess)]) == 0
    got = capsys.readouterr()
    assert "we deploy on Tuesdays" in got.out and "remember that I like tabs" not in got.out
    assert "not shown (the catch-up does not send them)" in got.err


def _session_with_own_write(p: Project, sess: Path) -> None:
    _fake_session(sess, [
        _user("remember that I like tabs", "2026-03-05T10:00:00Z"),
        _assistant([{"type": "tool_use", "id": "t1", "name": "Write",
                     "input": {"file_path": str(p.memory_dir / "user_tabs.md"), "content": "x"}}],
                   "2026-03-05T10:00:01Z"),
        _result("t1", "File created successfully", "2026-03-05T10:00:02Z"),
        _assistant([{"type": "text", "text": "Saved: you like tabs."}], "2026-03-05T10:00:03Z", "a2"),
        _user("correction: we deploy on Tuesdays, not Fridays", "2026-03-05T11:30:00Z"),
        _assistant([{"type": "text", "text": "Understood, Tuesdays."}], "2026-03-05T11:30:05Z", "a3"),
    ])


def test_catchup_extracts_the_turns_after_the_sessions_own_memory_write(env: Env) -> None:
    p = env.project("-home-dev-turns")
    env.memory(p, {"MEMORY.md": ""})
    sess = p.dir / "11111111-2222-3333-4444-888888888888.jsonl"
    _session_with_own_write(p, sess)
    s = env.stub
    s.script(s.message(s.memory("create", path="/memories/project_deploy.md", file_text=topic(
        "Deploy day", "deploys happen on Tuesdays", "Deploys happen on Tuesdays (corrected 2026-03-05).",
        "project"))), s.message(s.text("saved the deploy day")))
    out = catchup_project(env.jc(), p)
    assert out.outcome == "changed", out
    bodies = _bodies(env)
    assert len(bodies) == 2
    assert "we deploy on Tuesdays" in bodies[0]
    assert "remember that I like tabs" not in bodies[0] and "Saved: you like tabs" not in bodies[0]
    t = env.state.transcript(sess)
    assert t is not None and t.extract_offset == sess.stat().st_size


def test_a_refused_memory_write_skips_nothing(env: Env) -> None:
    p = env.project("-home-dev-denied")
    env.memory(p, {"MEMORY.md": ""})
    sess = p.dir / "11111111-2222-3333-4444-999999999999.jsonl"
    _fake_session(sess, [
        _user("remember that I like tabs", "2026-03-05T10:00:00Z"),
        _assistant([{"type": "tool_use", "id": "t1", "name": "Write",
                     "input": {"file_path": str(p.memory_dir / "user_tabs.md"), "content": "x"}}],
                   "2026-03-05T10:00:01Z"),
        _result("t1", "PreToolUse:Write hook error: refused", "2026-03-05T10:00:02Z", error=True),
    ])
    env.stub.script(env.stub.message(env.stub.text("nothing to save")))
    catchup_project(env.jc(), p)
    bodies = _bodies(env)
    assert len(bodies) == 1 and "remember that I like tabs" in bodies[0]


def _long_session(path: Path, turns: int) -> list[str]:
    """A session whose user turns alone exceed a 1,000-character budget, with bulky tool output."""
    words: list[str] = []
    lines: list[dict[str, Any]] = []
    for i in range(turns):
        said = f"U{i:02d} " + f"user point {i} " * 12
        words.append(said.strip())
        ts = f"2026-03-05T{10 + i // 60:02d}:{i % 60:02d}:00Z"
        lines.append(_user(said, ts))
        lines.append(_assistant([{"type": "thinking", "thinking": "hmm " * 200, "signature": "x"},
                                 {"type": "text", "text": "narration " * 60},
                                 {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": "ls"}}],
                                ts, f"a{i}"))
        lines.append(_result(f"t{i}", "output line\n" * 300, ts))
    _fake_session(path, lines)
    return words


def _small_render(env: Env, **catchup: Any) -> Config:
    return replace(env.config, transcripts=replace(env.config.transcripts, render_max_chars=1000),
                   catchup=replace(env.config.catchup, **catchup))


def test_user_turns_are_never_cut_and_a_long_span_is_split_across_runs(env: Env) -> None:
    p = env.project("-home-dev-long")
    env.memory(p, {"MEMORY.md": ""})
    sess = p.dir / "11111111-2222-3333-4444-aaaaaaaaaaaa.jsonl"
    words = _long_session(sess, 12)
    env.stub.fallback = Reply(200, env.stub.message(env.stub.text("nothing to save")))
    out = catchup_project(env.jc(config=_small_render(env)), p)
    assert out.outcome in ("changed", "unchanged"), out
    bodies = [json.loads(b) for b in _bodies(env)]
    assert len(bodies) > 1  # one run per piece
    sent = [b["messages"][0]["content"] for b in bodies]
    text = "\n".join(c if isinstance(c, str) else "\n".join(b.get("text", "") for b in c) for c in sent)
    for w in words:  # every user turn whole, in order, once
        assert text.count(w) == 1, w
    assert [text.index(w) for w in words] == sorted(text.index(w) for w in words)
    for part in re.findall(r"<transcript>\n(.*?)</transcript>", text, re.S):
        assert len(part) <= 1000  # each piece within the budget: tool results, thinking, narration cut first
    assert "hmm hmm" not in text.split("</transcript>")[0]  # the first piece's thinking went
    t = env.state.transcript(sess)
    assert t is not None and t.extract_offset == sess.stat().st_size


def test_a_split_span_advances_only_over_the_pieces_sent(env: Env) -> None:
    p = env.project("-home-dev-long2")
    env.memory(p, {"MEMORY.md": ""})
    sess = p.dir / "11111111-2222-3333-4444-bbbbbbbbbbbb.jsonl"
    words = _long_session(sess, 12)
    env.stub.fallback = Reply(200, env.stub.message(env.stub.text("nothing to save")))
    # the token cap stops the run after one piece: it is enforced before sending (a conversation of
    # one call here), so it is set to hold one first request of this span, not two
    probe = env.project("-home-dev-long2-probe")
    env.memory(probe, {"MEMORY.md": ""})
    _long_session(probe.dir / sess.name, 12)
    catchup_project(env.jc(config=_small_render(env, max_tool_turns=1)), probe)
    body = env.stub.requests[0].body
    first_request = llm.estimate_tokens(body["system"], body["tools"], body["messages"])
    env.stub.requests.clear()
    cfg = _small_render(env, max_tool_turns=1, max_input_tokens=int(first_request * 1.3))
    catchup_project(env.jc(config=cfg), p)
    first = _bodies(env)
    assert len(first) == 1 and words[0] in first[0] and words[-1] not in first[0]
    t = env.state.transcript(sess)
    assert t is not None and 0 < t.extract_offset < sess.stat().st_size
    sent_upto = max(i for i, w in enumerate(words) if w in first[0])
    # the next run starts where the first stopped: nothing skipped, nothing sent twice
    catchup_project(env.jc(config=cfg), p)
    second = _bodies(env)[1]
    assert words[sent_upto + 1] in second and words[sent_upto] not in second


def test_a_dream_sends_no_secret_already_in_memory(env: Env) -> None:
    """The index, the manifest's descriptions and the files the model views are memory too: a secret
    already written there is redacted before the dream sends it, and counted."""
    p = env.project("-home-dev-sec")
    env.memory(p, {"MEMORY.md": f"# Memory\n\nrotate {FILE_SECRET} monthly\n\n- [Ops](project_ops.md) — ops notes\n",
                   "project_ops.md": topic("Ops", f"ops notes, token {FILE_SECRET}", "CI runs nightly.", "project")})
    s = env.stub
    s.script(s.message(s.memory("view", path="/memories/project_ops.md")),
             s.message(s.text("nothing to merge")))
    out = dream_project(env.jc(force=True), p)
    assert out.outcome in ("changed", "unchanged"), out
    bodies = _bodies(env)
    assert bodies and all(FILE_SECRET not in b for b in bodies)
    assert "[REDACTED:GitHub token]" in bodies[0]
    # counted: the index line and the viewed file (the manifest is redacted where it is built, uncounted)
    assert out.details["redactions"] >= 2


# --------------------------------------------------------------------------- a full index


def _full_index_project(env: Env, lines: int = 200) -> tuple[Project, Path]:
    """An index at its budget (200 lines by default: one more line would pass the cut), and a session
    with a new fact."""
    p = env.project("-home-dev-full")
    files = {"MEMORY.md": "".join(f"- [Note {i}](project_note_{i}.md) — note {i}\n" for i in range(lines - 1))
             + "- [Deploy](project_deploy.md) — how and when we deploy\n",
             "project_deploy.md": topic("Deploy", "how and when we deploy", "Deploys happen on Fridays.", "project")}
    files |= {f"project_note_{i}.md": topic(f"Note {i}", f"note {i}", f"fact {i}", "project") for i in range(lines - 1)}
    env.memory(p, files)
    sess = p.dir / "11111111-2222-3333-4444-999999999999.jsonl"
    _fake_session(sess, [_user("Deploys now need the VPN, remember that.")])
    return p, sess


def _within_budget(p: Project, env: Env) -> None:
    from memd.core import index as mindex

    b = env.config.budget
    text = (p.memory_dir / "MEMORY.md").read_text()
    assert mindex.measure(text, b.max_lines, b.max_chars, b.warn_ratio).level != "over"


def test_a_catchup_into_a_full_index_appends_to_a_topic_file(env: Env) -> None:
    """Issue 24: a catch-up into an index at its budget was refused every run. The model is told the
    index is full and appends the fact to the related topic file: applied, the index within budget."""
    p, sess = _full_index_project(env)
    before = (p.memory_dir / "MEMORY.md").read_text()
    s = env.stub
    s.script(s.message(s.memory("str_replace", path="/memories/project_deploy.md", old_str="Deploys happen on Fridays.",
                                new_str="Deploys happen on Fridays and need the VPN (since 2026-03-05).")),
             s.message(s.text("appended to project_deploy.md")))
    out = catchup_project(env.jc(), p)
    assert out.outcome == "changed", out
    assert "need the VPN" in (p.memory_dir / "project_deploy.md").read_text()
    assert (p.memory_dir / "MEMORY.md").read_text() == before
    _within_budget(p, env)
    system = s.requests[0].body["system"][-1]["text"]
    assert "The index is full" in system and "Add no line to it" in system
    t = env.state.transcript(sess)
    assert t is not None and t.extract_offset == sess.stat().st_size


@pytest.mark.parametrize("own_line", [False, True])
def test_a_new_file_into_a_full_index_is_kept_without_its_line(env: Env, own_line: bool) -> None:
    """A new topic file whose index line would pass the budget does not refuse the run: the file is
    kept unindexed (recall finds it by its description), the line the model added for it withdrawn."""
    p, _ = _full_index_project(env)
    before = (p.memory_dir / "MEMORY.md").read_text()
    s = env.stub
    calls = [s.memory("create", path="/memories/project_vpn.md",
                      file_text=topic("VPN", "deploys need the VPN", "Deploys need the VPN.", "project"))]
    if own_line:
        calls.append(s.memory("insert", path="/memories/MEMORY.md", insert_line=200,
                              insert_text="- [VPN](project_vpn.md) — deploys need the VPN\n"))
    s.script(s.message(*calls), s.message(s.text("saved")))
    out = catchup_project(env.jc(), p)
    assert out.outcome == "changed", out
    assert (p.memory_dir / "project_vpn.md").exists()
    assert (p.memory_dir / "MEMORY.md").read_text() == before
    _within_budget(p, env)
    # the next run does not index it past the budget either: nothing to refuse
    sess2 = p.dir / "11111111-2222-3333-4444-999999999998.jsonl"
    _fake_session(sess2, [_user("Deploys go through the bastion host.")])
    s.script(s.message(s.memory("str_replace", path="/memories/project_vpn.md", old_str="Deploys need the VPN.",
                                new_str="Deploys need the VPN and the bastion host.")), s.message(s.text("saved")))
    assert catchup_project(env.jc(), p).outcome == "changed"
    _within_budget(p, env)


def test_a_user_line_in_a_full_index_is_never_withdrawn(env: Env) -> None:
    """Only lines the run added for files it added are withdrawn: a run whose index would still pass
    its budget (here the model adds a line of its own prose) is refused, as before."""
    p, _ = _full_index_project(env)
    before = tree(p.memory_dir)
    s = env.stub
    s.script(s.message(s.memory("insert", path="/memories/MEMORY.md", insert_line=200,
                                insert_text="Deploys need the VPN.\n")), s.message(s.text("saved")))
    out = catchup_project(env.jc(), p)
    assert out.outcome == "refused" and "over its budget" in out.message, out
    assert tree(p.memory_dir) == before
