"""A dream is handed what changed since the last dream (issue 24): the index, the manifest and the text
of the files whose bytes differ from the last dream's commit in memd's history, whoever changed them;
nothing changed and a healthy index: the model is not called. Through the real SDK and the stub API."""

from __future__ import annotations

import os
import time
from pathlib import Path

from memd import history
from memd.config import replace
from memd.jobs.dream import dream_project
from memd.layout import Project
from tests import test_model_jobs
from tests.test_model_jobs import Env, dup_folder, topic

env = test_model_jobs.env  # the model-job tests' fixture, shared

BODIES = {  # each topic file's body in dup_folder: never in the manifest nor the index
    "feedback_tabs.md": "Use tabs.",
    "feedback_tabs_2.md": "Tabs, never spaces. **Why:** the linter.",
    "user_role.md": "The user is a backend engineer.",
    "project_deploy.md": "Deploys happen on Fridays.",
}


def _first_request(env: Env, start: int) -> str:
    body = env.stub.requests[start].body
    assert isinstance(body, dict)
    return "".join(b["text"] for b in body["system"]) + "".join(
        c["text"] for m in body["messages"] for c in m["content"] if c.get("type") == "text")


def _first_dream(env: Env, p: Project) -> None:
    """A dream that merges the two tab memories: applied, committed in the history, a consolidation."""
    s = env.stub
    s.script(s.message(s.memory("str_replace", path="/memories/feedback_tabs.md", old_str="Use tabs.",
                                new_str="Use tabs, never spaces (the linter)."),
                       s.memory("delete", path="/memories/feedback_tabs_2.md", reason="dup")),
             s.message(s.text("merged the tab memories")))
    out = dream_project(env.jc(force=True), p)
    assert out.outcome == "changed", out
    assert env.state.project(p.name).last_consolidation is not None


def _write(path: Path, text: str) -> None:
    path.write_text(text)
    os.utime(path, (time.time() + 5, time.time() + 5))  # after the consolidation mark


def test_the_first_request_holds_only_the_changed_files_text(env: Env) -> None:
    p = dup_folder(env)
    _first_dream(env, p)
    # Claude Code, between dreams: one file rewritten, one new
    _write(p.memory_dir / "user_role.md", topic("Role", "staff engineer", "Now a staff engineer.", "user"))
    _write(p.memory_dir / "project_train.md", topic("Train", "release train", "Release train every Tuesday.",
                                                    "project"))
    start = len(env.stub.requests)
    env.stub.script(env.stub.message(env.stub.text("nothing to merge")))
    out = dream_project(env.jc(), p)
    assert out.outcome in ("unchanged", "changed"), out
    sent = _first_request(env, start)
    assert "Now a staff engineer." in sent and "Release train every Tuesday." in sent
    assert "the last dream's commit" in sent
    for body in ("Use tabs, never spaces (the linter).", BODIES["project_deploy.md"]):
        assert body not in sent  # unchanged since the last dream: the manifest and the index only
    assert "/memories/project_deploy.md [project]" in sent  # still in the manifest
    assert out.details["changed_files"] == 2 and out.details["deleted_files"] == 0


def test_an_undone_dream_hands_back_what_the_undo_restored(env: Env) -> None:
    p = dup_folder(env)
    _first_dream(env, p)
    history.undo_run(env.state_dir, p.name, p.memory_dir)
    assert (p.memory_dir / "feedback_tabs_2.md").exists()
    start = len(env.stub.requests)
    env.stub.script(env.stub.message(env.stub.text("ok")))
    dream_project(env.jc(), p)
    sent = _first_request(env, start)
    assert BODIES["feedback_tabs.md"] in sent and BODIES["feedback_tabs_2.md"] in sent
    assert BODIES["project_deploy.md"] not in sent and BODIES["user_role.md"] not in sent


def test_nothing_changed_since_the_last_dream_and_a_healthy_index_calls_no_model(env: Env) -> None:
    p = dup_folder(env)
    _first_dream(env, p)
    role = p.memory_dir / "user_role.md"
    _write(role, role.read_text())  # the same bytes written again (sync, an editor's save): newer, not changed
    start = len(env.stub.requests)
    out = dream_project(env.jc(), p)
    assert out.outcome == "unchanged" and "model not called" in out.message, out
    assert "no memory file changed" in out.message
    assert len(env.stub.requests) == start
    # forced, it runs: with no file text, only the index and the manifest
    env.stub.script(env.stub.message(env.stub.text("nothing to do")))
    out = dream_project(env.jc(force=True), p)
    sent = _first_request(env, start)
    assert "no memory file changed since then" in sent
    assert not any(b in sent for b in BODIES.values())


def test_nothing_changed_but_an_unhealthy_index_still_dreams(env: Env) -> None:
    p = dup_folder(env)
    _first_dream(env, p)
    index = p.memory_dir / "MEMORY.md"
    _write(index, "".join(line + "\n" for line in index.read_text().splitlines() if "user_role.md" not in line))
    start = len(env.stub.requests)
    env.stub.script(env.stub.message(env.stub.text("indexed the role")))
    dream_project(env.jc(), p)
    assert len(env.stub.requests) > start  # a topic file without an index line: the dream has work


def test_the_first_dream_and_the_cap_on_handed_text(env: Env) -> None:
    p = dup_folder(env)
    env.stub.script(env.stub.message(env.stub.text("ok")))
    out = dream_project(env.jc(), p)  # no dream in the history, never consolidated
    sent = _first_request(env, 0)
    assert "First dream" in sent and not any(b in sent for b in BODIES.values())
    assert out.details["since"] == "first dream"
    _first_dream(env, p)
    _write(p.memory_dir / "user_role.md", topic("Role", "staff engineer", "Now a staff engineer.", "user"))
    cfg = replace(env.config, dream=replace(env.config.dream, changed_max_chars=20))
    start = len(env.stub.requests)
    env.stub.script(env.stub.message(env.stub.text("ok")))
    dream_project(env.jc(config=cfg), p)
    sent = _first_request(env, start)
    assert "Now a staff engineer." not in sent
    assert "Also changed (view them when needed): /memories/user_role.md" in sent
