"""Declared forgetting (issue 31, finding 1): a model run may forget a memory, or merge one into another,
with a reason; the guard lets an index entry go with that file and refuses every other loss.

The pure rules (``memd.core.guard.check(..., forgotten=...)``, ``memd.core.declared``), the confined
memory tool's ``delete`` with ``reason`` and ``merge`` (``memd.llm.memtool``, ``memd.llm.forgettool``),
and whole dreams through the real SDK against the loopback stub.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from memd import history
from memd.core import declared, guard
from memd.core.declared import Forgotten, Stale
from memd.jobs.dream import dream_project
from memd.layout import Project
from memd.llm.forgettool import FORGET_TOOL_NAME, handler
from memd.llm.memtool import StagedMemory
from tests.test_model_jobs import Env, topic, tree
from tests.test_model_jobs import env as env

L = guard.GuardLimits()
FREEZE = topic("Merge freeze", "Merge freeze for the mobile release until 2026-01-15",
               "No merges to main until 2026-01-15 while the mobile release is cut.", "project")
ROLE = topic("Role", "backend engineer on the order service", "The user is a backend engineer.", "user")
TESTS = topic("Tests", "run the fast suite before committing", "Run `make test-fast` before every commit.")
DEPLOY = topic("Deploy", "deploys need the VPN", "Deploys to staging and prod need the VPN.", "project")
INDEX = ("# Memory\n\nAsk Priya before touching payments.\n\n"
         "- [Merge freeze](project_merge_freeze.md) — merge freeze until 2026-01-15\n"
         "- [Role](user_role.md) — backend engineer (owns the order export)\n"
         "- [Tests](feedback_tests.md) — run the fast suite before committing\n"
         "- [Deploy](project_deploy.md) — VPN for deploys\n")


def folder(**extra: str) -> dict[str, bytes]:
    files = {"MEMORY.md": INDEX, "project_merge_freeze.md": FREEZE, "user_role.md": ROLE,
             "feedback_tests.md": TESTS, "project_deploy.md": DEPLOY, **extra}
    return {k: v.encode() for k, v in files.items()}


def without(files: dict[str, bytes], rel: str, *, line: str | None = None) -> dict[str, bytes]:
    out = {k: v for k, v in files.items() if k != rel}
    if line is not None:
        out["MEMORY.md"] = out["MEMORY.md"].decode().replace(line, "").encode()
    return out


FREEZE_LINE = "- [Merge freeze](project_merge_freeze.md) — merge freeze until 2026-01-15\n"
EXPIRED = Forgotten("project_merge_freeze.md", "the freeze ended on 2026-01-15")


# --------------------------------------------------------------------------- the pure rules


def test_an_expired_memory_goes_with_its_entry_when_declared() -> None:
    """The issue's case: the hook paraphrases the description, so before this the notes rule refused it."""
    before = folder()
    after = without(before, "project_merge_freeze.md", line=FREEZE_LINE)
    assert guard.check(before, after, L, forgotten=[EXPIRED]).passed
    # the old rule still holds for a writer that declares nothing (None) ...
    old = guard.check(before, after, L)
    assert not old.passed and "words the user wrote after an entry's link" in old.reasons[0]
    # ... and a model run that deletes it without a reason is refused: silent loss
    silent = guard.check(before, after, L, forgotten=())
    assert not silent.passed
    assert any("deletes this memory without saying why" in r for r in silent.reasons)


def test_the_entry_is_released_only_with_its_file() -> None:
    before = folder()
    after = without(before, "project_merge_freeze.md", line=FREEZE_LINE)
    # words dropped from an entry whose file stays (user_role.md's note)
    a = dict(after)
    a["MEMORY.md"] = a["MEMORY.md"].replace(b" (owns the order export)", b"")
    res = guard.check(before, a, L, forgotten=[EXPIRED])
    assert not res.passed and "owns the order export" in res.reasons[0]
    # a declaration for a file the run did not delete releases nothing
    res = guard.check(before, a, L, forgotten=[EXPIRED, Forgotten("user_role.md", "wrong")])
    assert not res.passed and "owns the order export" in res.reasons[0]
    # prose dropped alongside
    p = dict(after)
    p["MEMORY.md"] = p["MEMORY.md"].replace(b"Ask Priya before touching payments.\n", b"")
    res = guard.check(before, p, L, forgotten=[EXPIRED])
    assert not res.passed and "text the user wrote into the index" in res.reasons[0]


