"""Claude Code's nested frontmatter through memd (issue 10 #6): every key kept, ``modified`` a date.

Claude Code 2.1.328 rewrites a topic file's frontmatter on every memory Write/Edit into
``metadata: {node_type, type, originSessionId, modified}`` (facts.md section 3). Every path on which memd
rewrites something in a memory folder must leave those keys, and keys nobody knows, byte for byte:
the rebuild, the model jobs' writes through the memory tool and their apply, and undo. The date the
file states is a date signal for recall and the model jobs' manifest (``memd.memfolder.manifest``).
"""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path
from typing import Any

import pytest

from memd import apply as ap
from memd import history
from memd.config import Config
from memd.core import frontmatter
from memd.core.rebuild import NORMALISE
from memd.layout import Project
from memd.llm.client import Usage
from memd.llm.memtool import StagedMemory
from memd.memfolder import manifest

SESSION = "8c1f4e2a-5b6d-4e7f-9a0b-1c2d3e4f5a6b"
FRONT = ("---\n"
         "name: deploy\n"
         "description: how we deploy\n"
         "x-team-owner: ops   # a key nobody knows, with a comment\n"
         "metadata:\n"
         "  node_type: memory\n"
         "  type: project\n"
         f"  originSessionId: {SESSION}\n"
         "  modified: 2026-11-20T08:30:00.000Z\n"
         "  reviewed_by: dana\n"
         "---\n")
NESTED = FRONT + "\nDeploys go through CI.\n"


def front_of(text: str) -> str:
    has, _, body_start, _ = frontmatter.split(text)
    assert has
    return text[:body_start]


@pytest.fixture
def project(tmp_path: Path) -> Project:
    d = tmp_path / "projects" / "-p"
    (d / "memory").mkdir(parents=True)
    (d / "memory" / "MEMORY.md").write_text("# Memory\n\n- [Deploy](project_deploy.md) — how we deploy\n")
    (d / "memory" / "project_deploy.md").write_text(NESTED)
    return Project("-p", d, d / "memory")


# --------------------------------------------------------------------------- reading it


def test_nested_keys_are_read() -> None:
    tf = frontmatter.parse(NESTED)
    assert tf.shape == "nested" and tf.type == "project" and tf.description == "how we deploy"
    assert tf.meta["originSessionId"] == SESSION and tf.meta["node_type"] == "memory"
    assert frontmatter.render(tf) == NESTED
    assert frontmatter.key_paths(NESTED) == {
        "name", "description", "x-team-owner", "metadata", "metadata.node_type", "metadata.type",
        "metadata.originSessionId", "metadata.modified", "metadata.reviewed_by"}


@pytest.mark.parametrize(("value", "expected"), [
    ("2026-11-20T08:30:00.000Z", dt.datetime(2026, 11, 20, 8, 30, tzinfo=dt.UTC).timestamp()),
    ("2026-11-20T08:30:00Z", dt.datetime(2026, 11, 20, 8, 30, tzinfo=dt.UTC).timestamp()),
    ("2026-11-20T10:30:00+02:00", dt.datetime(2026, 11, 20, 8, 30, tzinfo=dt.UTC).timestamp()),
    ("2026-11-20", dt.datetime(2026, 11, 20).timestamp()),  # a date: local midnight
    ("'2026-11-20'", dt.datetime(2026, 11, 20).timestamp()),
    (dt.date(2026, 11, 20), dt.datetime(2026, 11, 20).timestamp()),  # what PyYAML makes of it
    (dt.datetime(2026, 11, 20, 8, 30, tzinfo=dt.UTC), dt.datetime(2026, 11, 20, 8, 30, tzinfo=dt.UTC).timestamp()),
    ("last week", None), ("2026-13-40", None), ("", None), (None, None), (20261120, None), ("2026-11", None),
])
def test_to_timestamp(value: object, expected: float | None) -> None:
    assert frontmatter.to_timestamp(value) == expected


def test_modified_time_takes_the_newest_stated_date() -> None:
    assert frontmatter.modified_time(frontmatter.parse(NESTED).data) == frontmatter.to_timestamp(
        "2026-11-20T08:30:00.000Z")
    flat = "---\nname: a\nupdated: 2026-10-01\ndate: 2025-01-01\n---\nbody\n"
    assert frontmatter.modified_time(frontmatter.parse(flat).data) == dt.datetime(2026, 10, 1).timestamp()
    assert frontmatter.modified_time(frontmatter.parse("---\nname: a\n---\nb\n").data) is None
    assert frontmatter.modified_time({"metadata": "not a table", "modified": "junk"}) is None


