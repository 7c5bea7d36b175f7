"""The dream resolves sync's conflict blocks (issue 21 #3), through the real SDK against the stub API.

The folders hold blocks as sync writes them (``memd.sync.merge.merge_file`` on a true conflict). The
model's work is scripted: its edits go through the memory tool, its decisions through
``resolve_conflict``; the guard, the apply and the history are the product's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memd import history
from memd.core import conflict as cblock
from memd.jobs.dream import dream_project
from memd.layout import Project
from memd.llm.resolvetool import RESOLVE_TOOL_NAME
from memd.sync.merge import merge_file
from tests.test_model_jobs import Env, topic, tree
from tests.test_model_jobs import env as env

BASE = topic("Database", "which database the app uses", "The database is SQLite.", "project")
MINE = topic("Database", "which database the app uses", "The database is MySQL now.", "project")
THEIRS = topic("Database", "which database the app uses", "The database is Postgres 16.", "project")
START = cblock.begin_line("desktop", "2026-12-01")


def db_block() -> str:
    fm = merge_file("project_db.md", BASE.encode(), MINE.encode(), THEIRS.encode(), machine="desktop",
                    date="2026-12-01")
    assert fm.how == "conflict" and fm.result is not None
    return fm.result.decode()


def conflict_folder(env: Env, index_block: bool = False) -> Project:
    p = env.project("-home-dev-app")
    index = "# Memory\n\n- [Database](project_db.md) — which database the app uses\n" \
            "- [Role](user_role.md) — backend engineer\n"
    if index_block:
        index += f"Indent with tabs.\n{START}\nIndent with 4 spaces.\n{cblock.END}\n"
    env.memory(p, {"MEMORY.md": index, "project_db.md": db_block(),
                   "user_role.md": topic("Role", "backend engineer", "The user is a backend engineer.", "user")})
    return p


def resolve(env: Env, path: str, line: int, decision: str, reason: str) -> dict[str, Any]:
    return env.stub.tool_use(RESOLVE_TOOL_NAME, {"path": path, "line": line, "decision": decision, "reason": reason})


def block_text(text: str) -> str:
    (b,) = cblock.blocks(text)
    assert b.end is not None
    return "\n".join(text.split("\n")[b.line - 2:b.end]) + "\n"  # this side's line, then the block


def test_the_block_is_what_sync_writes() -> None:
    text = db_block()
    assert text.endswith(f"The database is MySQL now.\n{START}\nThe database is Postgres 16.\n{cblock.END}\n")
    assert [b.line for b in cblock.blocks(text)] == [7]


def test_a_resolved_block_is_applied_and_reported(env: Env) -> None:
    p = conflict_folder(env)
    s = env.stub
    old = block_text(db_block())
    s.script(
        s.message(s.memory("str_replace", path="/memories/project_db.md", old_str=old,
                           new_str="The database is Postgres 16.\n"),
                  resolve(env, "/memories/project_db.md", 7, "other", "the 2026-11-30 session moved it to Postgres")),
        s.message(s.text("Resolved the database conflict: Postgres 16.")))
    out = dream_project(env.jc(), p)
    assert out.outcome == "changed", out
    text = (p.memory_dir / "project_db.md").read_text()
    assert "The database is Postgres 16." in text and "MySQL" not in text and cblock.BEGIN not in text
    assert out.details["conflict_blocks"] == [
        {"file": "project_db.md", "line": 7, "machine": "desktop", "date": "2026-12-01", "decision": "other",
         "reason": "the 2026-11-30 session moved it to Postgres"}]
    assert "1 sync conflict block(s) resolved (project_db.md from desktop: took the other machine's lines)" \
        in out.message
    # the history's run says, per block, the decision and the reason
    entry = next(e for e in history.log(env.state_dir, p.name) if e.kind == "after")
    assert ("- project_db.md:7 (desktop, 2026-12-01): took the other machine's lines: the 2026-11-30 session "
            "moved it to Postgres") in entry.message
    # the model was told about blocks, and the file holding one came first in its material, whole
    body = s.requests[0].body
    assert RESOLVE_TOOL_NAME in {t["name"] for t in body["tools"]}
    system = "".join(b["text"] for b in body["system"])
    assert "## Sync conflict blocks: resolve them first" in system and "both sides are the user's own words" \
        in system.lower()
    material = body["system"][-1]["text"]
    assert material.startswith("## Sync conflict blocks to resolve first (1 in 1 file(s))")
    assert "     8\tThe database is Postgres 16." in material
    assert material.index("/memories/project_db.md") < material.index("Phase 1 material")


def test_a_block_kept_both_ways(env: Env) -> None:
    """Both facts kept ('both'); and a block the model leaves alone stays, reported as open."""
    p = conflict_folder(env, index_block=True)
    s = env.stub
    s.script(
        s.message(s.memory("str_replace", path="/memories/MEMORY.md",
                           old_str=f"Indent with tabs.\n{START}\nIndent with 4 spaces.\n{cblock.END}\n",
                           new_str="Indent with tabs. In Python files, 4 spaces.\n"),
                  resolve(env, "/memories/MEMORY.md", 6, "both", "one rule is for Go, the other for Python")),
        s.message(s.text("merged the indentation rules")))
    before_db = (p.memory_dir / "project_db.md").read_text()
    out = dream_project(env.jc(), p)
    assert out.outcome == "changed", out
    index = (p.memory_dir / "MEMORY.md").read_text()
    assert cblock.BEGIN not in index and "Indent with tabs. In Python files, 4 spaces.\n" in index
    assert (p.memory_dir / "project_db.md").read_text() == before_db  # left open, as it was
    assert [(b["file"], b["decision"]) for b in out.details["conflict_blocks"]] == [
        ("MEMORY.md", "both"), ("project_db.md", "open")]
    assert "1 sync conflict block(s) resolved (MEMORY.md from desktop: kept both (they do not contradict))" \
        in out.message and "1 sync conflict block(s) left open" in out.message


def test_an_index_block_dropped_without_a_decision_is_refused(env: Env) -> None:
    p = conflict_folder(env, index_block=True)
    s = env.stub
    s.script(s.message(s.memory("str_replace", path="/memories/MEMORY.md",
                                old_str=f"{START}\nIndent with 4 spaces.\n{cblock.END}\n", new_str="")),
             s.message(s.text("tidied the index")))
    before = tree(p.memory_dir)
    out = dream_project(env.jc(), p)
    assert out.outcome == "refused", out
    assert "MEMORY.md: the run removes 1 sync conflict block(s) (line 6, from desktop) without saying what it " \
           "decided" in out.message
    assert "Indent with 4 spaces" in out.message  # the prose rule: the user's words
    assert tree(p.memory_dir) == before


BROKEN = {
    # only the end marker removed: a start marker without its end
    "half-removed": ({"command": "str_replace", "path": "/memories/project_db.md",
                      "old_str": f"Postgres 16.\n{cblock.END}\n", "new_str": "Postgres 16.\n"}, True,
                     "project_db.md: the run leaves a sync conflict block half-removed (a start marker without its "
                     "end at line 7)"),
    # only the start marker removed: an end marker without its start
    "start-removed": ({"command": "str_replace", "path": "/memories/project_db.md",
                       "old_str": f"{START}\n", "new_str": ""}, True,
                      "project_db.md: the run leaves a sync conflict block half-removed (an end marker without its "
                      "start at line 8)"),
    # the whole block gone, but no decision said
    "undecided": ({"command": "str_replace", "path": "/memories/project_db.md",
                   "old_str": f"{START}\nThe database is Postgres 16.\n{cblock.END}\n", "new_str": ""}, False,
                  "project_db.md: the run removes 1 sync conflict block(s) (line 7, from desktop) without saying "
                  "what it decided"),
    # the markers kept, the other machine's words dropped
    "words-dropped": ({"command": "str_replace", "path": "/memories/project_db.md",
                       "old_str": "The database is Postgres 16.\n", "new_str": ""}, False,
                      "project_db.md: the run drops words of a sync conflict block it did not resolve (1 line(s)), "
                      "first: \"The database is Postgres 16.\""),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_resolution_is_refused_and_nothing_applied(env: Env, case: str) -> None:
    edit, decided, reason = BROKEN[case]
    p = conflict_folder(env)
    s = env.stub
    calls = [s.tool_use("memory", edit)]
    if decided:  # even with a decision, a half-removed block never lands
        calls.append(resolve(env, "/memories/project_db.md", 7, "this", "MySQL is newer"))
    s.script(s.message(*calls), s.message(s.text("done")))
    before = tree(p.memory_dir)
    out = dream_project(env.jc(), p)
    assert out.outcome == "refused", out
    assert reason in out.message, out.message
    assert tree(p.memory_dir) == before
    assert env.state.project(p.name).last_consolidation is None
    assert not [e for e in history.log(env.state_dir, p.name) if e.kind == "after"]


def test_the_tool_refuses_a_block_that_is_not_there(env: Env) -> None:
    p = conflict_folder(env)
    s = env.stub
    s.script(s.message(resolve(env, "/memories/project_db.md", 3, "this", "x"),
                       resolve(env, "/memories/user_role.md", 1, "this", "x"),
                       resolve(env, "/memories/project_db.md", 7, "maybe", "x")),
             s.message(s.text("nothing")))
    out = dream_project(env.jc(), p)
    assert out.outcome == "unchanged" and out.details["refused"] == 3
    results = s.requests[1].body["messages"][-1]["content"]
    assert [r.get("is_error") for r in results] == [True, True, True]
    assert "its blocks open at line(s) 7" in results[0]["content"]
    assert "holds no conflict block" in results[1]["content"]
    assert "decision must be one of this, other, both, ask" in results[2]["content"]


def test_a_decision_whose_block_stays_is_reported_open(env: Env) -> None:
    """The model says it resolved a block but never edits it: the block is reported open, not resolved."""
    p = conflict_folder(env)
    s = env.stub
    s.script(s.message(resolve(env, "/memories/project_db.md", 7, "this", "MySQL is newer"),
                       s.memory("str_replace", path="/memories/user_role.md", old_str="backend engineer.",
                                new_str="backend engineer (Go).")),
             s.message(s.text("done")))
    out = dream_project(env.jc(), p)
    assert out.outcome == "changed", out
    assert [b["decision"] for b in out.details["conflict_blocks"]] == ["open"]
    assert "resolved" not in out.message and "1 sync conflict block(s) left open" in out.message
    assert cblock.count((p.memory_dir / "project_db.md").read_text()) == 1


def test_without_a_model_a_block_is_never_touched(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    p = conflict_folder(env, index_block=True)
    for i in range(4):  # unindexed files: the keyless rebuild has work to do
        (p.memory_dir / f"reference_{i}.md").write_text(topic(f"Ref {i}", f"reference {i}", "x", "reference"))
    before = tree(p.memory_dir)
    out = dream_project(env.jc(), p)
    assert out.model_off and out.outcome == "changed" and env.stub.requests == []
    after = tree(p.memory_dir)
    assert "(reference_3.md)" in after["MEMORY.md"]
    assert after["project_db.md"] == before["project_db.md"]
    assert f"Indent with tabs.\n{START}\nIndent with 4 spaces.\n{cblock.END}\n" in after["MEMORY.md"]


def test_review_mode_proposes_the_resolution(env: Env) -> None:
    p = conflict_folder(env)
    s = env.stub
    s.script(s.message(s.memory("str_replace", path="/memories/project_db.md", old_str=block_text(db_block()),
                                new_str="The database is MySQL now.\n"),
                       resolve(env, "/memories/project_db.md", 7, "this", "MySQL is the newer fact")),
             s.message(s.text("done")))
    out = dream_project(env.jc(dry_run=True), p)
    assert out.outcome == "proposed", out
    assert "1 sync conflict block(s) proposed to resolve" in out.message
    assert cblock.count((p.memory_dir / "project_db.md").read_text()) == 1
    review = Path(out.details["review"]).read_text(encoding="utf-8")
    assert "# - project_db.md:7 (desktop, 2026-12-01): kept this machine's lines: MySQL is the newer fact" in review
    json.dumps(out.details)  # the run log stores it


def test_a_dream_settles_the_conflicts_sync_kept_for_it(env: Env) -> None:
    """Sync's hand-off (memd.sync.evidence): a dream that leaves the block open keeps the conflict open
    (``memd status`` still shows it); the dream that resolves it settles it."""
    from memd.sync import evidence

    p = conflict_folder(env)
    row = evidence.Conflict(evidence.conflict_id("project_db.md", MINE.encode(), THEIRS.encode()), p.name,
                            "project_db.md", MINE, THEIRS, BASE, "desktop", "c0ffee", 0.0)
    assert evidence.record(env.state_dir, p.name, [row]) == [row]
    s = env.stub
    s.script(s.message(s.text("left the conflict for the user")))
    out = dream_project(env.jc(), p)
    assert out.outcome == "unchanged" and "sync_conflicts_settled" not in out.details
    assert [c.id for c in evidence.open_conflicts(env.state_dir, p.name)] == [row.id]
    s.script(s.message(s.memory("str_replace", path="/memories/project_db.md", old_str=block_text(db_block()),
                                new_str="The database is MySQL now.\n"),
                       resolve(env, "/memories/project_db.md", 7, "this", "MySQL is the newer fact")),
             s.message(s.text("kept MySQL")))
    out = dream_project(env.jc(force=True), p)
    assert out.outcome == "changed" and out.details["sync_conflicts_settled"] == 1, out
    assert evidence.open_conflicts(env.state_dir, p.name) == [] and evidence.status_line(env.state_dir) == ""


def test_a_catch_up_that_drops_a_block_is_refused(env: Env, claude_data: Path) -> None:
    """The catch-up is told to leave blocks alone, and is held to it: it has no decisions to give."""
    import os
    import shutil

    from memd.jobs.catchup import catchup_project
    from tests.test_model_jobs import OLD, REAL_SESSION

    p = conflict_folder(env)
    dst = p.dir / Path(REAL_SESSION).name
    shutil.copy(claude_data / "projects" / REAL_SESSION, dst)
    os.utime(dst, (OLD, OLD))
    s = env.stub
    s.script(s.message(s.memory("str_replace", path="/memories/project_db.md",
                                old_str=f"{START}\nThe database is Postgres 16.\n{cblock.END}\n", new_str="")),
             s.message(s.text("tidied")))
    before = tree(p.memory_dir)
    out = catchup_project(env.jc(), p)
    assert out.outcome == "refused", out
    assert "project_db.md: the run removes 1 sync conflict block(s) (line 7, from desktop) without saying what " \
           "it decided" in out.message
    assert tree(p.memory_dir) == before
    system = "".join(b["text"] for b in s.requests[0].body["system"])
    assert "is the nightly dream's to resolve" in system
    assert {t["name"] for t in s.requests[0].body["tools"]} == {"memory"}


def test_new_conflict_blocks_make_the_project_due_and_blocks_left_open_wait(env: Env) -> None:
    """A block sync wrote is the other machine's words waiting, marked, in the file: the next nightly
    dream takes it up even if the project was consolidated an hour ago with no session since. A block
    that dream left open does not make it due again night after night (it waits for the usual gates);
    a new block does."""
    import os

    from memd.jobs import gates as G
    from memd.jobs import runner

    p = conflict_folder(env)
    jc = env.jc()
    now = jc.clock.time()
    env.state.mark_consolidated(p.name, now - 3600)
    os.utime(p.memory_dir / "project_db.md", (now - 60, now - 60))  # sync wrote it after that dream
    gate = G.check_dream(jc, p)
    assert gate.passed and gate.gate == "conflict_blocks" and "1 sync conflict block(s)" in gate.reason, gate
    # the dream through the runner, as the daemon runs it: it leaves the block open
    s = env.stub
    s.script(s.message(s.memory("str_replace", path="/memories/user_role.md", old_str="backend engineer.",
                                new_str="backend engineer (Go).")),
             s.message(s.text("done")))
    out = runner.run_project("dream", jc, p, dream_project)
    assert out is not None and out.outcome == "changed", out
    assert cblock.count((p.memory_dir / "project_db.md").read_text()) == 1
    gate = G.check_dream(env.jc(), p)
    assert not gate.passed and gate.gate == "min_hours", gate  # seen: not due again for the same block
    # a new block arrives from another machine: due again
    (p.memory_dir / "user_role.md").write_text(
        (p.memory_dir / "user_role.md").read_text()
        + f"{cblock.begin_line('laptop', '2026-12-02')}\nThe user is a frontend engineer.\n{cblock.END}\n")
    gate = G.check_dream(env.jc(), p)
    assert gate.passed and gate.gate == "conflict_blocks" and "2 sync conflict block(s)" in gate.reason, gate
    # a block in team/ is not ours to resolve (sync never writes there): it does not make the project due
    (p.memory_dir / "user_role.md").write_text(topic("Role", "backend engineer", "The user is a backend engineer.",
                                                     "user"))
    G.note_blocks(env.jc(), p)
    (p.memory_dir / "team").mkdir(exist_ok=True)
    (p.memory_dir / "team" / "t.md").write_text(f"x\n{cblock.begin_line('srv', '2026-12-02')}\ny\n{cblock.END}\n")
    assert G.check_dream(env.jc(), p).gate == "min_hours"