def test_a_file_written_again_after_its_declaration_is_not_forgotten() -> None:
    before = folder()
    after = dict(before)
    after["MEMORY.md"] = after["MEMORY.md"].replace(FREEZE_LINE.encode(), b"")
    assert declared.effective([EXPIRED], set(before), set(after)) == []
    assert not guard.check(before, after, L, forgotten=[EXPIRED]).passed  # the entry's words are still lost


def test_a_merge_must_carry_the_facts_or_declare_them_stale() -> None:
    dup = topic("VPN", "the VPN for deploys", "Deploys need the VPN.\nThe VPN profile is shop-ops.", "project")
    before = folder(**{"project_vpn.md": dup})
    merged = Forgotten("project_vpn.md", "a duplicate of project_deploy.md", "project_deploy.md")
    after = without(before, "project_vpn.md")
    res = guard.check(before, after, L, forgotten=[merged])
    assert not res.passed
    assert res.reasons == ('project_vpn.md: merged into project_deploy.md, which does not hold 1 of its sentence(s), '
                           'first: "The VPN profile is shop-ops." (carry each into project_deploy.md, or declare '
                           'it stale with its reason)',)
    carried = dict(after)
    carried["project_deploy.md"] = DEPLOY.replace("need the VPN.", "need the VPN (profile shop-ops).").encode()
    assert guard.check(before, carried, L, forgotten=[merged]).passed
    stale = Forgotten("project_vpn.md", "duplicate", "project_deploy.md",
                      (Stale("The VPN profile is shop-ops.", "the profile was retired in March"),))
    assert guard.check(before, after, L, forgotten=[stale]).passed
    # into a file the run deleted, or into itself
    gone = Forgotten("project_vpn.md", "dup", "project_gone.md")
    assert "which is not a memory in the folder after the run" in guard.check(before, after, L,
                                                                              forgotten=[gone]).reasons[0]


def test_a_private_duplicate_of_a_team_memory_merges_into_it() -> None:
    team = topic("Release train", "releases leave on Tuesdays", "The release train leaves every Tuesday at 10:00 UTC.",
                 "project")
    mine = topic("Releases", "release day", "The release train leaves every Tuesday at 10:00 UTC.", "project")
    before = folder(**{"team/release_train.md": team, "project_releases.md": mine})
    before["MEMORY.md"] += b"- [Releases](project_releases.md) \xe2\x80\x94 Tuesday train, 10:00 UTC sharp\n"
    after = without(before, "project_releases.md",
                    line="- [Releases](project_releases.md) — Tuesday train, 10:00 UTC sharp\n")
    merged = Forgotten("project_releases.md", "team/release_train.md says the same", "team/release_train.md")
    assert guard.check(before, after, L, forgotten=[merged]).passed
    assert not guard.check(before, after, L, forgotten=()).passed  # "sharp": the entry's words, undeclared


def test_declared_deletions_still_count_against_the_share() -> None:
    before = folder()
    after = without(without(before, "project_merge_freeze.md", line=FREEZE_LINE), "project_deploy.md",
                    line="- [Deploy](project_deploy.md) — VPN for deploys\n")
    res = guard.check(before, after, L, forgotten=[EXPIRED, Forgotten("project_deploy.md", "no VPN any more")])
    assert not res.passed and "deletes 2 of 4 memories" in res.reasons[0]


def test_an_undeclared_deletion_that_loses_nothing_passes() -> None:
    before = folder(**{"project_deploy_2.md": DEPLOY})
    after = without(before, "project_deploy_2.md")
    assert guard.check(before, after, L, forgotten=()).passed


