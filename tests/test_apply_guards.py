"""The model-job apply path's last lines of defence: symlinks, links to non-.md files, content wipes,
recall confinement and crash leftovers (issue 5 review). Models talk through the real SDK to the stub."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memd import apply as ap
from memd import history, recall, store
from memd.config import Config, HooksConfig, ModelConfig, replace
from memd.jobs.catchup import catchup_project
from memd.jobs.dream import dream_project
from memd.layout import Project
from memd.llm.memtool import StagedMemory
from memd.memfolder.manifest import build
from tests import test_model_jobs
from tests.plugins.stub_api import Reply, StubAPI
from tests.test_model_jobs import Env, Log, _fake_session, _user, dup_folder, topic, tree

env = test_model_jobs.env  # the fixture, shared


def outside_with(tmp_path: Path, files: dict[str, str] | None = None) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    for rel, text in (files or {}).items():
        (out / rel).write_text(text)
    return out


# --------------------------------------------------------------------------- 1. symlinks in the live folder


SYMLINK_ATTACKS = {
    "create": {"command": "create", "path": "/memories/ext/evil.md",
               "file_text": topic("Evil", "evil", "written outside", "project")},
    "str_replace": {"command": "str_replace", "path": "/memories/ext/there.md", "old_str": "theirs",
                    "new_str": "pwned"},
    "rename": {"command": "rename", "old_path": "/memories/user_role.md", "new_path": "/memories/ext/role.md"},
    "file-symlink": {"command": "create", "path": "/memories/user_new.md",
                     "file_text": topic("New", "new", "through a dangling file symlink", "user")},
}


@pytest.mark.parametrize("attack", sorted(SYMLINK_ATTACKS))
def test_a_model_cannot_write_through_a_symlink_in_the_memory_folder(env: Env, tmp_path: Path,
                                                                     attack: str) -> None:
    p = dup_folder(env)
    outside = outside_with(tmp_path, {"there.md": topic("There", "there", "theirs", "project")})
    (p.memory_dir / "ext").symlink_to(outside, target_is_directory=True)
    (p.memory_dir / "user_new.md").symlink_to(outside / "new.md")  # dangling: its target does not exist
    s = env.stub
    s.script(s.message(s.tool_use("memory", SYMLINK_ATTACKS[attack])), s.message(s.text("done")))
    before = tree(p.memory_dir)
    out = dream_project(env.jc(), p)
    assert out.outcome == "unchanged", out
    assert tree(p.memory_dir) == before
    assert tree(outside) == {"there.md": topic("There", "there", "theirs", "project")}
    assert (p.memory_dir / "user_new.md").is_symlink()
    result = s.requests[1].body["messages"][-1]["content"][0]
    assert result["is_error"] is True and "symlink" in result["content"]
    assert str(outside) not in result["content"]  # the model learns nothing about the machine


def staged_with_symlinked_ext(env: Env, tmp_path: Path) -> tuple[Project, Path, ap.Staging]:
    p = dup_folder(env)
    outside = outside_with(tmp_path)
    (p.memory_dir / "ext").symlink_to(outside, target_is_directory=True)
    st = ap.stage(env.state_dir, p, "dream", "dream-sym-1")
    # what a memory tool without the live check would have let through: staging has no ext/
    (st.root / "ext").mkdir()
    (st.root / "ext" / "evil.md").write_text(topic("Evil", "evil", "written outside", "project"))
    return p, outside, st


def test_the_guard_rejects_a_run_whose_write_lands_behind_a_symlink(env: Env, tmp_path: Path) -> None:
    _, outside, st = staged_with_symlinked_ext(env, tmp_path)
    ap.finalize(st, env.config)
    reasons = ap.guard(st, ap.changes(st), env.config)
    assert any(r.startswith("ext/evil.md: ext is a symlink") for r in reasons), reasons
    assert tree(outside) == {}
    st.cleanup()


def test_apply_itself_refuses_a_write_behind_a_symlink(env: Env, tmp_path: Path) -> None:
    """Apply is the last line of defence: even with the guard bypassed nothing lands outside."""
    p, outside, st = staged_with_symlinked_ext(env, tmp_path)
    (st.root / "user_role.md").write_text(topic("Role", "backend engineer", "A backend engineer (Go).", "user"))
    chs = ap.changes(st)
    log = Log()
    res = ap.apply(st, chs, "dream dream-sym-1: test", log)
    assert tree(outside) == {}
    dropped = dict(res.dropped)
    assert "symlink" in dropped["ext/evil.md"]
    assert "(Go)" in (p.memory_dir / "user_role.md").read_text()  # the rest of the run is applied
    assert [e for e, _ in log.warnings] == ["apply.dropped"]
    st.cleanup()


def test_apply_never_deletes_through_a_folder_swapped_for_a_symlink(env: Env, tmp_path: Path) -> None:
    p = dup_folder(env)
    note = topic("Old", "old", "an old note", "project")
    env.memory(p, {"ext/old.md": note})
    st = ap.stage(env.state_dir, p, "dream", "dream-sym-2")
    (st.root / "ext" / "old.md").unlink()
    chs = ap.changes(st)
    # meanwhile ext/ becomes a symlink to a folder holding a file of the same name and content
    outside = outside_with(tmp_path, {"old.md": note})
    for f in (p.memory_dir / "ext").iterdir():
        f.unlink()
    (p.memory_dir / "ext").rmdir()
    (p.memory_dir / "ext").symlink_to(outside, target_is_directory=True)
    assert any("ext is a symlink" in r for r in ap.guard(st, chs, env.config))
    res = ap.apply(st, chs, "dream dream-sym-2: test")
    assert (outside / "old.md").read_text() == note
    assert "symlink" in dict(res.dropped)["ext/old.md"] and res.applied == []
    st.cleanup()


def test_apply_never_replaces_a_dangling_file_symlink(env: Env, tmp_path: Path) -> None:
    p = dup_folder(env)
    outside = outside_with(tmp_path)
    (p.memory_dir / "user_new.md").symlink_to(outside / "new.md")
    st = ap.stage(env.state_dir, p, "dream", "dream-sym-3")
    (st.root / "user_new.md").write_text(topic("New", "new", "new", "user"))
    chs = ap.changes(st)
    assert any("user_new.md is a symlink" in r for r in ap.guard(st, chs, env.config))
    res = ap.apply(st, chs, "dream dream-sym-3: test")
    assert (p.memory_dir / "user_new.md").is_symlink() and tree(outside) == {}
    assert "user_new.md" in dict(res.dropped)
    st.cleanup()


def _run_then(env: Env, p: Project, files: dict[str, str | None]) -> str:
    """Apply a run that writes (or, for None, deletes) files; returns its id."""
    st = ap.stage(env.state_dir, p, "dream", f"dream-u-{len(history.log(env.state_dir, p.name))}")
    for rel, text in files.items():
        if text is None:
            (st.root / rel).unlink()
        else:
            (st.root / rel).parent.mkdir(parents=True, exist_ok=True)
            (st.root / rel).write_text(text)
    res = ap.apply(st, ap.changes(st), f"dream {st.run_id}: test")
    assert not res.dropped
    st.cleanup()
    return st.run_id


def test_undo_never_restores_through_a_symlink(env: Env, tmp_path: Path) -> None:
    p = dup_folder(env)
    note = topic("Note", "note", "a note in a sub-folder", "project")
    env.memory(p, {"notes/a.md": note})
    _run_then(env, p, {"notes/a.md": None})  # the run deletes it; apply removes the empty notes/
    assert not (p.memory_dir / "notes").exists()
    outside = outside_with(tmp_path)
    (p.memory_dir / "notes").symlink_to(outside, target_is_directory=True)
    dry = history.undo_run(env.state_dir, p.name, p.memory_dir, dry_run=True)
    assert dry.restored == [] and "symlink" in dict(dry.skipped)["notes/a.md"]
    res = history.undo_run(env.state_dir, p.name, p.memory_dir)
    assert tree(outside) == {} and res.restored == []
    assert "symlink" in dict(res.skipped)["notes/a.md"]


def test_undo_never_removes_through_a_symlink(env: Env, tmp_path: Path) -> None:
    p = dup_folder(env)
    new = topic("Sub", "sub", "added by the run", "project")
    _run_then(env, p, {"sub/new.md": new})
    # sub/ is swapped for a symlink to a folder holding the same file: undo must not remove it
    (p.memory_dir / "sub" / "new.md").unlink()
    (p.memory_dir / "sub").rmdir()
    outside = outside_with(tmp_path, {"new.md": new})
    (p.memory_dir / "sub").symlink_to(outside, target_is_directory=True)
    res = history.undo_run(env.state_dir, p.name, p.memory_dir)
    assert (outside / "new.md").read_text() == new
    assert res.removed == [] and "symlink" in dict(res.skipped)["sub/new.md"]


def test_the_memory_tool_checks_the_live_folder_only_when_given_it(tmp_path: Path) -> None:
    live, staging = tmp_path / "live", tmp_path / "staging"
    live.mkdir()
    staging.mkdir()
    (live / "ext").symlink_to(outside_with(tmp_path), target_is_directory=True)
    inp = {"command": "create", "path": "/memories/ext/a.md", "file_text": topic("A", "a", "a", "user")}
    text, err = StagedMemory(staging, live=live).handle(dict(inp))
    assert err and "symlink" in text and not (staging / "ext").exists()
    text, err = StagedMemory(staging).handle(dict(inp))  # a staging copy of its own: no live folder
    assert not err and (staging / "ext" / "a.md").is_file()


# --------------------------------------------------------------------------- 2. links to non-.md files


def test_links_to_non_md_files_and_folders_do_not_reject_every_run(env: Env) -> None:
    p = dup_folder(env)
    (p.memory_dir / "arch.png").write_bytes(b"\x89PNG\r\n")
    (p.memory_dir / "docs").mkdir()
    (p.memory_dir / "docs" / "readme.txt").write_text("docs\n")
    index = p.memory_dir / "MEMORY.md"
    index.write_text(index.read_text() + "- [Diagram](arch.png) — the architecture\n"
                                         "- [Docs](docs/) — design notes\n")
    s = env.stub
    s.script(s.message(s.memory("str_replace", path="/memories/project_deploy.md", old_str="Fridays.",
                                new_str="Fridays (since 2026-03-01).")), s.message(s.text("ok")))
    out = dream_project(env.jc(), p)
    assert out.outcome == "changed", out
    assert "since 2026-03-01" in (p.memory_dir / "project_deploy.md").read_text()
    assert "(arch.png)" in index.read_text() and "(docs/)" in index.read_text()


def test_a_run_keeps_index_entries_of_live_files_it_never_staged(env: Env) -> None:
    """Staging skips symlinked and oversized files: the rebuild on the copy must not drop their entries."""
    p = dup_folder(env)
    (p.memory_dir / "inner.md").symlink_to(p.memory_dir / "user_role.md")
    index = p.memory_dir / "MEMORY.md"
    index.write_text(index.read_text() + "- [Inner](inner.md) — a symlink inside the folder\n")
    s = env.stub
    s.script(s.message(s.memory("str_replace", path="/memories/project_deploy.md", old_str="Fridays.",
                                new_str="Fridays (since 2026-03-01).")), s.message(s.text("ok")))
    out = dream_project(env.jc(), p)
    assert out.outcome == "changed", out
    assert "- [Inner](inner.md) — a symlink inside the folder" in index.read_text()
    assert "since 2026-03-01" in (p.memory_dir / "project_deploy.md").read_text()


def test_the_link_guard_still_catches_what_the_run_breaks(env: Env, tmp_path: Path) -> None:
    p = dup_folder(env)
    (p.memory_dir / "arch.png").write_bytes(b"\x89PNG\r\n")
    (p.memory_dir / "docs").mkdir()
    (p.memory_dir / "docs" / "readme.txt").write_text("docs\n")
    outside = outside_with(tmp_path, {"pic.png": "x"})
    (p.memory_dir / "ext").symlink_to(outside, target_is_directory=True)
    index = p.memory_dir / "MEMORY.md"
    index.write_text(index.read_text() + "- [Old](gone.png) — missing before the run already\n")
    st = ap.stage(env.state_dir, p, "dream", "dream-links")
    (st.root / "feedback_tabs_2.md").unlink()
    (st.root / "MEMORY.md").write_text((st.root / "MEMORY.md").read_text()
                                       + "- [Pic](arch.png) — live, not staged\n"
                                       + "- [Docs](docs/) — a folder without markdown\n"
                                       + "- [Nope](nope.png) — new and missing\n"
                                       + "- [Ext](ext/pic.png) — behind a symlink\n"
                                       + "- [Up](../CLAUDE.md) — out of the folder\n")
    reasons = [r for r in ap.guard(st, ap.changes(st), env.config) if r.startswith("MEMORY.md")]
    assert sorted(reasons) == sorted([
        "MEMORY.md links to a file the run deleted (feedback_tabs_2.md)",
        "MEMORY.md links to a missing file (nope.png)",
        "MEMORY.md links to a missing file (ext/pic.png)",
        "MEMORY.md links outside the memory folder (../CLAUDE.md)",
    ])
    st.cleanup()


# --------------------------------------------------------------------------- 3. content wipes


def test_a_run_that_empties_every_memory_is_rejected_whole(env: Env) -> None:
    p = dup_folder(env)
    s = env.stub
    bodies = {"feedback_tabs.md": "Use tabs.", "feedback_tabs_2.md": "Tabs, never spaces. **Why:** the linter.",
              "user_role.md": "The user is a backend engineer.", "project_deploy.md": "Deploys happen on Fridays."}
    s.script(s.message(*[s.memory("str_replace", path=f"/memories/{f}", old_str=b, new_str="")
                         for f, b in bodies.items()]), s.message(s.text("reflected")))
    log = Log()
    before = tree(p.memory_dir)
    out = dream_project(env.jc(log=log), p)
    assert out.outcome == "refused", out
    assert tree(p.memory_dir) == before
    reasons = out.details["rejected"]
    assert {r.split(":")[0] for r in reasons if "empties this memory" in r} == set(bodies)
    assert [e for e, _ in log.warnings] == ["dream.rejected"] and log.warnings[0][1]["reasons"] == reasons
    assert env.state.project(p.name).last_consolidation is None
    assert history.list_runs(env.state_dir, p.name) == []


def test_a_run_that_strips_a_description_is_rejected(env: Env) -> None:
    p = dup_folder(env)
    s = env.stub
    s.script(s.message(s.memory("str_replace", path="/memories/user_role.md",
                                old_str="description: backend engineer\n", new_str="")), s.message(s.text("ok")))
    before = tree(p.memory_dir)
    out = dream_project(env.jc(), p)
    assert out.outcome == "refused" and "user_role.md: the run removes its description" in out.message
    assert tree(p.memory_dir) == before


LONG = ("The deploy pipeline runs on GitHub Actions; staging deploys on every merge to main, production "
        "only after the release manager approves the tag. **Why:** an unreviewed deploy broke billing in "
        "January. **How to apply:** never suggest pushing tags directly.")


def big_folder(env: Env) -> Project:
    p = env.project("-home-dev-big")
    files = {f"project_{i}.md": topic(f"P{i}", f"project fact {i}", f"{LONG} ({i})", "project") for i in range(4)}
    files["MEMORY.md"] = "".join(f"- [P{i}](project_{i}.md) — project fact {i}\n" for i in range(4))
    env.memory(p, files)
    return p


def test_a_run_that_shrinks_every_memory_to_a_stub_is_rejected(env: Env) -> None:
    p = big_folder(env)
    s = env.stub
    s.script(s.message(*[s.memory("str_replace", path=f"/memories/project_{i}.md", old_str=f"{LONG} ({i})",
                                  new_str="See code.") for i in range(4)]), s.message(s.text("tidied")))
    before = tree(p.memory_dir)
    out = dream_project(env.jc(), p)
    assert out.outcome == "refused", out
    assert "the run shrinks the memories' content by" in out.message and "at most 50% allowed" in out.message
    assert tree(p.memory_dir) == before


def test_the_shrink_guard_counts_deleted_files(env: Env) -> None:
    p = big_folder(env)
    st = ap.stage(env.state_dir, p, "dream", "dream-shrink")
    for i in (1, 2):  # two of four bodies cut to a stub: just under half of the content
        (st.root / f"project_{i}.md").write_text(topic(f"P{i}", f"project fact {i}", "Short now.", "project"))
    assert ap.guard(st, ap.changes(st), env.config) == []
    (st.root / "project_0.md").unlink()  # one deletion: within dream.max_delete_share, but its content counts
    ap.finalize(st, env.config)
    reasons = ap.guard(st, ap.changes(st), env.config)
    assert len(reasons) == 1 and reasons[0].startswith("the run shrinks the memories' content by 7"), reasons
    st.cleanup()


def test_merging_two_near_duplicates_still_passes(env: Env) -> None:
    p = big_folder(env)
    env.memory(p, {"project_4.md": topic("P4", "project fact 4", LONG.replace("GitHub Actions", "GH Actions"),
                                         "project")})
    s = env.stub
    s.script(s.message(s.memory("str_replace", path="/memories/project_0.md", old_str=f"{LONG} ({0})",
                                new_str=LONG + " (CI is also called GH Actions.)"),
                       s.memory("delete", path="/memories/project_4.md", reason="dup")), s.message(s.text("merged")))
    out = dream_project(env.jc(), p)
    assert out.outcome == "changed" and (out.changed, out.deleted) == (1, 1), out


def test_a_tiny_folder_may_merge_its_two_duplicates_tersely(env: Env) -> None:
    p = env.project("-home-dev-tiny")
    a = "Use tabs, never spaces, in every file of this repo."
    b = "Tabs, never spaces, in every file of this repository."
    env.memory(p, {"MEMORY.md": "- [Tabs](feedback_a.md) — tabs\n- [Tabs 2](feedback_b.md) — tabs again\n",
                   "feedback_a.md": topic("Tabs", "tabs", a), "feedback_b.md": topic("Tabs 2", "tabs again", b)})
    merged = "Tabs, never spaces."
    assert (len(a) + len(b) - len(merged)) / (len(a) + len(b)) > ap.MAX_SHRINK_SHARE  # only the slack lets it by
    s = env.stub
    s.script(s.message(s.memory("str_replace", path="/memories/feedback_a.md", old_str=a, new_str=merged),
                       s.memory("delete", path="/memories/feedback_b.md", reason="dup")), s.message(s.text("merged")))
    out = dream_project(env.jc(), p)
    assert out.outcome == "changed", out
    assert set(tree(p.memory_dir)) == {"MEMORY.md", "feedback_a.md"}


def test_catchup_rejects_a_wipe_too_and_keeps_its_offsets(env: Env) -> None:
    p = env.project("-home-dev-cw")
    env.memory(p, {"MEMORY.md": "- [Role](user_role.md) — backend engineer\n",
                   "user_role.md": topic("Role", "backend engineer", "The user is a backend engineer.", "user")})
    sess = p.dir / "11111111-2222-3333-4444-888888888888.jsonl"
    _fake_session(sess, [_user("forget everything about me")])
    s = env.stub
    s.script(s.message(s.memory("str_replace", path="/memories/user_role.md",
                                old_str="The user is a backend engineer.", new_str=" ")), s.message(s.text("done")))
    log = Log()
    before = tree(p.memory_dir)
    out = catchup_project(env.jc(log=log), p)
    assert out.outcome == "refused" and "empties this memory" in out.message
    assert tree(p.memory_dir) == before
    assert log.warnings[0][0] == "catchup.rejected" and log.warnings[0][1]["reasons"]
    t = env.state.transcript(sess)
    assert t is not None and t.extract_offset == 0


# --------------------------------------------------------------------------- 4. recall stays in the folder


def test_recall_manifest_follows_no_symlink_out_of_the_folder(tmp_path: Path) -> None:
    mem = tmp_path / "memory"
    mem.mkdir()
    outside = outside_with(tmp_path, {"secret.md": topic("Secret", "ssh config", "Host prod", "reference")})
    (mem / "user_role.md").write_text(topic("Role", "who the user is", "backend", "user"))
    (mem / "link.md").symlink_to(outside / "secret.md")
    (mem / "inner.md").symlink_to(mem / "user_role.md")  # a symlink inside counts (memd.core.paths)...
    (mem / "ext").symlink_to(outside, target_is_directory=True)
    entries = build(mem).entries
    assert [e.name for e in entries] == ["inner.md", "user_role.md"]
    assert entries[0].path == (mem / "user_role.md").resolve()  # ...read at its target, inside the folder
    with pytest.raises(OSError):
        recall.read_memory(mem / "link.md", 4096)


def test_recall_never_reads_a_file_swapped_for_a_symlink(stub_api: StubAPI, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    mem = tmp_path / "memory"
    mem.mkdir()
    outside = outside_with(tmp_path, {"secret.md": "Host prod\n  IdentityFile ~/.ssh/prod\n"})
    role = mem / "user_role.md"
    role.write_text(topic("Role", "who the user is", "backend", "user"))

    def swap() -> None:  # while the model chooses, the file becomes a symlink out of the folder
        role.unlink()
        role.symlink_to(outside / "secret.md")

    stub_api.enqueue(Reply(body=stub_api.message(stub_api.text('{"files": ["user_role.md"]}')), before=swap))
    cfg = Config(model=replace(ModelConfig(), base_url=stub_api.base_url), hooks=replace(HooksConfig(), recall=True))
    res = recall.recall("who am I", mem, cfg)
    assert res.text is None or "IdentityFile" not in res.text
    assert res.chosen == []


# --------------------------------------------------------------------------- 5. temp files left by a crash


def dead_pid() -> int:
    out = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                         check=True)
    return int(out.stdout)


def test_sweep_temps_removes_only_memd_leftovers(tmp_path: Path) -> None:
    mem = tmp_path / "memory"
    (mem / "sub").mkdir(parents=True)
    (mem / "team").mkdir()
    dead, live = dead_pid(), os.getpid()
    files = {
        f".memd-a.md.{dead}.0123abcd.tmp": True,  # its writer is gone
        f"sub/.memd-b.md.{dead}.89abcdef.tmp": True,
        f".memd-c.md.{live}.00000000.tmp": False,  # a write in progress
        f".memd-d.md.{live}.11111111.tmp": True,  # alive pid but hours old: a reused pid
        f"team/.memd-t.md.{dead}.22222222.tmp": False,  # memd never writes in team/
        ".memd-notes.txt": False,  # not ours: wrong shape
        f".memd-tool-{dead}.tmp": False,
        f".memd-e.md.{dead}.0123abcd.tmp.bak": False,
        ".memd-f.md.9999999999.44444444.tmp": True,  # no process can have that pid
        "user_role.md": False,
    }
    for rel in files:
        (mem / rel).write_text("x")
    old = time.time() - 7200
    os.utime(mem / f".memd-d.md.{live}.11111111.tmp", (old, old))
    target = tmp_path / "precious"
    target.write_text("keep")
    (mem / f".memd-s.md.{dead}.33333333.tmp").symlink_to(target)  # not a regular file: left alone
    removed = store.sweep_temps(mem, older_than_s=3600)
    assert sorted(removed) == sorted(r for r, gone in files.items() if gone)
    for rel, gone in files.items():
        assert (mem / rel).exists() is not gone, rel
    assert target.read_text() == "keep" and (mem / f".memd-s.md.{dead}.33333333.tmp").is_symlink()
    assert store.sweep_temps(tmp_path / "missing") == []


def test_a_crashed_writes_temp_file_is_swept_when_a_run_applies(env: Env) -> None:
    p = dup_folder(env)
    # a real process dies mid-write: its temp file (atomic_write's name, its pid) stays behind
    code = ("import os, sys; from pathlib import Path; p = Path(sys.argv[1]); "
            "t = p.parent / f'.memd-{p.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp'; "
            "t.write_text('half a memo'); os._exit(9)")
    subprocess.run([sys.executable, "-c", code, str(p.memory_dir / "user_role.md")], check=False)
    leftovers = [n for n in os.listdir(p.memory_dir) if store.is_memd_temp(n)]
    assert len(leftovers) == 1
    s = env.stub
    s.script(s.message(s.memory("str_replace", path="/memories/project_deploy.md", old_str="Fridays.",
                                new_str="Fridays (since 2026-03-01).")), s.message(s.text("ok")))
    out = dream_project(env.jc(), p)
    assert out.outcome == "changed", out
    assert [n for n in os.listdir(p.memory_dir) if n.startswith(".")] == []
