"""Issue 12, finding 5: a repeated index entry is merged keeping both texts (or the newer when one
contains the other), never the first only; issue 13: orphans that are no memory are reported, never
indexed."""

from __future__ import annotations

from pathlib import Path

import pytest

from memd.config import Config
from memd.core.files import FileRecord, FolderSnapshot
from memd.core.lint import lint
from memd.core.rebuild import NORMALISE, not_a_memory, plan_rebuild, topics_of
from memd.layout import Project
from memd.maintenance import rebuild_project
from tests.plugins.memory_folders import topic, write_tree

DEPLOY = topic("Deploy", "deploy on Fridays", "project")


def _plan(index: str, files: dict[str, str]) -> str:
    snap = FolderSnapshot.from_texts({"MEMORY.md": index, **files})
    plan = plan_rebuild(index, topics_of(snap), mode=NORMALISE)
    again = plan_rebuild(plan.text, topics_of(FolderSnapshot.from_texts({"MEMORY.md": plan.text, **files})),
                         mode=NORMALISE)
    assert again.text == plan.text and not again.actions  # a rebuilt index is stable
    return plan.text


def test_an_appended_entry_for_a_listed_file_keeps_its_newer_text(tmp_path: Path) -> None:
    index = "# Memory\n\n- [Deploy](project_deploy.md) — deploy on Fridays\n- [Role](user_role.md) — backend\n"
    mem = write_tree(tmp_path / "p" / "memory", {
        "MEMORY.md": index + "- [Deploy](project_deploy.md) — deploy moved to Monday\n",
        "project_deploy.md": DEPLOY, "user_role.md": topic("Role", "backend", "user")})
    res = rebuild_project(Project("p", mem.parent, mem), Config(), tmp_path / "state", dry_run=False, mode=NORMALISE)
    assert res.written
    text = (mem / "MEMORY.md").read_text()
    assert text == ("# Memory\n\n- [Deploy](project_deploy.md) — deploy on Fridays; deploy moved to Monday\n"
                    "- [Role](user_role.md) — backend\n")
    assert not [f for f in lint(FolderSnapshot.from_texts({"MEMORY.md": text})) if f.code == "MEM011"]


@pytest.mark.parametrize(("first", "later", "merged"), [
    ("deploy on Fridays", "deploy on Fridays at 5pm", "deploy on Fridays at 5pm"),  # the newer contains it
    ("deploy on Fridays at 5pm", "on Fridays", "deploy on Fridays at 5pm"),  # the first contains the newer
    ("deploy on Fridays", "deploy on Fridays", "deploy on Fridays"),
    ("", "moved to Monday", "moved to Monday"),
    ("deploy on Fridays", "", "deploy on Fridays"),
])
def test_a_text_contained_in_the_other_is_said_once(first: str, later: str, merged: str) -> None:
    line = "- [Deploy](project_deploy.md)"
    index = f"{line}{' — ' + first if first else ''}\n{line}{' — ' + later if later else ''}\n"
    assert _plan(index, {"project_deploy.md": DEPLOY}) == f"{line} — {merged}\n"


def test_a_different_title_is_kept_too() -> None:
    index = "- [Deploy](project_deploy.md) — Fridays\n- [Release day](project_deploy.md) — Monday now\n"
    assert _plan(index, {"project_deploy.md": DEPLOY}) == \
        "- [Deploy](project_deploy.md) — Fridays; Release day: Monday now\n"


def test_too_long_together_the_newer_text_comes_first_and_survives_the_cut() -> None:
    old = "deploy " + "words about the old process " * 4
    index = f"- [Deploy](project_deploy.md) — {old}\n- [Deploy](project_deploy.md) — deploy moved to Monday\n"
    text = _plan(index, {"project_deploy.md": DEPLOY})
    assert text.startswith("- [Deploy](project_deploy.md) — deploy moved to Monday; deploy words")
    assert len(text.rstrip("\n")) <= 150 and text.count("\n") == 1


NOT_MEMORIES = {
    "notes.md": "just some notes, no frontmatter\n",
    "keys.secret.md": topic("Keys", "keys", "reference"),
    "vault.md": "$ANSIBLE_VAULT;1.1;AES256\n6238376534653238386366383737\n",
    "blob.md": "U2FsdGVkX1" + "A" * 200 + "\n",
    "pgp.md": "-----BEGIN PGP MESSAGE-----\n\nhQEMA...\n-----END PGP MESSAGE-----\n",
    "bin.md": "\x00\x01\x02\x03" * 50,
}


def test_orphans_that_are_no_memory_are_reported_and_never_indexed(tmp_path: Path) -> None:
    files = {**NOT_MEMORIES, "user_a.md": topic("A", "a real memory", "user")}
    snap = FolderSnapshot.from_texts({"MEMORY.md": "# Memory\n", **files})
    plan = plan_rebuild("# Memory\n", topics_of(snap), mode=NORMALISE)
    assert "(user_a.md)" in plan.text
    for rel in NOT_MEMORIES:
        assert f"({rel})" not in plan.text, rel
        assert any(r.startswith(f"{rel} is not indexed: ") for r in plan.reasons), (rel, plan.reasons)
    found = {f.path: f for f in lint(snap) if f.code in ("MEM010", "MEM015")}
    assert {p for p, f in found.items() if f.code == "MEM015"} == set(NOT_MEMORIES)
    assert found["user_a.md"].code == "MEM010"
    # not valid UTF-8: no text at all
    rec = FileRecord("raw.md", None, "not valid UTF-8", 10)
    assert not_a_memory(rec) == "it is not text (not valid UTF-8)"
    # a linked file that is no memory stays linked: a rebuild drops nothing the user listed
    linked = "- [Notes](notes.md) — my notes\n"
    snap = FolderSnapshot.from_texts({"MEMORY.md": linked, "notes.md": NOT_MEMORIES["notes.md"]})
    assert plan_rebuild(linked, topics_of(snap), mode=NORMALISE).text == linked
    # and through the I/O edge: a binary file in the folder is named, not indexed
    mem = write_tree(tmp_path / "p" / "memory", {"user_a.md": topic("A", "a", "user")})
    (mem / "data.secret.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    res = rebuild_project(Project("p", mem.parent, mem), Config(), tmp_path / "state", dry_run=False, mode=NORMALISE)
    assert res.written and "data.secret.md" not in (mem / "MEMORY.md").read_text()
    assert any("data.secret.md is not indexed" in r for r in res.reasons)