def test_sentences_and_stale_naming() -> None:
    body = "- First fact. Second fact!\n## A heading\n---\n1. Third: with a colon; fourth"
    assert declared.sentences(body) == ["First fact.", "Second fact!", "A heading", "Third: with a colon;", "fourth"]
    text = topic("x", "y", "The VPN profile is shop-ops.")
    assert declared.unknown_stale(text, [Stale("vpn profile is shop-ops", "r")]) == []
    assert declared.unknown_stale(text, [Stale("the", "r")]) == ["the"]  # a stray word names nothing


def test_an_entry_goes_back_beside_its_old_neighbours() -> None:
    old = "# M\n\n- [A](a.md) — a\n- [B](b.md) — b note\n- [C](c.md) — c\n"
    assert declared.without_entries(old, "b.md") == "# M\n\n- [A](a.md) — a\n- [C](c.md) — c\n"
    now = "# M\n\n- [A](a.md) — a\n- [D](d.md) — added later\n- [C](c.md) — c\n"
    assert declared.with_entries_of(old, now, "b.md") == \
        "# M\n\n- [A](a.md) — a\n- [D](d.md) — added later\n- [B](b.md) — b note\n- [C](c.md) — c\n"
    assert declared.with_entries_of(old, "# M\n", "b.md") == "# M\n- [B](b.md) — b note\n"  # after its heading
    assert declared.with_entries_of(old, "x\n", "b.md") == "x\n- [B](b.md) — b note\n"  # no neighbour: the end
    assert declared.with_entries_of(old, old, "b.md") == old  # linked already
    assert declared.with_entries_of(old, now, "z.md") == now  # never had an entry


# --------------------------------------------------------------------------- the memory tool