# --------------------------------------------------------------------------- a date signal


def test_manifest_rows_carry_the_newer_of_mtime_and_modified(tmp_path: Path) -> None:
    md = tmp_path / "memory"
    md.mkdir()
    old_mtime = dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp()
    stated = frontmatter.to_timestamp("2026-11-20T08:30:00.000Z")
    assert stated is not None
    # restored from a backup with an old mtime: modified is the newer, so it dates the row
    (md / "restored.md").write_text(NESTED)
    os.utime(md / "restored.md", (old_mtime, old_mtime))
    # copied yesterday (mtime new), modified older: the mtime dates it
    (md / "copied.md").write_text(NESTED.replace("2026-11-20T08:30:00.000Z", "2025-05-05T00:00:00.000Z"))
    new_mtime = time.time() - 86_400
    os.utime(md / "copied.md", (new_mtime, new_mtime))
    # a modified in the future is a broken clock: ignored
    (md / "future.md").write_text(NESTED.replace("2026-11-20T08:30:00.000Z", "2999-01-01T00:00:00.000Z"))
    os.utime(md / "future.md", (old_mtime - 10, old_mtime - 10))
    (md / "plain.md").write_text("---\nname: p\ndescription: d\ntype: user\n---\nb\n")
    os.utime(md / "plain.md", (old_mtime - 20, old_mtime - 20))
    rows = {e.name: e for e in manifest.build(md).entries}
    assert rows["restored.md"].modified == stated and rows["restored.md"].when == stated
    assert rows["restored.md"].mtime == old_mtime
    assert rows["copied.md"].when == new_mtime
    assert rows["future.md"].modified is None and rows["future.md"].when == old_mtime - 10
    assert rows["plain.md"].modified is None and rows["plain.md"].when == old_mtime - 20
    # the order stays Claude Code's: by mtime, newest first
    assert [e.name for e in manifest.build(md).entries] == ["copied.md", "restored.md", "future.md", "plain.md"]
    # the model jobs' manifest shows the row's date
    text = manifest.render_for_model(manifest.build(md))
    assert f"/memories/restored.md [project] {time.strftime('%Y-%m-%d', time.localtime(stated))} " in text


def test_recall_age_line_uses_modified(tmp_path: Path) -> None:
    from memd import recall

    md = tmp_path / "memory"
    md.mkdir()
    (md / "restored.md").write_text(NESTED)
    old = dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp()
    os.utime(md / "restored.md", (old, old))
    (entry,) = manifest.build(md).entries
    stated = frontmatter.to_timestamp("2026-11-20T08:30:00.000Z")
    assert stated is not None
    now = stated + 3 * 86_400 + 60
    assert recall.render_block(entry, "body", now).splitlines()[1] == "This memory is 3 days old."
    date = time.strftime("%Y-%m-%d", time.localtime(stated))
    assert f"- restored.md [project] {date}: how we deploy" == recall.render_manifest([entry])


# --------------------------------------------------------------------------- kept through every rewrite


def test_rebuild_leaves_nested_topic_files_byte_identical(project: Project, tmp_path: Path) -> None:
    from memd.maintenance import rebuild_project

    orphan = project.memory_dir / "user_role.md"
    orphan.write_text(NESTED.replace("name: deploy", "name: role").replace("type: project", "type: user"))
    before = {p.name: p.read_bytes() for p in project.memory_dir.glob("*_*.md")}
    res = rebuild_project(project, Config(), tmp_path / "state", dry_run=False, mode=NORMALISE)
    assert "(user_role.md)" in (project.memory_dir / "MEMORY.md").read_text(), res
    assert {p.name: p.read_bytes() for p in project.memory_dir.glob("*_*.md")} == before


def _tool(root: Path) -> StagedMemory:
    return StagedMemory(root)


