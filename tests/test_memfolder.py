"""The memory folder's owner in small pieces: the path rule, the bounded reader, the walk, locate."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memd.core import paths as P
from memd.memfolder.read import decode, read_bounded
from memd.memfolder.walk import MAX_DEPTH, confined_problem, list_files, locate, walk
from tests.plugins.memory_folders import write_tree


@pytest.mark.parametrize(("rel", "kind", "topic", "memory"), [
    ("a.md", P.FILE, True, True),
    ("sub/deep/a.md", P.FILE, True, True),
    ("team/t.md", P.FILE, True, True),
    ("MEMORY.md", P.FILE, False, True),
    ("team/MEMORY.md", P.FILE, False, True),
    ("sub/MEMORY.md", P.FILE, True, True),  # only the two indexes are indexes
    ("link.md", P.LINK, True, True),
    ("out.md", P.OUTSIDE, False, False),
    ("broken.md", P.BROKEN, False, False),
    ("fifo.md", P.OTHER, False, False),
    ("big.md", P.LARGE, False, False),
    ("locked.md", P.UNREADABLE, False, False),
    (".hidden.md", P.FILE, False, False),
    ("sub/.hidden.md", P.FILE, False, False),
    (".git/x.md", P.FILE, False, False),
    (".memd-a.md.1.0123abcd.tmp", P.FILE, False, False),
    ("notes.txt", P.FILE, False, False),
])
def test_the_one_rule(rel: str, kind: str, topic: bool, memory: bool) -> None:
    assert P.is_topic(rel, kind) is topic
    assert P.is_memory_file(rel, kind) is memory


def test_read_bounded_cuts_only_when_asked(tmp_path: Path) -> None:
    f = tmp_path / "a.md"
    f.write_bytes("é".encode() * 10)  # 20 bytes, two per character
    whole = read_bounded(f, 5, hash=False)
    assert whole.data is None and whole.problem is not None and whole.problem.startswith("too large")
    head = read_bounded(f, 5, hash=True, cut=True)
    assert head.cut and head.data == f.read_bytes()[:5] and head.signature is None  # no signature of a part
    assert decode(head) == "éé"  # the split character is dropped, not replaced
    short = read_bounded(f, 100, cut=True)
    assert not short.cut and short.text == "é" * 10 and short.signature is not None


def test_walk_order_caps_and_policy(tmp_path: Path) -> None:
    mem = write_tree(tmp_path / "m", {"b.md": "", "a/z.md": "", "a/.h/x.md": "", "team/t.md": ""})
    deep = mem / "/".join(f"d{i}" for i in range(MAX_DEPTH + 2))
    deep.mkdir(parents=True)
    (deep / "x.md").write_text("")
    os.symlink(mem / "a", mem / "linked")
    w = walk(mem)
    rels = [rel for rel, _, _ in w.entries]
    assert rels[:5] == ["a", "a/.h", "a/z.md", "b.md", "d0"]  # by name, a folder right before its files
    assert "a/.h/x.md" not in rels and "linked/z.md" not in rels and "team/t.md" in rels
    assert w.truncated and not any(r.endswith("/x.md") and r.startswith("d0") for r in rels)


def test_locate_follows_only_links_that_stay_inside(tmp_path: Path) -> None:
    mem = write_tree(tmp_path / "m", {"a.md": "a", "sub/b.md": "b"})
    write_tree(tmp_path / "out", {"s.md": "secret", "f/o.md": "o"})
    os.symlink("a.md", mem / "in.md")
    os.symlink(tmp_path / "out" / "s.md", mem / "out.md")
    os.symlink(tmp_path / "out" / "f", mem / "ext")
    os.symlink(mem / "sub", mem / "linked")
    (mem / ".h.md").write_text("h")
    assert locate(mem, "a.md") == str(mem / "a.md")
    assert locate(mem, "in.md") == os.path.realpath(mem / "a.md")
    for rel in ("out.md", "ext/o.md", "linked/b.md", ".h.md", "missing.md", "../out/s.md"):
        assert locate(mem, rel) is None, rel
    assert confined_problem(mem, "in.md") == "in.md is a symlink"  # writes never go through one
    assert {f.rel for f in list_files(mem).topics()} == {"a.md", "in.md", "sub/b.md"}


def test_hook_reads_no_memory_file_through_a_symlink_out_of_the_folder(tmp_path: Path) -> None:
    from memd.hooks.tool_use import read_text

    mem = write_tree(tmp_path / "m", {"MEMORY.md": "- [A](a.md) — a\n"})
    (tmp_path / "secret.md").write_text("outside")
    os.symlink(tmp_path / "secret.md", mem / "out.md")
    assert read_text(str(mem), "MEMORY.md", 10) == "- [A](a.md"  # cut, never refused
    assert read_text(str(mem), "out.md", 1000) is None
