"""The confined memory tool and the transcript search (no model involved)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memd.llm.memtool import Limits, StagedMemory, TranscriptSearch

SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


@pytest.fixture
def mem(tmp_path: Path) -> StagedMemory:
    root = tmp_path / "stage" / "memories"
    (root / "team").mkdir(parents=True)
    (root / "MEMORY.md").write_text("- [A](a.md) — a\n")
    (root / "a.md").write_text("---\nname: A\ndescription: a\ntype: user\n---\nline one\nline two\n")
    (root / "team" / "t.md").write_text("team fact\n")
    (tmp_path / "outside.md").write_text("outside\n")
    return StagedMemory(root, Limits(max_file_bytes=2000, max_run_bytes=5000))


def files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("path", [
    "/etc/passwd", "/memories/../outside.md", "/memories/./a.md", "/memoriesx/a.md", "memories/a.md",
    "/memories/a.md\x00.md", "/memories/.hidden.md", "/memories/sub\\..\\a.md", "", "/memories//a.md",
])
def test_paths_outside_or_odd_are_refused(mem: StagedMemory, path: str) -> None:
    before = files(mem.root.parent.parent)
    text, err = mem.handle({"command": "create", "path": path, "file_text": "x"})
    assert err, text
    assert files(mem.root.parent.parent) == before


def test_symlink_is_never_followed(mem: StagedMemory, tmp_path: Path) -> None:
    os.symlink(tmp_path, mem.root / "link")
    os.symlink(tmp_path / "outside.md", mem.root / "out.md")
    for inp in ({"command": "create", "path": "/memories/link/new.md", "file_text": "x"},
                {"command": "view", "path": "/memories/out.md"},
                {"command": "str_replace", "path": "/memories/out.md", "old_str": "outside", "new_str": "y"},
                {"command": "delete", "path": "/memories/out.md", "reason": "stale"}):
        text, err = mem.handle(inp)
        assert err and "symlink" in text, (inp, text)
    assert (tmp_path / "outside.md").read_text() == "outside\n"
    assert not (tmp_path / "new.md").exists()


def test_team_is_read_only(mem: StagedMemory) -> None:
    for inp in ({"command": "create", "path": "/memories/team/n.md", "file_text": "x"},
                {"command": "str_replace", "path": "/memories/team/t.md", "old_str": "team", "new_str": "y"},
                {"command": "insert", "path": "/memories/team/t.md", "insert_line": 0, "insert_text": "y"},
                {"command": "delete", "path": "/memories/team/t.md"},
                {"command": "rename", "old_path": "/memories/team/t.md", "new_path": "/memories/t.md"},
                {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/team/a.md"}):
        text, err = mem.handle(inp)
        assert err and "read-only" in text, (inp, text)
    assert (mem.root / "team" / "t.md").read_text() == "team fact\n"
    text, err = mem.handle({"command": "view", "path": "/memories/team/t.md"})
    assert not err and "team fact" in text


def test_only_markdown(mem: StagedMemory) -> None:
    text, err = mem.handle({"command": "create", "path": "/memories/x.txt", "file_text": "x"})
    assert err and "*.md" in text
    text, err = mem.handle({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/a.sh"})
    assert err and (mem.root / "a.md").exists()


def test_secret_refused_without_echo(mem: StagedMemory) -> None:
    text, err = mem.handle({"command": "create", "path": "/memories/k.md", "file_text": f"token {SECRET}\n"})
    assert err and "GitHub token" in text and SECRET not in text
    assert not (mem.root / "k.md").exists()
    text, err = mem.handle({"command": "str_replace", "path": "/memories/a.md", "old_str": "line one",
                            "new_str": SECRET})
    assert err and SECRET not in (mem.root / "a.md").read_text()
    assert all(SECRET not in r for _, _, r in mem.ops)


def test_size_caps(mem: StagedMemory) -> None:
    text, err = mem.handle({"command": "create", "path": "/memories/big.md", "file_text": "x" * 2001})
    assert err and "at most 2000" in text
    for i in range(2):
        assert not mem.handle({"command": "create", "path": f"/memories/f{i}.md", "file_text": "y" * 1900})[1]
    text, err = mem.handle({"command": "create", "path": "/memories/f3.md", "file_text": "y" * 1900})
    assert err and "as much as it may" in text


def test_commands_follow_the_protocol(mem: StagedMemory) -> None:
    text, err = mem.handle({"command": "view", "path": "/memories"})
    assert not err and "/memories/a.md" in text and "/memories/team/t.md" in text
    text, err = mem.handle({"command": "view", "path": "/memories/a.md", "view_range": [6, 7]})
    assert not err and "     6\tline one" in text and "name: A" not in text
    assert mem.handle({"command": "create", "path": "/memories/a.md", "file_text": "x"})[1]  # exists
    assert not mem.handle({"command": "str_replace", "path": "/memories/a.md", "old_str": "line two",
                           "new_str": "line 2"})[1]
    assert "line 2" in (mem.root / "a.md").read_text()
    assert mem.handle({"command": "str_replace", "path": "/memories/a.md", "old_str": "line",
                       "new_str": "x"})[1]  # ambiguous
    assert not mem.handle({"command": "insert", "path": "/memories/a.md", "insert_line": 5,
                           "insert_text": "inserted"})[1]
    assert (mem.root / "a.md").read_text().splitlines()[5] == "inserted"
    assert not mem.handle({"command": "create", "path": "/memories/sub/b.md", "file_text": "b\n"})[1]
    assert not mem.handle({"command": "rename", "old_path": "/memories/sub/b.md",
                           "new_path": "/memories/b.md"})[1]
    assert mem.handle({"command": "delete", "path": "/memories/sub"})[1]  # no directory deletes
    assert mem.handle({"command": "delete", "path": "/memories/MEMORY.md"})[1]
    assert not mem.handle({"command": "delete", "path": "/memories/b.md", "reason": "stale"})[1]
    assert not (mem.root / "b.md").exists()
    assert mem.handle({"command": "format_disk"})[1]
    assert mem.handle("not a dict")[1]
    assert [op[0] for op in mem.ops][:2] == ["view", "view"]


def _write_session(path: Path, n: int, text: str) -> None:
    with path.open("w") as f:
        for i in range(n):
            f.write(json.dumps({"type": "user", "sessionId": path.stem, "timestamp": f"2026-03-0{1 + i % 9}T10:00:00Z",
                                "message": {"role": "user", "content": f"{text} number {i} " + "pad " * 50}}) + "\n")
        f.write(json.dumps({"type": "assistant", "sessionId": path.stem, "timestamp": "2026-03-02T10:00:00Z",
                            "message": {"role": "assistant", "content": [
                                {"type": "text", "text": "the deploy freeze starts 2026-03-05"},
                                {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "x"}}]}}) + "\n")
        f.write('{"type": "user", "message": {"content": "cut mid-wri')


def test_search_is_bounded(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _write_session(a, 120, "deploy freeze")
    _write_session(b, 3, "other")
    s = TranscriptSearch([a, b], max_calls=2)
    text, err = s.handle({"pattern": "deploy FREEZE"})
    lines = text.splitlines()
    assert not err and len(lines) == 51 and lines[0].startswith("50 matching")
    assert all(len(ln) < 260 for ln in lines[1:])
    assert lines[1].startswith("b 2026-03-02 10:00 assistant:")  # newest file first
    assert any(ln.startswith("a 2026-03-0") and "user: deploy freeze number" in ln for ln in lines)
    text, err = s.handle({"pattern": "starts 2026|nomatch", "max_results": 5})
    assert not err and "assistant: the deploy freeze starts 2026-03-05" in text
    assert s.handle({"pattern": "again"})[1]  # call cap
    assert TranscriptSearch([a]).handle({"pattern": "ab"})[1]  # too short


def test_viewed_files_and_search_results_are_redacted_and_counted(mem: StagedMemory, tmp_path: Path) -> None:
    (mem.root / "b.md").write_text(f"---\nname: B\ndescription: b\ntype: user\n---\nCI token {SECRET}\n")
    out, err = mem.handle({"command": "view", "path": "/memories/b.md"})
    assert not err and SECRET not in out and "[REDACTED:GitHub token]" in out and mem.redactions == 1
    s = tmp_path / "s.jsonl"
    s.write_text(json.dumps({"type": "user", "sessionId": "s", "timestamp": "2026-03-01T10:00:00Z",
                             "message": {"role": "user", "content": f"the deploy token is {SECRET} ok"}}) + "\n")
    search = TranscriptSearch([s])
    out, err = search.handle({"pattern": "deploy token"})
    assert not err and SECRET not in out and "[REDACTED:GitHub token]" in out and search.redactions == 1
    # a needle found only inside the secret shows the marker, never the secret
    out, _ = search.handle({"pattern": SECRET[:12]})
    assert SECRET[4:] not in out