@pytest.fixture
def mem(tmp_path: Path) -> StagedMemory:
    root = tmp_path / "memories"
    root.mkdir()
    for rel, data in folder(**{"team/release_train.md": topic("Release train", "t", "Train on Tuesdays.")}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return StagedMemory(root)


def test_delete_needs_a_reason_and_takes_the_entry(mem: StagedMemory) -> None:
    text, err = mem.handle({"command": "delete", "path": "/memories/project_merge_freeze.md"})
    assert err and "give 'reason'" in text and (mem.root / "project_merge_freeze.md").exists()
    text, err = mem.handle({"command": "delete", "path": "/memories/project_merge_freeze.md",
                            "reason": "  the freeze\nended on 2026-01-15 "})
    assert not err, text
    assert not (mem.root / "project_merge_freeze.md").exists()
    assert (mem.root / "MEMORY.md").read_text() == INDEX.replace(FREEZE_LINE, "")
    assert mem.forgotten == {"project_merge_freeze.md": EXPIRED}


def test_a_memory_written_again_gets_its_entry_back(mem: StagedMemory) -> None:
    assert not mem.handle({"command": "delete", "path": "/memories/project_merge_freeze.md", "reason": "rewrite"})[1]
    assert not mem.handle({"command": "create", "path": "/memories/project_merge_freeze.md",
                           "file_text": FREEZE.replace("2026-01-15", "2026-02-01")})[1]
    assert mem.forgotten == {} and (mem.root / "MEMORY.md").read_text() == INDEX


def test_merge_refuses_to_lose_a_fact(mem: StagedMemory) -> None:
    (mem.root / "project_vpn.md").write_text(topic("VPN", "v", "Deploys need the VPN.\nThe VPN profile is shop-ops."))
    with (mem.root / "MEMORY.md").open("a") as f:
        f.write(VPN_LINE)
    forget = handler(mem)
    text, err = forget({"path": "/memories/project_vpn.md", "into": "/memories/project_deploy.md", "reason": "dup"})
    assert err and "'The VPN profile is shop-ops.'" in text and (mem.root / "project_vpn.md").exists()
    text, err = forget({"path": "/memories/project_vpn.md", "into": "/memories/project_deploy.md", "reason": "dup",
                        "stale": [{"text": "The VPN profile is shop-ops", "reason": "retired in March"}]})
    assert not err, text
    assert f"its index line went: {VPN_LINE.strip()!r}" in text and (mem.root / "MEMORY.md").read_text() == INDEX
    assert mem.forgotten["project_vpn.md"] == Forgotten(
        "project_vpn.md", "dup", "project_deploy.md", (Stale("The VPN profile is shop-ops", "retired in March"),))
    assert [op[0] for op in mem.ops] == ["merge", "merge"]
    # into team/ (read-only, but it may absorb), never into the index, itself or nothing
    text, err = forget({"path": "/memories/project_deploy.md", "into": "/memories/team/release_train.md",
                        "reason": "dup"})
    assert err and "does not hold" in text
    for into in ("/memories/MEMORY.md", "/memories/project_deploy.md", "/memories/missing.md", "/memories"):
        assert forget({"path": "/memories/project_deploy.md", "into": into, "reason": "dup"})[1]
    assert forget({"path": "/memories/team/release_train.md", "reason": "stale"})[1]  # team/ is read-only


# --------------------------------------------------------------------------- whole dreams


def test_dream_forgets_an_expired_memory_with_its_entry(env: Env) -> None:
    p = env.project("-home-dev-shop")
    env.memory(p, {k: v.decode() for k, v in folder().items()})
    s = env.stub
    s.script(s.message(s.tool_use(FORGET_TOOL_NAME, {"path": "/memories/project_merge_freeze.md",
                                                     "reason": "the freeze ended on 2026-01-15"})),
             s.message(s.text("Forgot the merge freeze: it ended on 2026-01-15.")))
    out = dream_project(env.jc(force=True), p)
    assert out.outcome == "changed", out
    mem = tree(p.memory_dir)
    assert "project_merge_freeze.md" not in mem and "merge freeze" not in mem["MEMORY.md"]
    assert mem["MEMORY.md"] == INDEX.replace(FREEZE_LINE, "")  # every other byte as it was
    assert out.details["forgotten"] == [{"file": "project_merge_freeze.md", "action": "deleted",
                                         "reason": "the freeze ended on 2026-01-15"}]
    assert "forgot project_merge_freeze.md" in out.message
    (run,) = history.list_runs(env.state_dir, p.name)
    entry = next(e for e in history.log(env.state_dir, p.name) if e.kind == "after")
    assert "project_merge_freeze.md deleted: the freeze ended on 2026-01-15" in entry.message
    assert run.run == out.run_id


def test_dream_merges_a_private_duplicate_of_a_team_memory(env: Env) -> None:
    p = env.project("-home-dev-shop")
    team = topic("Release train", "releases leave on Tuesdays", "The release train leaves every Tuesday at 10:00 UTC.",
                 "project")
    files = {k: v.decode() for k, v in folder().items()}
    files["team/release_train.md"] = team
    files["team/MEMORY.md"] = "- [Release train](release_train.md) — releases leave on Tuesdays\n"
    files["project_releases.md"] = topic("Releases", "when releases go out",
                                         "Releases: the release train leaves every Tuesday at 10:00 UTC.", "project")
    files["MEMORY.md"] += "- [Releases](project_releases.md) — Tuesday train at ten\n"
    env.memory(p, files)
    s = env.stub
    s.script(s.message(s.tool_use(FORGET_TOOL_NAME, {"path": "/memories/project_releases.md",
                                                     "into": "/memories/team/release_train.md",
                                                     "reason": "the team memory says the same"})),
             s.message(s.text("Merged the private release note into the team memory.")))
    out = dream_project(env.jc(force=True), p)
    assert out.outcome == "changed", out
    mem = tree(p.memory_dir)
    assert "project_releases.md" not in mem and "Tuesday train at ten" not in mem["MEMORY.md"]
    assert mem["team/release_train.md"] == team
    assert out.details["forgotten"] == [{"file": "project_releases.md", "action": "merged",
                                         "reason": "the team memory says the same",
                                         "into": "team/release_train.md"}]


def test_a_keyless_dream_changes_no_byte_of_a_healthy_folder_holding_an_expired_memory(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    p = env.project("-home-dev-shop")
    env.memory(p, {k: v.decode() for k, v in folder().items()})
    before = tree(p.memory_dir)
    out = dream_project(env.jc(force=True), p)
    assert out.model_off and out.outcome == "unchanged" and env.stub.requests == []
    assert tree(p.memory_dir) == before


def test_a_reviewed_dream_proposes_the_forgetting(env: Env) -> None:
    p = env.project("-home-dev-shop")
    env.memory(p, {k: v.decode() for k, v in folder().items()})
    before = tree(p.memory_dir)
    s = env.stub
    s.script(s.message(s.tool_use(FORGET_TOOL_NAME, {"path": "/memories/project_merge_freeze.md",
                                                     "reason": "the freeze ended on 2026-01-15"})),
             s.message(s.text("done")))
    out = dream_project(env.jc(force=True, dry_run=True), p)
    assert out.outcome == "proposed" and "would forget project_merge_freeze.md" in out.message, out
    assert out.details["forgotten"][0]["reason"] == "the freeze ended on 2026-01-15"
    assert tree(p.memory_dir) == before
    assert "# memories forgotten:" in Path(out.details["review"]).read_text()


def test_dream_that_deletes_without_a_reason_changes_nothing(env: Env) -> None:
    p = env.project("-home-dev-shop")
    env.memory(p, {k: v.decode() for k, v in folder().items()})
    before = tree(p.memory_dir)
    s = env.stub
    s.script(s.message(s.memory("delete", path="/memories/project_merge_freeze.md")),
             s.message(s.text("Deleted the freeze.")))
    out = dream_project(env.jc(force=True), p)
    assert out.outcome == "unchanged" and out.details["refused"] == 1, out
    assert tree(p.memory_dir) == before


# --------------------------------------------------------------------------- recorded, listed, undone one by one

VPN = topic("VPN", "the VPN profile for deploys", "Deploys need the VPN.\nThe VPN profile is shop-ops.", "project")
VPN_LINE = "- [VPN](project_vpn.md) — profile shop-ops, ask ops for access\n"


def _forgetting_dream(env: Env, monkeypatch: pytest.MonkeyPatch) -> tuple[Project, dict[str, str], str]:
    """A dream over eight memories that forgets the expired freeze and merges the VPN note into the deploy
    memory (run through the runner, as the daemon does); the CLI's state folder is the env's."""
    from memd.jobs.runner import run_job

    xdg = env.state_dir.parent / "xdg"
    xdg.mkdir()
    (xdg / "memd").symlink_to(env.state_dir)
    monkeypatch.setenv("XDG_STATE_HOME", str(xdg))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(env.state_dir.parent / "config"))
    p = env.project("-home-dev-shop")
    files = {k: v.decode() for k, v in folder().items()}
    files["project_vpn.md"] = VPN
    for i in range(3):
        files[f"reference_{i}.md"] = topic(f"Ref {i}", f"reference {i}", f"See board {i}.", "reference")
        files["MEMORY.md"] += f"- [Ref {i}](reference_{i}.md) — reference {i}\n"
    files["MEMORY.md"] += VPN_LINE
    env.memory(p, files)
    s = env.stub
    s.script(s.message(s.memory("str_replace", path="/memories/project_deploy.md", old_str="need the VPN.",
                                new_str="need the VPN (profile shop-ops)."),
                       s.tool_use(FORGET_TOOL_NAME, {"path": "/memories/project_vpn.md", "reason": "a duplicate",
                                                     "into": "/memories/project_deploy.md"}),
                       s.tool_use(FORGET_TOOL_NAME, {"path": "/memories/project_merge_freeze.md",
                                                     "reason": "the freeze ended on 2026-01-15"})),
             s.message(s.text("Merged the VPN note, forgot the freeze.")))
    (out,) = run_job("dream", env.jc(force=True), [p]).outcomes
    assert out.outcome == "changed", out
    return p, files, out.run_id or ""


def test_history_report_and_viewer_list_what_was_forgotten(env: Env, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from memd.cli import main
    from memd.jobs import checkin
    from memd.ui.timeline import timeline

    p, _, run = _forgetting_dream(env, monkeypatch)
    claude = str(env.claude)
    assert main(["history", "--claude-dir", claude, p.name]) == 0
    out = capsys.readouterr().out
    assert "- project_merge_freeze.md deleted: the freeze ended on 2026-01-15" in out
    assert "- project_vpn.md merged into project_deploy.md: a duplicate" in out
    report = checkin.build_report(env.state, now=time.time() + 1, since=0.0, state_dir=env.state_dir).markdown
    section = report.split("## Memories forgotten", 1)[1].split("##", 1)[0]
    assert (f"- {p.name}: project_merge_freeze.md deleted: the freeze ended on 2026-01-15 (run {run}; "
            f"`memd undo {p.name} {run} --file project_merge_freeze.md` brings it back)") in section
    assert "project_vpn.md merged into project_deploy.md: a duplicate" in section
    (entry,) = [e for e in timeline(p.name, env.state_dir).entries if e.history_run == run]
    assert [line for line, _ in entry.forgotten] == ["project_merge_freeze.md deleted: the freeze ended on 2026-01-15",
                                                     "project_vpn.md merged into project_deploy.md: a duplicate"]
    assert entry.forgotten[0][1] == f"memd undo {p.name} {run} --file project_merge_freeze.md"


def test_undo_file_brings_back_one_memory_and_its_entry(env: Env, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from memd.cli import main

    p, files, run = _forgetting_dream(env, monkeypatch)
    claude = str(env.claude)
    after_run = tree(p.memory_dir)
    assert main(["undo", "--claude-dir", claude, p.name, run, "--file", "nope.md"]) == 2
    assert "did not change a memory named 'nope.md'" in capsys.readouterr().err
    assert main(["undo", "--claude-dir", claude, p.name, "--file", "project_merge_freeze.md", "--dry-run"]) == 0
    assert "would restore project_merge_freeze.md" in capsys.readouterr().out and tree(p.memory_dir) == after_run
    assert main(["undo", "--claude-dir", claude, p.name, run, "--file", "project_merge_freeze.md"]) == 0
    assert "undid project_merge_freeze.md of " in capsys.readouterr().out
    mem = tree(p.memory_dir)
    assert mem["project_merge_freeze.md"] == FREEZE
    assert mem["MEMORY.md"] == files["MEMORY.md"].replace(VPN_LINE, "")  # its line back where it was
    assert "project_vpn.md" not in mem and "profile shop-ops" in mem["project_deploy.md"]  # the rest stays
    # the merged-away memory too, by itself; the absorbing file keeps what the merge wrote
    assert main(["undo", "--claude-dir", claude, p.name, run, "--file", "project_vpn.md"]) == 0
    mem = tree(p.memory_dir)
    assert mem["project_vpn.md"] == VPN and mem["MEMORY.md"] == files["MEMORY.md"]
    assert mem["project_deploy.md"] == after_run["project_deploy.md"]
    # an undo of the memory it brought back is an undo like any other
    assert main(["history", "--claude-dir", claude, p.name]) == 0
    assert "--file project_vpn.md" in capsys.readouterr().out


def test_a_forgetting_whose_deletion_was_skipped_is_not_recorded(env: Env) -> None:
    """Claude Code wrote the absorbing file meanwhile: that write is dropped, so the run's deletions are
    skipped (a deletion may be the other half of a merge); nothing says the memory was forgotten."""
    from tests.plugins.stub_api import Reply

    p = env.project("-home-dev-shop")
    files = {k: v.decode() for k, v in folder().items()}
    files["project_vpn.md"] = VPN
    files["MEMORY.md"] += VPN_LINE
    env.memory(p, files)
    theirs = DEPLOY.replace("prod", "prod (said today)")
    s = env.stub
    s.script(s.message(s.memory("str_replace", path="/memories/project_deploy.md", old_str="need the VPN.",
                                new_str="need the VPN (profile shop-ops)."),
                       s.tool_use(FORGET_TOOL_NAME, {"path": "/memories/project_vpn.md", "reason": "a duplicate",
                                                     "into": "/memories/project_deploy.md"})),
             Reply(body=s.message(s.text("merged")),
                   before=lambda: (p.memory_dir / "project_deploy.md").write_text(theirs)))
    out = dream_project(env.jc(force=True), p)
    mem = tree(p.memory_dir)
    assert mem["project_vpn.md"] == VPN and mem["project_deploy.md"] == theirs
    assert "forgotten" not in out.details and "merged project_vpn.md" not in out.message, out
    entry = next(e for e in history.log(env.state_dir, p.name) if e.kind == "after")
    assert declared.forgotten_in(entry.message) == []
