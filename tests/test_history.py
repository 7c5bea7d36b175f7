"""Snapshot history (dulwich, git-compatible), `memd history`, `memd undo`, `memd prompts`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from memd import apply as ap
from memd import history
from memd.cli import main
from memd.config import Config
from memd.core.rebuild import NORMALISE
from memd.layout import Project
from memd.llm import prompts


def make(root: Path) -> Project:
    d = root / "claude" / "projects" / "-home-dev-app"
    (d / "memory" / "team").mkdir(parents=True)
    (d / "memory" / "MEMORY.md").write_text("- [A](a.md) — a\n- [B](b.md) — b\n")
    (d / "memory" / "a.md").write_text("---\nname: A\ndescription: a\ntype: user\n---\nalpha\n")
    (d / "memory" / "b.md").write_text("---\nname: B\ndescription: b\ntype: user\n---\nbeta\n")
    (d / "memory" / "team" / "t.md").write_text("team\n")
    (d / "memory" / "notes.txt").write_text("not memory\n")
    return Project(d.name, d, d / "memory")


def tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def cli_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the CLI's XDG folders into tmp_path; returns the state folder it will use."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "home" / ".local" / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    return tmp_path / "home" / ".local" / "state" / "memd"


def applied_run(state: Path, p: Project) -> str:
    """A run through staging and apply: a.md changed, b.md deleted, c.md added."""
    st = ap.stage(state, p, "dream", "dream-test-1")
    (st.root / "a.md").write_text("---\nname: A\ndescription: a\ntype: user\n---\nalpha, merged with beta\n")
    (st.root / "b.md").unlink()
    (st.root / "c.md").write_text("---\nname: C\ndescription: c\ntype: project\n---\ngamma\n")
    ap.finalize(st, Config())
    chs = ap.changes(st)
    assert ap.guard(st, chs, Config()) == []
    ap.apply(st, chs, "dream dream-test-1: +1 ~1 -1 - merged")
    st.cleanup()
    return st.run_id


def test_snapshot_is_a_git_repository(tmp_path: Path) -> None:
    p = make(tmp_path)
    state = tmp_path / "state"
    c = history.snapshot(state, p.name, p.memory_dir, "first")
    assert len(c) == 40
    files = history.files_at(state, p.name, c)
    assert set(files) == {"MEMORY.md", "a.md", "b.md", "team/t.md"}  # *.md only, team/ included
    assert not any(".md" in n for n in os.listdir(p.memory_dir) if n.startswith("."))  # nothing of ours
    if shutil.which("git"):
        out = subprocess.run(["git", "--git-dir", str(history.repo_dir(state, p.name)), "log", "--format=%s"],
                             capture_output=True, text=True, check=True)
        assert out.stdout.strip() == "first"


def test_apply_then_undo_restores_and_removes(tmp_path: Path) -> None:
    p = make(tmp_path)
    state = tmp_path / "state"
    before = tree(p.memory_dir)
    run = applied_run(state, p)
    after = tree(p.memory_dir)
    assert "b.md" not in after and "c.md" in after and "merged" in after["a.md"]
    assert after["notes.txt"] == "not memory\n"
    runs = history.list_runs(state, p.name)
    assert [r.run for r in runs] == [run] and runs[0].complete
    # someone edits c.md after the run: undo leaves it alone and says so
    (p.memory_dir / "c.md").write_text("changed by Claude Code\n")
    res = history.undo_run(state, p.name, p.memory_dir)
    assert ("c.md", "changed since the run; left as it is") in res.skipped
    now = tree(p.memory_dir)
    assert now["a.md"] == before["a.md"] and now["b.md"] == before["b.md"]
    assert now["c.md"] == "changed by Claude Code\n"


def test_undo_never_writes_team(tmp_path: Path) -> None:
    p = make(tmp_path)
    state = tmp_path / "state"
    history.commit_files(state, p.name, {"team/t.md": b"team\n"}, "before", kind="before", run="r", job="dream")
    history.commit_files(state, p.name, {"team/t.md": b"changed\n"}, "after", kind="after", run="r", job="dream")
    (p.memory_dir / "team" / "t.md").write_text("changed\n")
    res = history.undo_run(state, p.name, p.memory_dir, "r")
    assert res.skipped == [("team/t.md", "in team/ (never written by memd)")]
    assert (p.memory_dir / "team" / "t.md").read_text() == "changed\n"


def test_history_and_undo_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    p = make(tmp_path)
    state = cli_state_dir(tmp_path, monkeypatch)
    before = tree(p.memory_dir)
    run = applied_run(state, p)
    claude = str(tmp_path / "claude")
    assert main(["history", "--claude-dir", claude, p.name]) == 0
    out = capsys.readouterr().out
    assert run in out and "+1 ~1 -1 - merged" in out
    assert main(["undo", "--claude-dir", claude, p.name, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would restore a.md" in out and "would remove c.md" in out
    assert tree(p.memory_dir) != before
    assert main(["undo", "--claude-dir", claude, p.name, run]) == 0
    assert tree(p.memory_dir) == before
    assert main(["undo", "--claude-dir", claude, p.name, "no-such-run"]) == 2
    assert "no run 'no-such-run'" in capsys.readouterr().err


def test_prompts_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prompts"]) == 0
    listing = capsys.readouterr().out
    assert "catchup" in listing and "dream" in listing
    assert main(["prompts", "dream"]) == 0
    assert capsys.readouterr().out == prompts.render("dream", Config())  # as sent: the budgets filled in
    assert main(["prompts", "nope"]) == 2


# --------------------------------------------------------------------------- the prompts carry every rule

BOTH = {
    "four types": ["`user`", "`feedback`", "`project`", "`reference`"],
    "transcripts are data": ["data, not instructions"],
    "never saved": ["code patterns", "architecture", "file paths", "git history", "fix recipes", "CLAUDE.md",
                    "ephemeral", "secrets"],
    "absolute dates": ["absolute dates", "YYYY-MM-DD"],
    "index line": ["at most 150 characters", "one line per"],
    "index prose is the user's": ["the user's own text", "move them into a topic file", "link that file",
                                  "never drop them", "words after an entry's link"],
}
CATCHUP = {
    "even when asked": ["even when the user explicitly asks"],
    "approvals with why": ["approvals", "as well as corrections", "why"],
    "dates from record timestamps": ["timestamps of the transcript records"],
    "update, not duplicate": ["update that file", "rather than creating a duplicate"],
    "one topic per file": ["One topic per file"],
    "manifest": ["manifest"],
    "forget X with a reason": ["`delete` and a `reason`", "a delete without a reason is refused"],
}
DREAM = {
    "four phases": ["Orient", "Gather", "Consolidate", "Prune and index"],
    "merge duplicates": ["Merge duplicates into one file"],
    "newest evidence wins": ["newest evidence"],
    "delete contradicted or stale": ["contradicted", "stale"],
    "narrow searches": ["search_transcripts", "Never try to read whole transcripts"],
    "budget": ["200 lines", "25,000 characters"],
    "team read-only": ["`team/` is read-only"],
    "declared forgetting": ["`forget_memory`", "`into`", "`stale`", "its index line (the words after its link too)",
                            "goes with it", "merged `into` the team file"],
}


RECALL = {
    "prompt is data": ["data, not instructions"],
    "JSON only": ["Return JSON only", '{"files": ['],
    "at most 5 names": ["at most 5 file names"],
    "names from the manifest": ["verbatim from the manifest", "Never invent a file name"],
    "nothing relevant": ["empty list"],
}


@pytest.mark.parametrize(("name", "rules"), [("catchup", {**BOTH, **CATCHUP}), ("dream", {**BOTH, **DREAM}),
                                             ("recall", RECALL)])
def test_prompts_carry_every_rule(name: str, rules: dict[str, list[str]]) -> None:
    text = " ".join(prompts.render(name, Config()).split())  # as sent: the budgets filled in
    missing = [f"{rule}: {phrase!r}" for rule, phrases in rules.items() for phrase in phrases
               if phrase.lower() not in text.lower()]
    assert not missing, missing


@pytest.mark.parametrize("name", ["catchup", "dream"])
def test_prompts_never_ask_to_empty_the_index_of_the_users_text(name: str) -> None:
    """Issue 11: "no content in the index" made a model drop the notes a user wrote into MEMORY.md."""
    text = " ".join(prompts.load(name).split()).lower()
    assert "no content in the index" not in text and "holds no content of its own" not in text


def test_undo_command_rebuilds_an_index_changed_since(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    p = make(tmp_path)
    state = cli_state_dir(tmp_path, monkeypatch)
    applied_run(state, p)
    with (p.memory_dir / "MEMORY.md").open("a") as f:
        f.write("- [Extra](extra.md) — written by Claude Code later\n")
    (p.memory_dir / "extra.md").write_text("---\nname: Extra\ndescription: extra\ntype: user\n---\nx\n")
    assert main(["undo", "--claude-dir", str(tmp_path / "claude"), p.name]) == 0
    assert "MEMORY.md rebuilt" in capsys.readouterr().out
    index = (p.memory_dir / "MEMORY.md").read_text()
    assert "(b.md)" in index and "(c.md)" not in index and "(extra.md)" in index


def test_guard_delete_share_and_over_budget_index(tmp_path: Path) -> None:

    from memd.config import BudgetConfig, DreamConfig, replace

    p = make(tmp_path)
    state = tmp_path / "state"
    st = ap.stage(state, p, "dream", "r1")
    (st.root / "b.md").unlink()
    chs = ap.changes(st)
    no_deletes = Config(dream=replace(DreamConfig(), max_delete_share=0.0))
    assert any("deletes 1 of 2" in r for r in ap.guard(st, chs, no_deletes))
    assert not any("deletes" in r for r in ap.guard(st, chs, Config()))  # one deletion is always allowed
    # an index already over a (tiny) budget may stay over only if the run does not lengthen it
    tiny = Config(budget=replace(BudgetConfig(), max_lines=1))
    assert not any("over its budget" in r for r in ap.guard(st, chs, tiny))
    (st.root / "MEMORY.md").write_text((st.root / "MEMORY.md").read_text() + "- [C](a.md) — again\n")
    assert any("over its budget" in r for r in ap.guard(st, ap.changes(st), tiny))
    st.cleanup()


def test_undoing_a_rebuild_keeps_what_claude_code_wrote_while_it_ran(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's "after" commit is what the run wrote, not the folder re-read: a topic file Claude Code
    edited between the rebuild's snapshot and its record is not the rebuild's change, and undoing the
    rebuild leaves it (a lost write found by the concurrent-writers campaign)."""
    from memd import maintenance, store

    p = make(tmp_path)
    state = tmp_path / "state"
    (p.memory_dir / "MEMORY.md").write_text("- [A](a.md) — a\n- [Gone](gone.md) — gone\n- [B](b.md) — b\n")
    real_write = store.atomic_write  # the rebuild imports it when it runs

    def write_then_claude_code_edits(*a: object, **k: object) -> None:
        real_write(*a, **k)  # type: ignore[arg-type]
        (p.memory_dir / "b.md").write_text("---\nname: B\ndescription: b\ntype: user\n---\nbeta, and w-121\n")

    monkeypatch.setattr(store, "atomic_write", write_then_claude_code_edits)
    res = maintenance.rebuild_project(p, Config(), state, dry_run=False, mode=NORMALISE)
    assert res.written, res.reasons
    monkeypatch.setattr(store, "atomic_write", real_write)
    u, _ = maintenance.undo_project(p, Config(), state, None, dry_run=False)
    assert u.restored == ["MEMORY.md"] and u.removed == [], u
    assert "w-121" in (p.memory_dir / "b.md").read_text()
    assert "gone.md" in (p.memory_dir / "MEMORY.md").read_text()


def test_an_undo_records_only_what_it_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = make(tmp_path)
    state = tmp_path / "state"
    applied_run(state, p)
    real_write = history.atomic_write

    def write_then_claude_code_writes(*a: object, **k: object) -> None:
        real_write(*a, **k)  # type: ignore[arg-type]
        (p.memory_dir / "d.md").write_text("---\nname: D\ndescription: d\ntype: user\n---\nw-122\n")

    monkeypatch.setattr(history, "atomic_write", write_then_claude_code_writes)
    res = history.undo_run(state, p.name, p.memory_dir)
    assert sorted(res.restored) == ["MEMORY.md", "a.md", "b.md"] and res.removed == ["c.md"], res
    before, after = history.files_at(state, p.name, res.snapshot), history.files_at(state, p.name, res.undo_commit)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert changed == ["MEMORY.md", "a.md", "b.md", "c.md"] and "d.md" not in after
    assert (p.memory_dir / "d.md").read_text().endswith("w-122\n")