def test_memory_tool_edits_keep_every_key(tmp_path: Path) -> None:
    root = tmp_path / "staging"
    root.mkdir()
    (root / "d.md").write_text(NESTED)
    tool = _tool(root)
    out, err = tool.handle({"command": "str_replace", "path": "/memories/d.md", "old_str": "through CI",
                            "new_str": "through CI, never by hand"})
    assert not err, out
    out, err = tool.handle({"command": "insert", "path": "/memories/d.md", "insert_line": 13,
                            "insert_text": "Since 2026-11-01."})
    assert not err, out
    text = (root / "d.md").read_text()
    assert front_of(text) == FRONT and text.endswith("never by hand.\nSince 2026-11-01.\n")
    # a value may change, in place
    out, err = tool.handle({"command": "str_replace", "path": "/memories/d.md", "old_str": "  type: project",
                            "new_str": "  type: reference"})
    assert not err, out
    assert front_of((root / "d.md").read_text()) == FRONT.replace("type: project", "type: reference")


@pytest.mark.parametrize(("old", "new", "lost"), [
    (f"  originSessionId: {SESSION}\n", "", "metadata.originSessionId"),
    ("x-team-owner: ops   # a key nobody knows, with a comment\n", "", "x-team-owner"),
    (FRONT, "---\nname: deploy\ndescription: how we deploy\ntype: project\n---\n", "metadata.modified"),
])
def test_memory_tool_refuses_an_edit_that_drops_a_key(tmp_path: Path, old: str, new: str, lost: str) -> None:
    root = tmp_path / "staging"
    root.mkdir()
    (root / "d.md").write_text(NESTED)
    out, err = _tool(root).handle({"command": "str_replace", "path": "/memories/d.md", "old_str": old,
                                   "new_str": new})
    assert err and lost in out and "Keep every frontmatter key" in out
    assert (root / "d.md").read_text() == NESTED


def test_name_and_description_are_left_to_the_run_guard(tmp_path: Path) -> None:
    """memd.core.guard rejects a whole run that strips them (tests/test_apply_guards.py)."""
    root = tmp_path / "staging"
    root.mkdir()
    (root / "d.md").write_text(NESTED)
    out, err = _tool(root).handle({"command": "str_replace", "path": "/memories/d.md",
                                   "old_str": "description: how we deploy\n", "new_str": ""})
    assert not err, out


def test_memory_tool_delete_and_create_must_keep_the_keys(tmp_path: Path) -> None:
    root = tmp_path / "staging"
    root.mkdir()
    (root / "d.md").write_text(NESTED)
    tool = _tool(root)
    assert not tool.handle({"command": "delete", "path": "/memories/d.md", "reason": "stale"})[1]
    flat = "---\nname: deploy\ndescription: how we deploy\ntype: project\n---\nnew body\n"
    out, err = tool.handle({"command": "create", "path": "/memories/d.md", "file_text": flat})
    assert err and "metadata.originSessionId" in out and not (root / "d.md").exists()
    out, err = tool.handle({"command": "create", "path": "/memories/d.md", "file_text": FRONT + "\nnew body\n"})
    assert not err, out
    # a brand-new file is the model's to shape
    assert not tool.handle({"command": "create", "path": "/memories/n.md", "file_text": flat})[1]


def edit_body(ws: ap.Workspace) -> ap.Edits:
    st = ws.get()
    tool = StagedMemory(st.root)
    out, err = tool.handle({"command": "str_replace", "path": "/memories/project_deploy.md",
                            "old_str": "through CI.", "new_str": "through CI, tagged releases only."})
    assert not err, out
    return ap.Edits("edited one", model_called=True, usage=Usage(calls=1))


def _apply(project: Project, tmp_path: Path, edit: Any) -> ap.RunResult:
    return ap.run(project, edit, state_dir=tmp_path / "state", job="dream", run_id="dream-1", config=Config(),
                  review=False)


def test_apply_and_undo_keep_the_nested_frontmatter(project: Project, tmp_path: Path) -> None:
    live = project.memory_dir / "project_deploy.md"
    res = _apply(project, tmp_path, edit_body)
    assert res.verdict is ap.Verdict.APPLIED and res.changed == ("project_deploy.md",), res
    text = live.read_text()
    assert front_of(text) == FRONT and "tagged releases only." in text
    # undo puts back the bytes from before the run, frontmatter and all
    history.undo_run(tmp_path / "state", "-p", project.memory_dir)
    assert live.read_text() == NESTED
