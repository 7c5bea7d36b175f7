"""Which files are topic files: the manifest of Claude Code's recall side query, for an awkward folder.

In 2.1.328 the recall side query (a selector over a manifest of memory files, facts 6) is behind a
server-side flag, ``tengu_moth_copse``, off by default and never fetched here (non-essential traffic
is off). The flag is read from the cached flags in ``~/.claude.json`` when
``CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF=1``; the test sets both, so the CLI runs its real
recall with its real folder walk and sends the manifest to the stand-in.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memd.memfolder.walk import list_files
from tests.realcc.cli import Sandbox
from tests.realcc.stub import user_texts

RECALL_ENV = {"CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF": "1"}
LINE = re.compile(r"^- (?:\[(?P<type>\w+)\] )?(?P<name>.+?) \((?P<date>\d{4}-\d\d-\d\dT[\d:.]+Z)\)(?:: (?P<desc>.*))?$")
T0 = 1_780_000_000.0  # a fixed mtime base, so the newest-first order is known


@dataclass
class Item:
    name: str
    type: str | None
    date: str
    description: str | None


def _topic(path: Path, name: str, desc: str | None = None, type_: str | None = "project", extra: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fm = f"name: {name}\n" + (f"description: {desc}\n" if desc else "") + (f"type: {type_}\n" if type_ else "")
    path.write_text(f"---\n{fm}{extra}---\nbody of {name}\n", encoding="utf-8")


def build(md: Path, outside: Path) -> list[str]:
    """Fill a memory folder with every awkward kind of file; returns the files in mtime order (oldest first)."""
    (md / "MEMORY.md").write_text("- [A](a.md) — alpha\n", encoding="utf-8")
    _topic(md / "a.md", "a", "plain a", extra="modified: 2020-01-01T00:00:00Z\n")
    _topic(md / "inner_target.md", "inner", "target of an inner symlink")
    os.symlink(md / "inner_target.md", md / "link_inside.md")
    _topic(outside / "o.md", "outside", "a file outside the folder")
    os.symlink(outside / "o.md", md / "link_outside.md")
    _topic(outside / "sub" / "s.md", "subfile", "in a symlinked sub-folder")
    os.symlink(outside / "sub", md / "linkdir")
    _topic(md / ".hidden.md", "hidden", "a hidden file")
    _topic(md / ".hdir" / "h.md", "hdir", "in a hidden folder")
    (md / "team").mkdir()
    (md / "team" / "MEMORY.md").write_text("- [T](t.md) — team thing\n", encoding="utf-8")
    _topic(md / "team" / "t.md", "teamt", "a team topic")
    _topic(md / "team" / ".th.md", "teamhidden", "a hidden file in team")
    _topic(md / "team" / "sub" / "x.md", "teamsub", "in a team sub-folder")
    _topic(md / "nested" / "deep" / "n.md", "nested", "a nested file")
    _topic(md / "nested" / ".h.md", "nestedhidden", "a hidden nested file")
    _topic(md / "nested" / "MEMORY.md", "nestedindex", "an index in a sub-folder")
    for d in ("logs", "sessions", "proposals", "Logs", "sessions.", "logs2"):
        _topic(md / d / "x.md", d, f"in {d}/")
    _topic(md / "notes.txt", "txt", "not markdown")
    _topic(md / "UPPER.MD", "upper", "upper-case extension")
    os.symlink(md / "missing.md", md / "broken.md")
    os.symlink("..", md / "uplink")
    os.symlink(md / "nested", md / "alias")
    os.symlink(md / ".hdir", md / "peek")  # a link inside to a hidden folder: adds nothing either
    os.symlink(md / "logs" / "x.md", md / "logx.md")  # a link's own path decides: listed
    (md / "meta.md").write_text("---\nname: meta\ndescription: nested metadata type\nmetadata:\n  type: feedback\n"
                                "  node_type: memory\n---\nbody\n", encoding="utf-8")
    (md / "late.md").write_text("---\nname: late\n" + "k: v\n" * 30 + "description: too late\ntype: user\n---\n",
                                encoding="utf-8")
    (md / "odd_type.md").write_text("---\nname: odd\ndescription: an unknown type\ntype: other\n---\n",
                                    encoding="utf-8")
    (md / "heading.md").write_text("# A heading, no frontmatter\ntext\n", encoding="utf-8")
    (md / "dir.md").mkdir()
    _topic(md / "dir.md" / "in.md", "indir", "in a folder named dir.md")
    order: list[str] = []
    for i, p in enumerate(sorted(q for q in (*md.rglob("*"), *outside.rglob("*")) if q.is_file())):
        os.utime(p, (T0 + i, T0 + i))  # follows symlinks, as the CLI's stat does
        order.append(str(p))
    return order


@pytest.fixture(scope="module")
def manifest(claude_cli: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[Item]]]:
    import tempfile

    from tests.realcc.stub import CliStub

    base = Path(tempfile.mkdtemp(prefix="rcm"))
    with CliStub() as stub:
        sb = Sandbox(claude_cli, stub, base)
        build(sb.memory, base / "outside")
        (sb.home / ".claude.json").write_text(json.dumps({"cachedGrowthBookFeatures": {"tengu_moth_copse": True}}))
        stub.turns(stub.message(stub.tool_use("Bash", {"command": "true", "description": "wait"})))
        run = sb.run("what do you remember about alpha?", env=RECALL_ENV)
        assert run.rc == 0, run.stderr[-2000:]
        side = [r for r in stub.side if "Available memories:" in "\n".join(user_texts(r.body))]
        assert side, "no recall side query was sent"
        text = next(t for t in user_texts(side[0].body) if t.startswith("Available memories:"))
        items = []
        for line in text.split("\n")[1:]:
            m = LINE.match(line)
            assert m, line
            items.append(Item(m["name"], m["type"], m["date"], m["desc"]))
        yield sb.memory, items


# What Claude Code 2.1.328 lists: every *.md (case-sensitive) below the folder, symlinks followed
# (files and folders, inside or outside; a link's own path decides; a folder is walked once, so a link
# to a folder inside adds nothing, even to a hidden one; a link to a folder above is not entered; broken
# links are skipped), except any file named MEMORY.md, any path with a component starting with "."
# (but team/<file> is exempt), the top-level folders logs/, sessions/, proposals/ (compared
# case-insensitively, trailing dots and spaces stripped), and team/ sub-folders (only team/<file>.md).
EXPECTED = {
    "a.md", "inner_target.md", "link_inside.md", "link_outside.md", "linkdir/s.md", "team/t.md", "team/.th.md",
    "nested/deep/n.md", "logs2/x.md", "meta.md", "late.md", "odd_type.md", "heading.md",
    "dir.md/in.md", "logx.md",
}


def test_manifest_lists_exactly_these_files(manifest: tuple[Path, list[Item]]) -> None:
    _, items = manifest
    assert {i.name for i in items} == EXPECTED


def test_manifest_is_newest_first_by_file_mtime(manifest: tuple[Path, list[Item]]) -> None:
    """The date shown and the order are the file's mtime (a symlink's target's), not ``modified``."""
    md, items = manifest
    stamps = [os.stat(md / i.name).st_mtime for i in items]
    assert stamps == sorted(stamps, reverse=True)
    for i in items:
        when = datetime.fromtimestamp(os.stat(md / i.name).st_mtime, UTC)
        assert i.date == when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def test_manifest_fields(manifest: tuple[Path, list[Item]]) -> None:
    """type from ``type`` or ``metadata.type`` (known types only); description only from frontmatter
    within the first 30 lines; no fallback to a heading."""
    by = {i.name: i for i in manifest[1]}
    assert (by["a.md"].type, by["a.md"].description) == ("project", "plain a")
    assert (by["meta.md"].type, by["meta.md"].description) == ("feedback", "nested metadata type")
    assert (by["odd_type.md"].type, by["odd_type.md"].description) == (None, "an unknown type")
    assert (by["late.md"].type, by["late.md"].description) == (None, None)
    assert (by["heading.md"].type, by["heading.md"].description) == (None, None)


# memd's one deliberate deviation (``memd.core.paths``): it never reads through a symlink that leaves the
# memory folder (check reports each, MEM008); everything else is Claude Code's set.
LEAVING = {"link_outside.md", "linkdir/s.md"}


def test_memd_topic_files_are_the_manifest(manifest: tuple[Path, list[Item]]) -> None:
    md, items = manifest
    assert {f.rel for f in list_files(md).topics()} == {i.name for i in items} - LEAVING


def test_memd_reports_the_links_leaving_the_folder(manifest: tuple[Path, list[Item]]) -> None:
    from memd.config import BudgetConfig
    from memd.core import lint
    from memd.memfolder.folder import read_folder

    md, _ = manifest
    snap = read_folder(md, BudgetConfig(), signatures=False)
    mem008 = {f.path for f in lint.check(snap, BudgetConfig()).findings if f.code == "MEM008"}
    assert mem008 == {"link_outside.md", "linkdir", "uplink"}  # each link once (``uplink -> ..`` leaves too)
