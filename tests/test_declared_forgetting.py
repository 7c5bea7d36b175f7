"""Declared forgetting (issue 31, finding 1): a model run may forget a memory, or merge one into another,
with a reason; the guard lets an index entry go with that file and refuses every other loss.

The pure rules (``memd.core.guard.check(..., forgotten=...)``, ``memd.core.declared``), the confined
memory tool's ``delete`` with ``reason`` and ``merge`` (``memd.llm.memtool``, ``memd.llm.forgettool``),
and whole dreams through the real SDK against the loopback stub.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memd import history
from memd.core import declared, guard
from memd.core.declared import Forgotten, Stale
from memd.jobs.dream import dream_project
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


def test_merge_refuses_to_lose_a_fact(mem: StagedMemory) -> None:
    (mem.root / "project_vpn.md").write_text(topic("VPN", "v", "Deploys need the VPN.\nThe VPN profile is shop-ops."))
    forget = handler(mem)
    text, err = forget({"path": "/memories/project_vpn.md", "into": "/memories/project_deploy.md", "reason": "dup"})
    assert err and "'The VPN profile is shop-ops.'" in text and (mem.root / "project_vpn.md").exists()
    text, err = forget({"path": "/memories/project_vpn.md", "into": "/memories/project_deploy.md", "reason": "dup",
                        "stale": [{"text": "The VPN profile is shop-ops", "reason": "retired in March"}]})
    assert not err, text
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
