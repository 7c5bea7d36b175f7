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
    ("sub/MEMORY.md", P.FILE, False, False),  # any MEMORY.md: not listed by Claude Code, not an index
    ("team/sub/MEMORY.md", P.FILE, False, False),
    ("team/.th.md", P.FILE, True, True),  # hidden, but directly in team/: listed
    ("team/sub/x.md", P.FILE, False, False),  # nothing below team/'s first level
    ("team/.h/x.md", P.FILE, False, False),
    ("teams/x.md", P.FILE, True, True),
    ("logs/x.md", P.FILE, False, False),  # the top-level folders logs/, sessions/, proposals/
    ("sessions/deep/x.md", P.FILE, False, False),
    ("proposals/x.md", P.FILE, False, False),
    ("Logs/x.md", P.FILE, False, False),  # any case, trailing dots and spaces stripped
    ("sessions./x.md", P.FILE, False, False),
    ("PROPOSALS . /x.md", P.FILE, False, False),
    ("\uff4cogs/x.md", P.FILE, True, True),  # a fullwidth letter is not "l" after NFC
    ("sub/logs/x.md", P.FILE, True, True),  # only at the top
    ("logs2/x.md", P.FILE, True, True),
    ("logs.md", P.FILE, True, True),
    ("UPPER.MD", P.FILE, False, False),  # .md is matched case-sensitively
    ("dir.md/in.md", P.FILE, True, True),
    ("MEMORY.md", P.LINK, False, True),
    ("MEMORY.md", P.OUTSIDE, False, False),  # measured (memd.memfolder.walk), never staged nor written
    ("team/.th.md", P.OUTSIDE, False, False),
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
    for rel in ("out.md", "ext/o.md", "linked/b.md", ".h.md", "missing.md", "../out/s.md", "sub/../../out/s.md"):
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


def test_folder_links_add_nothing_and_file_links_inside_count(tmp_path: Path) -> None:
    """Claude Code 2.1.328 lists nothing through a symlinked folder inside (``alias -> a``, ``peek -> .h``:
    each folder is walked once) and a link to a file inside beside its target; memd the same, and
    nothing through a link leaving the folder (its deviation)."""
    mem = write_tree(tmp_path / "m", {"a/z.md": "", ".h/x.md": "", "logs/l.md": "", "team/.t.md": "",
                                      "team/s/y.md": "", "s/MEMORY.md": ""})
    write_tree(tmp_path / "out", {"o.md": ""})
    os.symlink(mem / "a", mem / "alias")
    os.symlink(mem / ".h", mem / "peek")
    os.symlink("..", mem / "up")
    os.symlink(tmp_path / "out", mem / "ext")
    os.symlink(tmp_path / "out" / "o.md", mem / "o.md")
    os.symlink("a/z.md", mem / "zz.md")
    os.symlink(mem / "logs" / "l.md", mem / "l.md")  # a link's own path decides, not its target's
    assert {f.rel for f in list_files(mem).topics()} == {"a/z.md", "zz.md", "l.md", "team/.t.md"}


def test_an_index_behind_a_link_out_is_measured_never_staged(tmp_path: Path) -> None:
    """Issue 10 #7: Claude Code loads a MEMORY.md that is a symlink wherever it points; memd reads it to
    measure it (check, status, the hooks) and never counts it a memory file it may stage or write."""
    from memd.config import BudgetConfig
    from memd.core import lint
    from memd.memfolder.folder import read_files, read_folder

    mem = write_tree(tmp_path / "m", {"a.md": "---\nname: a\ndescription: a\ntype: user\n---\nx\n"})
    real = write_tree(tmp_path / "dotfiles", {"MEMORY.md": "- [A](a.md) — a\n" * 3}) / "MEMORY.md"
    os.symlink(real, mem / "MEMORY.md")
    snap = read_folder(mem, BudgetConfig(), signatures=False)
    idx = snap.index
    assert idx is not None and idx.text == real.read_text() and idx.leaves_folder and idx.kind == P.OUTSIDE
    report = lint.check(snap, BudgetConfig())
    assert report.budget is not None and report.budget.lines == 3
    assert [f.code for f in report.findings if f.code == "MEM008"] == ["MEM008"]  # still reported
    assert locate(mem, "MEMORY.md") == str(real)
    from memd.hooks.tool_use import read_text

    assert read_text(str(mem), "MEMORY.md", 1000) == real.read_text()  # the hooks measure it too
    assert "MEMORY.md" not in read_files(mem)  # never staged, never snapshotted
    assert confined_problem(mem, "MEMORY.md") == "MEMORY.md is a symlink"  # never written through
    # a topic file behind a link out is still not read
    os.symlink(real, mem / "out.md")
    assert locate(mem, "out.md") is None
    assert read_folder(mem, BudgetConfig()).by_rel["out.md"].text is None
